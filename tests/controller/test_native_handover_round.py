"""The controller's round of ``--native-policies`` (``webhook.controller.native_policies``)
against an API over real HTTP that runs no admission plugin (``tests/support/apiserver.py``):
it applies what the apiserver serves of the generated kinds (the VAPs alone where
MutatingAdmissionPolicies are not served), and marks nothing while no probe is answered, so the
webhook keeps every rule. What an apiserver that enforces them stores and answers is recorded in
``tests/policy/data/native-handover/`` (``tests/policy/test_native_handover.py``)."""

from __future__ import annotations

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
