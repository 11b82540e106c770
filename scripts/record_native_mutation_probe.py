#!/usr/bin/env python3
"""Record what a real kube-apiserver v1.36 answers to the mutation probe of the handover
(``webhook.policy.native_handover``: ``probe_mutation_objects``, ``probe_mutation_request``):
``tests/policy/data/native-handover/mutation-probe.json``.

Not run by CI (it needs the apiserver); ``tests/policy/test_native_handover.py`` reads what it
wrote. The question: with a MutatingAdmissionPolicy bound, does a dry-run create return the
object as mutated, and how long after the MAP's write until the mutation applies? Usage::

    KUBECONFIG=~/.cache/realk8s/kubeconfig .venv/bin/python scripts/record_native_mutation_probe.py

Three trials, each with a fresh token: the probe MAP and binding applied (server-side apply,
field manager ``infergate``; the first trial creates them, the next ones rewrite them with the
new token, as the controller does when the generated set changes), then a dry-run create of the
probe's ConfigMap every 0.1 s from the moment the apply returned, until the returned object
carries the annotation (at most 30 s). Recorded: every answer's time since the apply and
whether it was mutated, the first unmutated and the first mutated object as returned. Then the
MAP and binding are deleted.
"""

from __future__ import annotations

import datetime
import json
import os
import secrets
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from webhook import kinds  # noqa: E402
from webhook.controller.kubeapi import KubeApi, NotFound  # noqa: E402
from webhook.inputs.kube import KubeClientConfig, api_client  # noqa: E402
from webhook.policy.native_handover import (PROBE_NAME, probe_mutated, probe_mutation_objects,  # noqa: E402
                                            probe_mutation_request)

DATA = REPO / "tests" / "policy" / "data" / "native-handover"
NAMESPACE = "default"
KIND_OF = {"MutatingAdmissionPolicy": kinds.MUTATING_ADMISSION_POLICY,
           "MutatingAdmissionPolicyBinding": kinds.MUTATING_ADMISSION_POLICY_BINDING}


def trial(api: KubeApi) -> dict:
    token = secrets.token_hex(8)
    for obj in probe_mutation_objects(token):
        api.apply(KIND_OF[obj["kind"]], obj, "infergate")
    applied = time.monotonic()
    answers, unmutated, mutated = [], None, None
    while time.monotonic() - applied < 30:
        answer = api.dry_run_create(kinds.CONFIG_MAP, probe_mutation_request(token, NAMESPACE), NAMESPACE)
        answer.get("metadata", {}).pop("managedFields", None)
        done = probe_mutated(answer, token)
        answers.append({"after_seconds": round(time.monotonic() - applied, 3), "mutated": done})
        if done:
            mutated = answer
            break
        unmutated = unmutated or answer
        time.sleep(0.1)
    return {"token": token, "answers": answers, "first_unmutated": unmutated, "mutated": mutated}


def main() -> int:
    api = KubeApi(api_client(KubeClientConfig(kubeconfig=Path(os.environ["KUBECONFIG"]))))
    for kind in KIND_OF.values():
        try:
            api.get(kind, PROBE_NAME)
        except NotFound:
            continue
        print(f"{kind.kind} {PROBE_NAME} exists already: someone else is probing this cluster", file=sys.stderr)
        return 1
    trials = [trial(api) for _ in range(3)]
    stored = [api.get(kind, PROBE_NAME) for kind in KIND_OF.values()]
    for obj in stored:
        obj["metadata"].pop("managedFields", None)
    for kind in KIND_OF.values():
        api.delete(kind, PROBE_NAME)
    client = api_client(KubeClientConfig(kubeconfig=Path(os.environ["KUBECONFIG"])))
    response = client.call_api(*client.param_serialize("GET", "/version", auth_settings=["BearerToken"]))
    response.read()
    version = json.loads(response.data)["gitVersion"]
    recorded = {"recorded": f"kube-apiserver {version}, {datetime.date.today()} "
                            "(scripts/record_native_mutation_probe.py)",
                "trials": trials, "stored": stored}
    (DATA / "mutation-probe.json").write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    for t in trials:
        print(t["token"], [(a["after_seconds"], a["mutated"]) for a in t["answers"]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
