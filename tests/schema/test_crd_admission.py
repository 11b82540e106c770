"""Every probe of ``tests/conformance/cases/crd-admission.yaml``: offline CRD admission vs the apiserver."""

from __future__ import annotations

import copy
from collections import Counter
from functools import cache

import pytest
import yaml

from webhook.schema import CRDRegistry
from webhook.schema.crd_admission import check_crd, rejection_message
from webhook.schema.registry import CRDLoadError
from webhook.gocompat.fmt import go_json
from tests.support.paths import CASES, CHART_CRDS, REFERENCE
from tests.support.cel import EVALUATOR


# Probes that do not pass yet (strict: one that starts passing must be removed from here):
# they need cel-go's type checker and cost estimator.
KNOWN_GAPS = frozenset({

})


@cache
def _probes() -> list[dict]:
    with (CASES / "crd-admission.yaml").open() as handle:
        return yaml.safe_load(handle)["probes"]


@pytest.mark.parametrize("probe", _probes(), ids=[p["name"] for p in _probes()])
def test_probe(probe: dict) -> None:
    if probe["name"] not in KNOWN_GAPS:
        _check(probe)
        return
    try:
        _check(probe)
    except AssertionError as gap:
        pytest.xfail(f"known gap: {gap}")
    pytest.fail(f"{probe['name']} passes now: remove it from KNOWN_GAPS")


def _check(probe: dict) -> None:
    expect = probe["expect"]
    errors, warnings = check_crd(probe["crd"], EVALUATOR)
    assert warnings == expect.get("warnings", [])
    if probe["kind"] == "crd-accepted":
        assert errors == []
        return
    assert Counter(errors) == Counter(expect["errors"])
    assert rejection_message(probe["crd"], errors) == expect["message"]


def test_loading_a_crd_the_apiserver_refuses_fails_with_its_message() -> None:
    rejected = next(p for p in _probes() if p["name"] == "ref-forbidden")
    registry = CRDRegistry(evaluator=EVALUATOR)
    with pytest.raises(CRDLoadError) as caught:
        registry.add_checked(rejected["crd"], "crds.yaml")
    assert str(caught.value) == "crds.yaml: " + rejected["expect"]["message"]
    accepted = next(p for p in _probes() if p["name"] == "format-unknown-string")
    assert registry.add_checked(accepted["crd"], "crds.yaml") == ['unrecognized format "phone-number"']


@cache
def _installed_crds() -> list[tuple[str, dict]]:
    """CRDs a real apiserver accepted: the shipped chart and the recorded suites' references."""
    reference = [d for d in sorted((REFERENCE).iterdir()) if d.is_dir() and d.name != "cel"]
    files = sorted(CHART_CRDS.glob("*.yaml")) + [f for d in reference for f in sorted(d.rglob("*.yaml"))]
    found = []
    for file in files:
        for doc in yaml.safe_load_all(file.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                found.append((f"{file.parent.name}/{file.name}", doc))
    return found


@pytest.mark.parametrize("name, crd", _installed_crds(), ids=[name for name, _ in _installed_crds()])
def test_installed_crds_are_accepted(name: str, crd: dict) -> None:
    errors, warnings = check_crd(crd, EVALUATOR)
    assert errors == []
    # the only near-miss among them is the widgets' deliberately unknown string format
    assert warnings in ([], ['unrecognized format "phone-number"'])


def _crd_with_spec_property(prop: dict) -> dict:
    crd = copy.deepcopy(_probes()[0]["crd"])
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] = {"x": prop}
    return crd


