"""ValidatingAdmissionPolicies judging one request, as kube-apiserver v1.36's
``validating.dispatcher`` and ``validating.validator`` do.

Per policy whose ``matchConstraints`` match, per binding whose ``matchResources`` match, per
param the binding names: the matchConditions (with ``namespaceObject`` null; an error falls to
the failurePolicy: ``Fail`` denies with it, ``Ignore`` admits without the validations), then the
validations in order, each failed one a decision: its message (a ``messageExpression`` that
gives text without a line break and of at most 5,000 bytes, else ``message``, else
``failed expression: <expression>``) with its reason (``Invalid`` by default), or an evaluation
error under the failurePolicy. A failed decision meets the binding's validationActions: ``Deny``
(the first denied decision is the answer: ``ValidatingAdmissionPolicy '<p>' with binding '<b>'
denied request: <message>``), ``Warn`` (a warning ``Validation failed for
ValidatingAdmissionPolicy '<p>' with binding '<b>': <message>``), ``Audit`` (a
``validation.policy.admission.k8s.io/validation_failure`` record). A configuration error
(params not found under ``Deny``, a bad selector) denies under ``Fail`` as ``failed to
configure binding: ...`` (``failed to configure policy: ...`` for the policy's own).

The CEL cost limits are the apiserver's (``expressions``): one budget for the validations and
the variables they read, the messageExpressions going on with what is left (out of it, every
decision without an error of its own is ``failed messageExpression: ...``), one anew for the
audit annotations; either running out makes the policy's one decision ``validation failed due
to running out of cost budget, no further validation rules will be run``.

The apiserver walks the policies in the order of a Go map (unspecified); here they go in name
order, and bindings too. Rules that read what the cluster view does not know (the authorizer,
params or a namespace it does not show) are left out and named in ``unchecked``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from webhook.gocompat.fmt import go_quote
from webhook.policy.native.dispatch import (Cluster, ConfigurationError, Unchecked, bound_invocations,
                                            match_conditions, request_namespace)
from webhook.policy.native.expressions import OUT_OF_BUDGET, Budget, Context, EvaluationError, OutOfBudget, Unknown
from webhook.policy.native.loader import CompiledPolicy, NativePolicies
from webhook.policy.native.matching import Attributes
from webhook.policy.native.model import Binding

__all__ = ["Cluster", "NativeAnswer", "BindingResult", "evaluate", "forbidden_status", "match_conditions"]

FAILURE_KEY = "validation.policy.admission.k8s.io/validation_failure"
MAX_MESSAGE_BYTES = 5 * 1024  # celconfig.MaxEvaluatedMessageExpressionSizeBytes
MAX_ANNOTATION_VALUE = 10 * 1024
_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


@dataclass
class NativeAnswer:
    """What the ValidatingAdmissionPolicy plugin says to one request."""

    denied: str | None = None  # the denial's message (``ValidatingAdmissionPolicy '<p>' ... denied request: ...``)
    reason: str = ""
    code: int = 0
    warnings: list[str] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)  # validation_failure records (Audit)
    denials: list[str] = field(default_factory=list)  # every denied decision's message, the answer's first
    # per (policy, binding) that applied: what each rule said, for audits (``BindingResult``)
    results: list["BindingResult"] = field(default_factory=list)
    unchecked: list[tuple[str, str]] = field(default_factory=list)  # (what, unit) left out, unknown

    @property
    def allowed(self) -> bool:
        return self.denied is None


@dataclass
class _Decision:
    message: str
    reason: str = ""
    index: int = 0
    error: bool = True  # an evaluation or configuration error, not a validation that failed
    ignored: bool = False  # an error under failurePolicy Ignore: admitted (``ActionAdmit``)


@dataclass(frozen=True)
class BindingResult:
    """What one binding of a policy said to a request: ``result`` is ``pass``, ``fail`` (a
    validation did not hold: ``rule`` ``validations[i]``) or ``error`` (evaluation or
    configuration; ``fail_closed`` under failurePolicy Fail); ``actions``: the binding's."""

    policy: str
    binding: str
    rule: str
    result: str
    message: str = ""
    actions: tuple[str, ...] = ()
    fail_closed: bool = False


def _quoted_name(policy: CompiledPolicy, binding: Binding | None) -> str:
    if binding is None:
        return f"ValidatingAdmissionPolicy '{policy.name}'"
    return f"ValidatingAdmissionPolicy '{policy.name}' with binding '{binding.name}'"


