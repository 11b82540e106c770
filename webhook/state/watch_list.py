"""What a watch cache watches: of the kinds it may watch, those something reads.

Every replica of the webhook (and the controller) would otherwise list and watch every kind a
policy *might* look up, every Pod and Secret of the cluster among them, whatever the loaded
policies read. The list is a function of what is loaded: the policies' lookups (their
type-checked ``lookups``, params and what a policy written in Python declares:
``webhook.policy.unknown.kinds_read``) and what other readers name (the controller's
reconcilers, the CRDs that are the schema). A reload computes it again, and the watch cache
starts and stops watches to match (``KubeState.set_kinds``).
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.state.base import group_of
from webhook.state.kube import WatchedKind

__all__ = ["watches_for"]


def watches_for(candidates: Iterable[WatchedKind], reads: Iterable[tuple[str, str]]) -> tuple[WatchedKind, ...]:
    """The ``candidates`` whose group and kind are among ``reads`` ((apiVersion, kind): a kind
    read at any version of its group is the same objects), in the candidates' order."""
    wanted = {(group_of(api_version), kind) for api_version, kind in reads}
    return tuple(w for w in candidates if (group_of(w.api_version), w.kind) in wanted)
