"""MutatingAdmissionPolicies mutating one request, as kube-apiserver v1.36's
``mutating.dispatcher`` and ``generic.policyDispatcher`` do.

Per policy whose ``matchConstraints`` match, per binding whose ``matchResources`` match, per
param: an invocation. Each invocation's matchConditions (``namespaceObject`` null; an error is
the policy's error), then its mutations in order on the object as the previous ones left it:
the expression evaluated (``object`` the current object, ``oldObject``, ``request``,
``params``, ``namespaceObject``, lazy ``variables``), its patch applied (``patching``); an
error skips that mutation and is the policy's error (reason ``Invalid``); each mutation has a
CEL cost budget of its own (``expressions``), shared with the variables it reads. Errors of
failurePolicy ``Ignore`` policies are dropped; the others deny: the first one's text
(``policy '<p>' with binding '<b>' denied request: <error>``; a configuration error
``failed to configure binding: ...`` keeps reason ``Forbidden``) with every one as a cause,
code 403. A JSONPatch's result the apiserver cannot decode again (``patching.type_meta_error``,
a built-in kind's unknown fields) is a StatusError: the plugin stops there with that internal
error (500), whatever the failurePolicy (``dispatcher.go``).

Reinvocation (``reinvocationcontext.go``): a policy with ``reinvocationPolicy: IfNeeded`` that
ran before a later mutation changed the object is run again in the apiserver's second pass of
the mutating plugins, when the object changed since this plugin last returned it (a mutating
webhook after it did). ``Reinvocation`` carries that state between the two passes.

The apiserver walks policies in the order of a Go map, rebuilt whenever a policy or binding
changes (``generic.policySource.calculatePolicyData``; recorded:
``tests/policy/native/order/``); here they go in name order, and bindings too.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from webhook.cel.mutation import MutationError, json_patches, object_value
from webhook.gocompat.fmt import go_quote
from webhook.policy.native.expressions import OUT_OF_BUDGET, Budget, Context, EvaluationError, OutOfBudget, Unknown
from webhook.policy.native.loader import CompiledMutatingPolicy, NativePolicies
from webhook.policy.native.dispatch import (Cluster, ConfigurationError, Unchecked, bound_invocations,
                                            match_conditions, request_namespace)
from webhook.policy.native.matching import Attributes
from webhook.policy.native.patching import (DecodingError, MergeTypesUnknown, PatchError, apply_configuration,
                                            json_patch, type_meta_error)
from webhook.schema.field_validation import unknown_field

# a built-in object's fields its kind does not have (paths, in the strict decoder's order)
UnknownFields = Callable[[dict[str, Any]], list[str]]


@dataclass
class Reinvocation:
    """``policyReinvokeContext`` and the admission chain's reinvocation flag, for one request."""

    reinvoking: bool = False  # this is the chain's second pass
    should_reinvoke: bool = False  # a mutation asked for the second pass
    last_output: Any = None
    previously_invoked: set[tuple[str, str, str]] = field(default_factory=set)
    reinvoke: set[tuple[str, str, str]] = field(default_factory=set)

    def require_reinvoking(self) -> None:
        self.reinvoke |= self.previously_invoked
        self.previously_invoked = set()


@dataclass
class MutatingAnswer:
    """What the MutatingAdmissionPolicy plugin did to one request."""

    object: Any  # the object after every mutation
    status: dict[str, Any] | None = None  # a denial's metav1.Status
    unchecked: list[tuple[str, str]] = field(default_factory=list)  # (what, unit) left out, unknown

    @property
    def allowed(self) -> bool:
        return self.status is None


@dataclass
class _PolicyError:
    policy: CompiledMutatingPolicy
    binding: str | None
    message: str
    reason: str = ""

    def text(self) -> str:
        if self.binding is not None:
            return f"policy '{self.policy.name}' with binding '{self.binding}' denied request: {self.message}"
        return f"policy {go_quote(self.policy.name)} denied request: {self.message}"


