"""What every kind of ``infergate test`` suite shares: reading a suite file, its cases and their
results, and comparing answers (recorded suites: ``recorded_suites.py``; policy suites: ``policy_suites.py``)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from webhook import documents
from webhook.documents import Document
from webhook.schema import CRDRegistry

if TYPE_CHECKING:
    from webhook.cel import Evaluator


class SuiteError(ValueError):
    """A suite file that cannot be read or does not follow the format."""


class NotASuite(SuiteError):
    """A YAML file without ``cases`` or ``probes`` (skipped when found while walking a directory)."""


@dataclass
class CaseResult:
    suite: str
    name: str
    problems: list[str] = field(default_factory=list)
    erroneous: bool = False  # the case itself is wrong (no expectation): an input error, not a failure
    expected: bool = True  # False: the case has no expectation yet (``--update`` records one)
    line: int | None = None  # where its case starts in the suite file

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass
class Case:
    """One runnable case of a suite."""

    suite: "Suite"
    name: str
    data: dict[str, Any]
    run: Callable[["Case"], CaseResult]
    line: int | None = None  # where the case starts in the suite file

    def execute(self) -> CaseResult:
        try:
            result = self.run(self)
        except Exception as exc:  # a crash is a failing case with its reason, never a traceback
            result = CaseResult(self.suite.title, self.name, [f"crashed: {type(exc).__name__}: {exc}"])
        result.line = self.line
        return result


@dataclass
class Suite:
    path: Path
    title: str
    cases: list[Case]
    registry: CRDRegistry | None = None
    evaluator: Evaluator | None = None   # what its cases evaluate CEL with (a CRD probe's rules)


def read_suite_file(path: Path) -> Document:
    """A suite file's one document, with the line of every key (errors and results name it)."""
    parsed = documents.read_file(path).parse(node_lines=True, unwrap_lists=False)
    if parsed.error is not None:
        raise SuiteError(str(parsed.error))
    if not parsed.documents:
        raise NotASuite(f"{path}: not a suite (the file is empty)")
    return parsed.documents[0]


def multiset_diff(what: str, expected: list[str], actual: list[str]) -> list[str]:
    missing = Counter(expected) - Counter(actual)
    extra = Counter(actual) - Counter(expected)
    problems = []
    for text in missing.elements():
        problems.append(f"{what}: missing  {text}")
    for text in extra.elements():
        problems.append(f"{what}: extra    {text}")
    return problems


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def object_diff(expected: Any, actual: Any, path: str = "stored") -> list[str]:
    """Differences between two objects, one line per differing path."""
    if _same(expected, actual):
        return []
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        for key in sorted(set(expected) | set(actual)):
            sub = f"{path}.{key}"
            if key not in actual:
                out.append(f"{sub}: missing (expected {_short(expected[key])})")
            elif key not in expected:
                out.append(f"{sub}: unexpected {_short(actual[key])}")
            else:
                out += object_diff(expected[key], actual[key], sub)
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        out = []
        for i, (x, y) in enumerate(zip(expected, actual)):
            out += object_diff(x, y, f"{path}[{i}]")
        return out
    return [f"{path}: expected {_short(expected)}, got {_short(actual)}"]


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 160 else text[:157] + "..."
