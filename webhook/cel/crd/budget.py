"""The runtime cost budget of one request, shared by every CRD rule it evaluates."""


from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webhook.cel.limits import PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET


class CostBudget:
    """The runtime cost budget of one request, shared by every rule it evaluates.

    Each evaluation is charged what cel-go counts (``CompiledRule.cost``), which takes a
    second evaluation. A charge that cannot change what happens is counted later instead
    (``charge_later``): its estimate, an upper bound, is within the per-call limit and within
    what is left once every deferred charge is counted at its estimate too. Deferred charges
    are counted when ``remaining`` is read; the budget never runs out before they are
    (``exhausted``, ``depleted``), so it runs out at the same rule either way."""

    __slots__ = ("_remaining", "_deferred", "_deferred_bound")

    def __init__(self, limit: int = RUNTIME_CEL_COST_BUDGET) -> None:
        self._remaining = limit
        self._deferred: list[tuple[Callable[[Any, Any], int], Any, Any]] = []
        self._deferred_bound = 0

    @property
    def remaining(self) -> int:
        """What is left, every deferred charge counted."""
        if self._deferred:
            deferred, self._deferred, self._deferred_bound = self._deferred, [], 0
            self._remaining -= sum(count(activation, outcome) for count, activation, outcome in deferred)
        return self._remaining

    @remaining.setter
    def remaining(self, value: int) -> None:
        self._deferred, self._deferred_bound = [], 0
        self._remaining = value

    def charge_later(self, bound: int, count: Callable[[Any, Any], int], activation: Any, outcome: Any) -> bool:
        """Defer the charge ``count(activation, outcome)`` (at most ``bound``); False when it
        must be counted now."""
        if bound > PER_CALL_LIMIT or self._remaining - self._deferred_bound - bound < 0:
            return False
        self._deferred.append((count, activation, outcome))
        self._deferred_bound += bound
        return True

    @property
    def exhausted(self) -> bool:
        """The budget ran out (deferred charges never make it run out)."""
        return self._remaining < 0

    @property
    def depleted(self) -> bool:
        """Nothing is left (``remaining <= 0``), counting deferred charges only when it may be so."""
        return self._remaining - self._deferred_bound <= 0 and self.remaining <= 0
