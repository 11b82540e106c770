"""Record whether several MutatingAdmissionPolicies setting one field apply in a fixed order
(not run by the tests; ``order/mutating-order.yaml`` holds what it saw).

The apiserver builds its list of policies (``generic.policySource.calculatePolicyData``) by
ranging over a Go map of policy to bindings, anew each time a policy or binding changes (the
source refreshes at most once a second). This script creates the three policies and bindings
of ``order/mutating-order.yaml`` (each sets the label ``n2-order`` to its own letter), then,
per round, changes a label of one binding (which marks the source dirty), waits past the
refresh and sends the ConfigMap three times with ``?dryRun=All``; it writes the label each
write came back with, per round, into the file's ``rounds``::

    .venv/bin/python tests/policy/native/record_order.py --kubeconfig ~/.cache/realk8s/kubeconfig [--rounds 20]
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.policy.native.record import Cluster  # noqa: E402

FILE = HERE / "order" / "mutating-order.yaml"


class Dumper(yaml.SafeDumper):
    """YAML without anchors and aliases (the file reads as written)."""

    def ignore_aliases(self, data) -> bool:
        return True

ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True, type=Path)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    cluster = Cluster(args.kubeconfig)
    suite = yaml.safe_load(FILE.read_text())
    policies = [p for p in suite["policies"] if p["kind"] == "MutatingAdmissionPolicy"]
    bindings = [p for p in suite["policies"] if p["kind"] == "MutatingAdmissionPolicyBinding"]
    obj = suite["object"]
    label = suite["label"]
    path = f"/api/v1/namespaces/{obj['metadata']['namespace']}/configmaps?dryRun=All"

    def delete_all() -> None:
        for binding in bindings:
            cluster.call("DELETE", f"{ADMISSION}/mutatingadmissionpolicybindings/{binding['metadata']['name']}")
        for policy in policies:
            cluster.call("DELETE", f"{ADMISSION}/mutatingadmissionpolicies/{policy['metadata']['name']}")

    def labelled() -> str | None:
        _, body, _ = cluster.call("POST", path, obj)
        return ((body or {}).get("metadata") or {}).get("labels", {}).get(label)

    delete_all()
    rounds = []
    try:
        for policy in policies:
            cluster.call("POST", f"{ADMISSION}/mutatingadmissionpolicies", policy)
        for binding in bindings:
            cluster.call("POST", f"{ADMISSION}/mutatingadmissionpolicybindings", binding)
        deadline = time.monotonic() + 90
        while labelled() is None:
            if time.monotonic() > deadline:
                raise SystemExit("record_order: the policies never applied")
            time.sleep(0.5)
        touched = bindings[-1]["metadata"]["name"]
        for number in range(args.rounds):
            cluster.call("PATCH", f"{ADMISSION}/mutatingadmissionpolicybindings/{touched}",
                         {"metadata": {"labels": {"round": str(number + 1)}}}, "application/merge-patch+json")
            time.sleep(1.5)  # past the policy source's refresh (1s)
            rounds.append([labelled() for _ in range(3)])
            print(number, rounds[-1], file=sys.stderr)
    finally:
        delete_all()
    suite["rounds"] = rounds
    suite["recorded"] = {"apiserver": cluster.version(), "date": datetime.date.today().isoformat(),
                         "by": "tests/policy/native/record_order.py"}
    FILE.write_text(yaml.dump(suite, Dumper=Dumper, sort_keys=False, width=120))
    return 0


if __name__ == "__main__":
    sys.exit(main())
