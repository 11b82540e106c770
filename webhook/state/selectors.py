"""Kubernetes label selectors: the string form (``a=b,c in (x,y),!d``) and the
``metav1.LabelSelector`` form (``matchLabels`` / ``matchExpressions``).

Both compile to a tuple of :class:`Requirement`; matching is a pure function of a
label map, with the semantics of k8s.io/apimachinery/pkg/labels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["Requirement", "Selector", "SelectorError", "parse_selector", "from_label_selector", "selector_string"]


class SelectorError(ValueError):
    """A label selector that does not parse."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist (Equals/NotEquals are In/NotIn of one value)
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        # NotIn: a missing key satisfies it, as in apimachinery
        return self.key not in labels or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False  # a nil LabelSelector in some APIs selects nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements and not self.nothing


EVERYTHING = Selector()

_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=,()]+)")


def _tokens(text: str) -> list[str]:
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise SelectorError(f"unable to parse requirement at {text[pos:]!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


def parse_selector(text: str | None) -> Selector:
    """Parse the string form used by ``?labelSelector=`` and ``kubectl -l``."""
    if text is None or not text.strip():
        return EVERYTHING
    toks = _tokens(text)
    reqs: list[Requirement] = []
    i = 0

    def take() -> str:
        nonlocal i
        if i >= len(toks):
            raise SelectorError(f"unexpected end of selector {text!r}")
        i += 1
        return toks[i - 1]

    while i < len(toks):
        tok = take()
        if tok == "!":
            reqs.append(Requirement(take(), "DoesNotExist"))
        else:
            key = tok
            nxt = toks[i] if i < len(toks) else ","
            if nxt == ",":
                reqs.append(Requirement(key, "Exists"))
            elif nxt in ("=", "==", "!="):
                take()
                value = take() if i < len(toks) and toks[i] not in (",",) else ""
                reqs.append(Requirement(key, "NotIn" if nxt == "!=" else "In", frozenset({value})))
            elif nxt in ("in", "notin"):
                take()
                if take() != "(":
                    raise SelectorError(f"expected '(' after {nxt!r} in {text!r}")
                values: set[str] = set()
                while True:
                    tok = take()
                    if tok == ")":
                        break
                    if tok != ",":
                        values.add(tok)
                reqs.append(Requirement(key, "In" if nxt == "in" else "NotIn", frozenset(values)))
            else:
                raise SelectorError(f"unexpected {nxt!r} after {key!r} in selector {text!r}")
        if i < len(toks):
            if take() != ",":
                raise SelectorError(f"expected ',' between requirements in {text!r}")
    return Selector(tuple(reqs))


_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}


def from_label_selector(selector: Mapping[str, Any] | None) -> Selector:
    """Compile a ``metav1.LabelSelector``; ``None`` or ``{}`` selects everything."""
    if not selector:
        return EVERYTHING
    reqs = [Requirement(k, "In", frozenset({str(v)})) for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        op = expr.get("operator")
        if op not in _OPERATORS:
            raise SelectorError(f"{op!r} is not a valid label selector operator")
        values = frozenset(str(v) for v in expr.get("values") or ())
        if op in ("In", "NotIn") and not values:
            raise SelectorError(f"values: must be specified when operator is {op!r}")
        if op in ("Exists", "DoesNotExist") and values:
            raise SelectorError(f"values: may not be specified when operator is {op!r}")
        reqs.append(Requirement(expr["key"], op, values))
    return Selector(tuple(reqs))


def selector_string(match_labels: Mapping[str, str]) -> str:
    """``{"a": "b", "c": "d"}`` -> ``"a=b,c=d"`` (a label selector in its string form)."""
    return ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))
