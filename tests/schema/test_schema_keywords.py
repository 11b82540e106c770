"""One structural-schema keyword at a time: verdicts and the apiserver's exact error strings."""

from __future__ import annotations

import pytest

from tests.schema.helpers import create, crd, errors, registry, thing
from webhook.schema import CRDRegistry, RequestPath
from tests.support.cel import EVALUATOR

MARKER = ("<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; "
          "correct the existing errors to complete validation")


# -- types and formats ------------------------------------------------------------------------

def test_type_mismatch_names_the_actual_json_type():
    reg = registry({"n": {"type": "integer"}, "b": {"type": "boolean"}, "o": {"type": "object"}})
    out = create(reg, {"n": "5", "b": 1, "o": []})
    assert errors(out) == [
        'spec.b: Invalid value: "integer": spec.b in body must be of type boolean: "integer"',
        'spec.n: Invalid value: "string": spec.n in body must be of type integer: "string"',
        'spec.o: Invalid value: "array": spec.o in body must be of type object: "array"',
    ]
    assert out.code == 422 and not out.allowed


def test_float_for_integer_also_fails_the_range_check():
    out = create(registry({"n": {"type": "integer"}}), {"n": 5.5})
    assert errors(out) == [
        'spec.n: Invalid value: "number": spec.n in body must be of type integer: "number"',
        '<nil>: Invalid value: "": Checked value must be of type integer (default format) in spec.n',
    ]


def test_integral_float_is_an_integer():
    assert create(registry({"n": {"type": "integer"}}), {"n": 5.0}).allowed


def test_int32_format():
    reg = registry({"i": {"type": "integer", "format": "int32"}})
    assert errors(create(reg, {"i": 1.5})) == [
        'spec.i: Invalid value: "float64": spec.i in body must be of type int32: "float64"',
        '<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.i']
    assert errors(create(reg, {"i": 2 ** 31})) == [
        '<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.i']
    assert create(reg, {"i": 2 ** 31 - 1}).allowed


def test_float_format_overflow():
    reg = registry({"f": {"type": "number", "format": "float"}, "d": {"type": "number", "format": "double"}})
    assert errors(create(reg, {"f": 3.5e38, "d": 1.7e308})) == [
        '<nil>: Invalid value: "": Checked value must be of type number with format float in spec.f']


@pytest.mark.parametrize("fmt,good,bad", [
    ("date-time", "2024-01-02T03:04:05Z", "2024-01-02"),
    ("date", "2024-02-29", "2024-02-30"),
    ("duration", "1h30m", "5 parsecs"),
    ("byte", "aGVsbG8=", "aGVsbG8"),
    ("ipv4", "010.0.0.1", "256.1.1.1"),
    ("ipv6", "fe80::1", "zz::1"),
    ("cidr", "10.1.2.3/8", "10.0.0.0/33"),
    ("mac", "01-23-45-67-89-ab", "01:02"),
    ("uuid", "123E4567E89B12D3A456426614174000", "123"),
    ("email", "Jane Doe <jane@example.com>", "nobody"),
    ("hostname", "example.com", "-bad-.example.com"),
])
def test_formats(fmt, good, bad):
    reg = registry({"v": {"type": "string", "format": fmt}})
    assert create(reg, {"v": good}).allowed
    assert errors(create(reg, {"v": bad})) == [
        f'spec.v: Invalid value: "{bad}": spec.v in body must be of type {fmt.replace("-", "") if fmt == "datetime" else fmt}: "{bad}"']


def test_unknown_format_is_not_checked():
    assert create(registry({"v": {"type": "string", "format": "phone-number"}}), {"v": "x"}).allowed


# -- enum, pattern, lengths, bounds -----------------------------------------------------------

def test_enum_lists_supported_values_and_quotes_only_strings_in_the_value():
    reg = registry({"s": {"type": "string", "enum": ["a", "b"]}, "n": {"type": "number", "enum": [0.5, 2]}})
    assert errors(create(reg, {"s": "c", "n": 1})) == [
        'spec.n: Unsupported value: 1: supported values: "0.5", "2"',
        'spec.s: Unsupported value: "c": supported values: "a", "b"',
    ]
    assert create(reg, {"s": "a", "n": 2}).allowed


def test_pattern_is_go_re2_with_unicode_classes():
    reg = registry({"p": {"type": "string", "pattern": r"^\p{Lu}\p{Ll}+$"}})
    assert create(reg, {"p": "Émile"}).allowed
    assert errors(create(reg, {"p": "émile"})) == [
        "spec.p: Invalid value: \"émile\": spec.p in body should match '^\\p{Lu}\\p{Ll}+$'"]


