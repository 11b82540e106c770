"""``infergate audit --kubeconfig``: the objects of a live cluster, read once through the watch
cache the webhook runs (``webhook.state.kube.KubeState``: paged lists, read-only), with the
CRDs the cluster serves as the schema (``webhook.schema.watched.WatchedCRDs``).

What is read: what the policies look up (``WEBHOOK_KINDS``), the bundled kinds' CRDs, and every
kind the bundled CRDs serve that a policy may apply to (one watch per group and kind: its
newest version, older ones where the cluster serves only those). Nothing is written.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any

from webhook.schema.bundled import webhook_crd_names
from webhook.schema.watched import CRD_API_VERSION, CRD_KIND, CRD_PLURAL, WatchedCRDs
from webhook.state import group_of
from webhook.state.kube import WEBHOOK_KINDS, KubeState, WatchedKind

_VERSION = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?$")


class ClusterReadError(RuntimeError):
    """The cluster could not be read (unreachable, not synced within the timeout)."""


@dataclass
class ClusterObjects:
    objects: list[dict[str, Any]]
    state: KubeState
    registry: WatchedCRDs


def version_key(version: str) -> tuple[int, int, int]:
    """Kubernetes' version priority: GA over beta over alpha, then by number."""
    found = _VERSION.match(version)
    if found is None:
        return (-1, -1, -1)
    major, stage, minor = found.groups()
    return int(major), {"alpha": 0, "beta": 1, None: 2}[stage], int(minor or 0)


def audited_watches(kinds: list[tuple[str, str, str, bool]]) -> tuple[list[WatchedKind], list[WatchedKind]]:
    """(every watch, the watches of audited kinds) for ``kinds`` (``Auditor.audited_kinds``):
    one per group and kind, the webhook's own where it watches the kind already."""
    by_kind: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for api_version, kind, plural, _ in kinds:
        by_kind.setdefault((group_of(api_version), kind), []).append((api_version.rpartition("/")[2], plural))
    webhook = {(group_of(k.api_version), k.kind): k for k in WEBHOOK_KINDS}
    audited: list[WatchedKind] = []
    extra: list[WatchedKind] = []
    for (group, kind), versions in sorted(by_kind.items()):
        if (group, kind) in webhook:
            audited.append(webhook[(group, kind)])
            continue
        versions.sort(key=lambda v: version_key(v[0]), reverse=True)
        newest, plural = versions[0]
        watch = WatchedKind(f"{group}/{newest}" if group else newest, kind, plural,
                            older_versions=tuple(v for v, _ in versions[1:]))
        audited.append(watch)
        extra.append(watch)
    crds = [WatchedKind(CRD_API_VERSION, CRD_KIND, CRD_PLURAL, field_selector=f"metadata.name={name}")
            for name in sorted(webhook_crd_names())]
    return list(WEBHOOK_KINDS) + extra + crds, audited


def api_client(kubeconfig: str | None, context: str | None) -> Any:
    """A client of the cluster of ``kubeconfig`` (None: ``$KUBECONFIG``, else ``~/.kube/config``)
    and ``context`` (None: its current one); a bad kubeconfig raises ``ClusterReadError``, in one line."""
    from kubernetes import config as kube_config

    try:
        return kube_config.new_client_from_config(config_file=kubeconfig, context=context)
    except Exception as exc:  # the kubernetes client raises several types for a bad kubeconfig
        raise ClusterReadError(" ".join(str(exc).split())) from None


def read_cluster(api_client: Any, kinds: list[tuple[str, str, str, bool]], evaluator: Any, *,
                 timeout: float) -> ClusterObjects:
    """Every object of ``kinds`` in the cluster, with the cluster view the policies read and the
    cluster's CRDs; raises ``ClusterReadError`` when it does not sync within ``timeout`` s."""
    watches, audited = audited_watches(kinds)
    state = KubeState(api_client, tuple(watches))
    registry = WatchedCRDs(state, evaluator)
    state.on_change(CRD_API_VERSION, CRD_KIND, registry.refresh)
    synced(state, timeout)
    objects: list[dict[str, Any]] = []
    for watch in audited:
        objects += state.list(watch.api_version, watch.kind)
    return ClusterObjects(objects, state, registry)


def read_state(api_client: Any, *, timeout: float, kinds: tuple[Any, ...] = WEBHOOK_KINDS) -> KubeState:
    """The cluster view the policies read (``kinds``: ``WEBHOOK_KINDS`` unless told), listed once
    and no longer watched (``infergate validate --kubeconfig``): every kind it holds whole, as
    the webhook's; raises ``ClusterReadError`` when it does not sync within ``timeout`` s."""
    state = KubeState(api_client, kinds)
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
