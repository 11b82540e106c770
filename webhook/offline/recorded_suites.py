"""Recorded apiserver cases (``cases/README.md`` format): loading, running, comparing.

A suite file holds either object ``cases`` (a write and the apiserver's answer) or CRD
``probes`` (a CustomResourceDefinition and whether the apiserver admitted it). Running a
case gives a ``CaseResult`` whose ``problems`` say, readably, where the answer differs.
What every kind of suite shares (cases, results, comparing) is ``suite_cases.py``; user policy
suites (``kind: PolicySuite``) are ``policy_suites.py``.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from webhook.documents import Document
from webhook.offline.suite_cases import (Case, CaseResult, NotASuite, Suite, SuiteError, multiset_diff, object_diff,
                                         read_suite_file)
from webhook.inputs.crds import CRDSource, crd_registry
from webhook.schema import CRDLoadError, RequestPath
from webhook.schema.field_validation import SERVER_DEFAULT

if TYPE_CHECKING:
    from webhook.cel import Evaluator

_REQUEST = re.compile(r"^(?P<verb>[A-Z]+)\s+/apis/(?P<group>[^/]+)/(?P<version>[^/]+)"
                      r"(?:/namespaces/(?P<namespace>[^/]+))?/(?P<plural>[^/?]+)(?:/(?P<name>[^/?]+))?"
                      r"(?:/(?P<sub>[^/?]+))?(?:\?(?P<query>\S*))?$")


# -- loading -------------------------------------------------------------------------------

def load_suite(path: Path, evaluator: Evaluator, crds: tuple[Path, ...] | None = None) -> Suite:
    """A recorded suite file (``cases`` or ``probes``), its CEL evaluated with ``evaluator``."""
    return load_recorded_suite(read_suite_file(path), evaluator, crds)


def is_recorded_suite(data: Any) -> bool:
    return isinstance(data, dict) and any(key in data for key in SUITE_KINDS)


def load_recorded_suite(document: Document, evaluator: Evaluator, crds: tuple[Path, ...] | None = None) -> Suite:
    path, data = Path(document.origin.file), document.content
    if is_recorded_suite(data):
        for key, loader in SUITE_KINDS.items():
            if key in data:
                return loader(document, evaluator, crds)
    raise NotASuite(f"{path}: not a suite (expected a mapping with 'cases' or 'probes')")


def _load_object_suite(document: Document, evaluator: Evaluator, crds: tuple[Path, ...] | None) -> Suite:
    path, data = Path(document.origin.file), document.content
    title = str(data.get("suite") or path.stem)
    sources = tuple(crds) if crds else tuple(path.parent / str(p) for p in data.get("crds") or ())
    try:
        registry = crd_registry(CRDSource(paths=sources), evaluator)
    except CRDLoadError as exc:
        raise SuiteError(f"{path}: crds: {exc}") from None
    suite = Suite(path, title, [], registry, evaluator)
    for i, raw in enumerate(data.get("cases") or ()):
        if not isinstance(raw, dict):
            raise SuiteError(f"{path}: cases[{i}] is not a mapping")
        suite.cases.append(Case(suite, str(raw.get("name") or f"case-{i}"), raw, run_object_case,
                                document.line_of(("cases", i))))
    return suite


def _load_probe_suite(document: Document, evaluator: Evaluator, crds: tuple[Path, ...] | None) -> Suite:
    path, data = Path(document.origin.file), document.content
    suite = Suite(path, str(data.get("suite") or path.stem), [], evaluator=evaluator)
    for i, raw in enumerate(data.get("probes") or ()):
        if not isinstance(raw, dict):
            raise SuiteError(f"{path}: probes[{i}] is not a mapping")
        suite.cases.append(Case(suite, str(raw.get("name") or f"probe-{i}"), raw, run_crd_probe,
                                document.line_of(("probes", i))))
    return suite


SUITE_KINDS: dict[str, Callable[[Document, Evaluator, tuple[Path, ...] | None], Suite]] = {
    "cases": _load_object_suite,
    "probes": _load_probe_suite,
}


# -- running -------------------------------------------------------------------------------

def request_path(case: dict[str, Any]) -> RequestPath | None:
    """Where the recorded request went (``about.request``), when the case says."""
    request = ((case.get("about") or {}).get("request") or "") if isinstance(case.get("about"), dict) else ""
    match = _REQUEST.match(str(request).strip())
    if not match:
        return None
    name = match.group("name")
    if match.group("verb") == "POST" or name == "status":
        name = None
    return RequestPath(f"{match.group('group')}/{match.group('version')}", match.group("plural"),
                       match.group("namespace"), name)


def field_validation_of(case: dict[str, Any]) -> str:
    """The request's ``?fieldValidation=`` (``about.request``'s query), else the server default."""
    request = ((case.get("about") or {}).get("request") or "") if isinstance(case.get("about"), dict) else ""
    match = _REQUEST.match(str(request).strip())
    query = parse_qs(match.group("query") or "") if match else {}
    return (query.get("fieldValidation") or [SERVER_DEFAULT])[-1]


def run_object_case(case: Case) -> CaseResult:
    data = case.data
    if not data.get("expect"):
        return CaseResult(case.suite.title, case.name, ["no expect: the case checks nothing"], erroneous=True)
    outcome = case.suite.registry.handle(
        str(data.get("operation", "CREATE")), data.get("object"), data.get("old"), data.get("subresource"),
        request=request_path(data), field_validation=field_validation_of(data))
    answer = Answer(outcome.allowed, outcome.code, [str(e) for e in outcome.errors],
                    outcome.status.get("message") if outcome.status is not None else None, outcome.warnings,
                    outcome.object)
    return CaseResult(case.suite.title, case.name, answer_problems(data, answer))


@dataclass(frozen=True)
class Answer:
    """What an apiserver (or this one, offline) answered a recorded request."""

    allowed: bool
    code: int
    errors: list[str]      # the Status causes as '<field>: <detail>'
    message: str | None    # the Status message (None: no Status)
    warnings: list[str]
    object: Any            # what it stored (allowed)


def answer_problems(data: dict[str, Any], answer: Answer) -> list[str]:
    """How ``answer`` differs from the recorded case ``data``'s ``expect`` (none: it matches)."""
    expect = data["expect"]
    problems: list[str] = []
    if "allowed" in expect and bool(expect["allowed"]) != answer.allowed:
        problems.append(f"verdict: expected {'allowed' if expect['allowed'] else 'denied'}, got "
                        f"{'allowed' if answer.allowed else 'denied'}")
    if "code" in expect and expect["code"] != answer.code:
        problems.append(f"code: expected {expect['code']}, got {answer.code}")
    if not answer.allowed or expect.get("errors"):
        problems += multiset_diff("errors", list(expect.get("errors") or []), answer.errors)
    order_varies = bool((data.get("about") or {}).get("order_varies")) if isinstance(data.get("about"), dict) else False
    if expect.get("message") is not None and answer.message is not None:
        if not order_varies and answer.message != expect["message"]:
            problems.append(f"message:\n      expected: {expect['message']}\n      actual:   {answer.message}")
    expected_warnings = list(expect.get("warnings") or [])
    if expected_warnings != answer.warnings:
        problems += multiset_diff("warnings", expected_warnings, answer.warnings) or [
            f"warnings order: expected {expected_warnings}, got {answer.warnings}"]
    if "stored" in expect:
        actual = _with_generated_name(data.get("object"), reduce_metadata(expect["stored"]),
                                      reduce_metadata(answer.object))
        problems += object_diff(reduce_metadata(expect["stored"]), actual)
    return problems


