"""Memory of the cel-expr backend over >= 1,000,000 evaluations that use the Kubernetes libraries.

cel-expr-python 0.1.3 leaks on every call of a Python-implemented function (the argument
tuple, the converted arguments and a reference to the result are never released). This
benchmark measures that leak directly (baseline: one Python function called per evaluation)
and then the process's resident memory while the engine evaluates rules that exercise the
Kubernetes libraries: constant library calls (folded at compile time), list and regex
functions on data (plain CEL / cel-cpp natively), and library calls on selected data
(computed before the C++ evaluation and handed in as values).

    python bench/cel_memory.py [--evaluations 1000000]

tracemalloc does not see C++ allocations, so the figure is RSS (``/proc/self/statm``).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

from cel_expr_python import cel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, as the other benches

from webhook.cel import Evaluator  # noqa: E402

RULES = {
    # constant arguments: evaluated once, at compile time
    "folded": (
        "quantity('1Gi').isGreaterThan(quantity('1G')) && ip('10.0.0.1').family() == 4"
        " && !format.dns1123Label().validate('abc').hasValue() && semver('1.2.3').isLessThan(semver('1.10.0'))"
        " && url('https://example.com:80/a').getPort() == '80' && cidr('10.0.0.0/8').containsIP('10.1.2.3')"
    ),
    # Kubernetes list functions and regexes on data: plain CEL / cel-cpp's RE2
    "native": (
        "self.ports.isSorted() && self.ports.sum() > 0 && self.ports.max() == 8443 && self.ports.indexOf(443) == 1"
        " && self.name.find('[0-9]+') == '7' && self.name.findAll('[a-z]+').size() == 2"
    ),
    # library calls whose arguments are selected from the object
    "selected": (
        "isQuantity(self.memory) && quantity(self.memory).isLessThan(quantity('64Gi'))"
        " && ip(self.address).isLoopback() == false && url(self.endpoint).getScheme() == 'https'"
    ),
}
OBJECT = {
    "ports": [80, 443, 8080, 8443],
    "name": "model7-server",
    "memory": "16Gi",
    "address": "10.0.0.7",
    "endpoint": "https://models.example.com/v1",
}


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def leak_baseline(calls: int) -> float:
    """Bytes retained per call of a Python function by cel-expr-python itself."""
    decl = cel.FunctionDecl("f", [cel.Overload("f_string", cel.Type.STRING, [cel.Type.STRING], impl=lambda s: s)])
    program = cel.NewEnv(variables={"x": cel.Type.DYN}, functions=[decl]).compile("f(x) == 'abc'")
    for _ in range(10_000):
        program.eval(data={"x": "abc"})
    gc.collect()
    before = rss()
    for _ in range(calls):
        program.eval(data={"x": "abc"})
    gc.collect()
    return (rss() - before) / calls


def run(evaluations: int) -> dict:
    engine = Evaluator("cel-expr").engine
    programs = {name: engine.compile(rule, ["self"]) for name, rule in RULES.items()}
    activation = {"self": OBJECT}
    results: dict = {"leak_baseline_bytes_per_python_call": round(leak_baseline(200_000), 1), "rules": {}}
    for name, program in programs.items():
        assert program.evaluate(activation) is True, name
        for _ in range(20_000):  # warm-up: arenas, caches
            program.evaluate(activation)
        gc.collect()
        before, start = rss(), time.perf_counter()
        samples = []
        for i in range(evaluations):
            program.evaluate(activation)
            if i % (evaluations // 10) == 0:
                samples.append(rss())
        elapsed = time.perf_counter() - start
        gc.collect()
        after = rss()
        results["rules"][name] = {
            "evaluations": evaluations,
            "python_calls_per_evaluation": program.python_calls,
            "rss_growth_bytes": after - before,
            "rss_growth_bytes_per_evaluation": round((after - before) / evaluations, 3),
            "rss_samples_mib": [round(s / 2**20, 1) for s in samples],
            "us_per_evaluation": round(elapsed / evaluations * 1e6, 2),
        }
    # the same "selected" rule without hoisting: its 7 library calls go through Python
    plain = programs["selected"]._fallback
    contrast = evaluations // 10
    for _ in range(2_000):
        plain.eval(data=activation)
    gc.collect()
    before = rss()
    for _ in range(contrast):
        plain.eval(data=activation)
    gc.collect()
    results["selected_without_hoisting"] = {
        "evaluations": contrast,
        "python_calls_per_evaluation": 7,
        "rss_growth_bytes_per_evaluation": round((rss() - before) / contrast, 1),
    }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=1_000_000, help="per rule (default 1,000,000)")
    args = parser.parse_args()
    print(json.dumps(run(args.evaluations), indent=2))


if __name__ == "__main__":
    main()