def test_lengths_count_characters_not_bytes():
    reg = registry({"t": {"type": "string", "minLength": 2, "maxLength": 3}})
    assert create(reg, {"t": "ééé"}).allowed
    assert errors(create(reg, {"t": "é"})) == ['spec.t: Invalid value: "é": spec.t in body should be at least 2 chars long']
    assert errors(create(reg, {"t": "abcd"})) == ["spec.t: Too long: may not be more than 3 bytes"]


def test_numeric_bounds():
    reg = registry({"i": {"type": "integer", "minimum": 0, "maximum": 10},
                    "r": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1,
                          "exclusiveMaximum": True}})
    assert errors(create(reg, {"i": -1, "r": 1})) == [
        "spec.i: Invalid value: -1: spec.i in body should be greater than or equal to 0",
        "spec.r: Invalid value: 1: spec.r in body should be less than 1",
    ]
    assert errors(create(reg, {"i": 11, "r": 0})) == [
        "spec.i: Invalid value: 11: spec.i in body should be less than or equal to 10",
        "spec.r: Invalid value: 0: spec.r in body should be greater than 0",
    ]


def test_an_infinite_bound_from_yaml_compares_as_a_float():
    reg = registry({"o": {"type": "object", "minimum": float("-inf"), "maximum": float("inf")},
                    "i": {"type": "integer", "maximum": float("-inf")}})
    assert create(reg, {"o": {}}).allowed
    assert errors(create(reg, {"i": 1})) == [
        '<nil>: Invalid value: "": Maximum boundary value must be of type integer (default format) in spec.i',
        "spec.i: Invalid value: 1: spec.i in body should be less than or equal to -Inf"]


def test_multiple_of_uses_go_float_arithmetic():
    reg = registry({"s": {"type": "integer", "multipleOf": 5}, "f": {"type": "number", "multipleOf": 0.1}})
    assert create(reg, {"s": 10, "f": 0.3}).allowed
    assert errors(create(reg, {"s": 7, "f": 0.35})) == [
        "spec.f: Invalid value: 0.35: spec.f in body should be a multiple of 0.1",
        "spec.s: Invalid value: 7: spec.s in body should be a multiple of 5",
    ]


def test_array_and_object_sizes():
    reg = registry({"l": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
                    "m": {"type": "object", "minProperties": 1, "maxProperties": 2,
                          "additionalProperties": {"type": "string", "maxLength": 1}}})
    assert errors(create(reg, {"l": [], "m": {}})) == [
        "spec.l: Invalid value: 0: spec.l in body should have at least 1 items",
        "spec.m: Invalid value: 0: spec.m in body should have at least 1 properties",
    ]
    # too many properties: the map's values are not looked at any more
    assert errors(create(reg, {"l": ["a", "b", "c"], "m": {"a": "xx", "b": "y", "c": "z"}})) == [
        "spec.l: Too many: 3: must have at most 2 items",
        "spec.m: Too many: 3: must have at most 2 items",
    ]
    assert errors(create(reg, {"l": ["a"], "m": {"a": "xx"}})) == ["spec.m.a: Too long: may not be more than 1 bytes"]


def test_required_and_nullable():
    reg = registry({"a": {"type": "string"}, "n": {"type": "string", "nullable": True}}, required=["a"])
    out = create(reg, {"n": None})
    assert errors(out) == ["spec.a: Required value"]
    ok = create(reg, {"a": "x", "n": None})
    assert ok.allowed and ok.object["spec"] == {"a": "x", "n": None}


def test_null_in_list_of_non_nullable_items_is_a_type_error():
    out = create(registry({"l": {"type": "array", "items": {"type": "string"}}}), {"l": ["a", None]})
    assert errors(out) == ['spec.l[1]: Invalid value: "null": spec.l[1] in body must be of type string: "null"']


# -- combinators -------------------------------------------------------------------------------

