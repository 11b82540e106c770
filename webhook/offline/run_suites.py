"""``infergate test PATH...``: run suite files and report what differs.

Two kinds of suite: recorded apiserver cases (``recorded_suites.py``, the format of the shared
recordings) and user policy suites (``kind: PolicySuite``, ``policy_suites.py``). Reports for
CI (``-o junit|json``: ``ci.py``, ``suite_results.py``), rule coverage (``--coverage``:
``coverage.py``) and golden files (``--update``: ``golden.py``) work on the results of either.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from webhook import command_line, documents
from webhook.documents import Document
from webhook.offline.recorded_suites import is_recorded_suite, load_recorded_suite
from webhook.offline.ci import Finding, github_annotation, junit_xml, sarif
from webhook.offline.suite_results import SuiteRun, results_json
from webhook.offline.suite_cases import NotASuite, Suite, SuiteError, read_suite_file
from webhook.schema.bundled import DEFAULT_KUBEAI_CRD, KUBEAI_CRDS

if TYPE_CHECKING:
    from webhook.cel import Evaluator

DESCRIPTION = """\
Run test suites: user policy suites (kind: PolicySuite — writes and the answers you expect, through
the same admission chain the webhook runs) and recorded apiserver cases. A failing case prints
what differs, with its file and line; the last line is "N passed, M failed". A case without an
expect is an error (record one with --update)."""

EXAMPLES = """\
infergate test policies/tests                          # every suite under the directory
infergate test policies/tests --coverage               # and which policy rules the cases never hit
infergate test policies/tests --min-coverage 90        # fail the run below 90% of the rules hit
infergate test policies/tests -o junit > report.xml    # JUnit XML for CI (failures and summary on stderr)
infergate test policies/tests -o github                # GitHub Actions annotations on the failing cases
infergate test my-suite.yaml --update                  # record the current answers as the expectation
"""

OUTPUTS = ("text", "junit", "json", "github", "sarif")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.epilog = command_line.epilog(EXAMPLES)
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="suite files or directories (searched recursively for .yaml/.yml)")
    parser.add_argument("-f", "--filename", action="append", default=[], metavar="PATH",
                        help="the same as a PATH argument; repeatable")
    parser.add_argument("--crd", action="append", default=[], metavar="PATH",
                        help="load CRDs from PATH instead of each suite's 'crds:' list (repeatable)")
    parser.add_argument("--crd-only", action="store_true",
                        help="the apiserver's own handling only (no webhook policies)")
    parser.add_argument("--kubeai-crd", choices=list(KUBEAI_CRDS),
                        help="the bundled KubeAI Model CRD for policy suites that name no CRDs "
                             f"(default {DEFAULT_KUBEAI_CRD}: the current one)")
    parser.add_argument("--run", metavar="REGEX",
                        help="run only the cases whose name (or <suite>/<name>) matches REGEX")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text",
                        help="text (default), junit (JUnit XML), json (every answer), github (workflow command "
                             "annotations), sarif (SARIF 2.1.0); for junit/json/sarif the report is on stdout, "
                             "failures and the summary on stderr")
    parser.add_argument("--update", action="store_true",
                        help="record the current answers into policy suites whose cases fail or expect nothing")
    parser.add_argument("--coverage", action="store_true",
                        help="report which policy rules (validations, warnings, mutations, audit annotations) "
                             "the cases hit and which they never hit (information: --min-coverage is the gate)")
    parser.add_argument("--min-coverage", type=_percent, metavar="PCT",
                        help="fail the run (exit 1) when the cases hit fewer than PCT percent of the policies' rules")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only failures and the summary")


def _percent(value: str) -> float:
    try:
        number = float(value.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {value!r}") from None
    if not 0 <= number <= 100:
        raise argparse.ArgumentTypeError(f"a percentage is between 0 and 100, not {value}")
    return number


SUITE_SUFFIXES = (".yaml", ".yml")


def suite_files(paths: Iterable[Path]) -> list[tuple[Path, bool]]:
    """(file, named directly): files named on the command line, and every ``*.yaml``/``*.yml``
    under directories (recursively, as ``webhook.documents`` finds files)."""
    out: list[tuple[Path, bool]] = []
    for path in paths:
        if path.is_dir():
            out += [(p, False) for p in documents.manifest_files(path, SUITE_SUFFIXES)]
        else:
            out.append((path, True))
    return out


def load_suite(path: Path, evaluator: Evaluator, crds: tuple[Path, ...] | None = None, *,
               kubeai_crd: str | None = None) -> Suite:
    """Any suite file: a policy suite (``kind: PolicySuite``) or a recorded one (``cases``/``probes``),
    its CEL evaluated with ``evaluator``; ``crds``: CRD files and directories in place of each
    suite's ``crds:`` (``--crd``); ``kubeai_crd``: the bundled KubeAI Model CRD for policy
    suites that name no CRDs."""
    document: Document = read_suite_file(path)
    data = document.content
    if isinstance(data, dict) and data.get("kind") == "PolicySuite":
        # imported when a policy suite is met: recorded suites need none of its models (pydantic's
        # start-up, plugin discovery over sys.path)
        from webhook.offline.policy_suites import load_policy_suite

        return load_policy_suite(path, data, evaluator, crds, document=document, kubeai_crd=kubeai_crd)
    if is_recorded_suite(data):
        return load_recorded_suite(document, evaluator, crds)
    raise NotASuite(f"{path}: not a suite (expected kind: PolicySuite, or a mapping with 'cases' or 'probes')")


NO_EXPECT = "no expect: the case checks nothing (record its answer with --update)"


@dataclass(frozen=True)
class SuitesConfig:
    """What ``infergate test`` runs with, from its flags (checked by :meth:`from_flags`)."""

    evaluator: Evaluator
    paths: tuple[Path, ...]  # suite files and directories
    crds: tuple[Path, ...] | None = None  # --crd: in place of each suite's ``crds:``
    kubeai_crd: str | None = None  # for policy suites that name no CRDs
    crd_only: bool = False
    selected: re.Pattern[str] | None = None  # --run
    output: str = "text"
    update: bool = False
    coverage: bool = False  # --coverage: report it
    min_coverage: float | None = None  # the gate
    quiet: bool = False

    @classmethod
    def from_flags(cls, args: argparse.Namespace, evaluator: Evaluator) -> SuitesConfig:
        """The configuration of ``add_arguments``' flags; ``ValueError`` (one line) for a wrong one."""
        paths = tuple(Path(p) for p in [*args.paths, *args.filename])
        if not paths:
            raise ValueError("test: no suites: give suite files or directories")
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise ValueError(f"no such file or directory: {', '.join(missing)}")
        try:
            selected = re.compile(args.run) if args.run else None
        except re.error as exc:
            raise ValueError(f"--run: invalid regular expression: {exc}") from None
        return cls(evaluator=evaluator, paths=paths, crds=tuple(Path(d) for d in args.crd) or None,
                   kubeai_crd=args.kubeai_crd, crd_only=args.crd_only, selected=selected, output=args.output,
                   update=args.update, coverage=args.coverage, min_coverage=args.min_coverage, quiet=args.quiet)