def mutate(policies: NativePolicies, attrs: Attributes, cluster: Cluster, schema: Any,
           reinvocation: Reinvocation, unknown_fields: UnknownFields | None = None) -> MutatingAnswer:
    """The plugin's ``Admit`` on ``attrs`` (its object mutated in a copy). ``schema``: the
    kind's schema (``webhook.schema.structural.Node``) the ApplyConfigurations merge by; None
    for a built-in kind, whose merge types are known only for ``metadata``: an
    ApplyConfiguration setting more is left out, unknown (named in ``unchecked``).
    ``unknown_fields``: a built-in kind's, which the strict decoding of a JSONPatch's result
    refuses (a custom resource's are pruned later)."""
    answer = MutatingAnswer(attrs.object)
    errors: list[_PolicyError] = []
    invocations: list[tuple[CompiledMutatingPolicy, str, Any, tuple[str, str, str], tuple[str, str, str]]] = []
    for policy, bindings in policies.mutating_bound():
        for step in bound_invocations(policy, bindings, attrs, cluster):
            if isinstance(step, Unchecked):
                answer.unchecked.append((step.what, "bindings"))
            elif isinstance(step, ConfigurationError):
                errors.append(_PolicyError(policy, step.binding.name if step.binding is not None else None,
                                           step.message))
            else:
                param = step.param
                meta = (param or {}).get("metadata") or {} if isinstance(param, dict) else {}
                key = (policy.name, step.binding.name, f"{meta.get('namespace', '')}/{meta.get('name', '')}")
                invocations.append((policy, step.binding.name, param, key, step.gvr))
    if invocations:
        try:
            errors += _dispatch(invocations, attrs, cluster, schema, reinvocation, answer, unknown_fields)
        except DecodingError as exc:  # a StatusError: the plugin's answer, whatever the failurePolicy
            answer.status = _internal_error(str(exc))
            return answer
    failing = [e for e in errors if e.policy.definition.failure_policy != "Ignore"]
    if failing:
        answer.status = _forbidden(attrs, failing)
    return answer


def _dispatch(invocations, attrs: Attributes, cluster: Cluster, schema: Any, reinvocation: Reinvocation,
              answer: MutatingAnswer, unknown_fields: UnknownFields | None) -> list[_PolicyError]:
    """``dispatcher.dispatchInvocations``: each invocation's mutations on the object in turn."""
    if reinvocation.reinvoking and reinvocation.last_output != answer.object:
        reinvocation.require_reinvoking()
    errors: list[_PolicyError] = []
    namespace = request_namespace(attrs, cluster)
    obj = answer.object
    for policy, binding, param, key, gvr in invocations:
        if obj is None:  # nothing to patch (no object): the apiserver calls no patcher
            continue
        ran, mutated = _invoke(policy, binding, param, key, gvr, obj, attrs, namespace, schema, reinvocation, answer,
                               errors, unknown_fields)
        if not ran:
            continue
        if mutated != obj:
            reinvocation.require_reinvoking()
            reinvocation.should_reinvoke = True
        if policy.definition.reinvocation == "IfNeeded":
            reinvocation.previously_invoked.add(key)
        obj = mutated
    answer.object = obj
    reinvocation.last_output = copy.deepcopy(obj)
    return errors


