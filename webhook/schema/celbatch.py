"""Every CEL rule of an object in ONE engine call: the fast path for objects that pass.

The per-node walk (``celrules``) makes one engine call per schema node with rules and per
value at that node (ten list items with a rule: ten calls), and cel-expr converts the
activation into C++ values on every call (~35 µs even for ``true``), more than the rules
themselves cost. Here a schema's rules become one program over the root object, each
rule's ``self`` spelled as its node's path from the root::

    (root rules) && (!has(self.spec) || ((rules of spec, on self.spec)
        && self.spec.ports.all(__cb0, __cb0 == null || (rules of the items, on __cb0))))

``oldSelf`` becomes the old object's same path and ``__oldSelfPresent`` whether the old
object has it. That is the walk's old value only along object properties, so on UPDATE
transition rules below a list or map stay on the walk (on CREATE none has an old value).

It is only a fast path. When the program is anything but ``true`` (a rule fails, a runtime
error, the runtime bound), the caller runs the per-node walk, which writes the exact errors
and messages. When it is ``true``, the walk would report nothing for the batched rules, so
the answer is the walk's over the other rules, provided the cost budget never runs out:
the batched rules are charged here exactly as the walk charges them (per node value, by
the same estimates), and an object those charges do not leave budget for takes the walk.
A rule the program cannot hold unchanged (a name clash, a library call that would no
longer be computed before the evaluation) stays on the walk, which then runs for such
rules alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from webhook.cel.crd import (ABSENT as CEL_ABSENT, PER_CALL_LIMIT, CelEvalError, CompiledRule, NodeRules,
                             compile_program, compile_schema_rules)
from webhook.cel.optimize import HOIST_VARIABLES
from webhook.cel.syntax import CelSyntaxError, Comprehension, Ident, parse_with_spans, walk
from webhook.cel.types import DeclType, decl_type
from webhook.cel.values import to_cel
from webhook.schema.structural import ABSENT, Node

_VAR = "__cb"  # prefix of the program's own comprehension variables
_SPELLED = ("self", "oldSelf", "__oldSelfPresent")


@dataclass(eq=False, slots=True)
class _Site:
    """A schema node of the program: its batched rules and the children holding batched rules."""

    rules: NodeRules | None
    batched: tuple[CompiledRule, ...]
    fixed: int | None                       # the batched rules' charge when no value changes it
    properties: tuple[tuple[str, "_Site"], ...] = ()
    additional: "_Site | None" = None
    items: "_Site | None" = None
    known: frozenset[str] = frozenset()     # the node's declared properties (not additional ones)


class BatchPlan:
    """One schema's rules as one program, for CREATE (no old object) or UPDATE."""

    __slots__ = ("program", "root", "decl", "update", "reads_old", "remaining")

    def __init__(self, program: Any, root: _Site, decl: DeclType, *, update: bool, reads_old: bool,
                 remaining: dict[int, NodeRules]) -> None:
        self.program = program
        self.root = root
        self.decl = decl
        self.update = update
        self.reads_old = reads_old
        self.remaining = remaining   # id(schema node) -> its rules the program leaves to the walk

    def charge(self, obj: Any, old: Any) -> int | None:
        """What the walk would charge the budget for the batched rules when they all pass;
        None when one evaluation is over the per-call limit."""
        return _charge(self.root, obj, old if self.update else ABSENT)

    def holds(self, obj: Any, old: Any) -> bool:
        """Whether every batched rule is true on ``obj`` (False also on any error)."""
        activation = {"self": to_cel(obj, self.decl), "oldSelf": None, "__oldSelfPresent": self.update}
        if self.reads_old:
            activation["oldSelf"] = to_cel(old, self.decl)
        try:
            return self.program.evaluate(activation, cost_limit=PER_CALL_LIMIT) is True
        except CelEvalError:
            return False


def _charge(site: _Site, value: Any, old: Any) -> int | None:
    total = 0
    if site.batched:
        if site.fixed is not None:
            total = site.fixed
        else:
            assert site.rules is not None
            cel_old = CEL_ABSENT if old is ABSENT or old is None else old
            runnable = tuple(r for r in site.batched
                             if cel_old is not CEL_ABSENT or not r.uses_old_self or r.optional_old_self)
            charged = site.rules.charge(runnable, value, cel_old)
            if charged is None:
                return None
            total = charged
    if isinstance(value, dict):
        old_map = old if isinstance(old, dict) else None
        for key, child in site.properties:
            item = value.get(key)
            if item is not None:
                charged = _charge(child, item, old_map.get(key, ABSENT) if old_map is not None else ABSENT)
                if charged is None:
                    return None
                total += charged
        if site.additional is not None:
            for key, item in value.items():
                if item is not None and key not in site.known:
                    charged = _charge(site.additional, item, ABSENT)
                    if charged is None:
                        return None
                    total += charged
    elif isinstance(value, list) and site.items is not None:
        for item in value:
            if item is not None:
                charged = _charge(site.items, item, ABSENT)
                if charged is None:
                    return None
                total += charged
    return total


