"""What an engine keeps between calls: a bounded table, the least recently used entry dropped.

Each engine (``cel_expr``, ``cel_python``) owns its tables, so they live as long as the
``Evaluator`` built at the edge and are never shared by two engines.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

KEPT_SIZE = 4096  # entries a table keeps


class Kept:
    """A thread-safe table of at most ``size`` entries; ``get`` refreshes an entry."""

    __slots__ = ("_entries", "_size", "_lock")

    def __init__(self, size: int = KEPT_SIZE) -> None:
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The entry of ``key``, or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
