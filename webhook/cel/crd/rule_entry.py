"""One ``x-kubernetes-validations`` entry as the apiserver checks it before compiling it, and how
its error messages print the rule struct (other values as ``webhook.gocompat.fmt`` prints them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from webhook.gocompat.fmt import go_json, go_quote, go_struct_json

SUPPORTED_REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")


@dataclass(frozen=True, slots=True)
class RuleIssue:
    """One reason the apiserver rejects a rule when the CRD is created."""

    field: str      # path below the schema node, e.g. "x-kubernetes-validations[0].rule"
    kind: str       # "Invalid" | "Required" | "Unsupported" | "Forbidden"
    detail: str
    value: Any = None   # the rendered bad value for Invalid/Unsupported (already formatted)

    def render(self, path: str) -> str:
        where = f"{path}.{self.field}" if path else self.field
        if self.kind == "Required":
            return f"{where}: Required value: {self.detail}"
        if self.kind == "Forbidden":
            return f"{where}: Forbidden: {self.detail}"
        if self.kind == "Unsupported":
            return f"{where}: Unsupported value: {self.value}: supported values: {self.detail}"
        return f"{where}: Invalid value: {self.value}: {self.detail}"


_ENTRY_FIELD_TYPES = {"rule": str, "message": str, "messageExpression": str, "reason": str, "fieldPath": str,
                      "optionalOldSelf": bool}


def malformed_entry(index: int, entry: Any) -> list[RuleIssue]:
    """Issues for an entry (or its fields) of the wrong JSON type."""
    where = f"x-kubernetes-validations[{index}]"
    if not isinstance(entry, Mapping):
        return [RuleIssue(where, "Invalid", "must be of type object", go_json(entry))]
    return [RuleIssue(f"{where}.{name}", "Invalid", f"must be of type {'boolean' if kind is bool else 'string'}",
                      go_json(entry[name]))
            for name, kind in _ENTRY_FIELD_TYPES.items()
            if entry.get(name) is not None and not isinstance(entry[name], kind)]


def static_rule_issues(index: int, entry: Mapping[str, Any], node_schema: Mapping[str, Any]) -> list[RuleIssue]:
    where = f"x-kubernetes-validations[{index}]"
    issues: list[RuleIssue] = []
    rule = entry.get("rule") or ""
    message = entry.get("message") or ""
    trimmed_rule, trimmed_message = rule.strip(), message.strip()
    if not trimmed_rule:
        issues.append(RuleIssue(f"{where}.rule", "Required", "rule is not specified"))
    elif message and not trimmed_message:
        issues.append(RuleIssue(f"{where}.message", "Invalid", "must be non-empty if specified", go_quote(message)))
    elif "\n" in trimmed_message:
        issues.append(RuleIssue(f"{where}.message", "Invalid", "must not contain line breaks", go_quote(message)))
    elif "\n" in trimmed_rule and not trimmed_message:
        issues.append(RuleIssue(f"{where}.message", "Required",
                                "message must be specified if rule contains line breaks"))
    message_expression = entry.get("messageExpression") or ""
    if message_expression and not message_expression.strip():
        issues.append(RuleIssue(f"{where}.messageExpression", "Required",
                                "messageExpression must be non-empty if specified"))
    reason = entry.get("reason")
    if reason is not None and reason not in SUPPORTED_REASONS:
        issues.append(RuleIssue(f"{where}.reason", "Unsupported", ", ".join(f'"{r}"' for r in SUPPORTED_REASONS),
                                go_quote(reason)))
    field_path = entry.get("fieldPath") or ""
    if field_path:
        if not field_path.strip():
            issues.append(RuleIssue(f"{where}.fieldPath", "Invalid", "fieldPath must be non-empty if specified",
                                    go_quote(field_path)))
        elif "\n" in field_path:
            issues.append(RuleIssue(f"{where}.fieldPath", "Invalid", "fieldPath must not contain line breaks",
                                    go_quote(field_path)))
        elif not valid_field_path(field_path, node_schema):
            issues.append(RuleIssue(f"{where}.fieldPath", "Invalid", "must be a valid path", go_quote(field_path)))
    return issues


_FIELD_PATH_TOKEN = re.compile(r"'(?:[^'\\]|\\.)*'|[.\[\]]|[^.\[\]']+")
_SINGLE_QUOTE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                         "'": "'", "\\": "\\"}


def _field_path_segments(json_path: str, schema: Mapping[str, Any] | None) -> list[tuple[str, bool]] | None:
    """Split a rule's fieldPath into (name, is_property) steps valid for ``schema``; None if invalid."""
    tokens = _FIELD_PATH_TOKEN.findall(json_path)
    if "".join(tokens) != json_path:
        return None
    steps: list[tuple[str, bool]] = []
    position = 0
    while position < len(tokens):
        token = tokens[position]
        if token == "[":
            if position + 2 >= len(tokens):
                return None
            quoted, closing = tokens[position + 1], tokens[position + 2]
            if len(quoted) < 2 or quoted[0] != "'" or quoted[-1] != "'" or closing != "]":
                return None
            name = _unescape_single_quoted(quoted[1:-1])
            if name is None:
                return None
            position += 3
        elif token == ".":
            if position + 1 >= len(tokens):
                return None
            name = tokens[position + 1]
            position += 2
        else:
            return None
        if schema is None:
            return None
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        if properties is not None:
            if name not in properties:
                return None
            schema = properties[name]
            steps.append((name, True))
        elif isinstance(additional, Mapping):
            schema = additional
            steps.append((name, False))
        else:
            return None
    return steps


def _unescape_single_quoted(text: str) -> str | None:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            replacement = _SINGLE_QUOTE_ESCAPES.get(text[i + 1])
            if replacement is None:
                return None
            out.append(replacement)
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def valid_field_path(json_path: str, schema: Mapping[str, Any]) -> bool:
    return _field_path_segments(json_path, schema) is not None


def normalize_field_path(json_path: str, schema: Mapping[str, Any]) -> str:
    """The rule's fieldPath as a field.Path string relative to the rule's node ("a.b[key]")."""
    parts: list[str] = []
    for name, is_property in _field_path_segments(json_path, schema) or ():
        if not is_property:
            parts.append(f"[{name}]")
        else:
            parts.append(f".{name}" if parts else name)
    return "".join(parts)


# --- rendering of values in the apiserver's error strings ---

def go_rule_json(entry: Mapping[str, Any]) -> str:
    """The ValidationRule struct as the apiserver prints it in Invalid-value errors."""
    return go_struct_json({
        "Rule": entry.get("rule", ""),
        "Message": entry.get("message", ""),
        "MessageExpression": entry.get("messageExpression", ""),
        "Reason": entry.get("reason"),
        "FieldPath": entry.get("fieldPath", ""),
        "OptionalOldSelf": entry.get("optionalOldSelf"),
    })
