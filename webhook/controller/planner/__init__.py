"""The placement planner: from DeviceClasses, ResourceSlices and a class policy to
``status.resolved`` (docs/decisions.md, "Placement planning")."""

from webhook.controller.planner.devices import (
    DEDICATED,
    PARTITION,
    SHARED,
    WHOLE_DEVICE,
    Device,
    DeviceClassOffer,
    Inventory,
    devices_from_slices,
)
from webhook.controller.planner.memory import bytes_per_parameter, memory_need_gib
from webhook.controller.planner.placement import (
    CLAIM_DEVICE_MISSING,
    NO_FEASIBLE_PLACEMENT,
    AcceleratorPolicy,
    Placement,
    PlanFailure,
    effective_device_classes,
    plan,
)
from webhook.controller.planner.replan import requested_device_classes, seconds_until_stuck, stuck_claim

__all__ = [
    "CLAIM_DEVICE_MISSING",
    "DEDICATED",
    "NO_FEASIBLE_PLACEMENT",
    "PARTITION",
    "SHARED",
    "WHOLE_DEVICE",
    "AcceleratorPolicy",
    "Device",
    "DeviceClassOffer",
    "Inventory",
    "Placement",
    "PlanFailure",
    "bytes_per_parameter",
    "devices_from_slices",
    "effective_device_classes",
    "memory_need_gib",
    "plan",
    "requested_device_classes",
    "seconds_until_stuck",
    "stuck_claim",
]
