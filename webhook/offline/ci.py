"""Results in the formats CI systems read: JUnit XML, GitHub workflow commands, SARIF 2.1.0.

``infergate validate`` and ``infergate test`` both describe their results as
:class:`Finding` s (one per document or case, with its file and line) and print them here.
A finding may carry its problems one by one and its warnings, each a :class:`Note` naming the
rule that said it: ``<policy>/<rule>`` for an admission policy's (``validations[2]``,
``warnings[0]``), ``kube-apiserver/<reason>`` for the apiserver's own (``FieldValueInvalid``,
``unknown-field``, ``RequestEntityTooLarge``, ``warning``). GitHub gets one ``::error`` per
failed finding and one ``::warning`` per warning; SARIF one result per problem (level
``error``) and per warning (level ``warning``), every rule listed in the driver. A skipped
finding may warn too (``validate``'s near miss of a known kind): JUnit ``<skipped>`` with the
message, a ``::warning``, a SARIF ``warning``. JUnit's ``time`` is each finding's ``seconds``.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal

Status = Literal["passed", "failed", "error", "skipped"]


@dataclass(frozen=True)
class Note:
    """One problem or warning of a finding and the rule that said it (a SARIF ruleId)."""

    text: str
    rule: str


@dataclass(frozen=True)
class Finding:
    """One result: a document judged, a case run, or a problem reading one."""

    group: str  # the JUnit test suite: the file
    name: str  # the JUnit test case: the object or case
    status: Status
    file: str
    line: int | None
    message: str = ""  # failed/error/skipped: why (the first line is the summary)
    rule: str = ""  # SARIF ruleId: what kind of problem (denied, invalid-yaml, ...)
    seconds: float = 0.0
    problems: tuple[Note, ...] = ()  # a failed finding's problems one by one (SARIF: one result each)
    warnings: tuple[Note, ...] = ()


def junit_xml(findings: Iterable[Finding], name: str) -> str:
    """One ``<testsuite>`` per group (file), one ``<testcase>`` per finding: a denial or failed case
    is a ``<failure>``, a problem reading it an ``<error>``, a skipped document ``<skipped>``."""
    root = ET.Element("testsuites", name=name)
    suites: dict[str, ET.Element] = {}
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    times: dict[str, float] = {}
    for finding in findings:
        suite = suites.get(finding.group)
        if suite is None:
            suite = suites[finding.group] = ET.SubElement(root, "testsuite", name=finding.group)
            suite.attrib.update(tests="0", failures="0", errors="0", skipped="0")
            times[finding.group] = 0.0
        attributes = {"classname": finding.group, "name": finding.name, "time": f"{finding.seconds:.3f}",
                      "file": finding.file}
        if finding.line is not None:
            attributes["line"] = str(finding.line)
        case = ET.SubElement(suite, "testcase", attributes)
        counter = {"failed": "failures", "error": "errors", "skipped": "skipped"}.get(finding.status)
        if counter is not None:
            tag = {"failures": "failure", "errors": "error", "skipped": "skipped"}[counter]
            first = finding.message.splitlines()[0] if finding.message else finding.status
            child = ET.SubElement(case, tag, message=first[:200])
            if tag != "skipped" or finding.warnings:  # a skip that warns carries its words whole
                child.text = finding.message
            suite.set(counter, str(int(suite.get(counter)) + 1))
            totals[counter] += 1
        suite.set("tests", str(int(suite.get("tests")) + 1))
        totals["tests"] += 1
        times[finding.group] += finding.seconds
    for group, suite in suites.items():
        suite.set("time", f"{times[group]:.3f}")
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{sum(times.values()):.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _escape_data(text: str) -> str:
    # the runner's own escaping (actions/toolkit, command.ts): '%' first, then the line breaks
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _properties(finding: Finding, title: str) -> str:
    properties = f"file={_escape_property(finding.file)}"
    if finding.line is not None:
        properties += f",line={finding.line}"
    return properties + f",title={_escape_property(title)}"


def github_annotation(finding: Finding) -> str | None:
    """The ``::error`` workflow command that annotates ``finding`` in a pull request's files, or
    None (passed and skipped results need no annotation)."""
    if finding.status not in ("failed", "error"):
        return None
    return f"::error {_properties(finding, finding.name)}::{_escape_data(finding.message)}"


def github_annotations(finding: Finding) -> list[str]:
    """Every workflow command for ``finding``: its ``::error`` if it failed, then one ``::warning``
    per warning, titled with the object and the rule."""
    error = github_annotation(finding)
    out = [error] if error else []
    for note in finding.warnings:
        title = f"{finding.name} ({note.rule})" if finding.name else note.rule
        out.append(f"::warning {_properties(finding, title)}::{_escape_data(note.text)}")
    return out


SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

_RULES = {
    "denied": "The cluster would refuse the write (the CRD's schema or rules, or an admission policy)",
    "case-failed": "A policy test case's answer differs from its expectation",
    "input-error": "A file or document that cannot be used (broken YAML, unreadable; with --strict a kind "
                   "with no schema), or a test case that checks nothing",
    "kube-apiserver/unknown-field": "A field the kind's schema does not have (kube-apiserver's field validation: "
                                    "Strict refuses it, Warn warns)",
    "kube-apiserver/warning": "A warning kube-apiserver sends with its answer",
    "near-miss": "A document skipped, no schema serving its apiVersion and kind, which are a near miss of a "
                 "served kind (a typo the cluster would refuse: no matches for kind)",
}


def rule_description(rule: str) -> str:
    """What a rule id means, for the SARIF driver's list."""
    if rule in _RULES:
        return _RULES[rule]
    owner, _, name = rule.partition("/")
    if owner == "kube-apiserver":
        return f"kube-apiserver refuses the object: {name} (its schema, CRD rules, limits or decoding)"
    return f"Admission policy {owner}, rule {name}" if name else f"Admission policy {owner}"


