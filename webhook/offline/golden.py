"""``infergate test --update``: record the current answers into a policy suite file.

The file is edited round-trip (ruamel.yaml): comments, key order and quoting of everything
else stay as written. Only the ``expect`` of cases that failed or had none is rewritten, so
hand-written checks (regular expressions, a chosen subset) of passing cases are kept.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from webhook.offline.policy_suites import PolicyCaseResult, recorded_expectation

# keys --update owns; others in an ``expect`` (message, errorsMatch) are the author's
_RECORDED = ("allowed", "errors", "warnings", "patched", "auditAnnotations", "actions")


def _yaml() -> YAML:
    yaml = YAML()  # round-trip
    yaml.preserve_quotes = True
    yaml.width = 4096  # never fold long messages
    yaml.indent(mapping=2, sequence=2, offset=0)
    # ``[{number: 8000}]`` stays as written: ruamel would drop the braces of a one-key mapping in a
    # flow sequence (``[number: 8000]``, the same value, not the author's text)
    yaml.brace_single_entry_mapping_in_flow_sequence = True
    return yaml


def update_suite_file(path: Path, results: list[PolicyCaseResult]) -> list[str]:
    """Rewrite the expectations of ``results`` that failed or had none; the names of the cases updated."""
    stale = {r.name: r for r in results if r.outcome is not None and (not r.passed or not r.expected)}
    if not stale:
        return []
    yaml = _yaml()
    document = yaml.load(path.read_text(encoding="utf-8"))
    updated = []
    for case in document.get("cases") or ():
        result = stale.get(case.get("name"))
        if result is None:
            continue
        _record(case, recorded_expectation(result.outcome), result.outcome)
        updated.append(result.name)
    buffer = io.StringIO()
    yaml.dump(document, buffer)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return updated


def _record(case: CommentedMap, answer: dict[str, Any], outcome: Any) -> None:
    expect = case.get("expect")
    if not isinstance(expect, CommentedMap):
        expect = CommentedMap()
        case["expect"] = expect
    expect.fa.set_block_style()  # an ``expect: {}`` written inline would hold the whole object on one line
    for key in _RECORDED:
        if key in answer:
            expect[key] = answer[key]
        elif key in expect:
            del expect[key]
    status = outcome.status or {}
    for key in ("code", "reason"):  # kept only where the author asked for them
        if key in expect:
            if status.get(key) is None:
                del expect[key]
            else:
                expect[key] = status[key]
