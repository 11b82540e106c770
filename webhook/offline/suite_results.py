"""The results of an ``infergate test`` run, suite by suite, and their JSON output
(``-o json``): every suite, every case's whole answer, the coverage (the CI formats, JUnit,
GitHub and SARIF, are ``ci.py``'s)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webhook.offline.suite_cases import CaseResult


@dataclass
class SuiteRun:
    file: Path
    title: str
    results: list[tuple[CaseResult, float]] = field(default_factory=list)  # (result, seconds)
    error: str | None = None  # the suite could not be loaded

    @property
    def failed(self) -> int:
        return sum(1 for r, _ in self.results if not r.passed) + (1 if self.error else 0)


def _case_json(result: CaseResult, took: float) -> dict[str, Any]:
    out: dict[str, Any] = {"name": result.name, "passed": result.passed, "problems": result.problems,
                           "seconds": round(took, 4), "line": result.line}
    outcome = getattr(result, "outcome", None)
    if outcome is not None:  # policy suites: the whole answer
        out["answer"] = {"allowed": outcome.allowed, "status": outcome.status, "warnings": outcome.warnings,
                         "patch": outcome.patch, "object": outcome.object,
                         "auditAnnotations": outcome.audit_annotations, "actions": outcome.actions}
    return out


def results_json(runs: list[SuiteRun], passed: int, failed: int, coverage: dict[str, Any] | None) -> str:
    out: dict[str, Any] = {
        "passed": passed,
        "failed": failed,
        "suites": [{"file": str(r.file), "name": r.title, "error": r.error,
                    "cases": [_case_json(res, took) for res, took in r.results]} for r in runs],
    }
    if coverage is not None:
        out["coverage"] = coverage
    return json.dumps(out, indent=2, ensure_ascii=False, default=str) + "\n"
