"""Every CEL rule of an object in ONE engine call: the ladder's ``object_batch`` route
(``webhook.cel.ladder``: its contract, and what follows when it declines).

The per-node walk (``celrules``) makes one engine call per rule and per value at its node
(ten list items with a rule: ten calls), and cel-expr converts the activation into C++ values
on every call, which costs more than the rules themselves. Here a schema's rules become one
program over the root object, each rule's ``self`` spelled as its node's path from the root::

    (root rules) && (!has(self.spec) || ((rules of spec, on self.spec)
        && self.spec.ports.all(__cb1, __cb1 == null || (rules of the items, on __cb1))))

``oldSelf`` becomes the old object's same path and ``__oldSelfPresent`` whether the old
object has it. That is the walk's old value only along object properties, so on UPDATE
transition rules below a list or map stay on the walk (on CREATE none has an old value).

When the program is ``true``, the walk would report nothing for the batched rules, so the
answer is the walk's over the other rules, provided the walk's cost budget would not run out: the batched
rules are charged here at least what the walk charges them (their worst case, or their
estimate over the values for the costliest), and an object those charges leave no budget
for takes the walk. A rule whose runtime bound measures the values it sees (nested loops,
lists built in a loop) is batched too, in a program that answers on its native route only:
that route counts the program's own work as it runs (every rule's, against one per-call limit
and one iteration budget, so never less than the walk counts for any of them), where
cel-expr's bound would measure the batch's values, which are not the walk's (a rule left to
the walk reads other properties of the node). Such a program holds only rules the native
route translates (the others stay on the walk); where it cannot be native, or without the
native route, the batch is the other rules' and the walk runs those. Programs that do not
describe their bound (the cel-python backend's) never batch. The activation holds only what
the program reads (``select_walk``). A rule the program cannot hold unchanged (a
name clash, a library call that would no longer be computed before the evaluation) stays on
the walk, which then runs for such rules alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from webhook.cel.crd import CompiledRule, NodeRules, compile_program, compile_schema_rules
from webhook.cel import Engine, Evaluator
from webhook.cel.ladder import ALL, Routes
from webhook.cel.limits import PER_CALL_LIMIT
from webhook.cel.optimize.library_calls import HOIST_VARIABLES
from webhook.cel.syntax.ast import Comprehension, Ident, walk
from webhook.cel.syntax.parser import CelSyntaxError, parse_with_spans
from webhook.cel.common.escaping import RESERVED_SYMBOLS
from webhook.cel.common.decl import DeclType, decl_type
from webhook.cel.common.values import invalid_reads, to_cel
from webhook.schema.codegen import NodeCodegen
from webhook.schema.structural import Node

_VAR = "__cb"  # prefix of the program's own comprehension variables
_SPELLED = ("self", "oldSelf", "__oldSelfPresent")
# Rules whose worst case is at most this are charged it here: the sizes that would lower it
# cost more to measure than the budget they could save.
EXACT_CHARGE = 100_000


@dataclass(eq=False, slots=True)
class _PlanNode:
    """A schema node in a batch plan: its rules the program holds, and its children that lead to more."""

    decl: DeclType
    rules: NodeRules | None
    batched: tuple[CompiledRule, ...]
    fixed: int | None                       # the batched rules' charge per value (None: by size)
    read: frozenset[str] | None             # properties the batched rules read (None: the whole value)
    properties: tuple[tuple[str, str, "_PlanNode"], ...] = ()   # (property, CEL name, plan node)
    additional: "_PlanNode | None" = None
    items: "_PlanNode | None" = None
    shape: "_Shape | None" = None           # what the walk's invalid-data check looks at (None: no rules)


class BatchPlan:
    """One schema's rules as one program, for CREATE (no old object) or UPDATE."""

    __slots__ = ("program", "root", "update", "reads_old", "native_only", "remaining", "reach", "select")

    def __init__(self, program: Any, root: _PlanNode, *, update: bool, reads_old: bool, native_only: bool,
                 remaining: dict[int, NodeRules], reach: frozenset[int]) -> None:
        self.program = program
        self.root = root
        self.update = update
        self.reads_old = reads_old
        self.native_only = native_only  # it holds rules whose bound measures their values: native only
        self.remaining = remaining   # id(schema node) -> its rules the program leaves to the walk
        self.reach = reach           # ids of the schema nodes the walk visits for them
        self.select = compile_select(root)  # ``select_walk`` as generated Python

    def holds(self, obj: Any, old: Any, routes: Routes = ALL) -> int | None:
        """When every batched rule is true on ``obj``: at least what the walk would charge the
        budget for them; else None (also on an error, or an evaluation over the per-call limit)."""
        try:
            value = self.select(obj)
            old_value = self.select(old) if self.reads_old else None
            charged = _charge(self.root, value, old_value)
            if charged is None:
                return None
            activation = {"self": value, "oldSelf": old_value, "__oldSelfPresent": self.update}
            if self.native_only:
                holds = routes.runs("native") and self.program.native(activation, PER_CALL_LIMIT) is True
            else:
                holds = self.program.evaluate(activation, cost_limit=PER_CALL_LIMIT, accept=_is_true,
                                              routes=routes) is True
            return charged if holds else None
        except Exception:  # invalid data, a runtime error, an engine fault: the walk answers as it does
            return None