def test_one_of_any_of_all_of_not():
    reg = registry({
        "c": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
              "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        "y": {"type": "object", "properties": {"y": {"type": "string"}}, "not": {"required": ["y"]}},
        "n": {"type": "integer", "allOf": [{"minimum": 10}, {"multipleOf": 3}]},
        "s": {"type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "z$"}]},
    })
    assert create(reg, {"c": {"a": "1"}, "y": {}, "n": 12, "s": "xyz"}).allowed
    assert errors(create(reg, {"c": {"a": "1", "b": "2"}, "y": {"y": "1"}, "n": 11, "s": "m"})) == [
        '<nil>: Invalid value: "": "spec.c" must validate one and only one schema (oneOf). Found 2 valid alternatives',
        "spec.n: Invalid value: 11: spec.n in body should be a multiple of 3",
        '<nil>: Invalid value: "": "spec.n" must validate all the schemas (allOf)',
        '<nil>: Invalid value: "": "spec.s" must validate at least one schema (anyOf)',
        "spec.s: Invalid value: \"m\": spec.s in body should match '^a'",
        '<nil>: Invalid value: "": "spec.y" must not validate the schema (not)',
    ]


def test_int_or_string():
    reg = registry({"p": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}],
                          "minimum": 1, "pattern": "^[a-z]+$"}})
    assert create(reg, {"p": 8080}).allowed and create(reg, {"p": "http"}).allowed
    assert errors(create(reg, {"p": 0})) == ["spec.p: Invalid value: 0: spec.p in body should be greater than or equal to 1"]
    assert errors(create(reg, {"p": True})) == [
        'spec.p: Invalid value: "boolean": spec.p in body must be of type integer,string: "boolean"',
        '<nil>: Invalid value: "": "spec.p" must validate at least one schema (anyOf)',
        'spec.p: Invalid value: "boolean": spec.p in body must be of type integer: "boolean"']


# -- decoding: pruning, nulls, defaults --------------------------------------------------------

def test_unknown_fields_are_pruned_with_warnings():
    reg = registry({"a": {"type": "string"}, "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                                      "properties": {"p": {"type": "object",
                                                                           "properties": {"k": {"type": "string"}}}}}})
    out = create(reg, {"a": "x", "b": 1, "raw": {"free": [1], "p": {"k": "v", "drop": 2}}}, bogus=1)
    assert out.allowed
    assert out.warnings == ['unknown field "metadata.bogus"', 'unknown field "spec.b"', 'unknown field "spec.raw.p.drop"']
    assert out.object["spec"] == {"a": "x", "raw": {"free": [1], "p": {"k": "v"}}}
    assert "bogus" not in out.object["metadata"]


def test_null_pruned_then_defaulted():
    reg = registry({"d": {"type": "integer", "default": 100}, "o": {"type": "string"},
                    "nd": {"type": "string", "nullable": True, "default": "x"}})
    out = create(reg, {"d": None, "o": None, "nd": None})
    assert out.allowed and out.object["spec"] == {"d": 100, "nd": None}


def test_nested_defaults_materialise_in_objects_lists_and_maps():
    reg = registry({
        "d": {"type": "object", "default": {}, "properties": {
            "n": {"type": "object", "default": {}, "properties": {"depth": {"type": "integer", "default": 1}}},
            "o": {"type": "object", "default": {"k": "v"}, "properties": {"k": {"type": "string"},
                                                                        "other": {"type": "string", "default": "o"}}}}},
        "l": {"type": "array", "items": {"type": "object", "properties": {"w": {"type": "integer", "default": 1}}}},
        "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {
            "port": {"type": "integer", "default": 443}}}},
    })
    out = create(reg, {"l": [{}, {"w": 5}], "m": {"a": {}}})
    assert out.object["spec"] == {"d": {"n": {"depth": 1}, "o": {"k": "v", "other": "o"}},
                                  "l": [{"w": 1}, {"w": 5}], "m": {"a": {"port": 443}}}


def test_embedded_resource_metadata_round_trips_through_object_meta():
    reg = registry({"t": {"type": "object", "x-kubernetes-embedded-resource": True,
                          "x-kubernetes-preserve-unknown-fields": True}})
    out = create(reg, {"t": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "bogus": 1}}})
    assert out.allowed and out.warnings == ['unknown field "spec.t.metadata.bogus"']
    assert out.object["spec"]["t"]["metadata"] == {"name": "cm"}
    bad = create(reg, {"t": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": "nope"}}})
    assert bad.code == 400 and bad.status["message"] == (
        'Thing in version "v1" cannot be handled as a Thing: spec.t.metadata: Invalid value: {"labels":"nope"}: '
        "json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string")
    missing = create(reg, {"t": {"metadata": {"name": "x"}}})
    assert errors(missing) == ["spec.t.apiVersion: Required value", "spec.t.kind: Required value"]


# -- list types ----------------------------------------------------------------------------------

def test_set_and_map_list_duplicates():
    reg = registry({
        "s": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}},
        "m": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k", "p"],
              "items": {"type": "object", "required": ["k"], "properties": {
                  "k": {"type": "string"}, "p": {"type": "integer", "default": 80}}}},
    })
    assert errors(create(reg, {"s": [1, 1, 2, 1, 2], "m": [{"k": "a"}, {"k": "a", "p": 80}, {"k": "a", "p": 81}]})) == [
        'spec.m[1]: Duplicate value: {"k":"a","p":80}',
        "spec.s[1]: Duplicate value: 1",
        "spec.s[4]: Duplicate value: 2",
    ]


