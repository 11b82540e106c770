"""The request as policies read it (``request_view``) is exactly the request model's dump."""

from __future__ import annotations

import pytest

from webhook.admission.chain import request_view
from webhook.admission.review import AdmissionReview

MODEL = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "ml"},
         "spec": {"url": "hf://a/b", "engine": "VLLM", "features": ["TextGeneration"]}}

REQUESTS = {
    "minimal": {"uid": "1", "kind": {"kind": "Model"}, "resource": {"resource": "models"}, "operation": "DELETE"},
    "create": {
        "uid": "2", "kind": {"group": "kubeai.org", "version": "v1", "kind": "Model"},
        "resource": {"group": "kubeai.org", "version": "v1", "resource": "models"},
        "requestKind": {"group": "kubeai.org", "version": "v1", "kind": "Model"},
        "requestResource": {"group": "kubeai.org", "version": "v1", "resource": "models"},
        "name": "m", "namespace": "ml", "operation": "CREATE",
        "userInfo": {"username": "alice", "uid": "u-1", "groups": ["system:authenticated"],
                     "extra": {"scopes": ["a", "b"]}},
        "object": MODEL, "oldObject": None, "dryRun": True,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "kubectl"},
    },
    "update with extra fields everywhere": {
        "uid": "3", "kind": {"group": "kubeai.org", "version": "v1", "kind": "Model", "future": 1},
        "resource": {"group": "kubeai.org", "version": "v1", "resource": "models", "more": [1, {"x": None}]},
        "subResource": "status", "requestSubResource": "status", "operation": "UPDATE",
        "userInfo": {"username": "bob", "impersonated": {"by": "carol"}},
        "object": MODEL, "oldObject": MODEL, "newField": {"nested": [True, 1.5, "s"]}, "another": None,
    },
}


@pytest.mark.parametrize("name", list(REQUESTS))
def test_the_view_is_the_dump_without_the_objects(name):
    request = AdmissionReview.model_validate(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": REQUESTS[name]}).request
    view = request_view(request)
    dumped = request.model_dump(exclude={"object", "oldObject"})
    assert view == dumped
    assert list(view) == list(dumped)  # the same keys in the same order
    assert "object" not in view and "oldObject" not in view
