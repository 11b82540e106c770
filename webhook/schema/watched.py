"""The CRDs a cluster serves, as the schema (``infergate serve --kube-state``).

The webhook judges an object against the CRD the cluster serves for it, not the bundled one: the
cluster may run another release of KubeAI or GIE. :class:`WatchedCRDs` reads the
CustomResourceDefinitions the cluster view holds (the watch cache lists and watches the bundled
kinds' CRDs by name) and compiles each served version once; a changed CRD is compiled again
when its change arrives, in the watch's thread, and the next review uses it — reviews read the
registry in force through :meth:`current` and never wait for a compile. A kind or version the
cluster does not serve is in no registry: the admission chain leaves it to the apiserver.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Iterable

import orjson

from webhook import kinds
from webhook.schema.crd import ServedVersion, served_versions
from webhook.schema.registry import CRDRegistry

if TYPE_CHECKING:
    from webhook.cel import Evaluator

__all__ = ["CRD_API_VERSION", "CRD_KIND", "CRD_PLURAL", "WatchedCRDs"]

log = logging.getLogger(__name__)

_CRD = kinds.CUSTOM_RESOURCE_DEFINITION
CRD_API_VERSION, CRD_KIND, CRD_PLURAL = _CRD.api_version, _CRD.kind, _CRD.plural


class WatchedCRDs:
    """A :class:`CRDRegistry` of the CRDs in ``state``, rebuilt by :meth:`refresh`; their rules
    evaluated with ``evaluator``."""

    def __init__(self, state: Any, evaluator: Evaluator) -> None:
        self._state = state
        self._evaluator = evaluator
        self._lock = threading.Lock()  # one refresh at a time (the CRD watches' threads)
        self._compiled: dict[str, tuple[bytes, list[ServedVersion]]] = {}  # name -> (spec, versions)
        self._current = CRDRegistry(evaluator=evaluator)
        self.compiles = 0  # for tests and metrics: CRDs compiled so far

    def current(self) -> CRDRegistry:
        """The registry in force (a new object after every change; never mutated)."""
        return self._current

    def refresh(self) -> None:
        """Compile what changed among the cluster's CRDs and put the result in force."""
        with self._lock:
            crds = self._state.list(CRD_API_VERSION, CRD_KIND)
            self._current = self._build(crds)

    def _build(self, crds: Iterable[dict[str, Any]]) -> CRDRegistry:
        registry = CRDRegistry(evaluator=self._evaluator)
        compiled: dict[str, tuple[bytes, list[ServedVersion]]] = {}
        for crd in crds:
            name = (crd.get("metadata") or {}).get("name") or ""
            spec = orjson.dumps(crd.get("spec"), option=orjson.OPT_SORT_KEYS)
            known = self._compiled.get(name)
            if known is not None and known[0] == spec:
                versions = known[1]
            else:
                try:
                    versions = served_versions(crd, self._evaluator)
                except Exception as exc:  # noqa: BLE001 - any CRD a cluster serves must not stop the others
                    log.error("CRD %s cannot be compiled, so its kinds are left to the apiserver: %s: %s",
                              name, type(exc).__name__, exc)
                    continue
                self.compiles += 1
                log.info("CRD %s compiled: serving %s", name,
                         ", ".join(f"{v.api_version} {v.kind}" for v in versions) or "no version")
            compiled[name] = (spec, versions)
            registry.add(crd, versions)
        self._compiled = compiled
        return registry
