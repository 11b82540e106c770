"""How deep and how large one decoded document may be, wherever documents enter.

The CEL runtime converts values recursively in C++: a value nested a few thousand levels
deep overflows its stack (a segfault, not an exception). Every edge therefore hands on
only values within :data:`MAX_DEPTH`:

* JSON (review bodies, the apiserver's lists and watch events) is decoded by orjson,
  which refuses documents nested past ``MAX_DEPTH`` levels itself
  (``tests/reliability/test_nesting.py`` pins the two together);
* YAML can build values deeper and larger than its text: libyaml stops at 1,000 levels of
  *text*, but an alias (``*a``) re-uses a whole node, so a chain of aliases nests as deep
  as it likes, an alias inside its own anchor makes a value that contains itself, and
  aliases of aliases multiply (the "billion laughs"). Each YAML edge checks what it
  decoded with :func:`tree_problem`.
"""

from __future__ import annotations

from typing import Any

# orjson's limit (its JSONDecodeError "depth limit exceeded"): containers on any path
MAX_DEPTH = 1024
# values in one document once aliases are expanded: as many as a 3 MiB request can hold
# (one per two bytes, ``[0,0,...]``), the most the apiserver ever accepts in one object
MAX_VALUES = 3 * 1024 * 1024 // 2


def tree_problem(value: Any) -> str | None:
    """Why ``value`` cannot be handed on (too deep, containing itself, too large), or None.

    Level by level, so that a value containing itself stops at ``MAX_DEPTH``."""
    level = [value] if type(value) in _CONTAINERS else []
    depth, values = 0, 1
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            return f"nested more than {MAX_DEPTH} levels deep (or containing itself through a YAML alias)"
        below: list[Any] = []
        for node in level:
            children = node.values() if type(node) is dict else node
            values += len(children)
            if values > MAX_VALUES:
                return f"more than {MAX_VALUES:,} values once YAML aliases are expanded"
            below += [child for child in children if type(child) in _CONTAINERS]
        level = below
    return None


def may_alias(text: str) -> bool:
    """Whether YAML ``text`` can hold an alias at all: without an anchor (``&``) it cannot,
    and the decoded value is then no deeper than libyaml allows nor larger than the text."""
    return "&" in text


_CONTAINERS = (dict, list)