def _is_true(value: Any) -> bool:
    """The answer an engine's fast path may give alone (``Program.evaluate``'s ``accept``)."""
    return value is True


def _reads_invalid(plan_node: _PlanNode, value: Any) -> bool:
    """Whether the rules batched at ``plan_node`` read data contradicting the schema in ``value``."""
    if not plan_node.batched:
        return False
    rules = plan_node.rules
    return (not _surely_valid(value, plan_node) and bool(invalid_reads(value, rules.decl, rules.properties))) \
        or rules.invalid_items(value)  # type: ignore


def _valid(plan_node: _PlanNode, value: Any) -> bool:
    """False where the walk would find data contradicting the schema in what a rule reads (only
    possible where structural validation ratcheted, or did not run): it reports Kubernetes'
    invalid-data error there."""
    if _reads_invalid(plan_node, value):
        return False
    if isinstance(value, dict):
        for key, _, child in plan_node.properties:
            item = value.get(key)
            if item is not None and not _valid(child, item):
                return False
        if plan_node.additional is not None:
            return all(item is None or _valid(plan_node.additional, item) for item in value.values())
    elif isinstance(value, list) and plan_node.items is not None:
        return all(item is None or _valid(plan_node.items, item) for item in value)
    return True


class InvalidData(Exception):
    """Data contradicting the schema where a rule reads it (``_valid``): the walk answers."""


def select_walk(plan_node: _PlanNode, value: Any) -> Any:
    """``value`` as CEL sees it (``to_cel``), keeping only what the program reads: the
    properties the rules read and the way to the children's rules. Checks the data on the way
    (``_valid``, in the same walk): ``InvalidData`` where the walk would report it."""
    decl = plan_node.decl
    if plan_node.read is None or value is None:
        if value is not None and not _valid(plan_node, value):
            raise InvalidData()
        return to_cel(value, decl)
    if _reads_invalid(plan_node, value):
        raise InvalidData()
    if isinstance(value, dict):
        if decl.kind == "map":
            additional = plan_node.additional
            return to_cel(value, decl) if additional is None else {
                key: item if item is None else select_walk(additional, item) for key, item in value.items()}
        selected = {}
        by_property = decl.by_property
        read = plan_node.read
        for key in read:
            item = value.get(key)
            if item is not None:
                name, item_decl = by_property[key]
                selected[name] = converted = to_cel(item, item_decl)
                if key in RESERVED_SYMBOLS:
                    selected[key] = converted
        for key, name, child in plan_node.properties:
            item = value.get(key)
            if item is None:
                continue
            if key in read:  # converted whole above: only checked here
                if not _valid(child, item):
                    raise InvalidData()
                continue
            selected[name] = converted = select_walk(child, item)
            if key in RESERVED_SYMBOLS:
                selected[key] = converted
        return selected
    if isinstance(value, list) and plan_node.items is not None:
        items = plan_node.items
        return [item if item is None else select_walk(items, item) for item in value]
    return to_cel(value, decl)


