#!/usr/bin/env python3
"""Record what a real kube-apiserver v1.36 stores and answers when the controller hands the
rules of ``tests/policy/data/native-handover/policies/demo.yaml`` over to it:
``tests/policy/data/native-handover/recorded.json``.

Not run by CI (it needs the apiserver); ``tests/policy/test_native_handover.py`` reads what it
wrote. The policy matches only KubeAI Models labelled ``s2-native: "true"``, so no other object of
a shared cluster is judged. Usage::

    KUBECONFIG=~/.cache/realk8s/kubeconfig .venv/bin/python scripts/record_native_handover.py

1. one round of the controller's ``NativePolicies`` (no owner): the VAPs, the MAP and their
   bindings applied, the probe denied, the VAPs marked, the mutation probe annotated, the MAP
   marked; a second round, which must write nothing;
2. the stored VAPs, MAPs and bindings labelled managed-by infergate, as the API returns them;
3. the probe's dry-run create again: the Status of its denial;
4. dry-run creates of a Model in namespace ``s2-native`` breaking the exported validation, and
   one breaking only the exported warning: the Status (or object) and the Warning headers (the
   object returned carries the exported mutation's ``minReplicas``, by the MAP);
5. the policies changed to ``policies-later/`` (the warning and the mutation gone): one round
   (the ``-warn`` VAP and the MAP unmarked, their bindings deleted), the stored objects; after
   the grace, another round (the VAP and the MAP deleted), the stored objects;
6. everything it created deleted (the objects, the namespace).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from webhook import kinds  # noqa: E402
from webhook.cel import Evaluator  # noqa: E402
from webhook.controller.kubeapi import KubeApi  # noqa: E402
from webhook.controller.native_policies import NativePolicies  # noqa: E402
from webhook.inputs.kube import KubeClientConfig, api_client  # noqa: E402
from webhook.inputs.policies import PolicySource, load_policy_directory  # noqa: E402
from webhook.policy.native_export import export, kind_resources  # noqa: E402
from webhook.policy.native_handover import (MANAGED_BY_SELECTOR, content_hash, generated,  # noqa: E402
                                            probe_request)
from webhook.schema.bundled import known_kinds  # noqa: E402

DATA = REPO / "tests" / "policy" / "data" / "native-handover"
NAMESPACE = "s2-native"
MODEL = kinds.Kind("kubeai.org/v1", "Model", "models", True)


GRACE = 2.0


class Switch:
    """The policies in force, changed by the recorder."""

    def __init__(self, policy_set):
        self.set = policy_set

    def current(self):
        return self.set


KIND_OF = {"ValidatingAdmissionPolicy": kinds.VALIDATING_ADMISSION_POLICY,
           "ValidatingAdmissionPolicyBinding": kinds.VALIDATING_ADMISSION_POLICY_BINDING,
           "MutatingAdmissionPolicy": kinds.MUTATING_ADMISSION_POLICY,
           "MutatingAdmissionPolicyBinding": kinds.MUTATING_ADMISSION_POLICY_BINDING}


def listed(api) -> list[dict]:
    out = [o for kind in KIND_OF.values() for o in api.list(kind, MANAGED_BY_SELECTOR)]
    for obj in out:
        obj["metadata"].pop("managedFields", None)
    return sorted(out, key=lambda o: (o["kind"], o["metadata"]["name"]))


def model(labels: dict[str, str]) -> dict:
    return {"apiVersion": "kubeai.org/v1", "kind": "Model",
            "metadata": {"name": "s2-demo", "namespace": NAMESPACE, "labels": {"s2-native": "true", **labels}},
            "spec": {"features": ["TextGeneration"], "url": "hf://org/model", "engine": "VLLM",
                     "resourceProfile": "cpu:1"}}


def dry_run(client, path: str, body: dict) -> dict:
    response = client.call_api(*client.param_serialize(
        method="POST", resource_path=path, query_params=[("dryRun", "All")],
        header_params={"Content-Type": "application/json", "Accept": "application/json"}, body=body,
        auth_settings=["BearerToken"]))
    response.read()
    warnings = [v for k, v in response.getheaders().items() if k.lower() == "warning"]
    return {"code": response.status, "warnings": warnings, "body": json.loads(response.data)}


def main() -> int:
    client = api_client(KubeClientConfig(kubeconfig=Path(os.environ["KUBECONFIG"])))
    api = KubeApi(client)
    evaluator = Evaluator()
    policies = Switch(load_policy_directory(PolicySource(DATA / "policies"), evaluator).current())
    sync = NativePolicies(api, policies, kind_resources(known_kinds()), owner=None, namespace="default", grace=GRACE)
    sync.step()
    first = sync.writes
    sync.step()
    second = sync.writes - first
    assert second == 0, "the second round wrote"
    stored = listed(api)
    in_force = policies.current()
    token = content_hash(generated(export([p.definition for p in in_force.policies if getattr(p, "definition", None)],
                                          kind_resources(known_kinds()))))
    probe = dry_run(client, f"/api/v1/namespaces/default/configmaps", probe_request(token, "default"))
    try:
        api.create(kinds.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    except Exception:  # noqa: BLE001 - there already
        pass
    path = f"/apis/kubeai.org/v1/namespaces/{NAMESPACE}/models"
    denied = dry_run(client, path, model({"s2-bad": "x", "s2-odd": "y"}))
    warned = dry_run(client, path, model({"s2-odd": "y"}))
    policies.set = load_policy_directory(PolicySource(DATA / "policies-later"), evaluator).current()
    before = sync.writes
    sync.step()
    later = {"writes": sync.writes - before, "stored": listed(api)}
    time.sleep(GRACE)  # a recorder: the controller's grace, as the controller waits it out between rounds
    before = sync.writes
    sync.step()
    pruned = {"writes": sync.writes - before, "stored": listed(api)}
    response = client.call_api(*client.param_serialize("GET", "/version", auth_settings=["BearerToken"]))
    response.read()
    version = json.loads(response.data)["gitVersion"]
    recorded = {"recorded": f"kube-apiserver {version}, {datetime.date.today()} (scripts/record_native_handover.py)",
                "writes": {"first round": first, "second round": second}, "probes": sync.probes,
                "stored": stored,
                "probe": probe, "token": token, "denied": denied, "warned": warned,
                "later": later, "pruned": pruned}
    (DATA / "recorded.json").write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    for obj in listed(api):
        api.delete(KIND_OF[obj["kind"]], obj["metadata"]["name"])
    api.delete(kinds.NAMESPACE, NAMESPACE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
