"""Go's regular expressions (RE2 syntax and semantics) for schema ``pattern``s.

``google-re2`` gives the exact engine; its Python ``search`` wrapper maps offsets back to
characters on every call, which costs more than the match itself. A schema pattern only
needs yes/no, so matching goes to the engine directly when the wrapper exposes it.
"""

from __future__ import annotations

import re2

_UNANCHORED = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)


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