# -- metadata ------------------------------------------------------------------------------------

def test_metadata_name_rules():
    reg = registry({})
    assert errors(create(reg, {}, name="Bad_Name"))[0].startswith(
        'metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is")
    assert errors(create(reg, {}, name="")) == ["metadata.name: Required value: name or generateName is required"]
    generated = create(reg, {}, name="", generateName="thing-")
    assert generated.allowed and generated.object["metadata"]["name"].startswith("thing-")


def test_finalizer_warning_and_labels():
    reg = registry({})
    out = create(reg, {}, finalizers=["cleanup", "example.com/ok"])
    assert out.warnings == ['metadata.finalizers: "cleanup": prefer a domain-qualified finalizer name to avoid '
                            "accidental conflicts with other finalizer writers"]
    bad = create(reg, {}, labels={"ok": "bad value"})
    assert errors(bad)[0].startswith('metadata.labels: Invalid value: "bad value": a valid label must be an empty string')


# -- status subresource, scale, request checks ----------------------------------------------------

STATUS = {"type": "object", "properties": {"phase": {"type": "string", "enum": ["A", "B"]},
                                           "n": {"type": "integer", "minimum": 0}}}


def _status_registry() -> CRDRegistry:
    return CRDRegistry([crd({"type": "object", "properties": {"size": {"type": "string"},
                                                              "replicas": {"type": "integer"}}},
                            status_schema=STATUS,
                            subresources={"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                                  "statusReplicasPath": ".status.n"}})], evaluator=EVALUATOR)


def test_status_is_dropped_on_create_and_kept_on_main_update():
    reg = _status_registry()
    created = reg.handle("CREATE", {**thing({"size": "s"}), "status": {"phase": "A"}})
    assert created.allowed and "status" not in created.object
    old = {**thing({"size": "s"}), "status": {"phase": "B"}}
    updated = reg.handle("UPDATE", {**thing({"size": "m"}), "status": {"phase": "A"}}, old)
    assert updated.object["status"] == {"phase": "B"} and updated.object["spec"] == {"size": "m"}


def test_status_write_keeps_only_status_and_paths_are_relative():
    reg = _status_registry()
    old = thing({"size": "s"})
    out = reg.handle("UPDATE", {**thing({"size": "changed"}), "status": {"phase": "A", "n": 2}}, old, "status")
    assert out.allowed and out.object["spec"] == {"size": "s"} and out.object["status"] == {"phase": "A", "n": 2}
    bad = reg.handle("UPDATE", {**thing({}), "status": {"phase": "C", "n": -1}}, old, "status")
    assert errors(bad) == [
        "status.n: Invalid value: -1: n in body should be greater than or equal to 0",
        'status.phase: Unsupported value: "C": supported values: "A", "B"',
        ".status.n: Invalid value: -1: should be a non-negative integer",
    ]


def test_scale_replicas():
    reg = _status_registry()
    assert errors(reg.handle("CREATE", thing({"replicas": -1}))) == [
        ".spec.replicas: Invalid value: -1: should be a non-negative integer"]
    assert errors(reg.handle("CREATE", thing({"replicas": 2 ** 31}))) == [
        ".spec.replicas: Invalid value: 2147483648: should be less than or equal to 2147483647"]


def test_request_level_answers():
    reg = registry({})
    wrong = reg.handle("CREATE", {**thing({}), "kind": "Gizmo"},
                       request=RequestPath("test.infergate.io/v1", "things", "default"))
    assert errors(wrong) == ['kind: Invalid value: "Gizmo": must be Thing']
    assert wrong.status["message"].startswith('Gizmo.test.infergate.io "t1" is invalid')
    mismatch = reg.handle("CREATE", thing({}), namespace="other")
    assert mismatch.code == 400 and mismatch.status["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request")
    unknown = reg.handle("CREATE", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    assert unknown.code == 404 and not unknown.allowed
    renamed = reg.handle("UPDATE", thing({}, name="t2"), thing({}),
                         request=RequestPath("test.infergate.io/v1", "things", "default", "t1"))
    assert renamed.code == 400 and renamed.status["message"] == (
        "the name of the object (t2) does not match the name on the URL (t1)")
    other_group = reg.handle("CREATE", {**thing({}), "apiVersion": "other.io/v1"},
                             request=RequestPath("test.infergate.io/v1", "things", "default"))
    assert other_group.status["message"] == (
        "the API version in the data (other.io/v1) does not match the expected API version (test.infergate.io/v1)")


# -- ratcheting ----------------------------------------------------------------------------------

def test_ratcheting_tolerates_unchanged_errors_only():
    reg = registry({"h": {"type": "string", "pattern": "^[a-z]+$"}, "l": {"type": "integer"},
                    "o": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}})
    old = thing({"h": "Bad1", "o": ["a", "a"]})
    assert reg.handle("UPDATE", thing({"h": "Bad1", "l": 1, "o": ["b", "b"]}), old).allowed
    changed = reg.handle("UPDATE", thing({"h": "Bad2"}), old)
    assert errors(changed) == ["spec.h: Invalid value: \"Bad2\": spec.h in body should match '^[a-z]+$'"]


# -- the Status object ---------------------------------------------------------------------------

def test_status_message_and_causes():
    reg = registry({"a": {"type": "string"}, "b": {"type": "string"}}, required=["a", "b"])
    out = create(reg, {})
    assert out.status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Thing.test.infergate.io "t1" is invalid: [spec.a: Required value, spec.b: Required value]',
        "reason": "Invalid",
        "details": {"name": "t1", "group": "test.infergate.io", "kind": "Thing", "causes": [
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.a"},
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.b"}]},
        "code": 422,
    }
    one = create(registry({"a": {"type": "string"}}, required=["a"]), {})
    assert one.status["message"] == 'Thing.test.infergate.io "t1" is invalid: spec.a: Required value'


def test_ratcheting_correlates_map_lists_by_key_and_never_untyped_objects():
    reg = registry({
        "rules": {"type": "array", "maxItems": 1, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                  "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}}}},
        "free": {"type": "object", "maxProperties": 1, "x-kubernetes-preserve-unknown-fields": True},
    })
    old = thing({"rules": [{"k": "a"}, {"k": "b"}]})
    # reordering a map list is no change: the unchanged (if too long) list is tolerated
    assert reg.handle("UPDATE", thing({"rules": [{"k": "b"}, {"k": "a"}]}), old).allowed
    # an object without a schema for its fields never counts as unchanged
    old = thing({"free": {"a": 1, "b": 2}})
    assert errors(reg.handle("UPDATE", thing({"free": {"a": 1, "b": 2}}), old)) == [
        "spec.free: Too many: 2: must have at most 1 items"]


def test_status_write_without_a_status_subresource_is_not_found():
    reg = registry({})
    out = reg.handle("UPDATE", thing({}), thing({}), "status")
    assert out.code == 404 and out.status["reason"] == "NotFound"
    assert reg.handle("UPDATE", thing({}), None).code == 400


def test_validate_phase_takes_any_subresource_and_a_missing_old_object():
    reg = registry({"n": {"type": "integer", "minimum": 0}})
    prepared, warnings = reg.prepare("CREATE", thing({"n": -1, "x": 1}))
    assert warnings == ['unknown field "spec.x"'] and prepared["spec"] == {"n": -1}
    expected = ["spec.n: Invalid value: -1: spec.n in body should be greater than or equal to 0"]
    assert [str(e) for e in reg.validate("CREATE", prepared)[0]] == expected
    assert [str(e) for e in reg.validate("UPDATE", prepared, thing({"n": 1}), "scale")[0]] == expected
    assert [str(e) for e in reg.validate("UPDATE", prepared, None)[0]] == expected


def test_deeply_nested_objects_get_an_answer_not_a_crash():
    reg = registry({"free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "maxProperties": 0}})
    deep: dict = {}
    node = deep
    for _ in range(5000):
        node["x"] = {}
        node = node["x"]
    assert create(reg, {"free": {}}).allowed
    created = create(reg, {"free": deep})  # kept as is (Go decodes up to 10000 levels), then one error
    assert errors(created) == ["spec.free: Too many: 1: must have at most 0 items"]
    # fields without a schema are uncorrelatable: an identical old object does not ratchet the error
    updated = reg.handle("UPDATE", thing({"free": deep}), thing({"free": deep}))
    assert errors(updated) == ["spec.free: Too many: 1: must have at most 0 items"]


def test_finalizer_warnings_on_update_name_only_added_ones():
    reg = registry({})
    old = thing({}, finalizers=["cleanup"])
    out = reg.handle("UPDATE", thing({}, finalizers=["cleanup", "other"]), old)
    assert out.warnings == ['metadata.finalizers: "other": prefer a domain-qualified finalizer name to avoid '
                            "accidental conflicts with other finalizer writers"]
