"""Recorded apiserver cases (``cases/README.md`` format): loading, running, comparing.

A suite file holds either object ``cases`` (a write and the apiserver's answer) or CRD
``probes`` (a CustomResourceDefinition and whether the apiserver admitted it). Running a
case gives a ``CaseResult`` whose ``problems`` say, readably, where the answer differs.
Other kinds of suite plug in by adding a loader to ``SUITE_KINDS``; user policy suites
(``kind: PolicySuite``) are ``policy_suites``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from webhook.offline.documents import load_yaml
from webhook.schema import CRDLoadError, CRDRegistry, RequestPath

_REQUEST = re.compile(r"^(?P<verb>[A-Z]+)\s+/apis/(?P<group>[^/]+)/(?P<version>[^/]+)"
                      r"(?:/namespaces/(?P<namespace>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?"
                      r"(?:/(?P<sub>[^/]+))?$")


class SuiteError(ValueError):
    """A suite file that cannot be read or does not follow the format."""


class NotASuite(SuiteError):
    """A YAML file without ``cases`` or ``probes`` (skipped when found while walking a directory)."""


@dataclass
class CaseResult:
    suite: str
    name: str
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass
class Case:
    """One runnable case of a suite."""

    suite: "Suite"
    name: str
    data: dict[str, Any]
    run: Callable[["Case"], CaseResult]

    def execute(self) -> CaseResult:
        try:
            return self.run(self)
        except Exception as exc:  # a crash is a failing case with its reason, never a traceback
            return CaseResult(self.suite.title, self.name, [f"crashed: {type(exc).__name__}: {exc}"])


@dataclass
class Suite:
    path: Path
    title: str
    cases: list[Case]
    registry: CRDRegistry | None = None


# -- loading -------------------------------------------------------------------------------

def load_suite(path: Path, crd_dirs: list[Path] | None = None, *, kubeai_crd: str | None = None) -> Suite:
    """A suite file; ``kubeai_crd``: the bundled KubeAI Model CRD for policy suites that name no CRDs."""
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SuiteError(f"{path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise SuiteError(f"{path}:{where} invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except RecursionError:
        raise SuiteError(f"{path}: nested too deeply to be read") from None
    if isinstance(data, dict) and data.get("kind") == "PolicySuite":  # a user's policy suite
        from webhook.offline.policy_suites import load_policy_suite

        return load_policy_suite(path, data, crd_dirs, kubeai_crd=kubeai_crd)
    if isinstance(data, dict):
        for key, loader in SUITE_KINDS.items():
            if key in data:
                return loader(path, data, crd_dirs)
    raise NotASuite(f"{path}: not a suite (expected a mapping with 'cases' or 'probes')")


def _load_object_suite(path: Path, data: dict[str, Any], crd_dirs: list[Path] | None) -> Suite:
    title = str(data.get("suite") or path.stem)
    if crd_dirs:
        sources = list(crd_dirs)
    else:
        sources = [(path.parent / str(p)) for p in data.get("crds") or ()]
    try:
        registry = CRDRegistry.load(sources)
    except CRDLoadError as exc:
        raise SuiteError(f"{path}: crds: {exc}") from None
    suite = Suite(path, title, [], registry)
    for i, raw in enumerate(data.get("cases") or ()):
        if not isinstance(raw, dict):
            raise SuiteError(f"{path}: cases[{i}] is not a mapping")
        suite.cases.append(Case(suite, str(raw.get("name") or f"case-{i}"), raw, run_object_case))
    return suite


def _load_probe_suite(path: Path, data: dict[str, Any], crd_dirs: list[Path] | None) -> Suite:
    suite = Suite(path, str(data.get("suite") or path.stem), [])
    for i, raw in enumerate(data.get("probes") or ()):
        if not isinstance(raw, dict):
            raise SuiteError(f"{path}: probes[{i}] is not a mapping")
        suite.cases.append(Case(suite, str(raw.get("name") or f"probe-{i}"), raw, run_crd_probe))
    return suite


SUITE_KINDS: dict[str, Callable[[Path, dict[str, Any], list[Path] | None], Suite]] = {
    "cases": _load_object_suite,
    "probes": _load_probe_suite,
}


def suite_files(paths: Iterable[Path]) -> list[tuple[Path, bool]]:
    """(file, named directly): files named on the command line, and every ``*.yaml``/``*.yml``
    under directories (recursively)."""
    out: list[tuple[Path, bool]] = []
    for path in paths:
        if path.is_dir():
            out += [(p, False) for p in sorted(path.rglob("*")) if p.suffix in (".yaml", ".yml") and p.is_file()]
        else:
            out.append((path, True))
    return out


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


def run_object_case(case: Case) -> CaseResult:
    data = case.data
    expect = data.get("expect") or {}
    outcome = case.suite.registry.handle(
        str(data.get("operation", "CREATE")), data.get("object"), data.get("old"), data.get("subresource"),
        request=request_path(data))
    result = CaseResult(case.suite.title, case.name)
    problems = result.problems
    if "allowed" in expect and bool(expect["allowed"]) != outcome.allowed:
        problems.append(f"verdict: expected {'allowed' if expect['allowed'] else 'denied'}, got "
                        f"{'allowed' if outcome.allowed else 'denied'}")
    if "code" in expect and expect["code"] != outcome.code:
        problems.append(f"code: expected {expect['code']}, got {outcome.code}")
    actual_errors = [str(e) for e in outcome.errors]
    if not outcome.allowed or expect.get("errors"):
        problems += multiset_diff("errors", list(expect.get("errors") or []), actual_errors)
    order_varies = bool((data.get("about") or {}).get("order_varies")) if isinstance(data.get("about"), dict) else False
    if expect.get("message") is not None and outcome.status is not None:
        message = outcome.status.get("message")
        if not order_varies and message != expect["message"]:
            problems.append(f"message:\n      expected: {expect['message']}\n      actual:   {message}")
    expected_warnings = list(expect.get("warnings") or [])
    if expected_warnings != outcome.warnings:
        problems += multiset_diff("warnings", expected_warnings, outcome.warnings) or [
            f"warnings order: expected {expected_warnings}, got {outcome.warnings}"]
    if "stored" in expect:
        actual = _with_generated_name(data.get("object"), reduce_metadata(expect["stored"]),
                                      reduce_metadata(outcome.object))
        problems += object_diff(reduce_metadata(expect["stored"]), actual)
    return result


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
    outcome = check_crd(data.get("crd"))
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

def multiset_diff(what: str, expected: list[str], actual: list[str]) -> list[str]:
    missing = Counter(expected) - Counter(actual)
    extra = Counter(actual) - Counter(expected)
    problems = []
    for text in missing.elements():
        problems.append(f"{what}: missing  {text}")
    for text in extra.elements():
        problems.append(f"{what}: extra    {text}")
    return problems


def reduce_metadata(obj: Any) -> Any:
    """Metadata cut to what the recorded answers keep: name, namespace, labels, annotations."""
    if not isinstance(obj, dict):
        return obj
    out = dict(obj)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def object_diff(expected: Any, actual: Any, path: str = "stored") -> list[str]:
    """Differences between two objects, one line per differing path."""
    if _same(expected, actual):
        return []
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        for key in sorted(set(expected) | set(actual)):
            sub = f"{path}.{key}"
            if key not in actual:
                out.append(f"{sub}: missing (expected {_short(expected[key])})")
            elif key not in expected:
                out.append(f"{sub}: unexpected {_short(actual[key])}")
            else:
                out += object_diff(expected[key], actual[key], sub)
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        out = []
        for i, (x, y) in enumerate(zip(expected, actual)):
            out += object_diff(x, y, f"{path}[{i}]")
        return out
    return [f"{path}: expected {_short(expected)}, got {_short(actual)}"]


def _short(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 160 else text[:157] + "..."
