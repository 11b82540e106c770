"""Field validation as kube-apiserver applies it to a custom resource (``fieldValidation=``):
Strict refuses with every unknown field in one 400, Warn warns (the default of a request that
names none: the recorded cases), Ignore drops them without a word. Through the admission
chain, the directive is the review's ``request.options``, as the apiserver sends it."""

from __future__ import annotations

import pytest

from tests.schema.helpers import registry, thing
from webhook.admission.chain import AdmissionChain, offline_request
from webhook.policy import PolicySet
from webhook.schema.field_validation import directive
from webhook.state import FileState

SCHEMA = {"a": {"type": "string"},
          "t": {"type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True}}
SPEC = {"a": "x", "b": 1, "zz": {"deep": 1}, "t": {"apiVersion": "v1", "kind": "ConfigMap",
                                                     "metadata": {"name": "cm", "bogus": 1}}}
STRICT = ('Thing in version "v1" cannot be handled as a Thing: strict decoding error: unknown field '
          '"metadata.extra", unknown field "spec.b", unknown field "spec.zz", unknown field "spec.t.metadata.bogus"')


def test_strict_refuses_with_every_unknown_field_in_one_message():
    reg = registry(SCHEMA)
    out = reg.handle("CREATE", thing(SPEC, extra=1), field_validation="Strict")
    assert (out.allowed, out.code, out.warnings) == (False, 400, [])
    assert out.status == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": STRICT, "reason": "BadRequest", "code": 400}
    assert reg.handle("CREATE", thing({"a": "x"}), field_validation="Strict").allowed  # nothing unknown


def test_warn_is_the_default_and_ignore_says_nothing():
    reg = registry(SCHEMA)
    warned = reg.handle("CREATE", thing(SPEC, extra=1))
    assert warned.allowed and warned.warnings == [
        'unknown field "metadata.extra"', 'unknown field "spec.b"', 'unknown field "spec.zz"',
        'unknown field "spec.t.metadata.bogus"']
    assert reg.handle("CREATE", thing(SPEC, extra=1), field_validation="Warn").warnings == warned.warnings
    ignored = reg.handle("CREATE", thing(SPEC, extra=1), field_validation="Ignore")
    assert ignored.allowed and ignored.warnings == [] and ignored.object == warned.object
    assert "b" not in ignored.object["spec"] and "extra" not in ignored.object["metadata"]


def test_strict_applies_to_updates():
    reg = registry(SCHEMA)
    old = thing({"a": "x"})
    out = reg.handle("UPDATE", thing({"a": "y", "b": 2}), old, field_validation="Strict")
    assert out.code == 400 and out.status["message"].endswith('strict decoding error: unknown field "spec.b"')


@pytest.mark.parametrize("options,expected", [
    (None, "Warn"), ({}, "Warn"), ({"fieldValidation": "Strict"}, "Strict"), ({"fieldValidation": "Ignore"}, "Ignore"),
    ({"fieldValidation": ""}, "Warn"),
])
def test_the_directive_of_a_reviews_options(options, expected):
    assert directive(options) == expected


def test_the_chain_reads_the_directive_from_the_requests_options(tmp_path):
    chain = AdmissionChain(registry(SCHEMA), PolicySet(), FileState(objects=[]))
    obj = thing(SPEC, extra=1)
    strict = chain.run(offline_request(obj, field_validation="Strict"))
    assert not strict.allowed and strict.status["message"] == STRICT and strict.denied_by == "apiserver"
    assert offline_request(obj, field_validation="Strict").options == {
        "apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "dryRun": ["All"], "fieldValidation": "Strict"}
    warned = chain.run(offline_request(obj))  # no directive: the apiserver's default
    assert warned.allowed and 'unknown field "spec.b"' in warned.warnings
    ignored = chain.run(offline_request(obj, field_validation="Ignore"))
    assert ignored.allowed and ignored.warnings == []
