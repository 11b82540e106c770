"""Kubernetes' CEL library vectors (``shared/reference/cel/k8s_cel_library_vectors.yaml``).

Loads the vectors this package owns, converts their JSON variables as the apiserver types
them (for CRD vectors, by the ``self`` schema), and judges an engine's outcome against
the Kubernetes 1.36 behaviour (``k8s_1_36: differs`` wins over the upstream expectation).
"""

from __future__ import annotations

import base64
import datetime
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from webhook.cel import CelCompileError, CelEvalError, get_engine
from webhook.cel.library.base import OpaqueValue, OptionalValue

REPO = Path(__file__).resolve().parents[2]
# shared/ sits beside the repository (CI: a fresh clone with shared/ beside it; a worktree: further up)
SHARED = next(p / "shared" for p in REPO.parents if (p / "shared" / "spec").is_dir())
VECTORS_FILE = SHARED / "reference" / "cel" / "k8s_cel_library_vectors.yaml"
NOT_OURS = {"crd_values", "cost", "escaping"}  # replayed by webhook.cel.crd's tests


@cache
def load() -> list[dict[str, Any]]:
    with VECTORS_FILE.open() as f:
        return [v for v in yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if v["library"] not in NOT_OURS]


# --- values as the apiserver types them ---------------------------------------------------

_GO_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def go_duration(text: str) -> datetime.timedelta:
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    if body == "0":
        return datetime.timedelta(0)
    seconds = sum(float(n) * _GO_DURATION_UNITS[u] for n, u in _GO_DURATION_PART.findall(body))
    return datetime.timedelta(seconds=sign * seconds)


def typed(value: Any, schema: dict[str, Any] | None) -> Any:
    """A JSON value typed by its OpenAPI schema (date-time, date, duration, byte, number)."""
    if schema is None or value is None:
        return value
    kind, fmt = schema.get("type"), schema.get("format")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        extra = extra if isinstance(extra, dict) else None
        return {k: typed(v, props.get(k, extra)) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v, schema.get("items")) for v in value]
    if kind == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind == "string" and isinstance(value, str):
        if fmt == "date-time":
            return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if fmt == "date":
            return datetime.datetime.fromisoformat(value).replace(tzinfo=datetime.timezone.utc)
        if fmt == "duration":
            return go_duration(value)
        if fmt == "byte":
            return base64.b64decode(value)
    return value


def activation(vector: dict[str, Any]) -> dict[str, Any]:
    variables = dict(vector.get("variables") or {})
    if "schema" in vector:
        for name in ("self", "oldSelf"):
            if name in variables:
                schema = vector.get("old_schema", vector["schema"]) if name == "oldSelf" else vector["schema"]
                variables[name] = typed(variables[name], schema)
    return variables


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


def outcome(engine_name: str, vector: dict[str, Any]) -> tuple[str, Any]:
    """("value", v) | ("error", message) | ("compile_error", message)."""
    engine = get_engine(engine_name)
    variables = activation(vector)
    try:
        program = engine.compile(vector["expression"], variables.keys())
    except CelCompileError as err:
        return "compile_error", str(err)
    try:
        return "value", program.evaluate(variables)
    except CelEvalError as err:
        return "error", str(err)


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
