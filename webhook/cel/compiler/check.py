"""The checking step both backends share: an expression type-checked on cel-cpp's checker
against Kubernetes' declarations (``env.new_env``), then ``optimize``'s checks (Kubernetes'
literal checks, cel-go's range checks) and rewrites. Errors are ``CelCompileError`` in cel-go's
words (``wording``). The default backend (``engine.cel_expr``) plans the result; the
fallback (``engine.cel_python``) takes its errors and runtime bound and evaluates the source on celpy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

from webhook.cel.environment import protos
from webhook.cel.environment.env import new_env
from webhook.cel.errors import CelCompileError
from webhook.cel.optimize.optimizer import Result, optimize
from webhook.cel.environment.protos import children
from webhook.cel.cost.bound import CostShape, shape
from webhook.cel.compiler.wording import cel_go_overload_errors, clean_message, format_issues

@dataclass(frozen=True, slots=True)
class Checked:
    """An expression that passed every check."""

    expression: str
    plain: Result                 # ``optimize``'s result on the checked AST (nothing hoisted)
    cost: CostShape               # the runtime bound of that program
    fresh: Callable[[], Any]      # a new copy of the checked AST (variables renamed), for another pass


class Checker:
    """The checking step with its environments: one cel-cpp checking env per set of variable
    declarations, built when first needed and kept for the checker's life. An engine owns
    one (``Evaluator`` at the edge): nothing is kept between engines."""

    __slots__ = ("_envs", "_lock")

    def __init__(self) -> None:
        self._envs: dict[tuple, cel.Env] = {}  # per variable declarations
        self._lock = threading.Lock()

    def check(self, expression: str, variables: Mapping[str, cel.Type], rename: Mapping[str, str] | None = None,
              *, mixed_literals: bool = False) -> Checked:
        """``expression`` checked against typed variable declarations (``rename``: some
        variables read under another name at evaluation; ``mixed_literals``: as
        ``Engine.compile`` takes it). Raises ``CelCompileError``."""
        declarations = tuple(sorted((name, t.name()) for name, t in variables.items()))
        with self._lock:
            checking = self._envs.get(declarations)
            if checking is None:
                checking = self._envs[declarations] = new_env(variables)
        try:
            checked_expr = checking.compile(two_variable_exists_one(expression))
        except RuntimeError as err:
            raise CelCompileError(cel_go_overload_errors(expression, clean_message(str(err)))) from None

        def fresh() -> Any:
            decoded = protos.decode(checked_expr)
            return rename_variables(decoded, rename) if rename else decoded

        plain = optimize(fresh(), mixed_literals=mixed_literals)
        if plain.issues:
            raise CelCompileError(format_issues(expression, plain.checked.source_info, plain.issues))
        return Checked(expression, plain, shape(plain.checked.expr), fresh)


_EXISTS_ONE = ".exists_one("


def _starts_string(text: str, i: int) -> bool:
    """A string literal starts at ``i``: a quote, or r/b prefixes (not inside a name) and a quote."""
    j = i
    while j < len(text) and j - i < 2 and text[j] in "rRbB":
        j += 1
    if j >= len(text) or text[j] not in "'\"":
        return False
    return j == i or i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")


def _string_end(text: str, start: int) -> int:
    """Index just past the string literal starting at ``start`` (quote, or r/b prefix)."""
    i = start
    while text[i] in "rRbB":
        i += 1
    quote = text[i : i + 3] if text[i : i + 3] in ('"""', "\'\'\'") else text[i]
    raw = "r" in text[start:i].lower()
    i += len(quote)
    while i < len(text):
        if not raw and text[i] == "\\":
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote)
        i += 1
    return len(text)


def two_variable_exists_one(expression: str) -> str:
    """cel-cpp spells the two-variable ``exists_one(k, v, p)`` only ``existsOne``; rename it
    (same length, so error positions do not move), skipping string literals."""
    if _EXISTS_ONE not in expression:
        return expression
    out, i = list(expression), 0
    while i < len(expression):
        if _starts_string(expression, i):
            i = _string_end(expression, i)
            continue
        if expression.startswith(_EXISTS_ONE, i):
            depth, commas, j = 0, 0, i + len(_EXISTS_ONE)
            while j < len(expression) and depth >= 0:
                if _starts_string(expression, j):
                    j = _string_end(expression, j)
                    continue
                c = expression[j]
                depth += c in "([{"
                depth -= c in ")]}"
                commas += c == "," and depth == 0
                j += 1
            if commas == 2:
                out[i + 1 : i + len(_EXISTS_ONE)] = list("existsOne (")
        i += 1
    return "".join(out)


def _walk_free(expr: Any, visit: Any) -> None:
    """Call ``visit(node)`` for each identifier not bound by an enclosing comprehension."""
    stack = [(expr, frozenset())]
    while stack:
        node, bound = stack.pop()
        kind = node.WhichOneof("expr_kind")
        if kind == "ident_expr":
            if node.ident_expr.name not in bound:
                visit(node)
        elif kind == "comprehension_expr":
            c = node.comprehension_expr
            inner = bound | {c.iter_var, c.iter_var2, c.accu_var}
            stack += [(c.iter_range, bound), (c.accu_init, bound), (c.loop_condition, inner), (c.loop_step, inner),
                      (c.result, bound | {c.accu_var})]
        else:
            stack += [(child, bound) for child in children(node)]


def free_variables(expr: Any, variables: Iterable[str]) -> frozenset[str]:
    """The declared ``variables`` an expression reads."""
    variables, found = set(variables), set()
    _walk_free(expr, lambda node: found.add(node.ident_expr.name) if node.ident_expr.name in variables else None)
    return frozenset(found)


def rename_variables(checked: Any, rename: Mapping[str, str]) -> Any:
    """``checked`` reading each variable ``old`` of ``rename`` as ``rename[old]``."""
    def visit(node: Any) -> None:
        new = rename.get(node.ident_expr.name)
        if new is not None:
            node.ident_expr.name = new
            if node.id in checked.reference_map:
                checked.reference_map[node.id].name = new

    _walk_free(checked.expr, visit)
    return checked
