"""``infergate test PATH...``: run suite files of recorded cases and report what differs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from webhook.offline.cases import NotASuite, SuiteError, load_suite, suite_files


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="suite files or directories (searched recursively)")
    parser.add_argument("--crd", action="append", default=[], metavar="DIR",
                        help="load CRDs from DIR instead of each suite's 'crds:' list (repeatable)")
    parser.add_argument("--crd-only", action="store_true",
                        help="the apiserver's own handling only (no webhook policies)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only failures and the summary")


def run(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"error: no such file or directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    crd_dirs = [Path(d) for d in args.crd] or None
    passed = failed = 0
    for file, named in suite_files(paths):
        try:
            suite = load_suite(file, crd_dirs)
        except NotASuite as exc:
            if not named:
                continue  # other YAML beside the suites (CRDs, notes) is not an error
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        except SuiteError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        suite_passed = 0
        for case in suite.cases:
            result = case.execute()
            if result.passed:
                passed += 1
                suite_passed += 1
                continue
            failed += 1
            print(f"FAIL {file.name}: {result.name}")
            for problem in result.problems:
                print(f"    {problem}")
        if not args.quiet:
            print(f"{file}: {suite_passed}/{len(suite.cases)} passed")
    if not passed and not failed:
        print("error: no suite files (with 'cases' or 'probes') under " + ", ".join(args.paths), file=sys.stderr)
        return 2
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
