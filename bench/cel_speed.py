"""Per-rule evaluation time of the two CEL backends, measured in one run (ratio = cel-python / cel-expr).

    python bench/cel_speed.py [--evaluations 2000]

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=2000, help="per rule and round (default 2000)")
    args = parser.parse_args()
    print(json.dumps(run(args.evaluations), indent=2))


if __name__ == "__main__":
    main()
