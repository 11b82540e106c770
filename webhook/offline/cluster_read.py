"""A live cluster read once, for ``infergate audit --kubeconfig`` and ``infergate validate
--kubeconfig``: its objects through the watch cache the webhook runs (``webhook.state.kube.KubeState``: paged lists, read-only), with the
CRDs the cluster serves as the schema (``webhook.schema.watched.WatchedCRDs``).

What is read (``webhook.inputs.watches.audited_watches``): what the policies look up, the served
kinds' CRDs, and every kind the bundled CRDs serve that a policy may apply to (one watch per
group and kind: its newest version, older ones where the cluster serves only those). Nothing is
written.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from webhook.apiversion import group_of
from webhook.inputs.cluster import cluster_crds, watch_cache
from webhook.inputs.kube import KubeClientConfig, KubeConfigError
from webhook.inputs.kube import api_client as kube_api_client
from webhook.inputs.watches import audited_watches, lookup_watches
from webhook.kinds import Kind
from webhook.schema.watched import WatchedCRDs
from webhook.state.kube import KubeState, WatchedKind


class ClusterReadError(RuntimeError):
    """The cluster could not be read (unreachable, not synced within the timeout)."""


@dataclass
class ClusterObjects:
    objects: list[dict[str, Any]]
    state: KubeState
    registry: WatchedCRDs


def api_client(settings: KubeClientConfig) -> Any:
    """A client of the cluster ``settings`` name; a bad kubeconfig raises ``ClusterReadError``,
    in one line."""
    try:
        return kube_api_client(settings)
    except KubeConfigError as exc:
        raise ClusterReadError(str(exc)) from None


def read_cluster(api_client: Any, kinds: list[Kind], evaluator: Any, *,
                 timeout: float, native: tuple[WatchedKind, ...] = (),
                 params: tuple[WatchedKind, ...] = ()) -> ClusterObjects:
    """Every object of ``kinds`` in the cluster, with the cluster view the policies read and the
    cluster's CRDs (and ``native``: the cluster's ValidatingAdmissionPolicies and bindings,
    ``native_policy_watches``); raises ``ClusterReadError`` when it does not sync within
    ``timeout`` s. ``params`` (the native policies' param kinds) are read after the rest: a kind
    the user may not list (RBAC) stays unknown in the view (``KubeState.pending_reason``), what
    reads it unknown, and the read goes on."""
    watches, audited = audited_watches(kinds, native)
    state = watch_cache(api_client, watches)
    registry = cluster_crds(state, evaluator)
    synced(state, timeout)
    if params:
        _read_late(state, params, timeout)
    objects: list[dict[str, Any]] = []
    for watch in audited:
        objects += state.list(watch.api_version, watch.kind)
    return ClusterObjects(objects, state, registry)


def _read_late(state: KubeState, params: tuple[WatchedKind, ...], timeout: float) -> None:
    """Watch ``params`` besides (each in place of a watch of the same kind, a lookup's of one
    ConfigMap) and wait, within ``timeout`` s, until each is synced or has failed once."""
    keys = {(group_of(w.api_version), w.kind) for w in params}
    state.set_kinds(tuple(w for w in state.kinds if (group_of(w.api_version), w.kind) not in keys) + params)
    deadline = time.monotonic() + timeout
    while any(state.pending_reason(w.api_version, w.kind) == "not synced yet" for w in params):
        if time.monotonic() > deadline:
            return  # what is still not synced stays unknown, named where it is read
        time.sleep(0.05)


def read_state(api_client: Any, *, timeout: float, kinds: tuple[WatchedKind, ...] | None = None) -> KubeState:
    """The cluster view the policies read (``kinds``; unless told, ``lookup_watches``), listed
    once and no longer watched (``infergate validate --kubeconfig``): every kind it holds whole,
    as the webhook's; raises ``ClusterReadError`` when it does not sync within ``timeout`` s."""
    state = watch_cache(api_client, kinds if kinds is not None else lookup_watches())
    synced(state, timeout)
    state.stop()  # what was listed stays: the policies read it, nothing watches any more
    return state


def synced(state: KubeState, timeout: float) -> None:
    """Start ``state`` and wait for every kind's first list; on failure stop it and raise
    ``ClusterReadError`` with the last problem the watch cache met, in one line."""
    # the watch cache logs each retry (a server logs them); a command says one line at the end
    problems = _LastProblem()
    logger = logging.getLogger(KubeState.__module__)
    propagate = logger.propagate
    logger.addHandler(problems)
    logger.propagate = False
    state.start()
    try:
        if not asyncio.run(state.wait_ready(timeout)):
            problem = problems.last or state.interrupted or "no answer"
            raise ClusterReadError(f"the cluster was not read within {timeout:g}s: {_short(problem)}")
    except BaseException:
        state.stop()
        raise
    finally:
        logger.removeHandler(problems)
        logger.propagate = propagate


class _LastProblem(logging.Handler):
    """The last warning the watch cache logged (why the cluster could not be read)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 300 else flat[:297] + "..."