class _SelectCodegen(NodeCodegen):
    """``select_walk`` written out for one plan: a function per plan node, its reads, conversions and
    children inline (the generic walk looks each of them up on every object)."""

    prefix = "_s"

    def __init__(self) -> None:
        super().__init__({"InvalidData": InvalidData, "_valid": _valid, "_surely_valid": _surely_valid,
                          "invalid_reads": invalid_reads, "to_cel": to_cel})

    def convert(self, value: str, decl: DeclType | None) -> str:
        """``to_cel(value, decl)``, or the value itself where that is what it returns."""
        return value if decl is None or decl.plain else f"to_cel({value}, {self.value(decl)})"

    def define(self, plan_node: _PlanNode, name: str) -> list[str]:
        decl, me = plan_node.decl, self.value(plan_node)
        if plan_node.read is None:
            return [f"def {name}(v):",
                    f"    if v is not None and not _valid({me}, v): raise InvalidData()",
                    f"    return {self.convert('v', decl)}"]
        body = ["if v is None: return None"]
        if plan_node.batched:
            rules = self.value(plan_node.rules)
            body.append(f"if not _surely_valid(v, {me}) and invalid_reads(v, {rules}.decl, {rules}.properties): "
                        "raise InvalidData()")
            if plan_node.rules.reads_items:  # list item fields its rules read (``NodeRules.invalid_items``)
                body.append(f"if {rules}.invalid_items(v): raise InvalidData()")
        body += ["if isinstance(v, dict):"] + ["    " + line for line in self.mapping(plan_node)]
        if plan_node.items is not None:
            items = self.function(plan_node.items)
            body.append(f"if isinstance(v, list): return [x if x is None else {items}(x) for x in v]")
        body.append(f"return {self.convert('v', decl)}")
        return [f"def {name}(v):"] + ["    " + line for line in body]

    def mapping(self, plan_node: _PlanNode) -> list[str]:
        decl = plan_node.decl
        if decl.kind == "map":
            if plan_node.additional is None:
                return [f"return {self.convert('v', decl)}"]
            return [f"return {{k: x if x is None else {self.function(plan_node.additional)}(x) for k, x in v.items()}}"]
        out = ["out = {}"]
        for key in sorted(plan_node.read):
            out.append(f"x = v.get({key!r})")
            entry = decl.by_property.get(key)
            if entry is None:  # (no such property: the generic walk fails here too)
                out.append("if x is not None: raise InvalidData()")
                continue
            out += ["if x is not None:", f"    out[{entry[0]!r}] = {self.convert('x', entry[1])}"]
            if key in RESERVED_SYMBOLS:
                out.append(f"    out[{key!r}] = out[{entry[0]!r}]")
        for key, cel_name, child in plan_node.properties:
            out += [f"x = v.get({key!r})", "if x is not None:"]
            if key in plan_node.read:  # converted whole above: only checked here
                out.append(f"    if not _valid({self.value(child)}, x): raise InvalidData()")
                continue
            out.append(f"    out[{cel_name!r}] = {self.function(child)}(x)")
            if key in RESERVED_SYMBOLS:
                out.append(f"    out[{key!r}] = out[{cel_name!r}]")
        out.append("return out")
        return out


def compile_select(root: _PlanNode) -> Any:
    """``select_walk(root, value)`` as one generated function (the generic walk where the plan
    cannot be written out: nested past Python's limits)."""
    try:
        return _SelectCodegen().build(root, "<schema rules selection>")
    except (RecursionError, SyntaxError, MemoryError):
        return lambda value: select_walk(root, value)


# Python types a JSON value of each CEL kind has when it fits its schema (a stricter check than
# ``invalid_reads``, which runs only where this one is unsure)
_EXACT_TYPES = {"object": (dict,), "map": (dict,), "list": (list,), "string": (str,), "timestamp": (str,),
                "duration": (str,), "bytes": (str,), "int": (int,), "double": (int, float), "bool": (bool,)}


@dataclass(frozen=True, slots=True)
class _Shape:
    """What ``invalid_reads`` looks at on one node, precomputed: the JSON types its value and
    the properties its rules read may surely have (None: any), and whether such a property's
    list or map items may not be null. ``properties`` None: every property, from the decl."""

    types: frozenset[type] | None
    properties: tuple[tuple[str, frozenset[type] | None, bool], ...] | None


