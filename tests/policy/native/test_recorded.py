"""Every recorded ValidatingAdmissionPolicy case (``cases/*.yaml``, answers of a real
kube-apiserver v1.36 recorded by ``record.py``) replayed offline through ``infergate validate
--policies DIR --state DIR [--old FILE] -o json``: the same verdict, HTTP code, reason, message
(the whole metav1.Status of a denial), warnings and stored object.

The apiserver walks policies in a Go map's order: a case marked ``order_varies`` (the policies
whose order may vary) compares the warnings as a multiset; when it was denied it is replayed once
with every policy, which must deny naming one of them, and once without the ones the recording
did not name, which must give the recorded answer exactly."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.paths import REPO
from tests.support.cel import EVALUATOR
from webhook.cli import main
from webhook.policy import PolicyLoadError
from webhook.policy.native.loader import load_native
from webhook.policy.native.model import read_policy
from webhook.policy.native.typecheck import type_warnings
from webhook.policy.typecheck import KindSchemas

CASES = Path(__file__).resolve().parent / "cases"


def _suites() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    out = []
    for file in sorted(CASES.glob("*.yaml")):
        suite = yaml.safe_load(file.read_text())
        for case in suite.get("cases") or ():
            out.append((f"{file.stem}: {case['name']}", suite, case))
    return out


SUITES = _suites()


def _reduced(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {**obj, "metadata": {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}}


def _validate(tmp: Path, suite: dict[str, Any], case: dict[str, Any], policies: list[dict[str, Any]]) -> dict[str, Any]:
    (tmp / "policies").mkdir(parents=True)
    (tmp / "state").mkdir()
    (tmp / "policies" / "policies.yaml").write_text(yaml.safe_dump_all(policies, sort_keys=False))
    (tmp / "state" / "state.yaml").write_text(yaml.safe_dump_all(suite.get("state") or [], sort_keys=False))
    (tmp / "object.yaml").write_text(yaml.safe_dump(case["object"], sort_keys=False))
    argv = ["validate", "-j", "1", "-o", "json", "--policies", str(tmp / "policies"), "--state", str(tmp / "state")]
    for crd in suite.get("crds") or ():
        argv += ["--crd", str(REPO / crd)]
    if case["operation"] == "UPDATE":
        (tmp / "old.yaml").write_text(yaml.safe_dump(case["old"], sort_keys=False))
        argv += ["--old", str(tmp / "old.yaml")]
    if case.get("subresource"):
        argv += ["--subresource", case["subresource"]]
    if case.get("field_validation"):  # the case's ?fieldValidation= (Strict when it names none)
        argv += ["--field-validation", case["field_validation"]]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, str(tmp / "object.yaml")])
    assert code in (0, 1), err.getvalue()
    [result] = json.loads(out.getvalue())
    return result


def _suite_answer(tmp: Path, suite: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """A DELETE, which ``validate`` cannot send, through ``infergate test``: a policy suite of this
    one case, and the answer its report gives."""
    tmp.mkdir(parents=True)
    (tmp / "policies.yaml").write_text(yaml.safe_dump_all(suite["policies"], sort_keys=False))
    policy_suite = {"apiVersion": "policy.infergate.io/v1alpha1", "kind": "PolicySuite", "name": "replay",
                    "policies": ["policies.yaml"], "crds": [str(REPO / crd) for crd in suite.get("crds") or ()],
                    "state": suite.get("state") or [],
                    "cases": [{"name": case["name"], "operation": case["operation"], "old": case["old"]}]}
    (tmp / "suite.yaml").write_text(yaml.safe_dump(policy_suite, sort_keys=False))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main(["test", str(tmp / "suite.yaml"), "-o", "json"])
    [replayed] = json.loads(out.getvalue())["suites"][0]["cases"]
    return replayed["answer"]


def _named(status: dict[str, Any] | None) -> str:
    message = (status or {}).get("message", "")
    start = message.find("ValidatingAdmissionPolicy '")
    return message[start:].split("'")[1] if start >= 0 else ""


@pytest.mark.parametrize(("suite", "case"), [(s, c) for _, s, c in SUITES], ids=[name for name, _, _ in SUITES])
def test_recorded_answer(tmp_path: Path, suite: dict[str, Any], case: dict[str, Any]) -> None:
    expect = case["expect"]
    policies = suite["policies"]
    alternatives = case.get("order_varies") or []
    if alternatives:
        whole = _validate(tmp_path / "whole", suite, case, policies)
        assert sorted(whole["warnings"]) == sorted(expect["warnings"])
        if expect["allowed"]:  # only the warnings' order varies
            assert whole["allowed"] is True and _reduced(whole["object"]) == expect["stored"]
            return
        assert whole["allowed"] is False and _named(whole["status"]) in alternatives
        reported = _named(expect.get("status"))
        dropped = {name for name in alternatives if name != reported}
        policies = [p for p in policies if p["metadata"]["name"] not in dropped
                    and (p.get("spec") or {}).get("policyName") not in dropped]
    if case["operation"] == "DELETE":
        answer = _suite_answer(tmp_path / "suite", suite, case)
        assert (answer["allowed"], answer["status"], answer["warnings"]) == (
            expect["allowed"], expect.get("status"), expect["warnings"])
        return
    result = _validate(tmp_path / "case", suite, case, policies)
    assert result["allowed"] is expect["allowed"], result
    if alternatives:
        assert sorted(result["warnings"]) == sorted(expect["warnings"])
    else:
        assert result["warnings"] == expect["warnings"]
    if expect["allowed"]:
        assert result["status"] is None
        stored = _reduced(result["object"])
        if not case["object"]["metadata"].get("name"):  # generateName: each write a name of its own
            stored["metadata"].pop("name", None)
        assert stored == expect["stored"]
        # and of the same JSON types (a mutation's integral double is stored as an integer)
        assert json.dumps(stored, sort_keys=True) == json.dumps(expect["stored"], sort_keys=True)
    else:
        assert result["status"] == expect["status"]
        assert result["status"]["code"] == expect["code"]


def _field_ref(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


@pytest.mark.parametrize("file", [f for f in sorted(CASES.glob("*.yaml")) if "policies" in yaml.safe_load(f.read_text())],
                         ids=lambda f: f.stem)
def test_recorded_type_checking(file: Path) -> None:
    """Each policy's ``status.typeChecking.expressionWarnings`` as the apiserver wrote them."""
    suite = yaml.safe_load(file.read_text())
    schemas = KindSchemas([yaml.safe_load((REPO / crd).read_text()) for crd in suite.get("crds") or ()])
    for doc in suite["policies"]:
        if doc["kind"] != "ValidatingAdmissionPolicy":
            continue
        policy, problems = read_policy(doc)
        assert problems == [] and policy is not None
        found = [{"fieldRef": _field_ref(path), "warning": text}
                 for path, text in type_warnings(policy, schemas.kind_of, schemas)]
        assert found == suite["type_checking"][policy.name], policy.name


REJECTED = [(f"{file.stem}: {case['name']}", case) for file in sorted(CASES.glob("*.yaml"))
            for case in yaml.safe_load(file.read_text()).get("rejected") or ()]


@pytest.mark.parametrize("case", [c for _, c in REJECTED], ids=[name for name, _ in REJECTED])
def test_recorded_rejection(tmp_path: Path, case: dict[str, Any]) -> None:
    """What the apiserver refuses to create, the loader refuses with the same fields and messages
    (each ``<file>:<line>: <field>: <message>``); what it admits loads."""
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(case["object"], sort_keys=False))
    status = case["expect"]["status"]
    try:
        load_native(tmp_path, EVALUATOR)
    except PolicyLoadError as exc:
        found = sorted(problem.split(": ", 1)[1] for problem in exc.problems)
    else:
        found = []
    expected = [] if status is None else sorted(f"{c['field']}: {c['message']}" for c in status["details"]["causes"])
    assert found == expected
