"""What a client controls must not grow the server's memory: label sets, caches."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from webhook.server.metrics import MAX_KIND_LABELS

from .conftest import review


def kinds_in_metrics(text: str) -> set[str]:
    return {s.labels["kind"] for family in text_string_to_metric_families(text) for s in family.samples if "kind" in s.labels}


def test_arbitrary_kinds_do_not_grow_the_metrics(recording_server):
    client = recording_server.client()
    served = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "a"}}
    assert client.post("/validate", review(served)).status == 200
    for i in range(MAX_KIND_LABELS * 4):
        junk = {"apiVersion": "x/v1", "kind": f"Junk{i}", "metadata": {"name": "m"}}
        assert client.post("/validate", review(junk)).status == 200
    assert client.post("/validate", review(served)).status == 200
    kinds = kinds_in_metrics(client.get("/metrics").body.decode())
    assert "Model" in kinds and "other" in kinds
    assert len(kinds) <= MAX_KIND_LABELS + 1