def _shape(rules: NodeRules) -> _Shape:
    decl = rules.decl
    if decl is None or decl.kind != "object":
        return _Shape(_types(decl), ())
    if rules.properties is None:
        return _Shape(_types(decl), None)
    checks = []
    for key in sorted(rules.properties):
        entry = decl.by_property.get(key)
        if entry is not None:
            checks.append((key, _types(entry[1]), entry[1].elem is not None and not entry[1].elem.nullable))
    return _Shape(_types(decl), tuple(checks))


def _types(decl: DeclType | None) -> frozenset[type] | None:
    if decl is None:
        return None
    if decl.int_or_string:
        return frozenset((str, int))
    return frozenset(_EXACT_TYPES.get(decl.kind, ()))  # empty: never sure (the exact check decides)


def _surely_valid(value: Any, plan_node: _PlanNode) -> bool:
    """True only when ``invalid_reads`` would find nothing: the value and the properties the
    node's rules read have exactly their schema's JSON types, and no unexpected null items."""
    shape = plan_node.shape
    if shape is None:
        return False
    if shape.types is not None and type(value) not in shape.types:
        return False
    checks = shape.properties
    if checks is None:
        checks = _every_property(value, plan_node.decl)
    for key, types, no_null_items in checks:
        item = value.get(key)
        if item is None:
            continue
        kind = type(item)
        if types is not None and kind not in types:
            return False
        if no_null_items and (kind is list or kind is dict) and None in (item if kind is list else item.values()):
            return False
    return True


def _every_property(value: dict, decl: DeclType) -> list[tuple[str, frozenset[type] | None, bool]]:
    checks = []
    for key in value:
        entry = decl.by_property.get(key)
        if entry is not None:
            checks.append((key, _types(entry[1]), entry[1].elem is not None and not entry[1].elem.nullable))
    return checks


def _charge(plan_node: _PlanNode, value: Any, old: Any) -> int | None:
    """At least the walk's charges for the batched rules over the selected values (``old``:
    None where there is none); None when an evaluation is over the per-call limit."""
    total = 0
    if plan_node.batched:
        if plan_node.fixed is not None:
            total = plan_node.fixed
        else:
            has_old = old is not None
            activation = {"self": value, "oldSelf": old, "__oldSelfPresent": has_old}
            for rule in plan_node.batched:
                if rule.max_cost <= EXACT_CHARGE:
                    total += rule.max_cost
                elif has_old or not rule.uses_old_self or rule.optional_old_self:
                    cost = rule.charge(activation)
                    if cost > PER_CALL_LIMIT:
                        return None
                    total += cost
    if isinstance(value, dict):
        old_map = old if isinstance(old, dict) else None
        for _, name, child in plan_node.properties:
            item = value.get(name)
            if item is not None:
                charged = _charge(child, item, old_map.get(name) if old_map is not None else None)
                if charged is None:
                    return None
                total += charged
        if plan_node.additional is not None:
            for item in value.values():
                if item is not None:
                    charged = _charge(plan_node.additional, item, None)
                    if charged is None:
                        return None
                    total += charged
    elif isinstance(value, list) and plan_node.items is not None:
        for item in value:
            if item is not None:
                charged = _charge(plan_node.items, item, None)
                if charged is None:
                    return None
                total += charged
    return total


def build_plan(root: Node, *, update: bool, evaluator: Evaluator) -> BatchPlan | None:
    """The program for a schema, or None when nothing can be batched (or a node's rules do not
    compile: the walk reports that).

    Where some rules' runtime bound measures their values, first (when the evaluator's native
    route runs) the native plan: those rules with every other rule the native route translates
    (the rest stay on the walk), answering on that route only; when it holds no such rule or
    its program is not native, the plan of every rule but those."""
    decl = decl_type(root.raw, is_root=True, name="batch")
    if decl is None or not root.has_rules:
        return None
    engine = evaluator.engine
    plan = _plan(root, decl, update, engine, native=True) if evaluator.routes.runs("native") else None
    return plan if plan is not None else _plan(root, decl, update, engine, native=False)


