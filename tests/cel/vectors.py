"""Kubernetes' CEL library vectors (``tests/conformance/reference/cel/k8s_cel_library_vectors.yaml``).

Loads the vectors this package owns and replays each as Kubernetes ran it: on an environment
with its variables (``dyn``), or, for a vector with a ``schema`` (Kubernetes'
``TestValidationExpressions``), as a CRD rule with ``self`` typed by that schema
(``webhook.cel.crd`` on the engine under test); then judges the outcome against the
Kubernetes 1.36 behaviour (``k8s_1_36: differs`` wins over the upstream expectation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from webhook.cel import CelCompileError, CelEvalError, Evaluator
from webhook.cel.crd import ABSENT, CostBudget, CrdRuleError, compile_schema_rules
from webhook.cel.library.base import OpaqueValue, OptionalValue
from tests.support.paths import CEL_VECTORS

VECTORS_FILE = CEL_VECTORS
NOT_OURS = {"crd_values", "cost", "escaping"}  # replayed by webhook.cel.crd's tests


@cache
def every_vector() -> list[dict[str, Any]]:
    """Every vector of the file, the CRD-rule ones (``crd_values``, ``cost``, ``escaping``) too."""
    with VECTORS_FILE.open() as f:
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load() -> list[dict[str, Any]]:
    """The vectors this package replays on the engines alone."""
    return [v for v in every_vector() if v["library"] not in NOT_OURS]


def library_vectors(name: str, *, crd: bool) -> list[dict[str, Any]]:
    """The vectors of library ``name``, those run as CRD rules (with a ``schema``) or the others."""
    return [v for v in every_vector() if v["library"] == name and ("schema" in v) == crd]


# --- judging an outcome --------------------------------------------------------------------


@dataclass
class Expected:
    kind: str  # value | error | compile_error
    value: Any = None
    type: str | None = None
    text: str = ""
    optional: str | None = None
    check_expression: str | None = None


def expected(vector: dict[str, Any]) -> Expected:
    differs = vector["k8s_1_36"]
    if differs != "same":
        d = differs["differs"]
        if "compile_error" in d:
            return Expected("compile_error", text=_first_message(d["compile_error"]))
        if "error" in d:
            return Expected("error", text=d["error"])
        return Expected("value", value=d["value"], type=d.get("type"))
    e = vector["expect"]
    if vector["env"] == "k8s.crd" and "error_contains" in e:
        # the apiserver's field error appends the rule; the CEL error is what precedes it
        return Expected("error", text=e["error_contains"].split(" evaluating rule: ")[0])
    if "compile_error_contains" in e:
        # CRD vectors carry the field error's "compilation failed: " prefix
        return Expected("compile_error", text=e["compile_error_contains"].removeprefix("compilation failed: "))
    if "error_contains" in e:
        return Expected("error", text=e["error_contains"])
    return Expected("value", e.get("value"), e.get("type"), optional=e.get("optional"), check_expression=vector.get("check_expression"))


def _first_message(report: str) -> str:
    """``ERROR: <input>:1:15: msg\\n | src\\n | ..^`` -> ``msg``."""
    first = report.split("\n", 1)[0]
    return re.sub(r"^ERROR: <input>:\d+:\d+: ", "", first)


def cel_type_name(value: Any) -> str:
    if isinstance(value, OptionalValue):
        return f"optional_type({cel_type_name(value.value)})" if value.has_value else "optional_type"
    if isinstance(value, OpaqueValue):
        return value.cel_type
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, list):
        return f"list({cel_type_name(value[0]) if value else 'dyn'})"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


def same_value(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, bool) or isinstance(actual, bool):
        return type(actual) is type(wanted) and actual == wanted
    if isinstance(wanted, list):
        return isinstance(actual, list) and len(actual) == len(wanted) and all(map(same_value, actual, wanted))
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and actual.keys() == wanted.keys() and all(same_value(actual[k], wanted[k]) for k in wanted)
    return actual == wanted


_EVALUATORS: dict[str, Evaluator] = {}


def engine_for(name: str) -> Any:
    """One engine per backend for the whole test run: each keeps its compiled programs and
    environments, which thousands of vectors need not build again."""
    if name not in _EVALUATORS:
        _EVALUATORS[name] = Evaluator(name)
    return _EVALUATORS[name].engine


def outcome(engine_name: str, vector: dict[str, Any]) -> tuple[str, Any]:
    """("value", v) | ("error", message) | ("compile_error", message)."""
    if "schema" in vector:
        return _rule_outcome(engine_name, vector)
    engine = engine_for(engine_name)
    variables = vector.get("variables") or {}
    try:
        program = engine.compile(vector["expression"], variables.keys())
    except CelCompileError as err:
        return "compile_error", str(err)
    try:
        return "value", program.evaluate(variables)
    except CelEvalError as err:
        return "error", str(err)


def _rule_outcome(engine_name: str, vector: dict[str, Any]) -> tuple[str, Any]:
    """The vector as a CRD rule on a node of its schema: true when the rule holds."""
    rule = {"rule": vector["expression"]}
    if "\n" in rule["rule"]:  # a CRD requires a message for a rule with line breaks
        rule["message"] = "failed"
    schema = {**vector["schema"], "x-kubernetes-validations": [rule]}
    variables = vector.get("variables") or {}
    try:
        rules = compile_schema_rules(schema, is_root=bool(vector.get("is_resource_root")), path="",
                                     engine=engine_for(engine_name))
    except CrdRuleError as err:
        return "compile_error", err.issues[0].detail
    results = rules.evaluate(variables.get("self"), variables.get("oldSelf", ABSENT), budget=CostBudget())
    if not results:
        return "value", True
    return ("error", results[0].error) if results[0].error is not None else ("value", False)


def judge(engine_name: str, vector: dict[str, Any]) -> str | None:
    """None when the engine agrees with Kubernetes 1.36, else what differs."""
    want = expected(vector)
    kind, got = outcome(engine_name, vector)
    if kind != want.kind:
        return f"expected {want.kind} {want.text or want.value!r}, got {kind} {got!r}"
    if kind in ("error", "compile_error"):
        return None if want.text in got else f"expected {kind} containing {want.text!r}, got {got!r}"
    if want.type and not _type_matches(cel_type_name(got), want.type):
        return f"expected type {want.type}, got {cel_type_name(got)} ({got!r})"
    if want.check_expression:
        check_kind, check = outcome(engine_name, {**vector, "expression": want.check_expression, "k8s_1_36": "same"})
        return None if check_kind == "value" and check is True else f"check {want.check_expression!r} gave {check_kind} {check!r}"
    if isinstance(got, OptionalValue):
        if (want.optional == "none") == got.has_value:
            return f"expected optional {want.optional}, got {got!r}"
        return None if not got.has_value or same_value(got.value, want.value) else f"expected {want.value!r}, got {got!r}"
    return None if same_value(got, want.value) else f"expected {want.value!r}, got {got!r}"


def _type_matches(actual: str, wanted: str) -> bool:
    return actual == wanted or (wanted.startswith("list(") and actual == "list(dyn)") or (wanted == "optional_type" and actual.startswith("optional_type"))
