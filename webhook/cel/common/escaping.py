"""Property-name escaping of CRD schemas for CEL (Kubernetes' ``pkg/cel/escaping.go``).

A schema property becomes a CEL field only when its name can be escaped into a CEL
identifier: ``__`` -> ``__underscores__``, ``.`` -> ``__dot__``, ``-`` -> ``__dash__``,
``/`` -> ``__slash__``, and a name that is exactly a CEL reserved word -> ``__{word}__``.
Names starting with a digit or holding any other character are not accessible.
"""

from __future__ import annotations

import re

RESERVED_SYMBOLS = frozenset({
    "true", "false", "null", "in",
    "as", "break", "const", "continue", "else",
    "for", "function", "if", "import", "let",
    "loop", "package", "namespace", "return",
    "var", "void", "while",
})

_EXPAND = re.compile(r"(__|[-./]|[^a-zA-Z0-9\-./_])")
_PLAIN = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_UNEXPAND = re.compile(r"(_{2}[^_]+_{2})")
_EXPANSIONS = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_CONTRACTIONS = {"underscores": "__", "dot": ".", "dash": "-", "slash": "/"}


def escape(name: str) -> str | None:
    """The CEL identifier for a property name, or None when the name cannot be accessed."""
    if not name or "0" <= name[0] <= "9":
        return None
    if name in RESERVED_SYMBOLS:
        return f"__{name}__"
    if _PLAIN.match(name) and "__" not in name:
        return name
    ok = True

    def expand(match: re.Match[str]) -> str:
        nonlocal ok
        replacement = _EXPANSIONS.get(match.group(0))
        if replacement is None:
            ok = False
            return ""
        return replacement

    escaped = _EXPAND.sub(expand, name)
    return escaped if ok else None


def unescape(escaped: str) -> str | None:
    """The property name behind an escaped CEL identifier, or None for malformed escapes."""
    ok = True

    def contract(match: re.Match[str]) -> str:
        nonlocal ok
        token = match.group(0)
        contents = token[2:-2]
        if contents in _CONTRACTIONS:
            return _CONTRACTIONS[contents]
        if contents in RESERVED_SYMBOLS:
            if len(token) != len(escaped):
                ok = False
            return contents
        ok = False
        return ""

    name = _UNEXPAND.sub(contract, escaped)
    return name if ok else None
