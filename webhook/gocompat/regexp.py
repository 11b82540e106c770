"""Go's regular expressions (RE2 syntax and semantics): ``regexp.Compile``'s error texts
(``compile_error``, for CRD patterns and CEL's regex functions) and schema ``pattern`` matching.

``google-re2`` gives the exact engine; its Python ``search`` wrapper maps offsets back to
characters on every call, which costs more than the match itself. A schema pattern only
needs yes/no, so matching goes to the engine directly when the wrapper exposes it.
"""

from __future__ import annotations

import re2

_UNANCHORED = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
_QUIET = re2.Options()
_QUIET.log_errors = False

# RE2's (C++) error codes -> Go regexp/syntax's ErrorCode texts (the same where absent)
_RE2_TO_GO = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "bad repetition operator": "invalid nested repetition operator",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "trailing \\": "trailing backslash at end of expression",
    "invalid named capture group": "invalid named capture",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "pattern too large - compile failed": "expression too large",
}
_WHOLE_PATTERN = ("missing closing )", "unexpected )")  # Go names the whole expression for these


def compile_error(pattern: str, error: Exception | None = None) -> str | None:
    """Go's ``regexp.Compile`` error text for ``pattern`` (``error``: RE2's, when already
    compiled), or None when it compiles."""
    if error is None:
        try:
            re2.compile(pattern, _QUIET)
        except re2.error as problem:
            error = problem
        else:
            return None
    text = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
    return go_error_text(text, pattern)


def go_error_text(re2_text: str, pattern: str | None = None) -> str:
    """Go's ``regexp.Compile`` error for RE2's error text (``missing ): (``): its code, then
    the fragment (the whole ``pattern``, when known, for the codes where Go names it)."""
    code, _, fragment = re2_text.partition(": ")
    code = _RE2_TO_GO.get(code, code)
    shown = pattern if pattern is not None and (code in _WHOLE_PATTERN or not fragment) else fragment
    return f"error parsing regexp: {code}: `{shown}`"


class GoRegexp:
    """A compiled pattern; ``search(text)`` says whether it matches anywhere, like Go's MatchString."""

    __slots__ = ("pattern", "_compiled", "_native")

    def __init__(self, pattern: str):
        self.pattern = pattern
        self._compiled = re2.compile(pattern)  # raises re2.error for what Go's regexp rejects too
        native = getattr(self._compiled, "_regexp", None)
        self._native = native if native is not None and _UNANCHORED is not None else None

    def search(self, text: str) -> bool:
        if self._native is None:
            return self._compiled.search(text) is not None
        data = text.encode("utf-8", "replace")
        return self._native.Match(_UNANCHORED, data, 0, len(data))[0][0] != -1
