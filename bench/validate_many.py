"""``infergate validate`` over a directory of many manifests: objects per second, and the ratio
to merely parsing the same YAML, in one run.

Writes N manifests (default 10,000; the example manifests of ``examples/manifests/valid``
with unique names, one per file, in the namespaces the example state admits) to a temporary
directory, then times, each as a fresh process (so startup — imports, CRDs, compiling the
policies, loading the state — is included, as a user sees it):

* baseline  — reading and parsing every file with libyaml (PyYAML's ``CSafeLoader``, no
  infergate code: the same for every checkout);
* validate  — ``infergate validate -f DIR -o FORMAT -j J`` for J = 1 and J = the CPUs available
  (every document through the whole chain: decode, mutating policies, schema + CEL,
  validating policies), FORMAT = json (default) or text (``--output``).

Wall time depends on the machine's load; CPU time (the process and its workers) does not,
so both are reported. ``--against CHECKOUT`` times that checkout's ``infergate validate`` too
(``--against-ref REF`` first exports the git revision REF, e.g. ``main``, into a temporary
directory with ``git archive``), alternating with this one ``--rounds`` times (A/B on the same
load), and reports the best of each and their ratio. Usage: python bench/validate_many.py
[--count N] [--keep DIR] [--output json|text] [--against DIR | --against-ref REF] [--rounds N]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from webhook.offline.parallel import available_cpus  # noqa: E402


def write_manifests(directory: Path, count: int) -> None:
    sources = sorted((REPO / "examples" / "manifests" / "valid").glob("*.yaml"))
    objects = [yaml.safe_load(p.read_text()) for p in sources]
    for i in range(count):
        obj = copy.deepcopy(objects[i % len(objects)])
        obj["metadata"]["name"] = f"{obj['metadata']['name']}-{i}"
        (directory / f"m{i:05d}.yaml").write_text(yaml.safe_dump(obj, sort_keys=False))


def timed(argv: list[str], repo: Path = REPO) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of the process and its children, the result), run in ``repo``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc


def _load_average() -> str:
    """The one-minute load average (the machine's other work), or ``?`` off Linux."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--keep", metavar="DIR", help="write the manifests here (and keep them)")
    parser.add_argument("--against", metavar="CHECKOUT", type=Path,
                        help="another checkout of infergate (e.g. main's) to time alternately with this one")
    parser.add_argument("--against-ref", metavar="REF",
                        help="a git revision of this repository (e.g. main), exported to time against")
    parser.add_argument("--rounds", type=int, default=1, help="alternations with --against (best of each)")
    parser.add_argument("--output", choices=("json", "text"), default="json", help="validate's -o (default json)")
    args = parser.parse_args()
    exported = None
    if args.against_ref:
        exported = Path(tempfile.mkdtemp(prefix="infergate-ref-"))
        archive = subprocess.run(["git", "archive", args.against_ref], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(exported)], input=archive.stdout, check=True)
        args.against = exported / args.against_ref.replace("/", "-")
        exported.joinpath(args.against.name).mkdir()
        for entry in list(exported.iterdir()):
            if entry != args.against:
                entry.rename(args.against / entry.name)
    directory = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="infergate-bench-"))
    directory.mkdir(parents=True, exist_ok=True)
    write_manifests(directory, args.count)
    py = sys.executable
    parse = [py, "-c", "import sys, os, yaml; L = yaml.CSafeLoader; d = sys.argv[1]; "
             "print(sum(1 for f in sorted(os.listdir(d)) for doc in yaml.load_all(open(os.path.join(d, f)).read(), L)"
             " if doc is not None))", str(directory)]
    wall, cpu, proc = timed(parse)
    assert proc.returncode == 0 and int(proc.stdout) == args.count, proc.stderr
    rows = [("baseline: parse the YAML", 1, wall, cpu)]
    cpus = available_cpus()
    load_start = _load_average()
    checkouts = [(f" ({REPO.name})" if args.against else "", REPO)] + ([(f" ({args.against.name})", args.against.resolve())] if args.against else [])
    best: dict[str, tuple[int, float, float]] = {}
    for _ in range(args.rounds if args.against else 1):
        for jobs in sorted({1, cpus}):
            for label, repo in checkouts:
                argv = [py, "-m", "webhook", "validate", "-f", str(directory), "-o", args.output, "-j", str(jobs)]
                wall, cpu, proc = timed(argv, repo)
                if args.output == "json":
                    answers = json.loads(proc.stdout)
                    assert len(answers) == args.count and all(a["allowed"] for a in answers), proc.stderr[-2000:]
                else:
                    assert proc.stdout.count(" valid\n") == args.count, proc.stdout[-2000:]
                assert proc.returncode == 0, proc.stderr[-2000:]
                name = f"infergate validate -j {jobs}{label}"
                if name not in best or wall < best[name][1]:
                    best[name] = (jobs, wall, cpu)
    rows += [(name, jobs, wall, cpu) for name, (jobs, wall, cpu) in best.items()]
    print(f"{args.count} manifests, {cpus} CPUs available, load average {load_start} at the start, "
          f"{_load_average()} at the end\n")
    print("| run | wall | objects/s (wall) | CPU | objects per CPU-second | wall / baseline | CPU / baseline |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    _, _, base_wall, base_cpu = rows[0]
    for name, _, wall, cpu in rows:
        print(f"| {name} | {wall:.1f} s | {args.count / wall:,.0f} | {cpu:.1f} s | {args.count / cpu:,.0f} | "
              f"{wall / base_wall:.1f}× | {cpu / base_cpu:.1f}× |")
    if args.against:
        print(f"\nthis checkout against {args.against.name} (best of {args.rounds}; < 1 is faster):")
        for jobs in sorted({1, cpus}):
            mine, theirs = best[f"infergate validate -j {jobs} ({REPO.name})"], \
                best[f"infergate validate -j {jobs} ({args.against.name})"]
            print(f"  -j {jobs}: wall {mine[1] / theirs[1]:.3f}×, CPU {mine[2] / theirs[2]:.3f}×")
    if not args.keep:
        shutil.rmtree(directory)
    if exported is not None:
        shutil.rmtree(exported)
    return 0


if __name__ == "__main__":
    sys.exit(main())
