"""Arbitrary JSON never crashes the pipeline: every write gets an ``Outcome``."""

from __future__ import annotations


from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.schema import CRDRegistry, Outcome
from tests.support.paths import CHART_CRDS, LEGACY_CRDS, REFERENCE
from tests.support.cel import EVALUATOR

REGISTRY = CRDRegistry.load([REFERENCE / "conformance", CHART_CRDS, LEGACY_CRDS], evaluator=EVALUATOR)  # the seed-era kinds too
KINDS = REGISTRY.kinds()


def _schema_names(node, out, depth=0):
    if depth > 6:
        return
    for key, child in node.properties.items():
        out.add(key)
        _schema_names(child, out, depth + 1)
    for child in (node.items, node.additional):
        if child is not None:
            _schema_names(child, out, depth + 1)


_NAMES: set[str] = set()
for _api, _kind in KINDS:
    _schema_names(REGISTRY.served(_api, _kind).schema, _NAMES)
KEYS = st.one_of(st.sampled_from(sorted(_NAMES)), st.text(max_size=6))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                    st.floats(allow_nan=False), st.text(max_size=12))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                    st.dictionaries(KEYS, inner, max_size=5)), max_leaves=25)


def _object(kind_index: int, spec, status, metadata):
    api, kind = KINDS[kind_index % len(KINDS)]
    return {"apiVersion": api, "kind": kind, "metadata": metadata, "spec": spec, "status": status}


METADATA = st.one_of(st.fixed_dictionaries({"name": st.sampled_from(["fx-a", "ok", "Bad_Name", ""]),
                                            "namespace": st.just("default")}), JSON)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 100), JSON, JSON, METADATA, st.sampled_from([None, "status"]), JSON)
def test_any_json_gets_an_outcome(kind_index, spec, status, metadata, subresource, old_spec):
    obj = _object(kind_index, spec, status, metadata)
    created = REGISTRY.handle("CREATE", obj)
    assert isinstance(created, Outcome)
    assert created.allowed == (created.code in (200, 201))
    assert (created.status is None) == created.allowed
    old = _object(kind_index, old_spec, status, {"name": "ok", "namespace": "default"})
    updated = REGISTRY.handle("UPDATE", obj, old, subresource)
    assert isinstance(updated, Outcome)


@settings(max_examples=30, deadline=None)
@given(JSON)
def test_any_document_gets_an_outcome(document):
    assert isinstance(REGISTRY.handle("CREATE", document), Outcome)


KEYWORD_VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3))
SCHEMA = st.recursive(
    st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(["object", "array", "string", "integer", "number", "boolean", 5]),
        "format": st.sampled_from(["int32", "float", "date-time", "byte", "uri", 7]),
        "enum": st.lists(SCALARS, max_size=3), "pattern": st.sampled_from(["^a", "(", "\\p{Lu}"]),
        "minimum": KEYWORD_VALUES, "maximum": KEYWORD_VALUES, "multipleOf": st.sampled_from([0, 0.1, 3, -1, "x"]),
        "minLength": KEYWORD_VALUES, "maxLength": KEYWORD_VALUES, "maxItems": KEYWORD_VALUES,
        "nullable": st.booleans(), "default": JSON, "x-kubernetes-int-or-string": st.booleans(),
        "x-kubernetes-preserve-unknown-fields": st.booleans(), "x-kubernetes-embedded-resource": st.booleans(),
        "x-kubernetes-list-type": st.sampled_from(["set", "map", "atomic", 1]),
        "x-kubernetes-list-map-keys": st.lists(KEYS, max_size=2), "required": st.lists(KEYS, max_size=2),
    }),
    lambda inner: st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(["object", "array"]), "properties": st.dictionaries(KEYS, inner, max_size=3),
        "items": inner, "additionalProperties": st.one_of(inner, st.booleans()),
        "allOf": st.lists(inner, max_size=2), "anyOf": st.lists(inner, max_size=2),
        "oneOf": st.lists(inner, max_size=2), "not": inner, "required": st.lists(KEYS, max_size=2),
    }),
    max_leaves=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCHEMA, JSON, JSON)
def test_any_schema_and_value_get_an_outcome(schema, spec, old_spec):
    from tests.schema.helpers import crd, thing

    registry = CRDRegistry([crd(schema)], evaluator=EVALUATOR)
    assert isinstance(registry.handle("CREATE", thing(spec)), Outcome)
    assert isinstance(registry.handle("UPDATE", thing(spec), thing(old_spec)), Outcome)
