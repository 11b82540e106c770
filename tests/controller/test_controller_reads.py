"""The controller watches what its reconcilers read (``reconcilers.READS``, ``reads_of``): each
reconciler, run over the example cluster and the example manifests, reads nothing else; and a
controller that writes no status of a Pod-reading kind watches no Pod."""

from __future__ import annotations

from datetime import datetime, timezone

from tests.support.cel import EVALUATOR
from webhook import shipped_data
from webhook import kinds
from webhook.controller.context import ReconcileContext
from webhook.controller.reconcilers import RECONCILERS, reads_of
from webhook.controller.runner import controller_watches
from webhook.state.memory import MemoryState
from webhook.state import read_manifests


class RecordingState(MemoryState):
    """A cluster view that remembers the kinds read of it."""

    def __init__(self, objects):
        super().__init__(objects)
        self.read: set[tuple[str, str]] = set()

    def get(self, api_version, kind, name, namespace=None):
        self.read.add((api_version, kind))
        return super().get(api_version, kind, name, namespace)

    def list(self, api_version, kind, namespace=None, label_selector=None, *, selector=None):
        self.read.add((api_version, kind))
        return super().list(api_version, kind, namespace, label_selector, selector=selector)


def example_objects() -> list[dict]:
    state = shipped_data.examples_dir()
    objects = read_manifests(state)
    objects += [o for o in read_manifests(state.parent / "manifests" / "valid")
                if (o.get("apiVersion"), o.get("kind")) in kinds.BY_KEY]
    return objects


def test_each_reconciler_reads_only_what_it_declares():
    objects = example_objects()
    reconciled = set()
    for kind, reconciler in RECONCILERS.items():
        owned = [o for o in objects if (o.get("apiVersion"), o.get("kind")) == (kind.api_version, kind.kind)]
        for obj in owned:
            state = RecordingState(objects)
            reconciler(obj, ReconcileContext(state=state, now=datetime(2026, 1, 1, tzinfo=timezone.utc),
                                             evaluator=EVALUATOR))
            declared = {(k.api_version, k.kind) for k in reads_of([kind])}
            assert state.read <= declared, f"{kind.kind} reads {state.read - declared} beyond its READS"
            reconciled.add(kind)
    assert {kinds.KUBEAI_MODEL, kinds.INFERENCE_POOL, kinds.INFERENCE_SERVICE} <= reconciled


def test_a_controller_writing_no_pod_reading_status_watches_no_pod():
    classes_only = reads_of([kinds.INFERENCE_SERVICE_CLASS])
    assert kinds.POD not in classes_only and kinds.SECRET in classes_only
    assert kinds.POD in reads_of([kinds.INFERENCE_POOL]) and kinds.POD in reads_of([kinds.KUBEAI_MODEL])
    watched = {(w.api_version, w.kind) for w in controller_watches(classes_only, audit=False)}
    assert ("v1", "Pod") not in watched and ("v1", "Secret") in watched
