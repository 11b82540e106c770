"""Admission through the real apiserver: every scenario's answer as the cluster gives it,
and the same answer from ``infergate validate`` offline (their agreement is the point)."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess

import pytest
import yaml

from webhook.admission.chain import is_attribution

from . import cluster, offline, scenarios
from .api import JSON_PATCH, wait_for
from .scenarios import Case, dig

pytestmark = pytest.mark.e2e

CASES = scenarios.all_cases()


def _param(case: Case):
    return pytest.param(case, id=case.id, marks=[pytest.mark.decision(*d) for d in case.decisions])


def dry_named(case: Case) -> dict:
    """The scenario object under a name of its own: dry runs never meet the real objects."""
    obj = copy.deepcopy(case.obj)
    obj["metadata"]["name"] = obj["metadata"]["name"][:55] + "-dry"
    return obj


@pytest.fixture(scope="module")
def offline_answers(cluster_run) -> dict[str, dict]:
    objects = [cluster.labelled(dry_named(c), cluster_run.run_id) for c in CASES]
    return {case.id: answer for case, answer in zip(CASES, offline.validate(objects, state=cluster_run.state_dir))}


def check_expectation(case: Case, allowed: bool, message: str, warnings: list[str], obj: dict | None) -> None:
    assert allowed == case.allowed, message
    for phrase in case.message:
        assert phrase in message
    if not case.allowed:
        assert scenarios.denied_by_infergate(message) == case.by_webhook, message
    for path, value in case.stored:
        assert dig(obj, path) == value, path
    for phrase in case.warnings:
        assert any(phrase in w for w in warnings), warnings


@pytest.mark.decision(scenarios.SERVED, "Offline, without `--crd`, the bundled CRDs are used")
@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_dry_run_answer_agrees_with_offline_and_leaves_nothing(case: Case, cluster_run, offline_answers):
    obj = dry_named(case)
    reply = cluster_run.submit(obj, dry_run=True)
    check_expectation(case, reply.ok, reply.message, reply.warnings, reply.body if reply.ok else None)

    expected = offline_answers[case.id]
    assert reply.ok == expected["allowed"]
    if reply.ok:  # (a kind may have no spec: InferencePoolImport is status only)
        assert reply.body.get("spec") == expected["object"].get("spec")
    else:
        assert offline.comparable_denial(reply.body) == offline.comparable_denial(expected["status"])
    assert sorted(reply.warnings) == sorted(expected["warnings"])
    assert cluster_run.get(obj) is None, "dryRun=All stored the object"


@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.allowed])
def test_admitted_object_is_stored_with_its_defaults(case: Case, applied, cluster_run):
    stored = cluster_run.get(case.obj)
    assert stored is not None and stored["metadata"]["uid"] == applied[case.id]["metadata"]["uid"]
    for path, value in case.stored:
        assert dig(stored, path) == value, path


@pytest.mark.decision(scenarios.DECKHOUSE, "6. Immutable after create")
@pytest.mark.parametrize("which", sorted(scenarios.IMMUTABLE_CHANGES))
def test_immutable_fields_cannot_change(which, applied, cluster_run):
    # from the status the controller settled on: its first status write may still be coming,
    # and it moves the resourceVersion this test proves the denied update did not move
    stored = cluster_run.settled(applied["valid/inferenceservice-huggingface.yaml"])
    changed = scenarios.immutable_change(stored, which)
    reply = cluster_run.kube.replace(changed)
    assert reply.status == 422, reply.body
    assert scenarios.IMMUTABLE_CHANGES[which][0] in reply.message
    (expected,) = offline.validate([changed], old=[stored], state=cluster_run.state_dir)
    assert offline.comparable_denial(reply.body) == offline.comparable_denial(expected["status"])
    assert cluster_run.get(stored)["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


@pytest.mark.decision(scenarios.DECKHOUSE, "10. `launchStrategy`")
def test_dry_run_update_changes_nothing(applied, cluster_run):
    stored = cluster_run.settled(applied["valid/inferenceservice-catalog.yaml"])
    meta = stored["metadata"]
    reply = cluster_run.kube.patch(stored["apiVersion"], stored["kind"], meta["name"],
                                   [{"op": "replace", "path": "/spec/launchStrategy", "value": "Balance"}],
                                   namespace=meta["namespace"], content_type=JSON_PATCH, dry_run=True)
    assert reply.expect_ok()["spec"]["launchStrategy"] == "Balance"
    again = cluster_run.get(stored)
    assert again["spec"]["launchStrategy"] == "Latency"
    assert again["metadata"]["resourceVersion"] == meta["resourceVersion"]


# --- what kubectl prints -------------------------------------------------------------------

KUBECTL_CASES = [c for c in CASES if not c.allowed or c.warnings]


@pytest.mark.parametrize("case", [_param(c) for c in KUBECTL_CASES])
def test_kubectl_prints_the_denial_and_the_warnings(case: Case, cluster_run):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the API answers are checked by the other scenarios")
    obj = cluster.labelled(dry_named(case), cluster_run.run_id)
    reply = cluster_run.submit(obj, dry_run=True)
    result = subprocess.run([kubectl, "--kubeconfig", cluster_run.kubeconfig, "create", "--dry-run=server",
                             "-f", "-", "-o", "name"], input=yaml.safe_dump(obj), capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode == 0) == case.allowed, result.stderr
    if not case.allowed:
        for line in kubectl_prints(reply.body):
            assert line in result.stderr
    for warning in reply.warnings:
        assert f"Warning: {warning}" in result.stderr


WEBHOOK_DENIALS = [c for c in CASES if not c.allowed and c.by_webhook]


@pytest.mark.parametrize("case", [_param(c) for c in WEBHOOK_DENIALS])
def test_kubectl_names_the_webhook_and_the_policy_that_denied(case: Case, cluster_run):
    """kubectl prints an Invalid status as its causes alone (never the message that names the
    webhook): the causes keep one per field error for tools, and end with one naming the webhook
    and the policy, which kubectl prints too."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the API answers are checked by the other scenarios")
    obj = cluster.labelled(dry_named(case), cluster_run.run_id)
    reply = cluster_run.submit(obj, dry_run=True)
    named_webhook = re.match(r'admission webhook "([^"]+)" denied the request: ', reply.message)
    if named_webhook is None:  # a native run: an exported rule, denied by its VAP before the webhook is called
        assert scenarios.denied_by_infergate(reply.message) and scenarios.WEBHOOK_DENIAL not in reply.message, \
            reply.message
        result = subprocess.run([kubectl, "--kubeconfig", cluster_run.kubeconfig, "create", "--dry-run=server",
                                 "-f", "-", "-o", "name"], input=yaml.safe_dump(obj), capture_output=True, text=True,
                                timeout=60)
        assert result.returncode != 0
        for line in kubectl_prints(reply.body):
            assert line in result.stderr, result.stderr
        return
    webhook = named_webhook.group(1)
    policies = re.search(r" \((?:policy|policies) ([^)]+)\)$", reply.message).group(1).split(", ")
    causes = reply.body["details"]["causes"]
    *errors, named = causes
    assert errors and not any(is_attribution(c) for c in errors)
    assert is_attribution(named) and f'"{webhook}"' in named["message"]
    result = subprocess.run([kubectl, "--kubeconfig", cluster_run.kubeconfig, "create", "--dry-run=server",
                             "-f", "-", "-o", "name"], input=yaml.safe_dump(obj), capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0
    assert f'admission webhook "{webhook}"' in result.stderr
    assert all(policy in result.stderr for policy in policies), result.stderr
    for cause in errors:
        assert cause["message"] in result.stderr


def kubectl_prints(status: dict) -> list[str]:
    """What kubectl shows of a refused write (its checkErr): an Invalid status as
    'The KIND "NAME" is invalid' and one 'field: message' per cause; any other as
    'Error from server (Reason): ... message'."""
    details = status.get("details") or {}
    if status.get("reason") == "Invalid" and details:
        head = (f'The {details.get("kind", "")} "{details.get("name", "")}" is invalid'
                if details.get("kind") or details.get("name") else "The request is invalid")
        # a cause without a field prints as Go's empty string: ": message"
        return [head] + [f"{c.get('field', '')}: {c.get('message', '')}" for c in details.get("causes") or ()]
    return [f"Error from server ({status.get('reason')})" if status.get("reason") else "Error from server",
            status.get("message", "")]


# --- the CRDs alone --------------------------------------------------------------------------


@pytest.fixture
def without_webhook(cluster_run):
    """The run's webhook configurations removed (the apiserver alone judges), then restored."""
    kube = cluster_run.kube
    saved = [kube.get(c["apiVersion"], c["kind"], c["metadata"]["name"]) for c in cluster_run.configurations]
    (probe,) = cluster.load_documents(cluster.MANIFESTS_DIR / scenarios.webhook_probe())
    try:
        for config in saved:
            kube.delete(config["apiVersion"], config["kind"], config["metadata"]["name"])
        wait_for("the apiserver to stop calling the webhook", lambda: cluster_run.submit(probe, dry_run=True).ok,
                 timeout=30)
        yield cluster_run
    finally:
        for config in saved:
            cluster.create_owned(kube, config, cluster_run.owned)
        wait_for("the webhook answering again",
                 lambda: scenarios.WEBHOOK_DENIAL in cluster_run.submit(probe, dry_run=True).message, timeout=30)


@pytest.mark.decision(scenarios.KUBEAI, "CRD: exactly v0.12.0's")
@pytest.mark.decision(scenarios.DECKHOUSE, "Allow-lists in the class are sets")
def test_crd_rules_are_answered_by_the_apiserver_as_offline(without_webhook):
    cases = scenarios.crd_only_cases()
    objects = [cluster.labelled(c.obj, without_webhook.run_id) for c in cases]
    expected = offline.validate(objects, crd_only=True, state=without_webhook.state_dir)
    for case, obj, answer in zip(cases, objects, expected):
        reply = without_webhook.submit(obj, dry_run=True)
        assert reply.status == 422, (case.id, reply.body)
        for phrase in case.message:
            assert phrase in reply.message, case.id
        assert scenarios.WEBHOOK_DENIAL not in reply.message
        assert offline.comparable_denial(reply.body) == offline.comparable_denial(answer["status"]), case.id
