"""Pass rate of each CEL backend on Kubernetes' library vectors, per library.

    python bench/cel_vectors.py [--engine cel-expr --engine cel-python] [--failures]

Both engines' replays are also the test suite (tests/cel/test_vectors.py, where each failing
vector is a strict xfail with its reason); this prints the pass rates side by side and the
failing vectors' ids.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cel import vectors  # noqa: E402


def pass_rates(engine: str, show_failures: bool) -> dict:
    total, passed, failing = collections.Counter(), collections.Counter(), []
    for vector in vectors.load():
        library = vector["library"]
        total[library] += 1
        try:
            problem = vectors.judge(engine, vector)
        except Exception as err:  # a backend crash counts as a failure
            problem = f"crash: {type(err).__name__}: {err}"
        if problem is None:
            passed[library] += 1
            continue
        failing.append(vector["id"])
        if show_failures:
            print(f"{engine} {vector['id']}: {vector['expression'][:80]!r}: {problem[:200]}", file=sys.stderr)
    by_library = {lib: f"{passed[lib]}/{total[lib]}" for lib in sorted(total)}
    return {"passed": sum(passed.values()), "total": sum(total.values()), "by_library": by_library, "failing": failing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", action="append", help="cel-expr and/or cel-python (default both)")
    parser.add_argument("--failures", action="store_true", help="list each failing vector on stderr")
    args = parser.parse_args()
    engines = args.engine or ["cel-expr", "cel-python"]
    print(json.dumps({engine: pass_rates(engine, args.failures) for engine in engines}, indent=2))


if __name__ == "__main__":
    main()