def run(args: argparse.Namespace) -> int:
    try:
        config = SuitesConfig.from_flags(args, args.evaluator)
    except ValueError as exc:
        return command_line.error(str(exc))
    paths, selected = list(config.paths), config.selected
    log = sys.stdout if config.output in ("text", "github") else sys.stderr  # the human-readable lines
    coverage = None
    if config.coverage or config.min_coverage is not None:
        from webhook.offline.coverage import Coverage

        coverage = Coverage()
    runs: list[SuiteRun] = []
    findings: list[Finding] = []
    suites = 0
    for file, named in suite_files(paths):
        try:
            suite = load_suite(file, config.evaluator, config.crds, kubeai_crd=config.kubeai_crd)
        except SuiteError as exc:
            if isinstance(exc, NotASuite) and not named:
                continue  # other YAML beside the suites (CRDs, notes) is not an error
            command_line.error(str(exc))
            runs.append(SuiteRun(file, file.stem, error=str(exc)))
            findings.append(Finding(str(file), "(load)", "error", str(file), _line_of(str(exc), file), str(exc),
                                    "input-error"))
            if config.output == "github":
                print(github_annotation(findings[-1]), file=log)
            continue
        suites += 1
        if config.crd_only and hasattr(suite, "crd_only"):
            suite.crd_only = True
        suite_run = _execute(suite, selected, coverage)
        runs.append(suite_run)
        if config.update:
            _update(file, suite_run, log)
        for result, _ in suite_run.results:
            if not result.expected and not config.update:
                result.problems.append(NO_EXPECT)
                result.erroneous = True
        findings += _print_suite(suite_run, config, log)
    counts = Counter(f.status for f in findings)
    passed, failed, errors = counts["passed"], counts["failed"], counts["error"]
    if not passed and not failed and not errors:
        if selected and suites:
            return command_line.error(f"no case matches --run {selected.pattern}")
        return command_line.error("no suite files (with 'cases' or 'probes') under " + ", ".join(map(str, paths)))
    if config.output == "junit":
        sys.stdout.write(junit_xml(findings, "infergate test"))
    elif config.output == "sarif":
        from webhook import __version__

        sys.stdout.write(sarif(findings, version=__version__))
    elif config.output == "json":
        sys.stdout.write(results_json(runs, passed, failed, coverage.as_dict() if coverage else None))
    below = False
    if coverage is not None:
        if config.coverage and config.output != "json":
            print(coverage.render(), file=log)
        if config.min_coverage is not None:  # --coverage informs; --min-coverage is the gate
            below = coverage.percent < config.min_coverage
            verdict = "below" if below else "at least"
            print(f"rule coverage {coverage.percent:.1f}% is {verdict} --min-coverage {config.min_coverage:g}%",
                  file=log)
    print(f"{passed} passed, {failed} failed" + (f", {errors} error{'s' if errors != 1 else ''}" if errors else ""),
          file=log)
    if errors:
        return command_line.USAGE
    return command_line.FAILED if failed or below else command_line.OK


