"""A background audit's scan, offline: N existing objects (default 5,000) judged by
``webhook.audit.Auditor`` with the shipped policies and CRDs, objects per second, against the
admission of the same objects in the same run.

The objects are the examples as a cluster stores them (``examples/manifests/valid``, and one
in 20 from ``denied-by-webhook``: a cluster with some violations), each with a unique name and
uid, a resourceVersion and a status, judged against the example state (the classes, pools,
namespaces and KubeAI config they refer to: each object's lookups touch its neighbours, not
the whole scan). Each round times, in thread CPU (steady under load), best of ``--rounds``:

* baseline — ``AdmissionChain.run`` of each object as a CREATE (what admitting it costs: the
  chain the auditor reuses);
* audit    — ``Auditor.audit`` of each object (the scan's judging);
* audit + report — the same and ``build_report`` of each, serialised as the controller compares
  it (``orjson``, sorted keys).

Target: audit ≥ 5,000 objects/s. Usage: python bench/audit_scan.py [--objects N] [--rounds N]

Live, with ``--kubeconfig K`` (a scratch cluster; ``bench/_audit_live.py``): N KubeAI Models
created, then ``infergate controller``'s audit loop over its watch cache scans them twice: cold
(every Report created) and converged (a full resync, which must write nothing: the controller's
count and the apiserver's ``apiserver_request_total``); everything it created removed after.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import sys
import time
from pathlib import Path

import orjson
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from webhook import shipped_data  # noqa: E402
from webhook.admission.chain import AdmissionChain, offline_request  # noqa: E402
from webhook.audit import Auditor, build_report  # noqa: E402
from webhook.cel import Evaluator  # noqa: E402
from webhook.policy import PolicySet  # noqa: E402
from webhook.schema import CRDRegistry  # noqa: E402
from webhook.state import FileState  # noqa: E402

MANIFESTS = REPO / "examples" / "manifests"


def stored_objects(count: int) -> list[dict]:
    """``count`` objects as a cluster stores them; one in 20 violates a policy."""
    valid = [yaml.safe_load(p.read_text()) for p in sorted((MANIFESTS / "valid").glob("*.yaml"))]
    denied = [yaml.safe_load(p.read_text()) for p in sorted((MANIFESTS / "denied-by-webhook").glob("*.yaml"))]
    out = []
    for i in range(count):
        source = denied[(i // 20) % len(denied)] if i % 20 == 19 else valid[i % len(valid)]
        obj = copy.deepcopy(source)
        meta = obj["metadata"]
        meta["name"] = f"{meta['name']}-{i}"
        digest = hashlib.sha256(f"{obj['kind']}/{i}".encode()).hexdigest()
        meta.update(uid=f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}",
                    resourceVersion=str(10_000 + i), generation=1, creationTimestamp="2026-03-01T10:00:00Z")
        obj["status"] = {}
        out.append(obj)
    return out


def thread_seconds(fn, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kubeconfig", help="live: the controller's audit against this cluster (a scratch one)")
    args = parser.parse_args()
    if args.kubeconfig:
        from _audit_live import live  # bench/ is the script's directory, first on sys.path

        return live(args.kubeconfig, args.objects)
    evaluator = Evaluator()
    registry = CRDRegistry.shipped(evaluator=evaluator)
    policies = PolicySet.load(shipped_data.policies_dir(), evaluator=evaluator)
    objects = stored_objects(args.objects)
    state = FileState(shipped_data.examples_dir())
    chain = AdmissionChain(registry, policies, state)
    auditor = Auditor(registry, policies, state)
    requests = [offline_request(o, namespace=o["metadata"].get("namespace")) for o in objects]

    denied = sum(not chain.run(r).allowed for r in requests)  # (warm both once; check they agree)
    audited = [auditor.audit(o) for o in objects]
    assert sum(a.verdict.denied for a in audited) == denied > 0

    def admit() -> None:
        for request in requests:
            chain.run(request)

    def audit() -> None:
        for obj in objects:
            auditor.audit(obj)

    def audit_and_report() -> None:
        for obj in objects:
            orjson.dumps(build_report(auditor.audit(obj)), option=orjson.OPT_SORT_KEYS)

    rows = [("baseline: admission (`AdmissionChain.run`, CREATE)", thread_seconds(admit, args.rounds)),
            ("audit (`Auditor.audit`)", thread_seconds(audit, args.rounds)),
            ("audit + report (`build_report`, serialised)", thread_seconds(audit_and_report, args.rounds))]
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    print(f"{args.objects} objects ({denied} denied), best of {args.rounds}, load {load}, thread CPU\n")
    print("| run | seconds | objects/s | ÷ baseline |")
    print("|---|---:|---:|---:|")
    base = rows[0][1]
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} | {args.objects / seconds:,.0f} | {seconds / base:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
