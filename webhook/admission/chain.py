"""The admission chain: policies' mutations -> JSON patch -> the apiserver's schema/CEL
step -> validating policies.

``admit`` answers one endpoint of the webhook (``mutating`` or validating), as the
apiserver calls them; ``run`` is the whole write offline (decode, mutating webhook,
schema and CRD rules, validating webhook) for ``infergate validate``. Both are pure CPU
work over in-memory policies and cluster state: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from webhook.admission.patch import make_patch
from webhook.admission.review import AdmissionRequest, AdmissionResult
from webhook.apiversion import group_of, split
from webhook.policy import Denial, PolicyInput, PolicySetProvider, Trace
from webhook.policy.actions import VALIDATION_FAILURE_KEY, enforce, failure_annotation, ordered
from webhook.policy.native.matching import Attributes, MatchError
from webhook.policy.native.mutating import MutatingAnswer, Reinvocation, UnknownFields, mutate
from webhook.policy.native.validating import Cluster, NativeAnswer, evaluate, forbidden_status
from webhook.schema import CRDRegistry, RequestError, field_validation
from webhook.schema.field_validation import FieldValidation
from webhook.schema.fielderrors import invalid_status
from webhook.state import ClusterState
from webhook.state.knowledge import EVERYTHING, cluster_scoped_builtin

_JUDGED = ("CREATE", "UPDATE")
_NATIVE_JUDGED = ("CREATE", "UPDATE", "DELETE")  # ValidatingAdmissionPolicies also judge deletions
_NATIVE_MUTATED = ("CREATE", "UPDATE")  # MutatingAdmissionPolicies mutate writes (CONNECT carries no object offline)
# the webhooks' names in the configurations (webhook/webhook_config.py): the apiserver names
# the one that denied in its answer
MUTATING_WEBHOOK = "mutate.infergate.io"
VALIDATING_WEBHOOK = "validate.infergate.io"
_STATUS_CODES = {"Forbidden": 403, "Unauthorized": 401, "InternalError": 500, "BadRequest": 400}


@dataclass
class ChainOutcome:
    """The whole write, offline: what ``infergate validate`` prints."""

    allowed: bool
    status: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)
    object: dict[str, Any] | None = None  # as it would be stored
    patch: list[dict[str, Any]] = field(default_factory=list)  # the mutating webhook's patch
    audit_annotations: dict[str, str] = field(default_factory=dict)
    traces: list[Trace] = field(default_factory=list)
    denied_by: str = ""  # "apiserver" or "webhook" when denied
    # failures admitted under the Audit action (both webhooks'): VAP's ValidationFailureValue
    # records, also in ``audit_annotations["validation_failure"]``
    audit_failures: list[dict[str, Any]] = field(default_factory=list)
    # each failed policy (both webhooks') -> the validation actions its failures met
    actions: dict[str, list[str]] = field(default_factory=dict)
    rules: dict[str, str] = field(default_factory=dict)  # a denial's message or a warning -> its policy rule
    # what the policies could not check, the cluster view not knowing it (``Verdict.unchecked``)
    unchecked: list[tuple[str, str]] = field(default_factory=list)


def offline_request(obj: dict[str, Any], old: dict[str, Any] | None = None, subresource: str | None = None, *,
                    namespace: str | None = None, username: str = "infergate-validate",
                    field_validation: FieldValidation | None = None) -> AdmissionRequest:
    """The AdmissionRequest the apiserver would send for writing ``obj`` (UPDATE when ``old``),
    its options naming ``field_validation`` (the client's ``?fieldValidation=``) when given."""
    operation = "UPDATE" if old is not None else "CREATE"
    options = {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options", "dryRun": ["All"]}
    if field_validation is not None:
        options["fieldValidation"] = field_validation
    api_version = str(obj.get("apiVersion", ""))
    group, version = split(api_version)
    kind = str(obj.get("kind", ""))
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return AdmissionRequest(
        uid="offline",
        kind={"group": group, "version": version, "kind": kind},
        resource={"group": group, "version": version, "resource": kind.lower() + "s"},
        subResource=subresource or "",
        name=str(meta.get("name") or ""),
        namespace=namespace or "",
        operation=operation,
        userInfo={"username": username},
        object=obj,
        oldObject=old,
        dryRun=True,
        options=options,
    )


def _as_answered(status: dict[str, Any] | None, webhook: str) -> dict[str, Any] | None:
    """A webhook's denial as the apiserver relays it to the client."""
    if not status:
        return status
    message = f"admission webhook {json.dumps(webhook)} denied the request"
    if status.get("message"):
        message += f": {status['message']}"
    return {**status, "message": message}


def _cause(denial: Denial) -> dict[str, Any]:
    """A StatusCause: as for field.Error, the message without its ``<field>: `` prefix."""
    if not denial.field_path:
        return {"reason": denial.reason, "message": denial.message}
    prefix = f"{denial.field_path}: "
    message = denial.message[len(prefix):] if denial.message.startswith(prefix) else denial.message
    return {"reason": denial.reason, "message": message, "field": denial.field_path}


# The first words of the cause that names the webhook and the policies of a denial (see
# :func:`denial_status`).
ATTRIBUTION = "denied by admission webhook "


def is_attribution(cause: Any) -> bool:
    """Whether a StatusCause is the one naming the webhook and policies (no field error)."""
    return isinstance(cause, dict) and not cause.get("field") and str(cause.get("message", "")).startswith(ATTRIBUTION)


def _policies(denials: list[Denial]) -> str:
    names = list(dict.fromkeys(d.policy for d in denials))
    return ("policy " if len(names) == 1 else "policies ") + ", ".join(names)


def denial_status(request: AdmissionRequest, denials: list[Denial], webhook: str = VALIDATING_WEBHOOK) -> dict[str, Any]:
    """A metav1.Status naming every denial; reason and code from the first.

    Whoever reads it learns which webhook and which policy denied: the message ends with the
    policies (the apiserver puts ``admission webhook "<webhook>" denied the request:`` before
    it), and the causes, one per field error for tools, end with one cause without a field
    naming the webhook and the policies. That last one is for kubectl: an ``Invalid`` status
    with details is printed as ``The <Kind> "<name>" is invalid:`` and its causes only, never
    the message (kubectl's checkErr); ValidatingAdmissionPolicy names itself the same way."""
    reason = denials[0].reason
    policies = _policies(denials)
    causes = [_cause(d) for d in denials] + [{"message": f"{ATTRIBUTION}{json.dumps(webhook)} ({policies})"}]
    details = {"name": request.name, "group": request.kind.group, "kind": request.kind.kind, "causes": causes}
    return {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "; ".join(dict.fromkeys(d.message for d in denials)) + f" ({policies})",
        "reason": reason,
        "details": {k: v for k, v in details.items() if v},
        "code": _STATUS_CODES.get(reason, 422),
    }


class AdmissionChain:
    """The webhook's decisions: the CRDs (``registry``, re-read from ``registry.current()`` per
    request: a cluster's CRDs change; ``None``: policies alone), the policies in force (re-read
    from ``policies.current()`` per request: hot reload) and the cluster ``state`` the policies'
    lookups read."""

    def __init__(self, registry: CRDSource | None, policies: PolicySetProvider, state: ClusterState) -> None:
        self.registry = registry
        self.policies = policies
        self.state = state
        self._fixed = registry if isinstance(registry, CRDRegistry) else None  # (read per request without a call)

    # -- the two webhook endpoints -----------------------------------------------------
    def admit(self, request: AdmissionRequest, *, mutating: bool, explain: bool = False) -> AdmissionResult:
        if mutating:
            return self._mutate(request, request.object, explain=explain)[0]
        return self._validate(request, request.object, explain=explain)[0]

    def _input(self, request: AdmissionRequest, obj: dict[str, Any] | None,
               view: dict[str, Any] | None = None) -> PolicyInput:
        """``view``: the request as policies read it, when already made."""
        namespace_object = self.state.get("v1", "Namespace", request.namespace) if request.namespace else None
        return PolicyInput(
            request=view if view is not None else request_view(request),
            object=obj,
            old_object=request.oldObject,
            namespace_object=namespace_object,
            state=self.state,
        )

    def _mutate(self, request: AdmissionRequest, obj: dict[str, Any] | None, *, explain: bool,
                view: dict[str, Any] | None = None) -> tuple[AdmissionResult, list[Trace], dict[str, Any] | None, Acted]:
        """The mutating webhook's answer to ``request`` carrying ``obj``; also the mutated object
        and the actions each failed policy's failures met."""
        if request.operation not in _JUDGED or obj is None:
            return AdmissionResult(allowed=True), [], obj, None
        policy_set = self.policies.current()
        policies = policy_set.for_review(_rule_key(request), mutating=True)
        if not policies:  # nothing to mutate: no input to build
            return AdmissionResult(allowed=True), [], obj, None
        stage = _judge(policies, self._input(request, obj, view), mutating=True, explain=explain,
                       policy_set=policy_set)
        if (stage.denials or any(w.startswith("policy ") and " not applied: " in w for w in stage.warnings)) \
                and self._wrongly_typed(request, obj):
            # The apiserver validates the schema after this webhook and refuses such an object in
            # its own words ("spec in body must be of type object"); what policies say of data
            # of the wrong type (CEL's "no such key", an internal error) would only hide them.
            return AdmissionResult(allowed=True), stage.traces, obj, None
        mutated = stage.input.object
        if stage.denials:
            result = AdmissionResult(allowed=False, status=denial_status(request, stage.denials, MUTATING_WEBHOOK),
                                     warnings=stage.warnings, rules=stage.rules, unchecked=stage.unchecked)
        else:
            result = AdmissionResult(allowed=True, patch=make_patch(obj, mutated), warnings=stage.warnings,
                                     rules=stage.rules, unchecked=stage.unchecked)
        if stage.failures:  # validations placed in the mutating webhook may be audited: its audit annotations
            result.audit_annotations[VALIDATION_FAILURE_KEY] = failure_annotation(stage.failures)
        return result, stage.traces, mutated, stage.acted

    def _validate(self, request: AdmissionRequest, obj: dict[str, Any] | None, *, explain: bool,
                  schema: bool = True, view: dict[str, Any] | None = None) -> tuple[AdmissionResult, list[Trace], Acted]:
        """The validating webhook's answer to ``request`` carrying ``obj``; also the actions each
        failed policy's failures met."""
        traces: list[Trace] = []
        acted: Acted = None
        warnings: list[str] = []
        registry = self._fixed or self._schemas()
        if schema and request.operation in _JUDGED and obj is not None and _serves(registry, obj):
            # the apiserver's schema and CRD rules, as it ran them before calling us (a kind or
            # version no CRD serves is the apiserver's to refuse: no schema judgement here)
            errors, schema_warnings = registry.validate(
                request.operation, obj, request.oldObject, request.subResource or None)
            warnings += schema_warnings
            if errors:
                status = invalid_status(str(obj.get("kind")), request.kind.group,
                                        (obj.get("metadata") or {}).get("name") or request.name, errors)
                return AdmissionResult(allowed=False, status=status, warnings=warnings), traces, None
        denials: list[Denial] = []
        audit: dict[str, str] = {}
        rules: dict[str, str] = {}
        unchecked: list[tuple[str, str]] = []
        policy_set = self.policies.current()
        policies = policy_set.for_review(_rule_key(request), mutating=False)
        if policies:  # (none: no input to build)
            stage = _judge(policies, self._input(request, obj, view), mutating=False, explain=explain,
                           policy_set=policy_set)
            traces, warnings, denials, audit = stage.traces, warnings + stage.warnings, stage.denials, stage.audit
            acted = stage.acted
            rules = stage.rules
            unchecked = stage.unchecked
            if stage.failures:
                audit[VALIDATION_FAILURE_KEY] = failure_annotation(stage.failures)
        warnings = list(dict.fromkeys(warnings))
        if denials:
            return AdmissionResult(allowed=False, status=denial_status(request, denials), warnings=warnings,
                                   audit_annotations=audit, rules=rules, unchecked=unchecked), traces, acted
        return AdmissionResult(allowed=True, warnings=warnings, audit_annotations=audit, rules=rules,
                               unchecked=unchecked), traces, acted

    def _wrongly_typed(self, request: AdmissionRequest, obj: dict[str, Any]) -> bool:
        """Whether the CRD's schema finds a field of ``obj`` of the wrong type."""
        registry = self._fixed or self._schemas()
        if not _serves(registry, obj):
            return False
        try:
            errors, _ = registry.validate(request.operation, obj, request.oldObject, request.subResource or None)
        except RequestError:
            return False
        return any(error.reason == "FieldValueTypeInvalid" for error in errors)

    def _schemas(self) -> CRDRegistry | None:
        return self.registry.current() if self.registry is not None else None

    # -- the whole write, offline ------------------------------------------------------------
    def run(self, request: AdmissionRequest, *, explain: bool = False, crd_only: bool = False) -> ChainOutcome:
        """What the cluster answers to ``request``: the apiserver decodes the object, calls the
        mutating webhook, validates schema and CRD rules, then calls the validating webhook."""
        warnings: list[str] = []
        obj = request.object
        registry = self._schemas()
        served = obj is not None and _serves(registry, obj)
        subresource = request.subResource or None
        served_as = (obj.get("apiVersion"), obj.get("kind")) if served else None  # before any mutation
        if request.operation in _JUDGED and served:
            try:
                obj, decode_warnings = registry.prepare(request.operation, obj, request.oldObject, subresource,
                                                        namespace=request.namespace or None,
                                                        field_validation=field_validation.directive(request.options))
            except RequestError as exc:
                return ChainOutcome(False, exc.status(), list(exc.warnings), denied_by="apiserver")
            warnings += decode_warnings
        patch: list[dict[str, Any]] = []
        unchecked: list[tuple[str, str]] = []
        traces: list[Trace] = []
        audited: list[dict[str, Any]] = []  # failures the mutating webhook admitted under Audit
        actions: dict[str, list[str]] = {}
        rules: dict[str, str] = {}
        view = request_view(request)  # the same for both webhooks: the object is not part of it
        native = getattr(self.policies.current(), "native", None)
        mutating = bool(native and native.mutating and not crd_only and obj is not None
                        and request.operation in _NATIVE_MUTATED)
        reinvocation = Reinvocation()
        if mutating:
            # the apiserver's MutatingAdmissionPolicy plugin runs before the mutating webhooks
            policies_said = native_mutation(native, request, obj, registry, self.state, reinvocation)
            if not policies_said.allowed:
                return ChainOutcome(False, policies_said.status, _unique(warnings), obj, denied_by="apiserver",
                                    unchecked=policies_said.unchecked)
            unchecked += policies_said.unchecked
            obj = policies_said.object
        if not crd_only:
            mutated, traces, patched, acted = self._mutate(request, obj, explain=explain, view=view)
            warnings += mutated.warnings
            audited = _failures(mutated.audit_annotations)
            actions = dict(acted or {})
            rules = dict(mutated.rules)
            unchecked += mutated.unchecked
            if not mutated.allowed:
                return ChainOutcome(False, _as_answered(mutated.status, MUTATING_WEBHOOK), _unique(warnings), obj,
                                    audit_annotations=dict(mutated.audit_annotations), traces=traces,
                                    denied_by="webhook", audit_failures=audited, actions=actions, rules=rules,
                                    unchecked=unchecked)
            patch = mutated.patch
            if patch:
                # what applying the patch gives (``make_patch`` is exact: tests apply every patch
                # with jsonpatch), without copying the object once more
                obj = patched
        if mutating and (reinvocation.should_reinvoke or patch):
            # the chain's second pass of the mutating plugins: the policies that asked for it
            # (IfNeeded) run again on what came after them, then our webhook (IfNeeded) on what they changed
            reinvocation.reinvoking = True
            policies_said = native_mutation(native, request, obj, registry, self.state, reinvocation)
            if not policies_said.allowed:
                return ChainOutcome(False, policies_said.status, _unique(warnings), obj, patch, denied_by="apiserver",
                                    unchecked=unchecked + policies_said.unchecked)
            if policies_said.object != obj:
                obj = policies_said.object
                again, more, patched, _ = self._mutate(request, obj, explain=explain, view=view)
                traces += more
                warnings += again.warnings
                if not again.allowed:
                    return ChainOutcome(False, _as_answered(again.status, MUTATING_WEBHOOK), _unique(warnings), obj,
                                        traces=traces, denied_by="webhook", unchecked=unchecked)
                if again.patch:
                    obj = patched
        if request.operation in _JUDGED and served:
            # a field a mutation (a MutatingAdmissionPolicy's, the webhook's) adds that the schema
            # does not know is pruned without a word, whatever the client asked; a null it sets
            # is validated (the storage's decoding, which would prune it, comes after validation)
            outcome = registry.handle(request.operation, obj, request.oldObject, subresource,
                                      namespace=request.namespace or None, field_validation="Ignore",
                                      mutated=True, served_as=served_as)
            warnings += outcome.warnings
            if not outcome.allowed:
                return ChainOutcome(False, outcome.status, _unique(warnings), obj, patch, traces=traces,
                                    denied_by="apiserver")
            obj = outcome.object
        if crd_only:
            return ChainOutcome(True, None, _unique(warnings), obj)
        if native and request.operation in _NATIVE_JUDGED:
            # the apiserver's own ValidatingAdmissionPolicy plugin runs before the validating webhooks
            answer, status = native_validation(native, request, obj, registry, self.state)
            warnings += answer.warnings
            unchecked += answer.unchecked
            if status is not None:
                return ChainOutcome(False, status, _unique(warnings), obj, patch, dict(answer.audit_annotations),
                                    traces, "apiserver", list(answer.failures), actions, rules, unchecked)
            native_audit = answer
        else:
            native_audit = None
        # the apiserver has just validated the schema: the validating webhook adds the policies
        validated, more, acted = self._validate(request, obj, explain=explain, schema=False, view=view)
        traces += more
        actions.update(acted or {})
        warnings += validated.warnings
        for text, rule in validated.rules.items():
            rules.setdefault(text, rule)
        audit = validated.audit_annotations
        audited += _failures(audit)
        if native_audit is not None and (native_audit.failures or native_audit.audit_annotations):
            audited = list(native_audit.failures) + audited
            audit = {**native_audit.audit_annotations, **audit}
        if audited:  # both webhooks' records as one list (in a cluster: one key per webhook)
            audit = {**audit, VALIDATION_FAILURE_KEY: failure_annotation(audited)}
        return ChainOutcome(validated.allowed, _as_answered(validated.status, VALIDATING_WEBHOOK), _unique(warnings),
                            obj, patch, audit, traces, "" if validated.allowed else "webhook", audited, actions, rules,
                            unchecked + list(validated.unchecked))


# each failed policy -> the validation actions its failures met (None: no policy failed)
Acted = dict[str, list[str]] | None


class CRDSource(Protocol):
    """Where the chain reads the CRDs in force: a ``CRDRegistry`` (fixed) or
    ``webhook.schema.watched.WatchedCRDs`` (a cluster's)."""

    def current(self) -> CRDRegistry: ...


def _rule_key(request: AdmissionRequest) -> tuple[str, str, str, str]:
    """What policies' rules match, as ``PolicyInput.rule_key`` reads it from the request
    (through the models' ``__dict__``, as ``request_view``: a model's attributes cost more)."""
    fields = request.__dict__
    kind = fields["kind"].__dict__
    return kind["group"], kind["kind"], fields["operation"], fields["subResource"] or ""


def _serves(registry: CRDRegistry | None, obj: dict[str, Any]) -> bool:
    return registry is not None and registry.served(str(obj.get("apiVersion")), str(obj.get("kind"))) is not None


def request_view(request: AdmissionRequest) -> dict[str, Any]:
    """The request as policies read it (``request``): without the objects, which they read
    as ``object`` and ``oldObject``.

    What ``model_dump(exclude={"object", "oldObject"})`` gives (fields in order, then the
    extra ones), in less time, sharing the request's lists and maps instead of copying
    them: policies only read the view."""
    view = _fields(request)
    del view["object"], view["oldObject"]
    for name in _NESTED_MODELS:
        if view[name] is not None:
            view[name] = _fields(view[name])
    return view


_NESTED_MODELS = ("kind", "resource", "requestKind", "requestResource", "userInfo")


def _fields(model: BaseModel) -> dict[str, Any]:
    extra = model.__pydantic_extra__
    return {**model.__dict__, **extra} if extra else dict(model.__dict__)


class _Stage:
    """What one webhook's policies said, in order: each stage folds one more thing than the
    other — the mutating one the object (each policy sees the mutations before it: ``input``),
    the validating one the audit annotations."""

    __slots__ = ("input", "traces", "warnings", "denials", "audit", "failures", "acted", "rules", "unchecked")

    def __init__(self, inp: PolicyInput) -> None:
        self.input = inp
        self.traces: list[Trace] = []
        self.warnings: list[str] = []
        self.denials: list[Denial] = []
        self.audit: dict[str, str] = {}
        self.failures: Any = ()  # failures admitted under Audit (``actions.enforce``): a list once any
        self.acted: Acted = None  # each failed policy -> the actions its failures met
        self.rules: dict[str, str] = {}  # a denial's message or a warning -> "<policy>/<rule>"
        self.unchecked: list[tuple[str, str]] = []  # what rules left out read (``webhook.policy.unknown``)


def _judge(policies: Any, inp: PolicyInput, *, mutating: bool, explain: bool, policy_set: Any) -> _Stage:
    """Every policy of the mutating or the validating webhook on ``inp``, in order, folded; a
    failed policy's denials under the validation actions in force (``policy_set.actions_for``:
    looked up only when a policy failed)."""
    stage = _Stage(inp)
    if not explain:
        _prepare(policies, inp, mutating=mutating)
    for policy in policies:
        verdict = policy.evaluate(stage.input, mutating=mutating, explain=explain)
        if verdict is None:
            continue
        if verdict.denials:
            enforce(verdict, *policy_set.actions_for(policy, stage.input))
            if stage.acted is None:
                stage.acted = {}
            stage.acted[verdict.policy] = ordered(verdict.validation_actions)
            if verdict.audit_failures:
                stage.failures = [*stage.failures, *verdict.audit_failures]
        stage.traces += verdict.traces
        if verdict.unchecked:
            stage.unchecked += verdict.unchecked
        stage.warnings += verdict.warnings
        stage.denials += verdict.denials
        if verdict.warnings or verdict.denials:
            _attribute(stage.rules, verdict)
        if not mutating:
            stage.audit.update(verdict.audit_annotations)
        elif verdict.object is not None and verdict.object is not stage.input.object:
            stage.input = stage.input.with_object(verdict.object)  # later policies see earlier mutations
    return stage


def _attribute(rules: dict[str, str], verdict: Any) -> None:
    """Which rule said each of ``verdict``'s denials and warnings (the first to say a text keeps it)."""
    for denial in verdict.denials:
        rules.setdefault(denial.message, f"{verdict.policy}/{denial.rule}" if denial.rule else verdict.policy)
    for warning in verdict.warnings:
        rule = verdict.warning_rules.get(warning)
        rules.setdefault(warning, f"{verdict.policy}/{rule}" if rule else verdict.policy)


def _prepare(policies: Any, inp: PolicyInput, *, mutating: bool) -> None:
    """Every policy's lookups first, so that their batches share one binding of the review's
    values (``ReviewScope``); a mutation makes a new input, prepared anew as needed."""
    for policy in policies:
        prepare = getattr(policy, "prepare", None)  # policies written in Python have nothing to bind
        if prepare is not None:
            prepare(inp, mutating=mutating)


def _failures(audit: dict[str, str]) -> list[dict[str, Any]]:
    """A webhook's failures admitted under Audit, read back from its audit annotation."""
    text = audit.get(VALIDATION_FAILURE_KEY)
    return json.loads(text) if text else []


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def native_validation(native: Any, request: AdmissionRequest, obj: dict[str, Any] | None,
                      registry: CRDRegistry | None, state: ClusterState) -> tuple[NativeAnswer, dict[str, Any] | None]:
    """The apiserver's ValidatingAdmissionPolicy plugin on ``request`` carrying ``obj`` (the
    object as it would be stored): its answer and, when it denies, the Status it answers."""
    attrs, cluster = native_request(request, obj, registry, state)
    answer = evaluate(native, attrs, cluster)
    return answer, (forbidden_status(attrs, answer) if not answer.allowed else None)


def native_mutation(native: Any, request: AdmissionRequest, obj: dict[str, Any], registry: CRDRegistry | None,
                    state: ClusterState, reinvocation: Reinvocation,
                    unknown_fields: UnknownFields | None = None) -> MutatingAnswer:
    """The apiserver's MutatingAdmissionPolicy plugin on ``request`` carrying ``obj`` (as
    decoded, defaulted): the object it leaves, or its denial. ``unknown_fields``: a built-in
    kind's (``mutate``)."""
    attrs, cluster = native_request(request, obj, registry, state)
    kind = request.kind
    served = registry.served(f"{kind.group}/{kind.version}" if kind.group else kind.version, kind.kind) \
        if registry is not None else None
    return mutate(native, attrs, cluster, served.schema if served is not None else None, reinvocation, unknown_fields)


def native_request(request: AdmissionRequest, obj: dict[str, Any] | None, registry: CRDRegistry | None,
                   state: ClusterState) -> tuple[Attributes, Cluster]:
    """The attributes of ``request`` carrying ``obj`` as the policy plugins see them, and what
    they read beside it (namespaces, params, which kinds are namespaced, equivalent versions)."""
    kind = request.kind
    served = registry.served(f"{kind.group}/{kind.version}" if kind.group else kind.version, kind.kind) \
        if registry is not None else None
    resource = served.plural if served is not None else guess_plural(kind.kind)
    view = request_view(request)
    view["resource"] = {"group": kind.group, "version": kind.version, "resource": resource}
    # what the apiserver's AdmissionRequest always names: the request's own kind and resource
    if not view.get("requestKind"):
        view["requestKind"] = {"group": kind.group, "version": kind.version, "kind": kind.kind}
    if not view.get("requestResource"):
        view["requestResource"] = dict(view["resource"])
    if view.get("requestSubResource") is None:
        view["requestSubResource"] = request.subResource or ""
    namespace = request.namespace or ""
    if kind.group == "" and kind.kind == "Namespace" and not namespace:
        # the apiserver's attributes of a Namespace name it as their namespace ("maybe a bug",
        # its dispatcher says): params are looked for there, and ``request.namespace`` says it
        namespace = request.name or str(((obj or request.oldObject or {}).get("metadata") or {}).get("name") or "")
        view["namespace"] = namespace
    attrs = Attributes(request.operation, kind.group, kind.version, kind.kind, resource, request.subResource or "",
                       request.name, namespace, obj, request.oldObject, view)
    knowledge = getattr(state, "knowledge", EVERYTHING)

    def namespace_object(name: str) -> dict[str, Any] | None:
        found = state.get("v1", "Namespace", name)
        if found is None:
            return None
        meta = found.get("metadata") if isinstance(found.get("metadata"), dict) else {}
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        # the label the apiserver gives every namespace, whatever the manifest says
        return {**found, "metadata": {**meta, "labels": {**labels, "kubernetes.io/metadata.name": name}}}

    def namespace_labels(name: str) -> dict[str, str]:
        found = namespace_object(name)
        if found is None:
            if knowledge.holds_whole("", "Namespace"):
                raise MatchError(f'namespaces "{name}" not found')
            raise MatchError(f'namespaces "{name}" not found', unknown=f"Namespace {name}")
        return found["metadata"]["labels"]

    def namespaced(api_version: str, kind_name: str) -> bool | None:
        """Whether a kind is namespaced; None when nothing serves it (a CRD's group always has a
        dot; a built-in one is the core group, a group without a dot or a ``*.k8s.io`` one)."""
        crd = registry.served(api_version, kind_name) if registry is not None else None
        if crd is not None:
            return crd.namespaced
        scope = getattr(state, "namespaced", None)  # a live view's discovery (a wrapped view may lack it)
        discovered = scope(api_version, kind_name) if scope is not None else None
        if discovered is not None:
            return discovered
        group = group_of(api_version)
        if group and "." in group and not group.endswith(".k8s.io"):
            return None
        return not cluster_scoped_builtin(group, kind_name)

    def equivalents(group: str, version: str, plural: str) -> list[tuple[str, str, str]]:
        """The versions a CRD serves the same resource in (matchPolicy Equivalent)."""
        if registry is None:
            return []
        found = (registry.served(api_version, kind_name) for api_version, kind_name in registry.kinds())
        return [(s.group, s.version, s.plural) for s in found if s is not None and s.group == group
                and s.plural == plural]

    return attrs, Cluster(state, namespace_labels, namespace_object, namespaced, equivalents)


def guess_plural(kind: str) -> str:
    """A built-in kind's resource as apimachinery's ``UnsafeGuessKindToResource`` spells it."""
    singular = kind.lower()
    if singular.endswith("s"):
        return singular + "es"
    if singular.endswith("y"):
        return singular[:-1] + "ies"
    return singular + "s"
