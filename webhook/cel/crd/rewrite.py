"""What the engine evaluates for a CRD rule: the rule's source with Kubernetes' value semantics
that plain CEL values cannot carry spelled out.

- ``x-kubernetes-list-type: set`` / ``map`` lists compare without regard to order (``a == b`` is
  ``size(a) == size(b) && sets.contains(a, b)``; a map list's elements are unique by key, so
  element containment is key-and-value containment);
- ``+`` on such a list merges: a set gains the other list's elements it lacks; a map list keeps
  its order, takes the other list's element for a shared key and appends the rest;
- with ``optionalOldSelf``, ``oldSelf`` is an optional (the engine gets the value and a flag);
- ``sum()`` of an empty list of durations or doubles is that type's zero (the engine sees the
  values, not the schema, so an empty list's sum would be the int 0);
- ``string()`` of a date-time field, and a date-time argument of ``format``'s ``%s``, is spelled
  ``string(dyn(x))``: the engine prints it from the value, in the field's own offset as cel-go
  does (see ``optimize.hoist_date_time_string``).

Rewrites are spliced into the original text by source span, so everything else stays verbatim.
"""

from __future__ import annotations

from webhook.cel.common.escaping import RESERVED_SYMBOLS
from webhook.cel.library.strings_format import clause_letters
from webhook.cel.syntax.ast import Call, CreateList, Expr, Ident, Literal, Select, children, walk
from webhook.cel.common.decl import DeclType

OPTIONAL_OLD_SELF = "(__oldSelfPresent ? optional.of(oldSelf) : optional.none())"
# Kubernetes' sum() of an empty list: the zero of the element type (an int's is the engine's own)
_SUM_ZERO = {"duration": "duration('0s')", "double": "0.0"}


def engine_source(source: str, expr: Expr, spans: dict[int, tuple[int, int]], decl: DeclType | None,
                  *, optional_old_self: bool = False) -> str:
    """``source`` rewritten for evaluation with plain values (unchanged when nothing applies)."""
    writer = _Rewriter(source, spans, decl, optional_old_self)
    return writer.render(expr) if writer.plan(expr) else source


class _Rewriter:
    def __init__(self, source: str, spans: dict[int, tuple[int, int]], decl: DeclType | None,
                 optional_old_self: bool) -> None:
        self.source = source
        self.spans = spans
        self.root = decl
        self.optional_old_self = optional_old_self
        self.templates: dict[int, object] = {}   # node id -> how to render it
        self.decls: dict[int, DeclType | None] = {}

    # --- which nodes change -------------------------------------------------------------------

    def plan(self, expr: Expr) -> bool:
        for node in walk(expr):
            if isinstance(node, Ident) and node.name == "oldSelf" and self.optional_old_self:
                self.templates[node.id] = "optional-old-self"
            elif isinstance(node, Call) and node.target is None and len(node.args) == 2 \
                    and node.function in ("_==_", "_!=_", "_+_"):
                left = self.decl_of(node.args[0])
                if left is not None and left.kind == "list" and left.list_type in ("set", "map"):
                    self.templates[node.id] = node.function
                elif left is not None and node.function != "_+_" and _has_unordered_lists(left):
                    self.templates[node.id] = node.function
            elif isinstance(node, Call) and node.function == "string" and node.target is None and len(node.args) == 1:
                if self.is_date_time(node.args[0]):
                    self.templates[node.id] = "date-time-string"
            elif isinstance(node, Call) and node.function == "format" and isinstance(node.target, Literal) \
                    and node.target.kind == "string" and len(node.args) == 1 and isinstance(node.args[0], CreateList):
                # cel-go's %s of a timestamp is its string(): a date-time argument is printed so
                # (any other clause rejects a timestamp at compile time, as before)
                letters = clause_letters(node.target.value) or []
                for letter, element in zip(letters, node.args[0].elements):
                    if letter == "s" and self.is_date_time(element):
                        self.templates[element.id] = "date-time-string"
            elif isinstance(node, Call) and node.function == "sum" and node.target is not None and not node.args:
                items = self.decl_of(node.target)
                if items is not None and items.kind == "list" and items.elem is not None \
                        and items.elem.kind in _SUM_ZERO:
                    self.templates[node.id] = "typed-sum"
        # macro-generated nodes have no source span; nothing rewritten can hide inside one
        return bool(self.templates) and all(node_id in self.spans for node_id in self.templates)

    def is_date_time(self, node: Expr) -> bool:
        decl = self.decl_of(node)
        return decl is not None and decl.kind == "timestamp" and decl.format == "date-time"

    def decl_of(self, node: Expr) -> DeclType | None:
        if node.id in self.decls:
            return self.decls[node.id]
        found: DeclType | None = None
        if isinstance(node, Ident):
            if node.name == "self" or (node.name == "oldSelf" and not self.optional_old_self):
                found = self.root
        elif isinstance(node, Select) and not node.test_only and not node.optional:
            operand = self.decl_of(node.operand)
            if operand is not None and operand.kind == "object":
                found = operand.fields.get(node.field)
                if found is None and node.field in RESERVED_SYMBOLS:
                    found = operand.fields.get(f"__{node.field}__")
            elif operand is not None and operand.kind == "map":
                found = operand.elem
        elif isinstance(node, Call) and node.target is None and len(node.args) == 2:
            left = self.decl_of(node.args[0])
            if node.function == "_[_]" and left is not None and left.kind in ("list", "map"):
                found = left.elem
            elif node.function == "_+_" and left is not None and left.list_type in ("set", "map"):
                found = left
        self.decls[node.id] = found
        return found

    # --- rendering ----------------------------------------------------------------------------

    def render(self, node: Expr) -> str:
        kind = self.templates.get(node.id)
        if kind == "optional-old-self":
            return OPTIONAL_OLD_SELF
        if kind == "typed-sum":
            assert isinstance(node, Call) and node.target is not None
            items = self.render(node.target)
            zero = _SUM_ZERO[self.decl_of(node.target).elem.kind]  # type: ignore[union-attr]
            return f"(size({items}) == 0 ? {zero} : ({items}).sum())"
        if kind == "date-time-string":
            if isinstance(node, Call) and node.function == "string":  # string(x)
                return f"string(dyn({self.render(node.args[0])}))"
            return f"string(dyn({self._verbatim(node)}))"  # x, an argument of format's %s
        if kind is not None:
            assert isinstance(node, Call)
            left, right = (self.render(arg) for arg in node.args)
            decl = self.decl_of(node.args[0])
            assert decl is not None
            if kind == "_+_":
                return _merge(left, right, decl)
            equal = _deep_equal(left, right, decl, 0)
            return equal if kind == "_==_" else f"!{equal}"
        return self._verbatim(node)

    def _verbatim(self, node: Expr) -> str:
        """The node's own text with every rewritten node inside it replaced."""
        start, end = self.spans[node.id]
        pieces, position = [], start
        for child in self._rewritten_children(node):
            child_start, child_end = self.spans[child.id]
            pieces.append(self.source[position:child_start])
            pieces.append(self.render(child))
            position = child_end
        pieces.append(self.source[position:end])
        return "".join(pieces)

    def _rewritten_children(self, node: Expr) -> list[Expr]:
        """The outermost rewritten nodes strictly inside ``node``, in source order."""
        found: list[Expr] = []
        stack = list(children(node))
        while stack:
            child = stack.pop()
            if child.id in self.templates:
                found.append(child)
            else:
                stack.extend(children(child))
        return sorted(found, key=lambda child: self.spans[child.id][0])




