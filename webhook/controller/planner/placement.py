"""Choose where an order lands: the effective DeviceClass set, then the first feasible class.

Rules (docs/decisions.md, "Placement planning"; docs/design.md, "Devices and placement"):

* effective set E — the intersection table (order ``deviceClasses`` × class
  ``allowedDeviceClasses``), minus ``status.resolved.excludedDeviceClasses``;
* a class is feasible when its placement mode and sharing mode are allowed and its memory
  holds the need: Dedicated takes the fewest devices n (1 <= n <= maxAcceleratorCount, and no
  more than one node holds) at share 100; Shared takes one device at the smallest share in
  [minSharePercent, maxSharePercent] that holds the need;
* candidates are tried in E's order (order list, else class list, else name); first wins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from webhook.controller.planner.devices import (
    DEDICATED,
    PARTITION,
    SHARED,
    WHOLE_DEVICE,
    DeviceClassOffer,
    Inventory,
)
from webhook.controller.planner.memory import GIB

CLAIM_DEVICE_MISSING = "ClaimDeviceMissing"
NO_FEASIBLE_PLACEMENT = "NoFeasiblePlacement"


@dataclass(frozen=True)
class AcceleratorPolicy:
    allowed_device_classes: tuple[str, ...]  # empty: any DeviceClass in the cluster
    placement_types: frozenset[str]
    sharing_modes: frozenset[str]
    max_count: int
    min_share: int
    max_share: int

    @classmethod
    def of_class(cls, class_spec: Mapping | None) -> "AcceleratorPolicy":
        """The class's ``acceleratorPolicy``; absent: anything, at most one device (docs/decisions.md, InferenceService 2)."""
        policy = (class_spec or {}).get("acceleratorPolicy")
        if not policy:
            return cls((), frozenset({PARTITION, WHOLE_DEVICE}), frozenset({SHARED, DEDICATED}), 1, 1, 100)
        return cls(
            allowed_device_classes=tuple(policy.get("allowedDeviceClasses") or ()),
            placement_types=frozenset(policy.get("allowedPlacementTypes") or ()),
            sharing_modes=frozenset(policy.get("allowedSharingModes") or ()),
            max_count=int(policy.get("maxAcceleratorCount") or 1),
            min_share=int(policy.get("minSharePercent") or 1),
            max_share=int(policy.get("maxSharePercent") or 100),
        )


@dataclass(frozen=True)
class Placement:
    device_class: str
    placement_mode: str
    sharing_mode: str
    count: int
    share_percent: int
    accelerator_memory_gib: int
    product_name: str | None


@dataclass(frozen=True)
class PlanFailure:
    reason: str
    message: str


def _names(items: Sequence[str]) -> str:
    return "[" + ", ".join(items) + "]"


def effective_device_classes(
    order_classes: Sequence[str] | None,
    policy: AcceleratorPolicy,
    existing: Sequence[str],
    excluded: Sequence[str] = (),
) -> list[str] | PlanFailure:
    """E, in candidate order, or ``ClaimDeviceMissing`` when it is empty."""
    allowed = policy.allowed_device_classes
    if order_classes:
        if allowed:
            effective = [name for name in order_classes if name in allowed]
            if not effective:
                return PlanFailure(
                    CLAIM_DEVICE_MISSING,
                    f"no DeviceClass of spec.resources.accelerator.deviceClasses {_names(order_classes)} "
                    f"is allowed by the class (allowedDeviceClasses {_names(allowed)})",
                )
        else:
            missing = [name for name in order_classes if name not in existing]
            if missing:
                return PlanFailure(
                    CLAIM_DEVICE_MISSING,
                    f"DeviceClass {_names(missing)} named in spec.resources.accelerator.deviceClasses "
                    f"does not exist",
                )
            effective = list(order_classes)
    elif allowed:
        effective = list(allowed)
    else:
        effective = sorted(existing)
        if not effective:
            return PlanFailure(CLAIM_DEVICE_MISSING, "the cluster has no DeviceClasses")
    remaining = [name for name in dict.fromkeys(effective) if name not in excluded]
    if not remaining:
        return PlanFailure(
            CLAIM_DEVICE_MISSING,
            f"every effective DeviceClass {_names(effective)} was excluded after failed placements",
        )
    return remaining


@dataclass(frozen=True)
class _Verdict:
    placement: Placement | None
    offer_gib: int  # the most memory this class could give under the policy
    note: str


def _fit(offer: DeviceClassOffer | None, name: str, policy: AcceleratorPolicy, need_gib: int | None) -> _Verdict:
    if offer is None:
        return _Verdict(None, 0, f"{name}: DeviceClass not found")
    if offer.memory_bytes is None:
        detail = "; ".join(offer.problems) or "no device in the cluster matches its selectors"
        return _Verdict(None, 0, f"{name}: {detail}")
    if offer.placement_mode not in policy.placement_types:
        return _Verdict(None, 0, f"{name}: placement {offer.placement_mode} not allowed")
    if offer.sharing_mode not in policy.sharing_modes:
        return _Verdict(None, 0, f"{name}: sharing {offer.sharing_mode} not allowed")
    device = Fraction(offer.memory_bytes) / GIB  # GiB, exact
    need = Fraction(need_gib or 0)

    def placement(count: int, share: int) -> Placement:
        return Placement(
            device_class=name,
            placement_mode=offer.placement_mode,
            sharing_mode=offer.sharing_mode,
            count=count,
            share_percent=share,
            accelerator_memory_gib=math.floor(device * count * share / 100),
            product_name=offer.product_name,
        )

    if offer.sharing_mode == DEDICATED:
        most = min(policy.max_count, offer.max_devices_per_node)
        count = max(1, math.ceil(need / device)) if need else 1
        if count <= most:
            return _Verdict(placement(count, 100), math.floor(device * most), "")
        return _Verdict(
            None, math.floor(device * most),
            f"{name}: {most} × {math.floor(device)} GiB device(s) offer {math.floor(device * most)} GiB",
        )
    low, high = policy.min_share, policy.max_share
    if low > high:
        return _Verdict(None, 0, f"{name}: share bounds [{low}, {high}] are empty")
    share = max(low, math.ceil(need * 100 / device)) if need else low
    if share <= high:
        return _Verdict(placement(1, share), math.floor(device * high / 100), "")
    return _Verdict(
        None, math.floor(device * high / 100),
        f"{name}: at most {high}% of a {math.floor(device)} GiB device offers {math.floor(device * high / 100)} GiB",
    )


def plan(
    order_classes: Sequence[str] | None,
    policy: AcceleratorPolicy,
    inventory: Inventory,
    need_gib: int | None,
    excluded: Sequence[str] = (),
) -> Placement | PlanFailure:
    """The placement of one replica, or why there is none."""
    effective = effective_device_classes(order_classes, policy, inventory.names(), excluded)
    if isinstance(effective, PlanFailure):
        return effective
    verdicts = []
    for name in effective:
        verdict = _fit(inventory.get(name), name, policy, need_gib)
        if verdict.placement is not None:
            return verdict.placement
        verdicts.append(verdict)
    best = max(verdicts, key=lambda v: v.offer_gib)
    need_text = f"{need_gib} GiB" if need_gib is not None else "an unknown amount"
    message = (
        f"no DeviceClass in {_names(effective)} can hold the model: it needs {need_text} of accelerator "
        f"memory per replica; the largest offer is {best.offer_gib} GiB. " + "; ".join(v.note for v in verdicts)
    )
    return PlanFailure(NO_FEASIBLE_PLACEMENT, message)