def _execute(suite: Suite, selected: re.Pattern[str] | None, coverage) -> SuiteRun:
    """Run the suite's cases (those ``--run`` selects), timing each; their traces feed ``coverage``."""
    suite_run = SuiteRun(suite.path, suite.title)
    if coverage is not None:
        coverage.add_policies(getattr(suite, "policies", ()))
    for case in suite.cases:
        if selected and not (selected.search(case.name) or selected.search(f"{suite.title}/{case.name}")):
            continue
        start = time.perf_counter()
        result = case.execute()
        suite_run.results.append((result, time.perf_counter() - start))
        outcome = getattr(result, "outcome", None)
        if coverage is not None and outcome is not None:
            coverage.record(outcome.traces)
    return suite_run


def _print_suite(suite_run: SuiteRun, config: SuitesConfig, log) -> list[Finding]:
    """Print a suite's failing cases (``FAIL file:line: name`` and what differs) and its tally;
    the findings of every case."""
    paint = command_line.Painter(log)
    findings = []
    for result, took in suite_run.results:
        where = f"{suite_run.file}:{result.line}" if result.line is not None else str(suite_run.file)
        status = "passed" if result.passed else "error" if result.erroneous else "failed"
        finding = Finding(suite_run.title, result.name, status, str(suite_run.file), result.line,
                          "\n".join(result.problems), "case-failed" if status == "failed" else "input-error", took)
        findings.append(finding)
        if result.passed:
            continue
        print(f"{paint('ERROR' if result.erroneous else 'FAIL', 'red')} {where}: {result.name}", file=log)
        for problem in result.problems:
            print(f"    {problem}", file=log)
        if config.output == "github":
            print(github_annotation(finding), file=log)
    if not config.quiet:
        passed = sum(1 for r, _ in suite_run.results if r.passed)
        print(f"{suite_run.file}: {passed}/{len(suite_run.results)} passed", file=log)
    return findings


def _line_of(message: str, file: Path) -> int | None:
    """The line a load error names (``file:LINE: ...``), if it names one."""
    head = message.split(": ", 1)[0]
    prefix = f"{file}:"
    return int(head[len(prefix):]) if head.startswith(prefix) and head[len(prefix):].isdigit() else None


def _update(file: Path, suite_run: SuiteRun, log) -> None:
    """``--update``: record the answers of failing (or expectation-less) policy cases into ``file``."""
    from webhook.offline.policy_suites import PolicyCaseResult

    results = [r for r, _ in suite_run.results if isinstance(r, PolicyCaseResult)]
    if not results:
        if any(not r.passed for r, _ in suite_run.results):
            print(f"{file}: not updated: --update rewrites policy suites only (this one is a recording)", file=log)
        return
    from webhook.offline.golden import update_suite_file

    updated = update_suite_file(file, results)
    for result in results:
        if result.name in updated:
            result.problems.clear()
            result.expected = True
    if updated:
        print(f"{file}: recorded the answers of {len(updated)} case(s): {', '.join(updated)}", file=log)
