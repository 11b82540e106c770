"""User policy suites (``kind: PolicySuite``): loading them and running their cases.

Every case is one AdmissionRequest sent through :meth:`AdmissionChain.run` — the code path
``infergate validate`` and the webhook use — and its answer is compared with ``expect``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from webhook.admission.chain import AdmissionChain, ChainOutcome, is_attribution
from webhook.admission.review import AdmissionRequest
from webhook.apiversion import split
from webhook.documents import Document
from webhook.offline.suite_cases import Case, CaseResult, Suite, SuiteError, multiset_diff, object_diff
from webhook.offline.policy_suite_format import Expectation, PolicySuite, SuiteCase
from webhook.policy import PolicyLoadError, PolicySet
from webhook.policy.actions import ActionsError, ordered
from webhook.inputs.crds import CRDSource, crd_registry
from webhook.inputs.policies import PolicySource, load_policy_set
from webhook.schema import CRDLoadError, CRDRegistry
from webhook.state import FileState, StateLoadError, read_manifests

if TYPE_CHECKING:
    from webhook.cel import Evaluator


@dataclass
class PolicyCaseResult(CaseResult):
    """A case's result with the whole answer (for ``--update``, ``--coverage`` and ``-o json``)."""

    outcome: ChainOutcome | None = None


@dataclass
class PolicySuiteRun(Suite):
    """A loaded policy suite: its cases run through ``chain``."""

    chain: AdmissionChain | None = None
    crd_only: bool = False  # ``infergate test --crd-only``: what the apiserver alone answers

    @property
    def policies(self) -> tuple[Any, ...]:
        return self.chain.policies.current().policies if self.chain else ()


# -- loading -------------------------------------------------------------------------------

def load_policy_suite(path: Path, data: dict[str, Any], evaluator: Evaluator, crds: tuple[Path, ...] | None = None,
                      *, document: Document | None = None, kubeai_crd: str | None = None) -> PolicySuiteRun:
    """A policy suite from its file's data, its CEL evaluated with ``evaluator``; ``document`` (the file as read, with its lines) lets
    errors and results name the line of each case; ``crds``: CRD files and directories in place
    of the suite's ``crds:`` (``infergate test --crd``); ``kubeai_crd``: the bundled KubeAI Model
    CRD when the suite names no CRDs."""
    try:
        model = PolicySuite.model_validate(data)
    except ValidationError as exc:
        raise SuiteError("\n".join(_format_errors(path, exc, document))) from None
    names = [c.name for c in model.cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SuiteError(f"{path}: case names must be unique: {', '.join(duplicates)}")
    for i, case in enumerate(model.cases):
        where = document.where_of(("cases", i)) if document is not None else str(path)
        problem = _case_problem(case)
        if problem:
            raise SuiteError(f"{where}: case {case.name!r}: {problem}")
        for pattern in [*(case.expect.errorsMatch or ()), *([case.expect.message] if case.expect.message else [])]:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise SuiteError(f"{where}: case {case.name!r}: invalid regular expression /{pattern}/: {exc}") from None
    base = path.parent
    try:
        registry = _registry(CRDSource(paths=crds or _resolve(base, model.crds), kubeai_crd=kubeai_crd), evaluator)
        sources = _resolve(base, model.policies)
        # the built-in policies: with the shipped ones unless the suite says
        builtin = model.builtin if model.builtin is not None else sources is None
        source = PolicySource(paths=sources, builtin=builtin, action_mapping=model.actions)
        if sources is None:
            policies = _shipped_policies(source, evaluator)
        else:  # type-checked against the suite's CRDs
            policies = load_policy_set(source, evaluator, registry, native=True)
        state = _state(base, model.state)
    except CRDLoadError as exc:
        raise SuiteError(f"{path}: crds: {exc}") from None
    except PolicyLoadError as exc:
        raise SuiteError(f"{path}: policies: {exc}") from None
    except StateLoadError as exc:
        raise SuiteError(f"{path}: state: {exc}") from None
    except ActionsError as exc:
        where = document.where_of(("actions",)) if document is not None else str(path)
        raise SuiteError(f"{where}: {exc}") from None
    suite = PolicySuiteRun(path, model.name or path.stem, [], registry, evaluator, AdmissionChain(registry, policies, state))
    for i, (raw, case) in enumerate(zip(data["cases"], model.cases)):
        line = document.line_of(("cases", i)) if document is not None else None
        suite.cases.append(Case(suite, case.name, raw, _runner(suite, model, case), line))
    return suite


def _case_problem(case: SuiteCase) -> str | None:
    if case.operation == "DELETE" and case.old is None:
        return "a DELETE needs old (the object as stored)"
    if case.operation != "DELETE" and case.object is None:
        return "object is required (the object written)"
    for key in ("object", "old"):
        value = getattr(case, key)
        if value is not None and not (isinstance(value.get("apiVersion"), str) and isinstance(value.get("kind"), str)):
            return f"{key} needs apiVersion and kind"
    return None


def _format_errors(path: Path, exc: ValidationError, doc: Document | None) -> list[str]:
    out = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        dotted = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".") or "(suite)"
        where = doc.where_of(loc) if doc is not None else str(path)
        out.append(f"{where}: {dotted}: {err['msg']}")
    return out