def _invoke(policy: CompiledMutatingPolicy, binding: str, param: Any, key: tuple[str, str, str],
            gvr: tuple[str, str, str], obj: dict[str, Any], attrs: Attributes, namespace: Any, schema: Any,
            reinvocation: Reinvocation, answer: MutatingAnswer, errors: list[_PolicyError],
            unknown_fields: UnknownFields | None) -> tuple[bool, Any]:
    """One invocation: whether it ran (its matchConditions held, and on the second pass it was
    due to run again) and the object its mutations leave."""
    # matched as another version (matchPolicy Equivalent): the policy sees the objects in that
    # version (a custom resource's conversion "None" changes only apiVersion) and a request
    # naming it; what it leaves is converted back
    request, old, api_version = attrs.request, attrs.old_object, obj.get("apiVersion")
    if gvr != (attrs.group, attrs.version, attrs.resource):
        group, version, resource = gvr
        request = {**attrs.request, "resource": {"group": group, "version": version, "resource": resource},
                   "kind": {**(attrs.request.get("kind") or {}), "version": version}}
        converted = f"{group}/{version}" if group else version
        obj = {**obj, "apiVersion": converted}
        old = {**old, "apiVersion": converted} if old is not None else None
    activation = {"object": obj, "oldObject": old, "request": request, "params": param, "namespaceObject": namespace}
    if policy.match_conditions:
        matched, error, unread = match_conditions(policy.match_conditions, policy.variables, activation,
                                                  policy.definition.failure_policy != "Ignore")
        if unread:
            answer.unchecked.append(("authorizer", "bindings"))
            return False, obj
        if error is not None:
            errors.append(_PolicyError(policy, binding, error, "Invalid"))
            return False, obj
        if not matched:
            return False, obj
    if reinvocation.reinvoking and key not in reinvocation.reinvoke:
        return False, obj
    for mutation in policy.mutations:
        budget = Budget()  # each patcher's ``ForInput`` its own
        context = Context({**activation, "object": obj}, policy.variables, budget)
        try:
            value = context.evaluate(mutation.expression)
            if mutation.patch_type == "JSONPatch":
                obj = json_patch(obj, json_patches(value))
                _decode_again(obj, unknown_fields)
            else:
                patch = object_value(value)
                # the object's group, version and kind, whatever the expression set (smd.go's SetGroupVersionKind)
                patch = {**patch, **{key: obj[key] for key in ("apiVersion", "kind") if key in obj}}
                obj = apply_configuration(schema, obj, patch)
        except Unknown:
            answer.unchecked.append(("authorizer", "rules"))
        except MergeTypesUnknown:
            answer.unchecked.append((f"the merge types of {attrs.kind} fields (an ApplyConfiguration beyond "
                                     "metadata)", "mutations"))
        except EvaluationError as exc:
            errors.append(_PolicyError(policy, binding, exc.text, "Invalid"))
        except OutOfBudget:
            errors.append(_PolicyError(policy, binding, OUT_OF_BUDGET, "Invalid"))
        except (MutationError, PatchError) as exc:
            errors.append(_PolicyError(policy, binding, str(exc), "Invalid"))
        if budget.uncounted:
            answer.unchecked.append(("the CEL cost of an expression (cel-go's count not known here)", "mutations"))
    return True, {**obj, "apiVersion": api_version} if obj.get("apiVersion") != api_version else obj


def _decode_again(obj: dict[str, Any], unknown_fields: UnknownFields | None) -> None:
    """``json_patch.go``'s strict decoding of the patched JSON: raises :class:`DecodingError`."""
    problem = type_meta_error(obj)
    if problem is None and unknown_fields is not None:
        unknown = unknown_fields(obj)
        if unknown:
            problem = "strict decoding error: " + ", ".join(unknown_field(path) for path in unknown)
    if problem is not None:
        raise DecodingError(problem)


def _internal_error(text: str) -> dict[str, Any]:
    """``apierrors.NewInternalError``'s metav1.Status."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"Internal error occurred: {text}", "reason": "InternalError",
            "details": {"causes": [{"message": text}]}, "code": 500}


def _forbidden(attrs: Attributes, errors: list[_PolicyError]) -> dict[str, Any]:
    """``admission.NewForbidden`` with the message replaced by the first error's text (its
    reason when it has one) and every error a cause."""
    name = attrs.name
    if not name:
        meta = (attrs.object or {}).get("metadata") or {}
        name = meta.get("name") or meta.get("generateName") or "Unknown"
    texts = [e.text() for e in errors]
    details: dict[str, Any] = {"name": name}
    if attrs.group:
        details["group"] = attrs.group
    details["kind"] = attrs.resource
    details["causes"] = [{"message": text} for text in texts]
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": texts[0],
            "reason": errors[0].reason or "Forbidden", "details": details, "code": 403}
