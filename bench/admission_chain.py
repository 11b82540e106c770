"""Per-request cost of the webhook's admission chain, as ratios to the apiserver's own work.

For every example manifest in ``examples/manifests/valid``, CREATE, against the embedded
example cluster state and the shipped policies, after a warm-up, in one run:

* baseline — ``CRDRegistry.handle``: what kube-apiserver itself does with the object
  (decode, schema, CRD rules);
* mutate   — ``AdmissionChain.admit(mutating=True)`` on the object as the apiserver sends it: the mutating webhook (lookups,
  mutations, the JSON patch);
* validate — ``AdmissionChain.admit(mutating=False)``: the validating webhook (schema step
  plus every validating policy);
* policies — the same without the schema step: the validating policies alone;
* run      — ``AdmissionChain.run``: the whole write offline (``infergate validate``).

Times are this thread's CPU time (``time.thread_time``): on a shared machine, wall time
measures the neighbours (``--wall`` for wall time).

Usage: python bench/admission_chain.py [--rounds N] [--wall] [--without-native]
       python bench/admission_chain.py --against OTHER_TREE [--runs 3]

``--against`` compares two code trees (e.g. a ``git worktree`` of the commit before a change):
this script measures each tree's code in turn (``--tree``), alternating, ``--runs`` times each,
and prints each cell's best run before → after.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from _timing import per_call  # (bench/ is on sys.path as the script's folder)

REPO = Path(__file__).resolve().parents[1]

# one row of the table ``main`` prints: name, then the columns in µs
_COLUMNS = ("baseline", "mutate", "validate", "policies", "run")
_ROW = re.compile(r"^(\S+)" + r"\s+([\d.]+)µ" * len(_COLUMNS))


def compare(other: Path, runs: int, rounds: int, wall: bool) -> int:
    """Before (the tree ``other``) → after (this tree): this script measuring each in turn."""
    best: dict[str, dict[str, dict[str, float]]] = {"before": {}, "after": {}}
    for _ in range(runs):
        for label, tree in (("before", other), ("after", REPO)):
            text = subprocess.run([sys.executable, __file__, "--rounds", str(rounds), "--tree", str(tree),
                                   *(["--wall"] if wall else [])], capture_output=True, text=True, check=True).stdout
            for match in filter(None, map(_ROW.match, text.splitlines())):
                cells = best[label].setdefault(match[1], {})
                for column, value in zip(_COLUMNS, match.groups()[1:]):
                    cells[column] = min(cells.get(column, float("inf")), float(value))
    print(f"{'object':44} " + " ".join(f"{c + ' before → after':>22}" for c in _COLUMNS))
    for name, after in best["after"].items():
        before = best["before"].get(name)
        if before is not None:
            print(f"{name:44} " + " ".join(f"{before[c]:11.0f} → {after[c]:6.0f}µ  " for c in _COLUMNS))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--wall", action="store_true", help="wall time instead of CPU time")
    parser.add_argument("--without-native", action="store_true",
                        help="every CEL program on cel-expr alone (no native fast path): the before of an A/B")
    parser.add_argument("--against", type=Path, help="another code tree to compare with (before → after)")
    parser.add_argument("--runs", type=int, default=3, help="with --against: runs of each tree, alternating")
    parser.add_argument("--tree", type=Path, default=REPO, help="the code tree to measure (default: this one)")
    args = parser.parse_args()
    if args.against is not None:
        return compare(args.against.resolve(), args.runs, args.rounds, args.wall)
    sys.path.insert(0, str(args.tree.resolve()))
    try:
        from webhook import shipped_data
    except ImportError:  # (a tree from before it had this name: --against an older commit)
        from webhook import resources as shipped_data
    from webhook.admission.chain import AdmissionChain, offline_request
    from webhook.policy import PolicySet
    from webhook.schema import CRDRegistry
    from webhook.state import FileState
    clock = time.perf_counter if args.wall else time.thread_time
    try:  # the default engine, every route (or all but the native one)
        from webhook.cel import Evaluator
        from webhook.cel.ladder import ALL
        engine = {"evaluator": Evaluator(routes=ALL.without("native") if args.without_native else ALL)}
    except ImportError:  # (a tree from before the engine was a value: --against an older commit)
        engine = {}
    registry = CRDRegistry.shipped(**engine)
    policies = PolicySet.load(shipped_data.policies_dir(), **engine)
    state = FileState(shipped_data.examples_dir())
    chain = AdmissionChain(registry, policies, state)
    policies_alone = AdmissionChain(None, policies, state)
    print(f"{'object':44} {'baseline':>9} {'mutate':>9} {'validate':>9} {'policies':>9} {'run':>9} {'webhook/base':>12}")
    ratios = []
    for path in sorted((REPO / "examples" / "manifests" / "valid").glob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            if not isinstance(obj, dict) or not registry.served(obj.get("apiVersion"), obj.get("kind")):
                continue
            namespace = obj["metadata"].get("namespace") or ("default" if obj["kind"] != "InferenceServiceClass" else "")
            request = offline_request(obj, namespace=namespace)
            assert chain.run(request).allowed, obj["metadata"]["name"]
            # the webhook receives the object decoded and defaulted by the apiserver
            prepared, _ = registry.prepare("CREATE", obj, namespace=namespace or None)
            received = request.model_copy(update={"object": prepared})
            assert chain.admit(received, mutating=False).allowed, obj["metadata"]["name"]

            def baseline():
                registry.handle("CREATE", obj, namespace=namespace or None)

            def mutate():
                chain.admit(received, mutating=True)

            def validate():
                chain.admit(received, mutating=False)

            def validate_policies():
                policies_alone.admit(received, mutating=False)

            def run():
                chain.run(request)

            fns = (baseline, mutate, validate, validate_policies, run)
            for fn in fns:  # warm-up: compile, caches
                for _ in range(10):
                    fn()
            b, m, v, p, r = (per_call(fn, args.rounds, clock=clock) for fn in fns)
            ratios.append((m + v) / b)
            name = f"{obj['kind']}/{obj['metadata']['name']}"
            print(f"{name:44} {b * 1e6:8.0f}µ {m * 1e6:8.0f}µ {v * 1e6:8.0f}µ {p * 1e6:8.0f}µ {r * 1e6:8.0f}µ "
                  f"{(m + v) / b:11.1f}x")
    print(f"\nmedian (mutate + validate) / baseline: {statistics.median(ratios):.1f}x, max {max(ratios):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