def _result(rule: str, index: int, level: str, text: str, finding: Finding) -> dict:
    location = {"physicalLocation": {"artifactLocation": {"uri": _uri(finding.file)}}}
    if finding.line is not None:
        location["physicalLocation"]["region"] = {"startLine": finding.line}
    return {"ruleId": rule, "ruleIndex": index, "level": level,
            "message": {"text": f"{finding.name}: {text}" if finding.name else text}, "locations": [location]}


def sarif(findings: Iterable[Finding], *, version: str) -> str:
    """A SARIF 2.1.0 log (GitHub code scanning reads it): one result per problem of a failed or
    erroneous finding (level ``error``; the finding's message when it lists none) and per warning
    (level ``warning``), its location the file and line, its rule listed in the driver."""
    rules_used: dict[str, int] = {}
    results = []
    for finding in findings:
        if finding.status in ("failed", "error"):
            problems = finding.problems or (
                Note(finding.message, finding.rule or ("denied" if finding.status == "failed" else "input-error")),)
            for note in problems:
                index = rules_used.setdefault(note.rule, len(rules_used))
                results.append(_result(note.rule, index, "error", note.text, finding))
        for note in finding.warnings:
            index = rules_used.setdefault(note.rule, len(rules_used))
            results.append(_result(note.rule, index, "warning", note.text, finding))
    rules = [{"id": rule, "shortDescription": {"text": rule_description(rule)}} for rule in rules_used]
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "infergate", "version": version, "rules": rules}},
            "results": results,
        }],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _uri(file: str) -> str:
    """The file as a URI reference: relative to the working directory when it lies under it (code
    scanning resolves results against the repository's root, where CI runs), forward slashes,
    ``%`` and spaces escaped."""
    from urllib.parse import quote

    path = Path(file)
    if path.is_absolute():
        try:
            file = str(path.relative_to(Path.cwd()))
        except ValueError:
            pass
    return quote(file.replace("\\", "/"), safe="/:._-~")
