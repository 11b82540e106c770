"""Per-object cost of the apiserver pipeline (schema + CEL), as ratios to a baseline.

For every example manifest the shipped CRDs serve (``examples/manifests/valid``), after a
warm-up, in one run:

* baseline  — ``json.loads(json.dumps(obj))`` + ``copy.deepcopy``: the least any handler does;
* prepare   — decode: copy, prune unknown fields and nulls, defaults, status rules;
* schema    — ``prepare`` + metadata + structural validation + list types (no CEL);
* total     — ``CRDRegistry.handle``: everything, CEL rules included.

Usage: python bench/schema_per_object.py [--rounds N]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _timing import per_call  # noqa: E402  (bench/ is on sys.path as the script's folder)
from webhook.schema import CRDRegistry  # noqa: E402
from webhook.schema.registry import ABSENT, _list_type_errors  # noqa: E402
from webhook.schema.objectmeta import validate_object_meta  # noqa: E402



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    registry = CRDRegistry.shipped()
    objects = []
    for path in sorted((REPO / "examples" / "manifests" / "valid").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and registry.served(doc.get("apiVersion"), doc.get("kind")):
                objects.append(doc)
    print(f"{'object':48} {'baseline':>9} {'prepare':>9} {'schema':>9} {'total':>9} {'total/base':>10}")
    totals, ratios = [], []
    for obj in objects:
        namespace = obj["metadata"].get("namespace", "default")
        served = registry.served(obj["apiVersion"], obj["kind"])
        outcome = registry.handle("CREATE", obj, namespace=namespace)
        assert outcome.allowed, (obj["metadata"]["name"], outcome.status)
        text = json.dumps(obj)

        def baseline():
            copy.deepcopy(json.loads(text))

        def prepare():
            registry.prepare("CREATE", obj, namespace=namespace)

        def schema():
            prepared, _ = registry.prepare("CREATE", obj, namespace=namespace)
            validate_object_meta(prepared["metadata"], namespaced=served.namespaced)
            served.validator.validate(prepared, ABSENT)
            _list_type_errors(served.schema, prepared, None)

        def total():
            registry.handle("CREATE", obj, namespace=namespace)

        for fn in (baseline, prepare, schema, total):  # warm-up: compile, caches
            for _ in range(30):
                fn()
        b, p, s, t = (per_call(fn, args.rounds) for fn in (baseline, prepare, schema, total))
        totals.append(t)
        ratios.append(t / b)
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        print(f"{name:48} {b * 1e6:8.1f}µ {p * 1e6:8.1f}µ {s * 1e6:8.1f}µ {t * 1e6:8.1f}µ {t / b:9.1f}x")
    print(f"\nmedian total {statistics.median(totals) * 1e6:.1f} µs per object, "
          f"max {max(totals) * 1e6:.1f} µs; median ratio to baseline {statistics.median(ratios):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
