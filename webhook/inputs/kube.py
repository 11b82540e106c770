"""The one way infergate builds its Kubernetes client (``serve --kube-state`` and its certificate
Secret, ``controller``, ``validate --kubeconfig``, ``audit --kubeconfig``).

In a pod without a kubeconfig named, the pod's service account; else the kubeconfig (the one
named, else ``$KUBECONFIG``, else ``~/.kube/config``) at its context (the one named, else its
current one).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubernetes import client

__all__ = ["KubeClientConfig", "KubeConfigError", "api_client"]

IN_CLUSTER_VARIABLE = "KUBERNETES_SERVICE_HOST"  # set in every pod


class KubeConfigError(ValueError):
    """No client could be configured (a bad or missing kubeconfig, an unknown context); one line."""


@dataclass(frozen=True, slots=True)
class KubeClientConfig:
    kubeconfig: Path | None = None  # None: in a pod its service account, else $KUBECONFIG or ~/.kube/config
    context: str | None = None  # None: the kubeconfig's current context
    in_cluster: bool = True  # in a pod without a kubeconfig named, use its service account
    # connections kept per host: every watch of a watch cache holds one for minutes, and a pool
    # smaller than the watches discards and reopens connections, with a warning each time
    pool_size: int | None = None  # None: the client's default
    # the apiserver names a write's field manager (and its audit log the caller) after the user
    # agent: None keeps the client's own
    user_agent: str | None = None

    def in_pod(self) -> bool:
        """Whether :func:`api_client` tries the pod's service account first."""
        return self.kubeconfig is None and self.in_cluster and IN_CLUSTER_VARIABLE in os.environ


def api_client(settings: KubeClientConfig) -> client.ApiClient:
    """A client configured by ``settings``; :class:`KubeConfigError` (one line) when none can be."""
    # imported here: a command that only may read a cluster (validate, audit) takes its
    # configuration without loading the kubernetes client
    from kubernetes import client, config

    configuration = client.Configuration()
    if settings.pool_size is not None:
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, settings.pool_size)
    try:
        loaded = False
        if settings.in_pod():
            try:
                config.load_incluster_config(client_configuration=configuration)
                loaded = True
            except config.ConfigException:
                pass  # a pod without a mounted token: its kubeconfig, as kubectl does
        if not loaded:
            # $KUBECONFIG read now (the client reads it once, when first imported)
            files = str(settings.kubeconfig) if settings.kubeconfig else os.environ.get("KUBECONFIG")
            config.load_kube_config(config_file=files, context=settings.context, client_configuration=configuration)
    except Exception as exc:  # the kubernetes client raises several types for a bad kubeconfig
        raise KubeConfigError(" ".join(str(exc).split()) or type(exc).__name__) from None
    api = client.ApiClient(configuration)
    if settings.user_agent is not None:
        api.user_agent = settings.user_agent
    return api
