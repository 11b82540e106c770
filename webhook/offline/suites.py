"""``infergate test PATH...``: run suite files and report what differs.

Two kinds of suite: recorded apiserver cases (``cases.py``, the format of the shared
recordings) and user policy suites (``kind: PolicySuite``, ``policy_suites.py``). Reports for
CI (``-o junit|json``: ``report.py``), rule coverage (``--coverage``: ``coverage.py``) and
golden files (``--update``: ``golden.py``) work on the results of either.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from webhook.offline.cases import NotASuite, SuiteError, load_suite, suite_files
from webhook.offline.report import SuiteReport, json_report, junit_xml
from webhook.schema.bundled import DEFAULT_KUBEAI_CRD, KUBEAI_CRDS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="suite files or directories (searched recursively)")
    parser.add_argument("--crd", action="append", default=[], metavar="DIR",
                        help="load CRDs from DIR instead of each suite's 'crds:' list (repeatable)")
    parser.add_argument("--crd-only", action="store_true",
                        help="the apiserver's own handling only (no webhook policies)")
    parser.add_argument("--kubeai-crd", choices=list(KUBEAI_CRDS),
                        help="the bundled KubeAI Model CRD for policy suites that name no CRDs "
                             f"(default {DEFAULT_KUBEAI_CRD}: the current one)")
    parser.add_argument("--run", metavar="REGEX",
                        help="run only the cases whose name (or <suite>/<name>) matches REGEX")
    parser.add_argument("-o", "--output", choices=["text", "junit", "json"], default="text",
                        help="junit/json: the report on stdout, failures and the summary on stderr")
    parser.add_argument("--update", action="store_true",
                        help="record the current answers into policy suites whose cases fail or expect nothing")
    parser.add_argument("--coverage", action="store_true",
                        help="report which policy rules (validations, warnings, mutations, audit annotations) "
                             "the cases hit and which they never hit")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only failures and the summary")


def run(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"error: no such file or directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        selected = re.compile(args.run) if args.run else None
    except re.error as exc:
        print(f"error: --run: invalid regular expression: {exc}", file=sys.stderr)
        return 2
    log = sys.stdout if args.output == "text" else sys.stderr  # the human-readable lines
    coverage = None
    if args.coverage:
        from webhook.offline.coverage import Coverage

        coverage = Coverage()
    crd_dirs = [Path(d) for d in args.crd] or None
    reports: list[SuiteReport] = []
    passed = failed = suites = 0
    for file, named in suite_files(paths):
        try:
            suite = load_suite(file, crd_dirs, kubeai_crd=args.kubeai_crd)
        except NotASuite as exc:
            if not named:
                continue  # other YAML beside the suites (CRDs, notes) is not an error
            print(f"error: {exc}", file=sys.stderr)
            reports.append(SuiteReport(file, file.stem, error=str(exc)))
            failed += 1
            continue
        except SuiteError as exc:
            print(f"error: {exc}", file=sys.stderr)
            reports.append(SuiteReport(file, file.stem, error=str(exc)))
            failed += 1
            continue
        suites += 1
        if args.crd_only and hasattr(suite, "crd_only"):
            suite.crd_only = True
        report = SuiteReport(file, suite.title)
        reports.append(report)
        if coverage is not None:
            coverage.add_policies(getattr(suite, "policies", ()))
        for case in suite.cases:
            if selected and not (selected.search(case.name) or selected.search(f"{suite.title}/{case.name}")):
                continue
            start = time.perf_counter()
            result = case.execute()
            report.results.append((result, time.perf_counter() - start))
            outcome = getattr(result, "outcome", None)
            if coverage is not None and outcome is not None:
                coverage.record(outcome.traces)
        if args.update:
            _update(file, report, log)
        suite_passed = sum(1 for r, _ in report.results if r.passed)
        passed += suite_passed
        failed += len(report.results) - suite_passed
        for result, _ in report.results:
            if not result.passed:
                print(f"FAIL {file.name}: {result.name}", file=log)
                for problem in result.problems:
                    print(f"    {problem}", file=log)
        if not args.quiet:
            print(f"{file}: {suite_passed}/{len(report.results)} passed", file=log)
    if not passed and not failed:
        if selected and suites:
            print(f"error: no case matches --run {args.run}", file=sys.stderr)
        else:
            print("error: no suite files (with 'cases' or 'probes') under " + ", ".join(args.paths), file=sys.stderr)
        return 2
    if args.output == "junit":
        sys.stdout.write(junit_xml(reports))
    elif args.output == "json":
        sys.stdout.write(json_report(reports, passed, failed, coverage.as_dict() if coverage else None))
    if coverage is not None and args.output != "json":
        print(coverage.render(), file=log)
    print(f"{passed} passed, {failed} failed", file=log)
    return 1 if failed else 0


def _update(file: Path, report: SuiteReport, log) -> None:
    """``--update``: record the answers of failing (or expectation-less) policy cases into ``file``."""
    from webhook.offline.policy_suites import PolicyCaseResult

    results = [r for r, _ in report.results if isinstance(r, PolicyCaseResult)]
    if not results:
        if any(not r.passed for r, _ in report.results):
            print(f"{file}: not updated: --update rewrites policy suites only (this one is a recording)", file=log)
        return
    from webhook.offline.golden import update_suite_file

    updated = update_suite_file(file, results)
    for result in results:
        if result.name in updated:
            result.problems.clear()
    if updated:
        print(f"{file}: recorded the answers of {len(updated)} case(s): {', '.join(updated)}", file=log)
