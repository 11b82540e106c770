"""CEL's optional syntax, which celpy 0.5 cannot parse, spelled as calls it can.

- ``x.?f``          -> ``__opt_select__(x, "f")``
- ``x[?i]``         -> ``__opt_index__(x, i)``
- ``[a, ?b]``       -> ``__opt_list__([a, b], [1])``: the positions of the optional elements
- ``{?k: v, j: w}`` -> ``__opt_map__([k, v, j, w], [0])``: the positions of the optional entries

and a triple-quoted string spanning lines as a one-line literal (celpy drops its line breaks).

Everything else keeps its source text (spliced by span, as ``rewrite.py`` does), so macros
and literals reach celpy as written; the functions are in ``operators.py``.
"""

from __future__ import annotations

import json

from webhook.cel.syntax.ast import (
    Call, CreateList, CreateMap, Expr, Literal, Select, children, walk)
from webhook.cel.syntax.parser import CelSyntaxError, parse_with_spans

OPT_SELECT = "__opt_select__"
OPT_INDEX = "__opt_index__"
OPT_LIST = "__opt_list__"
OPT_MAP = "__opt_map__"


def celpy_source(source: str) -> str:
    """``source`` as celpy can parse it (unchanged when nothing applies)."""
    if "?" not in source and "\n" not in source:
        return source
    try:
        expr, spans = parse_with_spans(source)
    except CelSyntaxError:
        return source  # the type checker has reported it already
    rewritten = {node.id for node in walk(expr) if _needs_rewrite(node, source, spans)}
    return _Renderer(source, spans, rewritten).render(expr) if rewritten else source


def _needs_rewrite(node: Expr, source: str, spans: dict[int, tuple[int, int]]) -> bool:
    if isinstance(node, Literal):
        return node.kind == "string" and node.id in spans and "\n" in source[slice(*spans[node.id])]
    return ((isinstance(node, Select) and node.optional)
            or (isinstance(node, Call) and node.function == "_[?_]")
            or (isinstance(node, CreateList) and bool(node.optional_indices))
            or (isinstance(node, CreateMap) and any(entry.optional for entry in node.entries)))


class _Renderer:
    def __init__(self, source: str, spans: dict[int, tuple[int, int]], rewritten: set[int]) -> None:
        self.source = source
        self.spans = spans
        self.rewritten = rewritten

    def render(self, node: Expr) -> str:
        if node.id not in self.rewritten:
            return self._verbatim(node)
        if isinstance(node, Literal):
            return _string(node.value)
        if isinstance(node, Select):
            return f"{OPT_SELECT}({self.render(node.operand)}, {_string(node.field)})"
        if isinstance(node, Call):
            receiver, index = (self.render(arg) for arg in node.args)
            return f"{OPT_INDEX}({receiver}, {index})"
        if isinstance(node, CreateList):
            elements = ", ".join(self.render(element) for element in node.elements)
            return f"{OPT_LIST}([{elements}], {sorted(node.optional_indices)})"
        assert isinstance(node, CreateMap)
        entries = ", ".join(f"{self.render(entry.key)}, {self.render(entry.value)}" for entry in node.entries)
        positions = [i for i, entry in enumerate(node.entries) if entry.optional]
        return f"{OPT_MAP}([{entries}], {positions})"

    def _verbatim(self, node: Expr) -> str:
        """The node's source text with the rewritten nodes inside it replaced."""
        start, end = self.spans[node.id]
        pieces, position = [], start
        for inner in self._outermost_rewritten(node):
            inner_start, inner_end = self.spans[inner.id]
            pieces.append(self.source[position:inner_start])
            pieces.append(self.render(inner))
            position = inner_end
        pieces.append(self.source[position:end])
        return "".join(pieces)

    def _outermost_rewritten(self, node: Expr) -> list[Expr]:
        """The rewritten nodes strictly inside ``node`` and not inside another, in source
        order (macro expansions may hold a node twice: each counts once)."""
        found: dict[int, Expr] = {}
        stack = children(node)
        while stack:
            child = stack.pop()
            if child.id in self.rewritten:
                found[child.id] = child
            else:
                stack.extend(children(child))
        return sorted(found.values(), key=lambda child: self.spans[child.id][0])


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)
