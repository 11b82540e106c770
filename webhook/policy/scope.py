"""A review as its policies read it (``PolicyInput``), and its values as their batches share
them (``ReviewScope``, which each ``CompiledPolicy`` prepares).

The chain asks every policy to prepare before any of them runs: each puts its params, its
lookups' results and its state variables into the review's scope under names of its own,
and the batches then share one binding of all of it (each value converted into CEL once
per review instead of once per program).
"""

from __future__ import annotations

from typing import Any, Mapping

from webhook.state import ClusterState

# what a request brings; the other names are each policy's own (its params, lookups, variables)
REQUEST_VARIABLES = ("object", "oldObject", "request", "namespaceObject")
POLICY_VARIABLES = ("params", "lookups", "variables")


class PolicyInput:
    """The request as policies see it (built once per request by the chain; a mutated object
    is a new input: ``with_object``). Read-only by convention: policies only read it.

    A plain class with slots: built on every review, where a frozen dataclass's field by field
    ``object.__setattr__`` would cost more than the rest of its construction."""

    __slots__ = ("request", "object", "old_object", "namespace_object", "state", "rule_key", "scope")

    def __init__(self, request: Mapping[str, Any], object: dict[str, Any] | None, old_object: dict[str, Any] | None,
                 namespace_object: dict[str, Any] | None, state: ClusterState) -> None:
        self.request = request  # the AdmissionRequest minus object/oldObject
        self.object = object
        self.old_object = old_object
        self.namespace_object = namespace_object
        self.state = state
        # what policies' rules match: (group, kind, operation, subresource)
        kind = request.get("kind") or {}
        self.rule_key = kind.get("group", ""), kind.get("kind", ""), request.get("operation"), \
            request.get("subResource") or ""
        # this input's values shared by its policies' batches
        self.scope = ReviewScope({"object": object, "oldObject": old_object, "request": request,
                                  "namespaceObject": namespace_object})

    def with_object(self, obj: dict[str, Any] | None) -> "PolicyInput":
        """The same request carrying ``obj`` (after a mutation)."""
        return PolicyInput(self.request, obj, self.old_object, self.namespace_object, self.state)

    @property
    def group(self) -> str:
        return self.rule_key[0]

    @property
    def kind(self) -> str:
        return self.rule_key[1]


class ReviewScope:
    """What one review's policies hand to CEL, shared by all their batches: the request's
    values, and each policy's params, lookups and precomputed variables under names of its
    own (``BatchPath.names``), bound once with the engine's ``bind`` (each value
    converted into CEL once per review, not once per program). The policies prepare their
    values first; one that adds values after the binding makes the next batch bind anew."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self.prepared: dict[int, Prepared | None] = {}  # by policy serial
        self._batches = 0  # how many batches prepared their values
        self._bindings: Mapping[str, Any] | None = None
        self._bound = 0  # how many values the bindings hold

    def add(self, values: Mapping[str, Any]) -> None:
        """A policy's values (under names of its own: a value once added never changes)."""
        self.values.update(values)
        self._batches += 1

    def bindings(self, engine: Any, reads: frozenset[str]) -> Mapping[str, Any]:
        """The values of (at least) ``reads``: bindings of every value, made anew only when
        values were added since (a binding converts a value only when a program first reads it,
        and is sized by what each program reads); for a single batch, plain data with only what
        it reads (a binding pays off from the second program that reads its values)."""
        if self._batches < 2:
            return {name: self.values[name] for name in reads if name in self.values}
        if self._bindings is None or self._bound != len(self.values):
            self._bound = len(self.values)
            self._bindings = engine.bind(self.values)
        return self._bindings


class Prepared:
    """A policy's values for one review, before its batches run."""

    __slots__ = ("params", "lookups", "variables", "lookups_read")

    def __init__(self, params: Any, lookups: dict[str, Any], variables: dict[str, Any],
                 lookups_read: frozenset[str] | None) -> None:
        self.params = params
        self.lookups = lookups
        self.variables = variables  # the state variables' values
        self.lookups_read = lookups_read  # by the batches (None: all)

    def bound(self, names: Mapping[str, str] | None) -> dict[str, Any]:
        """The values the batches read, under their names in the review's bindings (``None``:
        their own names)."""
        if self is NOTHING:
            return {}
        names = names or {name: name for name in POLICY_VARIABLES}
        read = self.lookups_read
        values = {names["params"]: self.params}
        if self.lookups and read != frozenset():
            values[names["lookups"]] = self.lookups if read is None else {k: self.lookups[k] for k in read}
        if self.variables:
            values[names["variables"]] = self.variables
        return values


NOTHING = Prepared(None, {}, {}, frozenset())  # for a policy whose batches read only the request
UNPREPARED = object()
