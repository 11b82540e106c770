"""What both native plugins do before their own work, as kube-apiserver v1.36's
``generic.policyDispatcher`` does it for both: per policy whose ``matchConstraints`` match, its
params kind resolved, per binding whose ``matchResources`` match, per param the binding names:
an invocation (``generic.PolicyInvocation``); and the matchConditions each invocation starts
with (``matchconditions.matcher.Match``).

A policy or binding the apiserver cannot configure is a :class:`ConfigurationError` in its words
(``failed to configure policy: ...``, ``failed to configure binding: ...``), which each plugin
answers by its failurePolicy; what the cluster view does not show (a namespace, params) is
:class:`Unchecked`, left out. The steps come in the order the dispatcher meets them, which
decides which error is reported first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from webhook.cel.limits import RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS
from webhook.policy.native.expressions import OUT_OF_BUDGET, Budget, Context, EvaluationError, OutOfBudget, Unknown
from webhook.policy.native.loader import CompiledNativePolicy
from webhook.policy.native.matching import Attributes, Equivalents, MatchError, NamespaceLabels, matches
from webhook.policy.native.model import Binding
from webhook.policy.native.params import ParamsError, ParamsUnknown, collect, gvk_text


@dataclass(frozen=True)
class Cluster:
    """What the plugins read beside the request: the cluster view (``get``/``list``/``knowledge``),
    a namespace's labels and object, whether a kind is namespaced, the resource's other versions."""

    state: Any
    namespace_labels: NamespaceLabels
    namespace_object: Callable[[str], "dict[str, Any] | None"]
    namespaced: Callable[[str, str], "bool | None"]  # None: no such kind is served
    equivalents: Equivalents | None = None


@dataclass(frozen=True)
class Invocation:
    """One (binding, param) of a policy that matched; ``gvr``: the resource as matched (another
    version of it under ``matchPolicy: Equivalent``)."""

    binding: Binding
    param: Any
    gvr: tuple[str, str, str]


@dataclass(frozen=True)
class ConfigurationError:
    """The policy (``binding`` None) or a binding the apiserver cannot configure."""

    binding: Binding | None
    error: str

    @property
    def message(self) -> str:
        prefix = "failed to configure binding" if self.binding is not None else "failed to configure policy"
        return f"{prefix}: {self.error}"


@dataclass(frozen=True)
class Unchecked:
    """What the cluster view does not show, which leaves a binding out (named in the note)."""

    what: str


Step = Invocation | ConfigurationError | Unchecked


def bound_invocations(policy: CompiledNativePolicy, bindings: Iterable[Binding], attrs: Attributes,
                      cluster: Cluster) -> list[Step]:
    """``policyDispatcher.Dispatch``'s matching for one policy and its bindings: nothing when its
    ``matchConstraints`` do not match, else its invocations, configuration errors and what was
    left out, in order."""
    try:
        matched, gvr = matches(policy.definition.match, attrs, cluster.namespace_labels, cluster.equivalents)
    except MatchError as exc:
        return [Unchecked(exc.unknown) if exc.unknown else ConfigurationError(None, str(exc))]
    if not matched:
        return []
    param_kind = policy.definition.param_kind
    if param_kind is not None and cluster.namespaced(*param_kind) is None:
        return [ConfigurationError(None, f"failed to find resource referenced by paramKind: '{gvk_text(*param_kind)}'")]
    steps: list[Step] = []
    for binding in bindings:
        if binding.match is not None:
            try:
                bound, _ = matches(binding.match, attrs, cluster.namespace_labels, cluster.equivalents)
            except MatchError as exc:
                steps.append(Unchecked(exc.unknown) if exc.unknown else ConfigurationError(binding, str(exc)))
                continue
            if not bound:
                continue
        try:
            params = collect(param_kind, binding.param_ref, attrs.namespace, cluster.state,
                             lambda a, k: bool(cluster.namespaced(a, k)))
        except ParamsUnknown as exc:
            steps.append(Unchecked(exc.what))
            continue
        except ParamsError as exc:
            steps.append(ConfigurationError(binding, str(exc)))
            continue
        steps += [Invocation(binding, param, gvr) for param in params]
    return steps


def request_namespace(attrs: Attributes, cluster: Cluster) -> dict[str, Any] | None:
    """``namespaceObject``: the request's Namespace (none for a Namespace's own write)."""
    name = attrs.namespace
    if attrs.kind == "Namespace" and attrs.group == "" and attrs.version == "v1":
        name = ""
    return cluster.namespace_object(name) if name else None


def match_conditions(conditions: Any, variables: Any, activation: dict[str, Any],
                     fail: bool = True) -> tuple[bool, str | None, bool]:
    """``matchconditions.matcher.Match`` (either plugin's): (matches, the error, read the
    authorizer). A false condition wins over errors; errors are joined as
    ``utilerrors.NewAggregate`` writes them. Their budget
    (``RuntimeCELCostBudgetMatchConditions``) running out is the error under failurePolicy
    Fail (``fail``), no match under Ignore."""
    context = Context({**activation, "namespaceObject": None}, variables,
                      Budget(RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS))
    errors: list[str] = []
    results: list[Any] = []
    unread = False
    try:
        for _, program in conditions:
            try:
                results.append(context.evaluate(program))
            except Unknown:
                unread = True
                results.append(None)
            except EvaluationError as exc:
                errors.append(exc.text)
                results.append(None)
    except OutOfBudget:
        return False, OUT_OF_BUDGET if fail else None, False
    if any(r is False for r in results):
        return False, None, False
    if unread:
        return False, None, True
    unique = list(dict.fromkeys(errors))  # utilerrors.NewAggregate: each text once, several in brackets
    if unique:
        return False, unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]", False
    return True, None, False
