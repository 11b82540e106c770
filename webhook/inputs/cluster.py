"""The cluster view read from a live cluster, built one way: the webhook's watch cache (what
the policies look up and the served kinds' CRDs) and the cluster's CRDs as the schema, compiled
as the CRD watches deliver them. ``serve --kube-state`` keeps it watching; ``validate`` and
``audit --kubeconfig`` list once (``webhook.offline.cluster_read``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from webhook.inputs.watches import webhook_watches
from webhook.schema.watched import CRD_API_VERSION, CRD_KIND, WatchedCRDs
from webhook.state.kube import KubeState, WatchedKind

if TYPE_CHECKING:
    from webhook.cel import Evaluator

__all__ = ["cluster_crds", "watch_cache"]


def watch_cache(api_client: Any, watches: Iterable[WatchedKind] | None = None) -> KubeState:
    """A watch cache of ``watches`` (default: the webhook's), not started."""
    return KubeState(api_client, tuple(watches) if watches is not None else webhook_watches())


def cluster_crds(state: KubeState, evaluator: Evaluator) -> WatchedCRDs:
    """The CRDs the cluster serves (in ``state``, a watch cache not yet started) as the schema:
    compiled as the CRD watches deliver them, the first list of each before ``state`` is ready."""
    registry = WatchedCRDs(state, evaluator)
    state.on_change(CRD_API_VERSION, CRD_KIND, registry.refresh)
    return registry