def _resolve(base: Path, paths: list[str] | None) -> tuple[Path, ...] | None:
    return None if paths is None else tuple(Path(os.path.normpath(base / p)) for p in paths)


@lru_cache(maxsize=8)
def _registry(source: CRDSource, evaluator: Evaluator) -> CRDRegistry:
    # one registry per set of CRDs in a run: compiling the CRDs' rules is the costly part
    return crd_registry(source, evaluator)


@lru_cache(maxsize=4)
def _shipped_policies(source: PolicySource, evaluator: Evaluator) -> PolicySet:
    # the shipped policies (type-checked against the shipped CRDs) compiled once per run: most
    # suites test them
    return load_policy_set(source, evaluator, native=True)


def _state(base: Path, entries: list[str | dict[str, Any]]) -> FileState:
    objects: list[dict[str, Any]] = []
    for i, entry in enumerate(entries):
        if isinstance(entry, str):
            objects += read_manifests(Path(os.path.normpath(base / entry)))
            continue
        missing = [f for f in ("apiVersion", "kind") if not isinstance(entry.get(f), str)]
        if missing or not isinstance((entry.get("metadata") or {}).get("name"), str):
            raise StateLoadError(f"state[{i}]: an object needs apiVersion, kind and metadata.name")
        objects.append(entry)
    return FileState(objects=objects)


# -- running -------------------------------------------------------------------------------

def _runner(suite: PolicySuiteRun, model: PolicySuite, case: SuiteCase):
    def run(_: Case) -> PolicyCaseResult:
        outcome = suite.chain.run(build_request(suite.registry, model, case), explain=True, crd_only=suite.crd_only)
        result = PolicyCaseResult(suite.title, case.name, outcome=outcome,
                                  expected=bool(case.expect.model_dump(exclude_none=True)))
        result.problems += compare(case.expect, outcome)
        return result

    return run


def build_request(registry: CRDRegistry, suite: PolicySuite, case: SuiteCase) -> AdmissionRequest:
    """The AdmissionRequest the apiserver would send for the case's write."""
    operation = case.operation or ("UPDATE" if case.old is not None else "CREATE")
    subject = case.object if case.object is not None else case.old or {}
    api_version = str(subject.get("apiVersion", ""))
    group, version = split(api_version)
    kind = str(subject.get("kind", ""))
    meta = subject.get("metadata") if isinstance(subject.get("metadata"), dict) else {}
    served = registry.served(api_version, kind)
    namespace = case.namespace
    if namespace is None:
        own = meta.get("namespace")
        namespaced = served.namespaced if served is not None else kind != "Namespace"
        namespace = own if isinstance(own, str) and own else (suite.namespace if namespaced else "")
    plural = served.plural if served is not None else kind.lower() + "s"
    old = case.old
    if namespace and isinstance(old, dict) and isinstance(old.get("metadata"), dict) \
            and not old["metadata"].get("namespace"):
        # a stored object always has its namespace (a suite may leave it to the case's)
        old = {**old, "metadata": {**old["metadata"], "namespace": namespace}}
    return AdmissionRequest(
        uid="infergate-test",
        kind={"group": group, "version": version, "kind": kind},
        resource={"group": group, "version": version, "resource": plural},
        subResource=case.subresource or "",
        name=str(meta.get("name") or ""),
        namespace=namespace,
        operation=operation,
        userInfo=case.userInfo.model_dump(),
        object=case.object if operation != "DELETE" else None,
        oldObject=old,
        dryRun=case.dryRun,
    )


