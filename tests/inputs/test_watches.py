"""The watch lists built in one place (``webhook.inputs.watches``): what ``validate --cluster``
lists besides the lookups for the params of native policies."""

from __future__ import annotations

from tests.support.cel import EVALUATOR
from webhook.inputs.watches import lookup_watches, lookup_watches_with
from webhook.schema import CRDRegistry


def test_a_param_kind_is_listed_whole_with_its_plural():
    (config_map,) = [w for w in lookup_watches() if w.kind == "ConfigMap"]
    assert config_map.field_selector == "metadata.name=kubeai-config"  # the lookups: KubeAI's config only
    registry = CRDRegistry.shipped(evaluator=EVALUATOR)
    watches = lookup_watches_with({("v1", "ConfigMap"), ("inference.networking.x-k8s.io/v1alpha2", "InferencePool"),
                                   ("gateway.networking.k8s.io/v1", "GatewayClass"), ("v1", "LimitRange")},
                                  registry.served)
    by_kind = {(w.api_version, w.kind): w for w in watches}
    assert len(by_kind) == len(watches)  # one watch per kind: the narrowed one replaced
    whole = by_kind[("v1", "ConfigMap")]
    assert (whole.plural, whole.field_selector) == ("configmaps", None)
    assert by_kind[("inference.networking.x-k8s.io/v1alpha2", "InferencePool")] \
        in lookup_watches()  # listed whole already: kept as the lookups have it
    assert by_kind[("gateway.networking.k8s.io/v1", "GatewayClass")].plural == "gatewayclasses"  # its CRD's
    assert by_kind[("v1", "LimitRange")].plural == "limitranges"  # a built-in kind's
    assert lookup_watches_with(()) == lookup_watches()