def _plan(root: Node, decl: DeclType, update: bool, engine: Engine, *, native: bool) -> BatchPlan | None:
    builder = _Builder(update, native, engine)
    try:
        plan_node = builder.plan_node(root, decl, "", True, "self", "oldSelf" if update else None, "true" if update else None)
    except Exception:  # a node whose rules the apiserver would reject: the walk reports it
        return None
    if plan_node is None or not builder.sources or (native and not builder.measures):
        return None
    program = compile_program(" && ".join(builder.sources), engine)
    if program is None or _python_work(program) != builder.python_work:
        return None
    if native and getattr(program, "native", None) is None:
        return None
    return BatchPlan(program, plan_node, update=update, reads_old=builder.reads_old, native_only=native,
                     remaining=builder.remaining, reach=frozenset(_reach(root, builder.remaining)))


def _reach(node: Node, remaining: Mapping[int, Any]) -> set[int]:
    """The nodes holding rules left to the walk, and their ancestors."""
    found: set[int] = set()
    children = [child for _, child in node.sorted_properties]
    children += [child for child in (node.additional, node.items) if child is not None]
    for child in children:
        if child.has_rules:
            found |= _reach(child, remaining)
    if found or id(node) in remaining:
        found.add(id(node))
    return found


def _python_work(program: Any) -> tuple[int, int]:
    """(library calls left to Python, calls computed before the evaluation) of a program."""
    return getattr(program, "python_calls", 0), getattr(program, "hoisted_calls", 0)


class _Builder:
    def __init__(self, update: bool, native: bool, engine: Engine) -> None:
        self.update = update
        self.engine = engine
        # native: the rules whose bound measures their values batch, the rules the native
        # route does not translate stay on the walk (else the other way round)
        self.native = native
        self.measures = False         # whether a rule whose bound measures its values batched
        self.remaining: dict[int, NodeRules] = {}
        self.sources: list[str] = []
        self.python_work = (0, 0)
        self.reads_old = False
        self._depth = 0

    def plan_node(self, node: Node, decl: DeclType | None, path: str, is_root: bool, here: str,
             old: str | None, old_present: str | None) -> _PlanNode | None:
        """The plan node of ``node`` (None when nothing below it is batched); ``here`` spells the
        node's value, ``old``/``old_present`` its old value and whether there is one (None:
        no old value correlates here)."""
        rules = compile_schema_rules(node.raw, is_root=is_root, path=path, engine=self.engine) if node.rules else None
        batched: list[CompiledRule] = []
        outer = len(self.sources)
        if rules is not None:
            rest = []
            for rule in rules.rules:
                if not self.update and rule.uses_old_self and not rule.optional_old_self:
                    continue  # never runs on CREATE
                source = self._rule_source(rule, decl, here, old, old_present)
                if source is None:
                    rest.append(rule)
                else:
                    batched.append(rule)
                    self.sources.append(f"({source})")
                    self.reads_old = self.reads_old or (old is not None and rule.uses_old_self)
            if rest:
                self.remaining[id(node)] = rules.subset(tuple(rest))
        own = self.sources[outer:]
        del self.sources[outer:]
        children: list[str] = []
        properties: list[tuple[str, str, _PlanNode]] = []
        for key, child in node.sorted_properties:
            if not child.has_rules:
                continue
            entry = decl.by_property.get(key) if decl is not None and decl.kind == "object" else None
            escaped, child_decl = entry if entry is not None else (None, None)
            child_here = f"{here}.{escaped}" if escaped else ""
            child_old = f"{old}.{escaped}" if old is not None and escaped else None
            child_present = f"{old_present} && has({child_old})" if child_old is not None else None
            start = len(self.sources)
            plan_node = self.plan_node(child, child_decl if escaped else None, f"{path}.{key}" if path else key, False,
                             child_here, child_old, child_present)
            if plan_node is not None:
                properties.append((key, escaped, plan_node))
                children.append(f"(!has({child_here}) || {self._conjunction(start)})")
        additional = items = None
        if node.additional is not None and node.additional.has_rules:
            usable = decl is not None and decl.kind == "map" and not node.properties
            var = self._variable()
            start = len(self.sources)
            additional = self.plan_node(node.additional, decl.elem if usable else None, f"{path}[*]", False,
                                   f"{here}[{var}]" if usable else "", None, None)
            if additional is not None:
                children.append(f"{here}.all({var}, {here}[{var}] == null || {self._conjunction(start)})")
        if node.items is not None and node.items.has_rules:
            usable = decl is not None and decl.kind == "list"
            var = self._variable()
            start = len(self.sources)
            items = self.plan_node(node.items, decl.elem if usable else None, f"{path}[*]", False,
                              var if usable else "", None, None)
            if items is not None:
                children.append(f"{here}.all({var}, {var} == null || {self._conjunction(start)})")
        self.sources.extend(own + children)
        if decl is None or not batched and not properties and additional is None and items is None:
            return None
        read = rules.subset(tuple(batched)).properties if rules is not None and batched else frozenset()
        return _PlanNode(decl, rules, tuple(batched), _fixed_charge(batched), read, tuple(properties),
                     additional, items, _shape(rules) if rules is not None and batched else None)

    def _conjunction(self, start: int) -> str:
        parts = self.sources[start:]
        del self.sources[start:]
        return " && ".join(parts)

    def _variable(self) -> str:
        self._depth += 1
        return f"{_VAR}{self._depth}"

    def _rule_source(self, rule: CompiledRule, decl: DeclType | None, here: str, old: str | None,
                     old_present: str | None) -> str | None:
        """The rule spelled on the root's variables, or None when it stays on the walk."""
        if decl is None or not here or rule.source is None or _VAR in rule.source:
            return None
        cost = getattr(rule.program, "cost", None)
        if cost is None:
            return None  # a program that does not describe its bound (cel-python's)
        if self.native:
            if getattr(rule.program, "native", None) is None:
                return None  # the native plan holds only what the native route translates
        elif cost.needs_measure:
            return None  # its bound measures its values: only the native plan holds it
        if rule.uses_old_self and self.update and old is None:
            return None  # below a list or map: the walk correlates old items
        if self.update:
            names = {"self": here, "oldSelf": old or "null", "__oldSelfPresent": f"({old_present})"}
        else:
            names = {"self": here, "oldSelf": "null", "__oldSelfPresent": "false"}
        source = respell(rule.source, names)
        if source is None:
            return None
        if rule.uses_old_self and not rule.optional_old_self:
            source = f"!({old_present}) || ({source})"
        work = own = _python_work(rule.program)
        if own != (0, 0):  # would the library calls still be computed the same way?
            alone = compile_program(_guarded(source, here), self.engine)
            if alone is None:
                return None
            work = _python_work(alone)
            # a call hoisted on its own may run inside the engine here (a regex on list items:
            # the engine's own matches, no Python call, and the native program needs neither);
            # one more Python call per evaluation would leak (cel-expr-python 0.1.3)
            if work[0] > own[0]:
                return None
        if work[1] and self.python_work[1] + work[1] > len(HOIST_VARIABLES):
            return None  # one program computes this many calls before its evaluation at most
        self.python_work = (self.python_work[0] + work[0], self.python_work[1] + work[1])
        self.measures = self.measures or cost.needs_measure
        return source