def evaluate(policies: NativePolicies, attrs: Attributes, cluster: Cluster) -> NativeAnswer:
    """The ValidatingAdmissionPolicy plugin's answer to the request ``attrs``."""
    answer = NativeAnswer()
    denied: list[tuple[CompiledPolicy, Binding | None, _Decision]] = []

    def config_error(policy: CompiledPolicy, error: ConfigurationError) -> None:
        binding = error.binding
        closed = policy.definition.failure_policy != "Ignore"
        answer.results.append(BindingResult(policy.name, binding.name if binding is not None else "", "", "error",
                                            error.message, binding.actions if binding is not None else ("Deny",),
                                            closed))
        if closed:
            denied.append((policy, binding, _Decision(error.message)))

    namespace: list[dict[str, Any] | None] = []  # the request's Namespace, read once when first needed
    for policy, bindings in policies.bound():
        annotations: dict[str, list[str]] = {}
        for step in bound_invocations(policy, bindings, attrs, cluster):
            if isinstance(step, Unchecked):
                answer.unchecked.append((step.what, "bindings"))
                continue
            if isinstance(step, ConfigurationError):
                config_error(policy, step)
                continue
            binding, param, gvr = step.binding, step.param, step.gvr
            if not namespace:
                namespace.append(request_namespace(attrs, cluster))
            decisions, audit, unknown, applied = _validate(policy, attrs, gvr, param, namespace[0])
            answer.unchecked += unknown
            closed = policy.definition.failure_policy != "Ignore"
            for index, decision in decisions:
                answer.results.append(BindingResult(policy.name, binding.name, f"validations[{index}]",
                                                    "error" if decision.error else "fail", decision.message,
                                                    binding.actions, closed))
            if applied and not decisions:
                answer.results.append(BindingResult(policy.name, binding.name, "", "pass",
                                                    actions=binding.actions))
            for index, decision in decisions:
                if decision.ignored:
                    continue
                for action in binding.actions:
                    if action == "Deny":
                        denied.append((policy, binding, decision))
                    elif action == "Audit":
                        answer.failures.append({"message": decision.message, "policy": policy.name,
                                                "binding": binding.name, "expressionIndex": index,
                                                "validationActions": list(binding.actions)})
                    elif action == "Warn":
                        answer.warnings.append(f"Validation failed for {_quoted_name(policy, binding)}: "
                                               f"{decision.message}")
            for key, value, error in audit:
                if error is not None:
                    denied.append((policy, binding, _Decision(error)))
                elif value is not None:
                    values = annotations.setdefault(key, [])
                    if value[:MAX_ANNOTATION_VALUE] not in values:
                        values.append(value[:MAX_ANNOTATION_VALUE])
        for key, values in annotations.items():
            answer.audit_annotations[f"{policy.name}/{key}"] = ", ".join(values)
    if answer.failures:
        answer.audit_annotations[FAILURE_KEY] = json.dumps(answer.failures, separators=(",", ":"))
    answer.denials = [f"{_quoted_name(p, b)} denied request: {d.message}" for p, b, d in denied]
    if denied:
        _, _, decision = denied[0]
        answer.denied = answer.denials[0]
        answer.reason = decision.reason or "Invalid"
        answer.code = _CODES.get(answer.reason, 422)
    return answer


