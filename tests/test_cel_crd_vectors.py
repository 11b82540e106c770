"""Replays the Kubernetes CRD-rule vectors (``crd_values``, ``escaping``) of
``shared/reference/cel/k8s_cel_library_vectors.yaml`` through ``webhook.cel.crd``."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import yaml

from webhook.cel.crd import ABSENT, CostBudget, CrdRuleError, compile_schema_rules
from webhook.cel.escaping import escape, unescape

REPO = Path(__file__).resolve().parents[1]
# shared/ sits beside the repository (CI: a fresh clone with shared/ beside it; a worktree: further up)
SHARED = next(p / "shared" for p in REPO.parents if (p / "shared" / "spec").is_dir())
VECTORS = SHARED / "reference" / "cel" / "k8s_cel_library_vectors.yaml"


@cache
def _vectors() -> list[dict]:
    with VECTORS.open() as handle:
        return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))

# Vectors that do not pass yet (strict: one that starts passing must be removed from here).
# Causes: cel-go type-check errors not yet reproduced, engine error wording, timestamps in the
# engine, set/map-list equality semantics. Shrinks as those land.
KNOWN_GAPS = frozenset({
    "crd_values-0009",
    "crd_values-0119",
    "crd_values-0142",
    "crd_values-0152",
    "crd_values-0153",
    "crd_values-0154",
    "crd_values-0155",
    "crd_values-0156",
    "crd_values-0157",
    "crd_values-0159",
    "crd_values-0161",
    "crd_values-0163",
    "crd_values-0171",
    "crd_values-0172",
    "crd_values-0176",
    "crd_values-0177",
    "crd_values-0213",
    "crd_values-0214",
    "crd_values-0215",
    "crd_values-0217",
    "crd_values-0218",
    "crd_values-0220",
    "crd_values-0227",
    "crd_values-0236",
    "crd_values-0306",
    "crd_values-0394",
    "crd_values-0395",
    "crd_values-0396",
    "crd_values-0397",
    "crd_values-0398",
    "crd_values-0399",
    "crd_values-0410",
    "crd_values-0420",
    "crd_values-0421",
    "crd_values-0422",
    "crd_values-0423",
    "crd_values-0424",
    "crd_values-0425",
    "crd_values-0426",
    "escaping-0191",
    "escaping-0199",
})


def _library(name: str, *, crd: bool) -> list[dict]:
    return [v for v in _vectors() if v["library"] == name and ("schema" in v) == crd]


def _ids(vectors: list[dict]) -> list[str]:
    return [v["id"] for v in vectors]


def _observed_detail(vector: dict) -> str | None:
    """The detail part of the field error the apiserver reported (after `Invalid value: "object": `)."""
    observed = vector.get("observed_field_errors") or []
    if len(observed) != 1:
        return None
    _, _, detail = observed[0].partition(": Invalid value: ")
    _, _, detail = detail.partition(": ")
    return detail


def replay(vector: dict) -> None:
    if vector["id"] not in KNOWN_GAPS:
        _replay(vector)
        return
    try:
        _replay(vector)
    except (Exception, pytest.fail.Exception) as gap:  # any failure is the known gap
        pytest.xfail(f"known gap: {gap}")
    pytest.fail(f"{vector['id']} passes now: remove it from KNOWN_GAPS")


def _replay(vector: dict) -> None:
    schema = dict(vector["schema"])
    schema["x-kubernetes-validations"] = [{"rule": vector["expression"]}]
    expect = vector["expect"]
    variables = vector.get("variables") or {}
    if "compile_error_contains" in expect:
        with pytest.raises(CrdRuleError) as caught:
            compile_schema_rules(schema, is_root=bool(vector.get("is_resource_root")), path="")
        text = caught.value.issues[0].detail
        assert expect["compile_error_contains"] in text
        observed = _observed_detail(vector)
        if observed is not None:
            assert "rule compile error: " + text == observed
        return
    rules = compile_schema_rules(schema, is_root=bool(vector.get("is_resource_root")), path="")
    old = variables.get("oldSelf", ABSENT)
    results = rules.evaluate(variables.get("self"), old, budget=CostBudget())
    if expect.get("skipped"):
        assert results == []
        return
    if "error_contains" in expect:
        assert len(results) == 1 and results[0].error is not None, results
        assert expect["error_contains"] in results[0].error
        observed = _observed_detail(vector)
        if observed is not None:
            assert results[0].error == observed
        return
    assert expect["type"] == "bool"
    if expect["value"] is True:
        assert results == []
    else:
        assert len(results) == 1 and results[0].error is None, results


@pytest.mark.parametrize("vector", _library("crd_values", crd=True), ids=_ids(_library("crd_values", crd=True)))
def test_crd_values(vector: dict) -> None:
    replay(vector)


@pytest.mark.parametrize("vector", _library("escaping", crd=True), ids=_ids(_library("escaping", crd=True)))
def test_escaping_in_rules(vector: dict) -> None:
    replay(vector)


@pytest.mark.parametrize("vector", _library("escaping", crd=False), ids=_ids(_library("escaping", crd=False)))
def test_escaping_names(vector: dict) -> None:
    expect = vector["expect"]
    if "property_name" in vector:
        escaped = escape(vector["property_name"])
        if expect.get("escapable") is False:
            assert escaped is None
        else:
            assert escaped == expect["escaped"]
            if expect.get("unescape_roundtrip"):
                assert unescape(escaped) == vector["property_name"]
    elif expect.get("unescapable"):
        assert unescape(vector["escaped_name"]) is None
    else:
        assert unescape(vector["escaped_name"]) == expect["unescaped"]