@pytest.mark.parametrize("prop, field, kind", [
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems", "Forbidden"),
    ({"type": "object", "definitions": {"a": {"type": "string"}}}, "definitions", "Forbidden"),
    ({"type": "object", "patternProperties": {"^a": {"type": "string"}}}, "patternProperties", "Forbidden"),
    ({"type": "null"}, "type", "Forbidden"),
    ({"type": "array", "items": [{"type": "string"}]}, "items", "Forbidden"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
     "additionalProperties", "Forbidden"),
    ({"type": "object", "x-kubernetes-map-type": "loose"}, "x-kubernetes-map-type", "Unsupported value"),
    ({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
      "items": {"type": "string"}}, "items.type", "Invalid value"),
    ({"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object", "properties": {
        "a": {"type": "string"}}}}, "x-kubernetes-list-map-keys", "Required value"),
])
def test_forbidden_schema_constructs(prop: dict, field: str, kind: str) -> None:
    errors, _ = check_crd(_crd_with_spec_property(prop), EVALUATOR)
    where = "spec.validation.openAPIV3Schema.properties[spec].properties[x]."
    assert any(e.startswith(f"{where}{field}: {kind}") for e in errors), errors


@pytest.mark.parametrize("crd, expected", [
    (None, "<nil>: Invalid value: null: must be of type object"),
    ({"spec": {"versions": "v1"}}, 'spec.versions: Invalid value: "v1": must be of type array'),
    ({"spec": {"versions": [{"schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "maxLength": "3", "x-kubernetes-validations": [{"rule": 5}]}}}}}]}},
     'spec.versions[0].schema.openAPIV3Schema.properties[spec].maxLength: Invalid value: "3": must be of type '
     'integer'),
])
def test_malformed_crds_get_clear_errors(crd: object, expected: str) -> None:
    errors, warnings = check_crd(crd, EVALUATOR)  # type: ignore[arg-type]
    assert errors[0] == expected and warnings == []


# (property schema, a value its format rejects, whether the apiserver keeps the format): 1.36 keeps
# the supported string formats (dashes dropped, case kept; k8s-short-name/k8s-long-name since 1.34)
# and only int32/int64, float/double on numbers; what it strips it warns about and never checks.
_FORMATS = [
    ({"type": "string", "format": "k8s-short-name"}, "Not.A-Label", True),
    ({"type": "string", "format": "k8s-long-name"}, "Not_A.Name", True),
    ({"type": "string", "format": "k8sshortname"}, "UPPER", True),
    ({"type": "string", "format": "date-time"}, "yesterday", True),
    ({"type": "string", "format": "K8s-Short-Name"}, "UPPER", False),
    ({"type": "string", "format": "k8s_short_name"}, "UPPER", False),
    ({"type": "string", "format": "k8s-ip-sloppy"}, "not an ip", False),  # registered, not supported
    ({"type": "string", "format": "int32"}, "x", False),
    ({"type": "integer", "format": "int32"}, 2 ** 31, True),
    ({"type": "integer", "format": "uuid"}, 2 ** 31, False),
    ({"x-kubernetes-int-or-string": True, "format": "int32"}, 2 ** 31, False),
    ({"x-kubernetes-int-or-string": True, "format": "k8s-short-name"}, "UPPER", True),
]


@pytest.mark.parametrize("prop, bad_value, kept", _FORMATS, ids=[str(p) for p, _, _ in _FORMATS])
def test_crd_admission_and_schema_engine_agree_on_formats(prop: dict, bad_value: object, kept: bool) -> None:
    crd = _crd_with_spec_property(prop)
    errors, warnings = check_crd(crd, EVALUATOR)
    assert errors == []
    assert warnings == ([] if kept else [f'unrecognized format "{prop["format"]}"'])
    spec = crd["spec"]
    obj = {"apiVersion": f"{spec['group']}/v1", "kind": spec["names"]["kind"],
           "metadata": {"name": "p", "namespace": "default"}, "spec": {"x": bad_value}}
    outcome = CRDRegistry([crd], evaluator=EVALUATOR).handle("CREATE", obj)
    assert outcome.allowed is not kept
    if kept:  # the format's own error, as kube-openapi words it for strings and for int32
        assert [str(e) for e in outcome.errors] in (
            [f"spec.x: Invalid value: {go_json(bad_value)}: spec.x in body must be of type {prop['format']}: "
             f"{go_json(bad_value)}"],
            ['<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.x'])
