"""A body of one served version written to another version's endpoint, as the apiserver's
decoding chain handles it (k8s.io/apimachinery versioning codec over apiextensions'
schemaCoercingDecoder and schemaCoercingConverter): decoded, pruned and defaulted in the body's
own version — its unknown fields are the warnings — then converted (strategy None: the
apiVersion) to the endpoint's version, where the converter's coercion prunes what that version
does not know without reporting it (it discards the pruned paths), and validated there."""

from __future__ import annotations

from webhook.schema import CRDRegistry, RequestPath
from tests.support.cel import EVALUATOR

V1 = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "old": {"type": "string"}, "size": {"type": "integer", "default": 1}}}}}
V2 = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "size": {"type": "integer", "maximum": 5}, "fresh": {"type": "string"}}}}}
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "widgets.example.io"},
       "spec": {"group": "example.io", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": True, "storage": False, "schema": {"openAPIV3Schema": V1}},
                             {"name": "v2", "served": True, "storage": True, "schema": {"openAPIV3Schema": V2}}]}}
REGISTRY = CRDRegistry([CRD], evaluator=EVALUATOR)
TO_V2 = RequestPath("example.io/v2", "widgets", "default")


def widget(version: str, spec: dict) -> dict:
    return {"apiVersion": f"example.io/{version}", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}


def test_a_v1_body_at_the_v2_endpoint_warns_about_v1s_unknown_fields_only():
    outcome = REGISTRY.handle("CREATE", widget("v1", {"old": "kept in v1", "fresh": "unknown in v1", "bogus": 1}),
                              request=TO_V2)
    assert outcome.allowed
    assert outcome.warnings == ['unknown field "spec.bogus"', 'unknown field "spec.fresh"']
    # stored as v2: v1's default applied before the conversion, v1's own field gone silently
    assert outcome.object["apiVersion"] == "example.io/v2"
    assert outcome.object["spec"] == {"size": 1}


def test_the_converted_object_is_validated_by_the_endpoints_schema():
    outcome = REGISTRY.handle("CREATE", widget("v1", {"size": 7}), request=TO_V2)
    assert [str(e) for e in outcome.errors] == [
        "spec.size: Invalid value: 7: spec.size in body should be less than or equal to 5"]


def test_the_same_version_as_the_endpoint_is_decoded_once():
    outcome = REGISTRY.handle("CREATE", widget("v2", {"old": "unknown in v2", "size": 2}), request=TO_V2)
    assert outcome.warnings == ['unknown field "spec.old"'] and outcome.object["spec"] == {"size": 2}