def error_strings(status: dict[str, Any] | None) -> list[str]:
    """A denial's causes as ``<field>: <message>`` (the apiserver's field.Error strings); the
    cause naming the webhook and policies is none of them."""
    if not status:
        return []
    causes = [c for c in (status.get("details") or {}).get("causes") or () if not is_attribution(c)]
    if not causes:
        return [str(status.get("message", ""))]
    return [f"{c['field']}: {c.get('message', '')}" if c.get("field") else str(c.get("message", "")) for c in causes]


def compare(expect: Expectation, outcome: ChainOutcome) -> list[str]:
    """What differs between the expected and the actual answer, one line per difference."""
    problems: list[str] = []
    status = outcome.status or {}
    errors = error_strings(outcome.status)
    if expect.allowed is not None and expect.allowed != outcome.allowed:
        got = "allowed" if outcome.allowed else f"denied: {status.get('message', '')}"
        problems.append(f"verdict: expected {'allowed' if expect.allowed else 'denied'}, got {got}")
    if expect.code is not None and expect.code != status.get("code"):
        problems.append(f"code: expected {expect.code}, got {status.get('code')}")
    if expect.reason is not None and expect.reason != status.get("reason"):
        problems.append(f"reason: expected {expect.reason}, got {status.get('reason')}")
    if expect.errors is not None:
        problems += multiset_diff("errors", expect.errors, errors)
    for pattern in expect.errorsMatch or ():
        if not any(_search(pattern, e) for e in errors):
            problems.append(f"errors: none matches /{pattern}/ (errors: {errors})")
    if expect.message is not None and not _search(expect.message, str(status.get("message", ""))):
        problems.append(f"message: /{expect.message}/ not found in {status.get('message', '')!r}")
    if expect.warnings is not None:
        problems += multiset_diff("warnings", expect.warnings, outcome.warnings)
    if expect.patched is not None:
        problems += object_diff(expect.patched, outcome.object, "patched")
    if expect.patch is not None and expect.patch != outcome.patch:
        problems.append(f"patch: expected {expect.patch}, got {outcome.patch}")
    if expect.auditAnnotations is not None:
        problems += object_diff(expect.auditAnnotations, outcome.audit_annotations, "auditAnnotations")
    if expect.actions is not None:
        expected = {name: ordered(actions) for name, actions in expect.actions.items()}
        if expected != outcome.actions:
            problems.append(f"actions: expected {expected}, got {outcome.actions}")
    return problems


def _search(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None  # patterns were compiled when the suite loaded


def recorded_expectation(outcome: ChainOutcome) -> dict[str, Any]:
    """The answer as an ``expect:`` mapping (what ``--update`` writes)."""
    out: dict[str, Any] = {"allowed": outcome.allowed}
    if not outcome.allowed:
        out["errors"] = error_strings(outcome.status)
    if outcome.warnings:
        out["warnings"] = list(outcome.warnings)
    if outcome.patch and outcome.allowed:  # a denied write is never stored: its object is noise
        out["patched"] = outcome.object
    if outcome.audit_annotations:
        out["auditAnnotations"] = dict(outcome.audit_annotations)
    if any(actions != ["Deny"] for actions in outcome.actions.values()):  # (Deny alone: the errors say it)
        out["actions"] = dict(outcome.actions)
    return out