def _with_generated_name(request: Any, expected: Any, actual: Any) -> Any:
    """A name the apiserver generated (``generateName`` + 5 random characters) matches any such name."""
    meta = request.get("metadata") if isinstance(request, dict) else None
    if not isinstance(meta, dict) or meta.get("name") or not isinstance(meta.get("generateName"), str):
        return actual
    prefix = meta["generateName"]
    want = ((expected or {}).get("metadata") or {}).get("name") if isinstance(expected, dict) else None
    got = ((actual or {}).get("metadata") or {}).get("name") if isinstance(actual, dict) else None
    if isinstance(want, str) and isinstance(got, str) and want.startswith(prefix) and got.startswith(prefix) \
            and len(want) == len(got) == len(prefix) + 5:
        actual = {**actual, "metadata": {**actual["metadata"], "name": want}}
    return actual


def run_crd_probe(case: Case) -> CaseResult:
    from webhook.schema.crd_admission import check_crd  # owned by the CEL/CRD layer

    data = case.data
    expect = data.get("expect") or {}
    outcome = check_crd(data.get("crd"), case.suite.evaluator)
    errors, warnings = _crd_answer(outcome)
    result = CaseResult(case.suite.title, case.name)
    rejected = data.get("kind") == "crd-rejection"
    if rejected and not errors:
        result.problems.append("verdict: expected the CRD to be rejected, it was accepted")
    if not rejected and errors:
        result.problems.append("verdict: expected the CRD to be accepted, it was rejected")
    result.problems += multiset_diff("errors", list(expect.get("errors") or []), errors)
    result.problems += multiset_diff("warnings", list(expect.get("warnings") or []), warnings)
    return result


def _crd_answer(outcome: Any) -> tuple[list[str], list[str]]:
    """``check_crd``'s answer as (error strings, warning strings), whatever shape it returns."""
    if isinstance(outcome, tuple) and len(outcome) == 2:
        errors, warnings = outcome
    else:
        errors = getattr(outcome, "errors", outcome)
        warnings = getattr(outcome, "warnings", [])
    return [str(e) for e in errors or []], [str(w) for w in warnings or []]


# -- comparing -----------------------------------------------------------------------------

def reduce_metadata(obj: Any) -> Any:
    """Metadata cut to what the recorded answers keep: name, namespace, labels, annotations."""
    if not isinstance(obj, dict):
        return obj
    out = dict(obj)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    return out