def _validate(policy: CompiledPolicy, attrs: Attributes, gvr: tuple[str, str, str], param: Any,
              namespace: dict[str, Any] | None):
    """``validator.Validate`` for one param: the failed decisions (index, decision), the audit
    annotations (key, value, error), what was left out as unknown, and whether it applied (its
    matchConditions held)."""
    fail = policy.definition.failure_policy != "Ignore"
    request = dict(attrs.request)
    obj, old = attrs.object, attrs.old_object
    if gvr != (attrs.group, attrs.version, attrs.resource):
        # matched as another version (matchPolicy Equivalent): the objects converted to it (a
        # custom resource's conversion "None" changes only apiVersion), the request naming it
        group, version, resource = gvr
        api_version = f"{group}/{version}" if group else version
        request["resource"] = {"group": group, "version": version, "resource": resource}
        request["kind"] = {**(request.get("kind") or {}), "version": version}
        obj = {**obj, "apiVersion": api_version} if obj is not None else None
        old = {**old, "apiVersion": api_version} if old is not None else None
    activation = {"object": obj, "oldObject": old, "request": request, "params": param,
                  "namespaceObject": namespace}
    unknown: list[tuple[str, str]] = []
    if policy.match_conditions:
        matched, error, unread = match_conditions(policy.match_conditions, policy.variables, activation, fail)
        if unread:
            return [], [], [("authorizer", "bindings")], False
        if error is not None:
            return [(0, _Decision(error, ignored=not fail))], [], [], True
        if not matched:
            return [], [], [], False
    # each stage a ``ForInput`` of its own budget: the validations', which their
    # messageExpressions go on with, and the audit annotations' anew
    out_of_budget = [(0, _Decision(OUT_OF_BUDGET, ignored=not fail))]
    budget = Budget()
    context = Context(activation, policy.variables, budget)
    outcomes: list[Any] = []  # per validation: True, False, or its EvaluationError
    try:
        for validation in policy.validations:
            try:
                outcomes.append(context.evaluate(validation.expression) is True)
            except Unknown:
                unknown.append(("authorizer", "rules"))
                outcomes.append(True)
            except EvaluationError as exc:
                outcomes.append(exc)
    except OutOfBudget:
        return out_of_budget, [], unknown + _uncounted(budget), True
    # every messageExpression is evaluated, whatever its validation gave (their ForInput)
    messages = Context(activation, policy.variables, budget)
    texts: list[Any] = []
    try:
        for validation in policy.validations:
            text = None
            if validation.message_expression is not None:
                try:
                    text = messages.evaluate(validation.message_expression)
                except (EvaluationError, Unknown):
                    text = None
            texts.append(text)
        message_error = None
    except OutOfBudget:
        message_error = f"failed messageExpression: {OUT_OF_BUDGET}"
    decisions: list[tuple[int, _Decision]] = []
    for i, (validation, outcome) in enumerate(zip(policy.validations, outcomes)):
        if isinstance(outcome, EvaluationError):
            decisions.append((i, _Decision(outcome.text, ignored=not fail)))
            continue
        if message_error is not None:  # every decision the validations left without an error
            decisions.append((i, _Decision(message_error, ignored=not fail)))
            continue
        if outcome:
            continue
        message = ""
        text = texts[i]
        if isinstance(text, str):
            text = text.strip()
            if len(text.encode()) > MAX_MESSAGE_BYTES or "\n" in text:
                text = ""
            message = text
        if not message and validation.message:
            message = validation.message.strip()
        if not message:
            message = f"failed expression: {validation.source.strip()}"
        decisions.append((i, _Decision(message, validation.reason or "Invalid", i, error=False)))
    audit = []
    annotation_budget = Budget()
    annotations = Context(activation, policy.variables, annotation_budget)
    try:
        for key, program in policy.audit_annotations:
            try:
                value = annotations.evaluate(program)
            except Unknown:
                unknown.append(("authorizer", "rules"))
                continue
            except EvaluationError as exc:
                if fail:
                    audit.append((key, None, exc.text))
                continue
            if value is None:
                continue
            if isinstance(value, str):
                if value.strip():
                    audit.append((key, value.strip(), None))
                continue
            audit.append((key, None, f"valueExpression '{program.source}' resulted in unsupported return type: "
                                     f"{_cel_type(value)}. Return type must be either string or null."))
    except OutOfBudget:  # the validations' decisions give way to this one
        return out_of_budget, [], unknown + _uncounted(budget, annotation_budget), True
    return decisions, audit, unknown + _uncounted(budget, annotation_budget), True


def _uncounted(*budgets: Budget) -> list[tuple[str, str]]:
    """An expression cel-go's cost of which is not known here: the budget's answer may differ."""
    return [("the CEL cost of an expression (cel-go's count not known here)", "rules")
            for budget in budgets for _ in budget.uncounted[:1]]


def _cel_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


def forbidden_status(attrs: Attributes, answer: NativeAnswer) -> dict[str, Any]:
    """The metav1.Status of a denial: ``admission.NewForbidden`` with the decision's reason and
    code, and the message again as the one cause."""
    resource = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    name = attrs.name
    if not name:
        meta = (attrs.object or {}).get("metadata") or {}
        name = meta.get("name") or meta.get("generateName") or "Unknown"
    message = f"{resource} {go_quote(name)} is forbidden: {answer.denied}"
    details: dict[str, Any] = {"name": name}
    if attrs.group:
        details["group"] = attrs.group
    details["kind"] = attrs.resource
    details["causes"] = [{"message": answer.denied}]
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": answer.reason, "details": details, "code": answer.code}
