"""Every status the controller writes is what the apiserver stores: accepted by the shipped
CRDs' status schema and kept byte for byte (nothing pruned, nothing defaulted). Were it not,
the stored status would never equal the desired one and every resync would write again."""

from __future__ import annotations

import copy
from datetime import datetime, timezone

import pytest

from webhook.controller.context import ReconcileContext
from webhook.offline.reconcile import load_state, owned_objects, read_manifests
from webhook.controller.reconcilers import reconcile
from webhook.shipped_data import examples_dir
from webhook.schema import CRDRegistry

from tests.controller.helpers import CLUSTER, ORDERS
from tests.support.cel import EVALUATOR

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
MANIFESTS = examples_dir().parent / "manifests"


def scenarios():
    extra = read_manifests([str(MANIFESTS / "valid"), str(MANIFESTS / "denied-by-webhook")])
    yield "examples", load_state(None, extra)
    for path in sorted(ORDERS.glob("*.yaml")):
        yield path.stem, load_state(CLUSTER, read_manifests([str(path)]))


CASES = [(name, state, obj) for name, state in scenarios() for obj in owned_objects(state)]


@pytest.fixture(scope="module")
def registry():
    return CRDRegistry.shipped(evaluator=EVALUATOR)


@pytest.mark.parametrize(
    "state, obj", [(s, o) for _, s, o in CASES],
    ids=[f"{n}:{o['kind']}/{o['metadata']['name']}" for n, _, o in CASES],
)
def test_status_is_stored_as_written(registry, state, obj):
    stored = copy.deepcopy(obj)
    stored["metadata"].setdefault("generation", 1)
    stored["metadata"].setdefault("resourceVersion", "1")
    stored["metadata"].setdefault("uid", "4f5c1f9e-0000-4000-8000-000000000001")
    stored["metadata"].setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
    status = reconcile(stored, ReconcileContext(state=state, now=NOW, evaluator=EVALUATOR))
    outcome = registry.handle("UPDATE", {**stored, "status": status}, stored, subresource="status",
                              namespace=stored["metadata"].get("namespace"))
    assert outcome.allowed, [str(e) for e in outcome.errors]
    assert outcome.object["status"] == status
