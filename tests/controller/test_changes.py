"""Which objects a change touches, and the change feed over a cluster view."""

from __future__ import annotations

import copy

from webhook import kinds
from webhook.controller.changes import ChangeFeed, affected_keys
from webhook.state.memory import MemoryState

from tests.controller.helpers import cluster_objects, order

IS, CLASS = kinds.INFERENCE_SERVICE, kinds.INFERENCE_SERVICE_CLASS


def versioned(objects):
    for index, obj in enumerate(objects):
        obj.setdefault("metadata", {})["resourceVersion"] = str(index + 1)
    return objects


def view_with(*extra):
    second = order()
    second["metadata"]["name"] = "other-order"
    second["spec"]["inferenceServiceClassName"] = "another-class"
    return MemoryState(versioned(cluster_objects() + [order(), second, *extra]))


def changed(view, obj):
    """The keys touched when ``obj`` changes in ``view``."""
    feed = ChangeFeed(view)
    feed.poll()
    view.put(obj)
    return affected_keys(feed.poll(), view)


def test_first_poll_sees_everything_and_then_nothing():
    view = view_with()
    feed = ChangeFeed(view)
    assert len(feed.poll()) == len(cluster_objects()) + 2
    assert feed.poll() == []


def test_deletion_is_a_change():
    view = view_with()
    feed = ChangeFeed(view)
    feed.poll()
    view.delete(IS.api_version, IS.kind, "hf-embedding", "hardfest-demo")
    (change,) = feed.poll()
    assert change.deleted and change.obj["metadata"]["name"] == "hf-embedding"
    assert affected_keys([change], view) == {(IS, "hardfest-demo", "hf-embedding")}


def test_class_spec_change_touches_its_orders_status_change_only_itself():
    view = view_with()
    service_class = copy.deepcopy(view.get(CLASS.api_version, CLASS.kind, "a30-shared"))
    service_class["metadata"]["resourceVersion"] = "900"
    service_class["status"] = {"phase": "Ready"}
    assert changed(view, service_class) == {(CLASS, None, "a30-shared")}
    service_class = copy.deepcopy(service_class)
    service_class["metadata"]["resourceVersion"] = "901"
    service_class["spec"]["scalingPolicy"]["maxReplicas"] = 5
    assert changed(view, service_class) == {(CLASS, None, "a30-shared"), (IS, "hardfest-demo", "hf-embedding")}


def test_inventory_and_references_touch_every_class_and_order():
    view = view_with()
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "new", "resourceVersion": "900"}}
    everything = {(CLASS, None, "a30-shared"), (IS, "hardfest-demo", "hf-embedding"), (IS, "hardfest-demo", "other-order")}
    assert changed(view, device_class) == everything
    certificate = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls", "namespace": "d8-system", "resourceVersion": "901"}}
    assert changed(view, certificate) == everything


def test_namespaced_inputs_touch_their_namespace():
    view = view_with()
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token", "namespace": "hardfest-demo", "resourceVersion": "900"}}
    assert changed(view, secret) == {(IS, "hardfest-demo", "hf-embedding"), (IS, "hardfest-demo", "other-order")}
    elsewhere = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x", "namespace": "sandbox", "resourceVersion": "901"}}
    assert changed(view, elsewhere) == set()


def test_workload_objects_touch_the_order_they_are_labelled_with():
    view = view_with()
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "c", "namespace": "hardfest-demo", "resourceVersion": "900",
                          "labels": {kinds.INFERENCE_SERVICE_LABEL: "other-order"}}}
    assert changed(view, claim) == {(IS, "hardfest-demo", "other-order")}


def test_pods_touch_kubeai_models_and_pools_of_their_namespace():
    model = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "ns", "resourceVersion": "800"}}
    pool = {"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "InferencePool",
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "801"}}
    view = view_with(model, pool)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "ns", "resourceVersion": "900"}}
    assert changed(view, pod) == {(kinds.KUBEAI_MODEL, "ns", "m"), (kinds.INFERENCE_POOL, "ns", "p")}


def test_pool_or_rival_changes_touch_every_inference_model_of_the_namespace():
    def model(name):
        return {"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "InferenceModel",
                "metadata": {"name": name, "namespace": "ns", "resourceVersion": "80" + name[-1]},
                "spec": {"modelName": "llama", "poolRef": {"name": "p"}}}
    view = view_with(model("im1"), model("im2"))
    rival = model("im3")
    rival["metadata"]["resourceVersion"] = "900"
    assert changed(view, rival) == {(kinds.INFERENCE_MODEL, "ns", n) for n in ("im1", "im2", "im3")}
