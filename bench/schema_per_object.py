"""Per-object cost of the apiserver pipeline (schema + CEL), as ratios to a baseline.

For every example manifest the shipped CRDs serve (``examples/manifests/valid``), after a
warm-up, in one run:

* baseline  — ``json.loads(json.dumps(obj))`` + ``copy.deepcopy``: the least any handler does;
* prepare   — decode: copy, prune unknown fields and nulls, defaults, status rules;
* schema    — ``prepare`` + metadata + structural validation + list types (no CEL);
* total     — ``CRDRegistry.handle``: everything, CEL rules included.

Usage: python bench/schema_per_object.py [--rounds N] [--without ROUTE[,ROUTE]]
       python bench/schema_per_object.py --against OTHER_TREE|without:ROUTE[,ROUTE] [--runs 3]

Times are the thread's CPU time per call (``--wall`` for wall-clock), best of 5 runs.
``--against`` compares two code trees (e.g. a ``git worktree`` of the commit before a change):
this script measures each tree's code in turn (``--tree``), alternating, ``--runs`` times each,
and prints each cell's best run before → after (the machine is shared: alternation lets a
neighbour's load hit both alike). ``--without``: the CEL rules with those fast routes of
``webhook.cel.ladder`` switched off (``object_batch``, ``native``, ``hoisted``);
``--against without:ROUTES``: this tree so before, as it is after (what those routes are
worth; ``--against walk`` is ``without:object_batch``).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from _timing import per_call  # (bench/ is on sys.path as the script's folder)

REPO = Path(__file__).resolve().parents[1]


# one row of the table ``main`` prints: name, then baseline/prepare/schema/total in µs
_ROW = re.compile(r"^(\S+)\s+([\d.]+)µ\s+([\d.]+)µ\s+([\d.]+)µ\s+([\d.]+)µ")
_COLUMNS = ("baseline", "prepare", "schema", "total")


def compare(before: list[str], runs: int, rounds: int) -> int:
    """Before (this script with the options ``before``) → after (this tree): this script
    measuring each in turn."""
    best: dict[str, dict[str, dict[str, float]]] = {"before": {}, "after": {}}
    for _ in range(runs):
        for label, options in (("before", before), ("after", [])):
            text = subprocess.run([sys.executable, __file__, "--rounds", str(rounds), *options],
                                  capture_output=True, text=True, check=True).stdout
            for match in filter(None, map(_ROW.match, text.splitlines())):
                cells = best[label].setdefault(match[1], {})
                for column, value in zip(_COLUMNS, match.groups()[1:]):
                    cells[column] = min(cells.get(column, float("inf")), float(value))
    print(f"{'object':48} " + " ".join(f"{c + ' before → after':>24}" for c in _COLUMNS)
          + f" {'total/baseline':>16}")
    for name, after in best["after"].items():
        before = best["before"].get(name)
        if before is None:
            continue
        cells = " ".join(f"{before[c]:10.1f} → {after[c]:8.1f}µ  " for c in _COLUMNS)
        print(f"{name:48} {cells} {before['total'] / before['baseline']:5.1f}x → "
              f"{after['total'] / after['baseline']:.1f}x")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--against", type=Path, help="another code tree to compare with (before → after)")
    parser.add_argument("--runs", type=int, default=3, help="with --against: runs of each tree, alternating")
    parser.add_argument("--tree", type=Path, default=REPO, help="the code tree to measure (default: this one)")
    parser.add_argument("--wall", action="store_true", help="time wall-clock, not the thread's CPU time")
    parser.add_argument("--without", default="", metavar="ROUTE[,ROUTE]",
                        help="CEL fast routes to switch off (webhook.cel.ladder.Routes fields)")
    args = parser.parse_args()
    if args.against is not None:
        against = "without:object_batch" if str(args.against) == "walk" else str(args.against)
        before = (["--without", against.removeprefix("without:")] if against.startswith("without:")
                  else ["--tree", str(args.against.resolve())])
        return compare(before, args.runs, args.rounds)
    sys.path.insert(0, str(args.tree.resolve()))
    from webhook.schema import CRDRegistry
    from webhook.schema.objectmeta import validate_object_meta
    from webhook.schema.registry import ABSENT, list_type_errors

    clock = time.perf_counter if args.wall else time.thread_time
    try:
        from webhook.cel import Evaluator
    except ImportError:  # (a tree from before the engine was a value: --against an older commit)
        Evaluator = None
    if Evaluator is None:
        registry = CRDRegistry.shipped()
    elif args.without:  # (a tree without ``webhook.cel.ladder`` is measured without the option)
        from webhook.cel.ladder import ALL

        routes = ALL
        for name in args.without.split(","):
            if name not in ALL.names():
                parser.error(f"--without: no route {name!r}; routes: {', '.join(ALL.names())}")
            routes = routes.without(name)
        registry = CRDRegistry.shipped(evaluator=Evaluator(routes=routes))
    else:
        registry = CRDRegistry.shipped(evaluator=Evaluator())
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
            list_type_errors(served.schema, prepared, None)

        def total():
            registry.handle("CREATE", obj, namespace=namespace)

        for fn in (baseline, prepare, schema, total):  # warm-up: compile, caches
            for _ in range(30):
                fn()
        b, p, s, t = (per_call(fn, args.rounds, clock=clock) for fn in (baseline, prepare, schema, total))
        totals.append(t)
        ratios.append(t / b)
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        print(f"{name:48} {b * 1e6:8.1f}µ {p * 1e6:8.1f}µ {s * 1e6:8.1f}µ {t * 1e6:8.1f}µ {t / b:9.1f}x")
    print(f"\nmedian total {statistics.median(totals) * 1e6:.1f} µs per object, "
          f"max {max(totals) * 1e6:.1f} µs; median ratio to baseline {statistics.median(ratios):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
