"""The rules of ``docs/decisions.md`` and the scenarios that exercise them.

A scenario names the rule it proves with ``@pytest.mark.decision(section, phrase)``: the
section heading and a phrase found in exactly one rule of it. A rule is a table row, a list
item or a numbered answer under a ``## `` heading (the introduction above the first heading
holds none). The normal suite checks that every rule is named
by at least one scenario and every marker names exactly one rule, so the e2e scenarios and
the decisions cannot drift apart unnoticed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .cluster import REPO

DECISIONS = REPO / "docs" / "decisions.md"
MARKER = "decision"

_ITEM = re.compile(r"^(?:- |\d+\. |\| (?!-)(?!kind \|))")


@dataclass(frozen=True)
class Rule:
    section: str
    text: str

    def __str__(self) -> str:
        return f"{self.section}: {self.text[:90]}"


def rules(markdown: str) -> list[Rule]:
    found: list[Rule] = []
    section, current = "", None
    for line in markdown.splitlines():
        if line.startswith("## "):
            section, current = line[3:].strip(), None
        elif section and _ITEM.match(line):
            current = [line]
            found.append(Rule(section, line))
        elif current is not None and line.startswith("  ") and line.strip():
            found[-1] = Rule(section, found[-1].text + " " + line.strip())
        else:
            current = None
    return found


def matching(all_rules: list[Rule], section: str, phrase: str) -> list[Rule]:
    return [r for r in all_rules if r.section == section and phrase in r.text]