def _has_unordered_lists(decl: DeclType) -> bool:
    """Whether a value of this type holds a set or map list anywhere (so ``==`` is not plain)."""
    if decl.kind == "list":
        return decl.list_type in ("set", "map") or (decl.elem is not None and _has_unordered_lists(decl.elem))
    if decl.kind == "map":
        return decl.elem is not None and _has_unordered_lists(decl.elem)
    if decl.kind == "object":
        return any(_has_unordered_lists(field) for field in decl.fields.values())
    return False


def _deep_equal(a: str, b: str, decl: DeclType, depth: int) -> str:
    """``a == b`` with Kubernetes' equality: set and map lists compare without regard to order."""
    if not _has_unordered_lists(decl):
        return f"({a} == {b})"
    if decl.kind == "list" and decl.list_type in ("set", "map"):
        return f"(size({a}) == size({b}) && sets.contains({a}, {b}))"
    if decl.kind == "list":
        i = f"__i{depth}"
        inner = _deep_equal(f"{a}[{i}]", f"{b}[{i}]", decl.elem, depth + 1)  # type: ignore[arg-type]
        return f"(size({a}) == size({b}) && lists.range(size({a})).all({i}, {inner}))"
    if decl.kind == "map":
        k = f"__k{depth}"
        inner = _deep_equal(f"{a}[{k}]", f"{b}[{k}]", decl.elem, depth + 1)  # type: ignore[arg-type]
        return f"(size({a}) == size({b}) && {a}.all({k}, {k} in {b} && {inner}))"
    # an object: same keys (declared or not), and each declared field equal by its own type
    parts = [f"size({a}) == size({b})"]
    for name, field in decl.fields.items():
        inner = _deep_equal(f"{a}.{name}", f"{b}.{name}", field, depth + 1)
        parts.append(f"has({a}.{name}) == has({b}.{name}) && (!has({a}.{name}) || {inner})")
    return "(" + " && ".join(f"({part})" for part in parts) + ")"


def _merge(left: str, right: str, decl: DeclType) -> str:
    if decl.list_type == "set":
        return f"({left} + ({right}).filter(__e, !(__e in {left})))"
    keys = [decl.elem.by_property[key][0] if decl.elem is not None and key in decl.elem.by_property else key
            for key in decl.map_keys]
    same = " && ".join(f"__x.{key} == __y.{key}" for key in keys) or "true"
    replaced = f"({left}).map(__x, ({right}).exists(__y, {same}) ? ({right}).filter(__y, {same})[0] : __x)"
    appended = f"({right}).filter(__y, !({left}).exists(__x, {same}))"
    return f"({replaced} + {appended})"
