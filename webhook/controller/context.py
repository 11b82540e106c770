"""What every reconciler reads: the cluster view, the clock, the settings, the inventory.

Reconcilers are pure functions ``(object, ReconcileContext) -> status``: the context is
their whole input. The inventory (each DeviceClass's offer, built by evaluating CEL
selectors against every device) is the one expensive derived value, so it is built lazily
and can be handed in already built: the runner keeps one until a DeviceClass or a
ResourceSlice changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from webhook.controller.planner import Inventory
from webhook import kinds
from webhook.state.base import ClusterState

if TYPE_CHECKING:
    from webhook.cel import Evaluator


@dataclass(frozen=True)
class Settings:
    replan_timeout: timedelta = timedelta(minutes=5)
    replan_limit: int = 3
    # Deckhouse global settings when no ModuleConfig "global" is in the cluster view
    # (DKP's own default for global.modules.https.mode is CertManager).
    public_domain_template: str | None = None
    https_mode: str = "CertManager"


def build_inventory(state: ClusterState, evaluator: Evaluator) -> Inventory:
    return Inventory.build(
        state.list(kinds.DEVICE_CLASS.api_version, kinds.DEVICE_CLASS.kind),
        state.list(kinds.RESOURCE_SLICE.api_version, kinds.RESOURCE_SLICE.kind),
        evaluator,
    )


@dataclass
class ReconcileContext:
    state: ClusterState
    now: datetime
    evaluator: Evaluator  # the DeviceClasses' CEL selectors
    settings: Settings = field(default_factory=Settings)
    inventory_source: Callable[[], Inventory] | None = None
    _inventory: Inventory | None = None
    memo: dict[Any, Any] = field(default_factory=dict)  # per-context results (class verdicts)

    @property
    def inventory(self) -> Inventory:
        if self._inventory is None:
            source = self.inventory_source or (lambda: build_inventory(self.state, self.evaluator))
            self._inventory = source()
        return self._inventory

    def get(self, kind: kinds.Kind, name: str, namespace: str | None = None) -> dict | None:
        return self.state.get(kind.api_version, kind.kind, name, namespace if kind.namespaced else None)

    def list(self, kind: kinds.Kind, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        return self.state.list(kind.api_version, kind.kind, namespace, label_selector)
