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
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _timing import per_call  # noqa: E402  (bench/ is on sys.path as the script's folder)
from webhook import resources  # noqa: E402
from webhook.admission.chain import AdmissionChain, offline_request  # noqa: E402
from webhook.policy import PolicySet  # noqa: E402
from webhook.schema import CRDRegistry  # noqa: E402
from webhook.state import FileState  # noqa: E402



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--wall", action="store_true", help="wall time instead of CPU time")
    parser.add_argument("--without-native", action="store_true",
                        help="every CEL program on cel-expr alone (no native fast path): the before of an A/B")
    args = parser.parse_args()
    if args.without_native:
        import webhook.cel.cel_expr as cel_expr
        cel_expr.compile_native = lambda expr: None
    clock = time.perf_counter if args.wall else time.thread_time
    registry = CRDRegistry.shipped()
    policies, state = PolicySet.load(resources.policies_dir()), FileState(resources.examples_dir())
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
