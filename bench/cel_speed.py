"""Per-rule evaluation time of the two CEL backends, measured in one run (ratio = cel-python / cel-expr).

    python bench/cel_speed.py [--evaluations 2000]
    python bench/cel_speed.py --extremes

``--extremes``: the values ``tests/reliability/test_fuzz_cel.py`` throws at cel-expr (3 MiB
strings, 10,000-element lists and maps, 1,000 levels deep; the accumulating macros over 10,000
elements, refused by the cost bound) through a few rules each, the slowest evaluation per value
as a ratio to the same rules on the small object in the same run.

Rules are the kinds infergate's CRDs and policies use (presence checks, string prefixes,
regexes, list quantifiers, cross-field comparisons) and the Kubernetes libraries. Programs
are compiled once (compile time reported separately); the figures are medians of 5 rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from webhook.cel import Evaluator  # noqa: E402

RULES = {
    "prefix": 'self.url.startsWith("hf://") || self.url.startsWith("s3://")',
    "presence": "!has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
    "regex": "self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",
    "quantifier": "self.targets.all(t, has(t.weight)) || self.targets.all(t, !has(t.weight))",
    "size": "size(self.name) <= 40 && self.targets.size() <= 16",
    "quantity": "quantity(self.memory).isLessThan(quantity('64Gi'))",
    "lists": "self.ports.isSorted() && self.ports.max() <= 65535",
    "format": "!format.dns1123Label().validate(self.name).hasValue()",
    "url": "url(self.url.replace('hf://', 'https://')).getHost() != ''",
}
OBJECT = {
    "url": "hf://org/model",
    "minReplicas": 1,
    "maxReplicas": 3,
    "name": "llama-3-8b",
    "memory": "16Gi",
    "ports": [80, 443, 8080],
    "targets": [{"name": "a", "weight": 50}, {"name": "b", "weight": 50}],
}


def per_evaluation(program, activation: dict, evaluations: int) -> float:
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(evaluations):
            program.evaluate(activation)
        rounds.append((time.perf_counter() - start) / evaluations)
    return statistics.median(rounds) * 1e6


def run(evaluations: int) -> dict:
    activation = {"self": OBJECT}
    results = {}
    for name, rule in RULES.items():
        row = {}
        for engine_name in ("cel-expr", "cel-python"):
            engine = Evaluator(engine_name).engine
            start = time.perf_counter()
            program = engine.compile(rule, ["self"])
            row[f"{engine_name}_compile_ms"] = round((time.perf_counter() - start) * 1e3, 2)
            assert program.evaluate(activation) is True, (engine_name, name)
            row[f"{engine_name}_us"] = round(per_evaluation(program, activation, evaluations), 1)
        row["ratio"] = round(row["cel-python_us"] / row["cel-expr_us"], 1)
        results[name] = row
    return results


def _nested(depth: int):
    value = "x"
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


EXTREME_VALUES = {
    "deep-1000": lambda: _nested(1000),
    "string-3MiB": lambda: "a" * (3 * 1024 * 1024),
    "list-10000": lambda: ["x"] * 10_000,
    "map-10000": lambda: {f"k{i}": i for i in range(10_000)},
    "unicode": lambda: "\u202e\ufeff\U0010ffff" * 1000,
}
EXTREME_RULES = ["self", "size(self)", "string(self)", "self.all(x, x == x)", "self.map(x, x)",
                 "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')", "self.split(',')", "self.map(x, x + 'y')",
                 "self.filter(x, x != 'y')"]


def _slowest(programs: list, value) -> float:
    """The slowest of ``programs`` on ``value``, in ms (a CEL error, a refusal, is an answer)."""
    from webhook.cel import CelError

    worst = 0.0
    for program in programs:
        start = time.perf_counter()
        try:
            program.evaluate({"self": value})
        except CelError:
            pass
        worst = max(worst, time.perf_counter() - start)
    return worst * 1e3


def extremes() -> dict:
    from webhook.cel import CelError

    engine, programs = Evaluator("cel-expr").engine, []
    for rule in EXTREME_RULES:
        try:
            programs.append(engine.compile(rule, ["self"]))
        except CelError:
            pass
    baseline = statistics.median(_slowest(programs, ["x"]) for _ in range(5))
    out = {"small_ms": round(baseline, 3)}
    for name, make in EXTREME_VALUES.items():
        ms = _slowest(programs, make())
        out[name] = {"slowest_ms": round(ms, 1), "ratio_to_small": round(ms / baseline, 1)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=2000, help="per rule and round (default 2000)")
    parser.add_argument("--extremes", action="store_true", help="the extreme values of the CEL fuzz test instead")
    args = parser.parse_args()
    print(json.dumps(extremes() if args.extremes else run(args.evaluations), indent=2))


if __name__ == "__main__":
    main()