def _guarded(source: str, here: str) -> str:
    """``source`` alone, guarded as in the program (enough to see how it compiles)."""
    if here.startswith(_VAR):
        var = here.split(".", 1)[0].split("[", 1)[0]
        return f"[dyn(self)].all({var}, {source})"
    return source


def _fixed_charge(rules: list[CompiledRule]) -> int | None:
    """What the walk charges at most for ``rules`` on one value: their worst cases (the walk's
    answer does not depend on the charges while the budget lasts, and these never run it out
    sooner than the real charges would); None when one of them is to be charged by size."""
    if any(r.max_cost > EXACT_CHARGE for r in rules):
        return None
    return sum(r.max_cost for r in rules)


def respell(source: str, names: Mapping[str, str]) -> str | None:
    """``source`` with each free ``self``/``oldSelf``/``__oldSelfPresent`` replaced; None when a
    comprehension of the rule rebinds one of them (or the source does not parse here)."""
    try:
        expr, spans = parse_with_spans(source)
    except CelSyntaxError:
        return None
    edits: list[tuple[int, int, str]] = []
    for node in walk(expr):
        if isinstance(node, Comprehension) and {node.iter_var, node.iter_var2, node.accu_var} & set(_SPELLED):
            return None
        if isinstance(node, Ident) and node.name in names:
            span = spans.get(node.id)
            if span is None:
                return None
            edits.append((span[0], span[1], names[node.name]))
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    return source
