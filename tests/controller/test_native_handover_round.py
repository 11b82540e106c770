"""The controller's round of ``--native-policies`` (``webhook.controller.native_policies``)
against an API over real HTTP that runs no admission plugin (``tests/support/apiserver.py``):
it applies what the apiserver serves of the generated kinds (the VAPs alone where
MutatingAdmissionPolicies are not served), and marks nothing while no probe is answered, so the
webhook keeps every rule. What an apiserver that enforces them stores and answers is recorded in
``tests/policy/data/native-handover/`` (``tests/policy/test_native_handover.py``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from kubernetes.client import ApiClient, Configuration

from webhook import kinds
from webhook.cel import Evaluator
from webhook.controller.kubeapi import KubeApi
from webhook.controller.native_policies import NativePolicies
from webhook.inputs.policies import PolicySource, load_policy_directory
from webhook.policy.native_export import export, kind_resources
from webhook.policy.native_handover import (BINDING, ENFORCED_ANNOTATION, HANDED_OVER_KINDS, MAP, MAP_BINDING,
                                            PROBE_NAME, VAP, enforced_rules, generated, stored_key)
from webhook.schema.bundled import known_kinds
from tests.support.apiserver import FakeApiServer

# the demo policy of the recording: a validation, a warning and a mutation
DATA = Path(__file__).parents[1] / "policy" / "data" / "native-handover"
EVALUATOR = Evaluator()
RESOURCES = kind_resources(known_kinds())
POLICY_KINDS = {VAP: kinds.VALIDATING_ADMISSION_POLICY, BINDING: kinds.VALIDATING_ADMISSION_POLICY_BINDING,
                MAP: kinds.MUTATING_ADMISSION_POLICY, MAP_BINDING: kinds.MUTATING_ADMISSION_POLICY_BINDING}


@pytest.mark.parametrize("maps_served", [False, True], ids=["no MAPs served", "MAPs served"])
def test_a_round_applies_what_the_apiserver_serves_and_marks_nothing_the_probe_did_not_prove(maps_served):
    served = (VAP, BINDING, MAP, MAP_BINDING) if maps_served else (VAP, BINDING)
    fake = FakeApiServer(builtins=True)  # (ConfigMaps: the probe's dry-run create)
    for kind in served:
        declared = POLICY_KINDS[kind]
        fake.serve_resource(declared.api_version, declared.plural, declared.kind, False)
    policies = load_policy_directory(PolicySource(DATA / "policies"), EVALUATOR)
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with fake.running() as url:
        configuration = Configuration()
        configuration.host = url
        sync = NativePolicies(KubeApi(ApiClient(configuration), timeout=5), policies, RESOURCES, owner=None,
                              namespace="default", probe_timeout=1.0, probe_interval=0.5,
                              clock=lambda: now[0], sleep=sleep)
        assert sync.served() == served
        sync.step()

    result = export([p.definition for p in policies.current().policies if getattr(p, "definition", None)], RESOURCES)
    assert {o["kind"] for o in generated(result)} == set(HANDED_OVER_KINDS)  # the demo exports all four kinds
    stored = {stored_key(o): o for o in fake.all_objects() if o.get("kind") in HANDED_OVER_KINDS}
    # the served kinds of the generated set, and the VAP probe (its dry run went unanswered, so
    # the round stopped there: the MAP probe comes after it)
    assert set(stored) == {stored_key(o) for o in generated(result) if o["kind"] in served} \
        | {(VAP, PROBE_NAME), (BINDING, PROBE_NAME)}
    listed = {path for method, path in fake.requests if method == "GET"}
    assert any(path.endswith("/mutatingadmissionpolicies") for path in listed) == maps_served
    # this API denies nothing: no probe passed, nothing marked, nothing handed over
    assert sync.probes == 3
    assert not [key for key, o in stored.items() if ENFORCED_ANNOTATION in (o["metadata"].get("annotations") or {})]
    assert enforced_rules(result, stored) == {}


def test_what_is_no_longer_generated_is_unmarked_then_deleted_after_the_grace_over_http():
    """The pruning path over HTTP, from what kube-apiserver v1.36.2 stored after the recorded
    rounds (``recorded.json``'s ``stored``: the demo's VAPs, MAP and bindings, marked, and the
    probes), with the later policies (``policies-later``: no warning, no mutation): the first
    round deletes the bindings of the ``-warn`` VAP and of the MAP and unmarks both (JSON merge
    patches), sending no probe (the VAP still generated keeps its mark); a round within the grace
    deletes nothing; the first round after it deletes both. Writes and what stays as recorded
    (``later``, ``pruned``); a round after that writes nothing."""
    recorded = json.loads((DATA / "recorded.json").read_text())
    fake = FakeApiServer(builtins=True)
    for declared in POLICY_KINDS.values():
        fake.serve_resource(declared.api_version, declared.plural, declared.kind, False)
    for obj in recorded["stored"]:
        fake.put(copy.deepcopy(obj), POLICY_KINDS[obj["kind"]].plural)
    later = load_policy_directory(PolicySource(DATA / "policies-later"), EVALUATOR)
    now = [0.0]

    def state() -> dict[tuple[str, str], str | None]:
        return {stored_key(o): (o["metadata"].get("annotations") or {}).get(ENFORCED_ANNOTATION)
                for o in fake.all_objects() if o.get("kind") in HANDED_OVER_KINDS}

    def recorded_state(round_: str) -> dict[tuple[str, str], str | None]:
        return {stored_key(o): (o["metadata"].get("annotations") or {}).get(ENFORCED_ANNOTATION)
                for o in recorded[round_]["stored"]}

    with fake.running() as url:
        configuration = Configuration()
        configuration.host = url
        sync = NativePolicies(KubeApi(ApiClient(configuration), timeout=5), later, RESOURCES, owner=None,
                              namespace="default", grace=10.0, clock=lambda: now[0], sleep=lambda _s: None)
        sync.step()
        assert (sync.writes, sync.probes) == (recorded["later"]["writes"], 0)
        assert state() == recorded_state("later")
        patched = [path for method, path in fake.requests if method == "PATCH"]
        assert sorted(patched) == [
            "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/infergate-s2-native-demo",
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/infergate-s2-native-demo-warn"]

        now[0] = 9.0  # within the grace: the webhooks may not have seen the marks go
        sync.step()
        assert sync.writes == recorded["later"]["writes"] and state() == recorded_state("later")

        now[0] = 10.0
        sync.step()
        assert sync.writes == recorded["later"]["writes"] + recorded["pruned"]["writes"]
        assert state() == recorded_state("pruned")

        writes = len([m for m, _ in fake.requests if m in ("POST", "PUT", "PATCH", "DELETE")])
        now[0] = 30.0
        sync.step()  # converged
        assert len([m for m, _ in fake.requests if m in ("POST", "PUT", "PATCH", "DELETE")]) == writes