def build_plan(root: Node, *, update: bool) -> BatchPlan | None:
    """The program for a schema, or None when nothing can be batched (or a node's rules do not
    compile: the walk reports that)."""
    decl = decl_type(root.raw, is_root=True, name="batch")
    if decl is None or not root.has_rules:
        return None
    builder = _Builder(update)
    try:
        site = builder.site(root, decl, "", True, "self", "oldSelf" if update else None, "true" if update else None)
    except Exception:  # a node whose rules the apiserver would reject: the walk reports it
        return None
    if site is None or not builder.sources:
        return None
    program = compile_program(" && ".join(builder.sources))
    if program is None or _python_work(program) != builder.python_work:
        return None
    return BatchPlan(program, site, decl, update=update, reads_old=builder.reads_old, remaining=builder.remaining)


def _python_work(program: Any) -> tuple[int, int]:
    """(library calls left to Python, calls computed before the evaluation) of a program."""
    return getattr(program, "python_calls", 0), getattr(program, "hoisted_calls", 0)


class _Builder:
    def __init__(self, update: bool) -> None:
        self.update = update
        self.remaining: dict[int, NodeRules] = {}
        self.sources: list[str] = []
        self.python_work = (0, 0)
        self.reads_old = False
        self._depth = 0

    def site(self, node: Node, decl: DeclType | None, path: str, is_root: bool, here: str,
             old: str | None, old_present: str | None) -> _Site | None:
        """The site of ``node`` (None when nothing below it is batched); ``here`` spells the
        node's value, ``old``/``old_present`` its old value and whether there is one (None:
        no old value correlates here)."""
        rules = compile_schema_rules(node.raw, is_root=is_root, path=path) if node.rules else None
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
        properties: list[tuple[str, _Site]] = []
        for key, child in node.sorted_properties:
            if not child.has_rules:
                continue
            entry = decl.by_property.get(key) if decl is not None and decl.kind == "object" else None
            escaped, child_decl = entry if entry is not None else (None, None)
            child_here = f"{here}.{escaped}" if escaped else ""
            child_old = f"{old}.{escaped}" if old is not None and escaped else None
            child_present = f"{old_present} && has({child_old})" if child_old is not None else None
            start = len(self.sources)
            site = self.site(child, child_decl if escaped else None, f"{path}.{key}" if path else key, False,
                             child_here, child_old, child_present)
            if site is not None:
                properties.append((key, site))
                children.append(f"(!has({child_here}) || {self._conjunction(start)})")
        additional = items = None
        if node.additional is not None and node.additional.has_rules:
            usable = decl is not None and decl.kind == "map" and not node.properties
            var = self._variable()
            start = len(self.sources)
            additional = self.site(node.additional, decl.elem if usable else None, f"{path}[*]", False,
                                   f"{here}[{var}]" if usable else "", None, None)
            if additional is not None:
                children.append(f"{here}.all({var}, {here}[{var}] == null || {self._conjunction(start)})")
        if node.items is not None and node.items.has_rules:
            usable = decl is not None and decl.kind == "list"
            var = self._variable()
            start = len(self.sources)
            items = self.site(node.items, decl.elem if usable else None, f"{path}[*]", False,
                              var if usable else "", None, None)
            if items is not None:
                children.append(f"{here}.all({var}, {var} == null || {self._conjunction(start)})")
        self.sources.extend(own + children)
        if not batched and not properties and additional is None and items is None:
            return None
        return _Site(rules, tuple(batched), _fixed_charge(batched, self.update), tuple(properties), additional,
                     items, frozenset(node.properties))

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
        if rule.uses_old_self and self.update and old is None:
            return None  # below a list or map: the walk correlates old items
        if self.update:
            names = {"self": here, "oldSelf": old or "null", "__oldSelfPresent": f"({old_present})"}
        else:
            names = {"self": here, "oldSelf": "null", "__oldSelfPresent": "false"}
        source = _respell(rule.source, names)
        if source is None:
            return None
        if rule.uses_old_self and not rule.optional_old_self:
            source = f"!({old_present}) || ({source})"
        own = _python_work(rule.program)
        if own[1] and self.python_work[1] + own[1] > len(HOIST_VARIABLES):
            return None  # one program computes this many calls before its evaluation at most
        if own != (0, 0):  # would the library calls still be computed the same way?
            alone = compile_program(_guarded(source, here))
            if alone is None or _python_work(alone) != own:
                return None
        self.python_work = (self.python_work[0] + own[0], self.python_work[1] + own[1])
        return source


def _guarded(source: str, here: str) -> str:
    """``source`` alone, guarded as in the program (enough to see how it compiles)."""
    if here.startswith(_VAR):
        var = here.split(".", 1)[0].split("[", 1)[0]
        return f"[dyn(self)].all({var}, {source})"
    return source


def _fixed_charge(rules: list[CompiledRule], update: bool) -> int | None:
    """The charge of ``rules`` when it is the same for every value (None: computed per value)."""
    if any(r.runtime_charge is not None or (update and r.uses_old_self and not r.optional_old_self)
           for r in rules):
        return None
    return sum(r.max_cost for r in rules)


def _respell(source: str, names: Mapping[str, str]) -> str | None:
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
