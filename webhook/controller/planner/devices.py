"""The device inventory: devices from ResourceSlices, and what each DeviceClass offers.

A DeviceClass's candidates are the devices all its ``selectors[].cel.expression`` accept,
evaluated like the DRA scheduler does (``device.driver``, ``device.attributes[domain].name``,
``device.capacity[domain].name``, ``device.allowMultipleAllocations``), with the project's CEL
engine. From the candidates the planner derives the class's placement mode (Partition for
MIG-like partitions), sharing mode (Shared for TimeSlicing/MPS configs or multi-allocatable
devices), the memory of one device and the product name (docs/design.md, "Devices and placement").
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from webhook.quantity import QuantityError, parse_quantity

if TYPE_CHECKING:
    from webhook.cel import Evaluator

PARTITION, WHOLE_DEVICE = "Partition", "WholeDevice"
SHARED, DEDICATED = "Shared", "Dedicated"
SHARING_STRATEGIES = frozenset({"TimeSlicing", "MPS"})


@dataclass(frozen=True, slots=True)
class Device:
    driver: str
    pool: str
    node: str
    name: str
    attributes: Mapping[str, Mapping[str, Any]]  # domain -> name -> plain value
    capacity: Mapping[str, Mapping[str, str]]  # domain -> name -> quantity text
    allow_multiple_allocations: bool

    def attribute(self, name: str) -> Any:
        """An attribute by its short name in any domain (the driver's own domain first)."""
        own = self.attributes.get(self.driver, {})
        if name in own:
            return own[name]
        for domain in sorted(self.attributes):
            if name in self.attributes[domain]:
                return self.attributes[domain][name]
        return None

    @property
    def memory_bytes(self) -> Decimal | None:
        for domain in [self.driver, *sorted(self.capacity)]:
            text = self.capacity.get(domain, {}).get("memory")
            if text is not None:
                try:
                    return parse_quantity(text)
                except QuantityError:
                    return None
        return None

    @property
    def is_partition(self) -> bool:
        kind = self.attribute("type")
        device_type = self.attribute("deviceType")
        return (isinstance(kind, str) and kind.lower() == "mig") or (
            isinstance(device_type, str) and device_type.upper() == "MIG"
        )

    @property
    def product_name(self) -> str | None:
        for name in ("productName", "device"):
            value = self.attribute(name)
            if isinstance(value, str) and value:
                return value
        return None

    def cel_value(self) -> dict:
        """The device as a DeviceClass selector sees it: capacities are quantities and
        version attributes semvers, as in the DRA scheduler's CEL environment."""
        return {
            "driver": self.driver,
            "attributes": {
                domain: {name: _cel_attribute(value) for name, value in values.items()}
                for domain, values in self.attributes.items()
            },
            "capacity": {
                domain: {name: _cel_quantity(text) for name, text in values.items()}
                for domain, values in self.capacity.items()
            },
            "allowMultipleAllocations": self.allow_multiple_allocations,
        }

    def profile_key(self) -> str:
        """Equal for devices no selector can tell apart (name, pool and node are not visible)."""
        return json.dumps(
            [self.driver, self.attributes, self.capacity, self.allow_multiple_allocations], sort_keys=True, default=str
        )


def _cel_quantity(text: str) -> Any:
    from webhook.cel.environment.env import to_runtime
    from webhook.cel.library.quantity import Quantity

    try:
        return to_runtime(Quantity(parse_quantity(text)))
    except QuantityError:
        return text  # not a quantity: a selector comparing it fails, as in the scheduler


class VersionAttribute(str):
    """A ``version`` attribute: a semantic version string, a ``semver`` value in CEL."""


def _attribute_value(raw: Any) -> Any:
    # resource.k8s.io/v1 DeviceAttribute is a one-of {int, bool, string, version}; design
    # documents often write the bare value, which is accepted as is.
    if isinstance(raw, Mapping):
        if "version" in raw:
            return VersionAttribute(raw["version"])
        for key in ("string", "int", "bool"):
            if key in raw:
                return raw[key]
    return raw


def _cel_attribute(value: Any) -> Any:
    if not isinstance(value, VersionAttribute):
        return value
    from webhook.cel.environment.env import to_runtime
    from webhook.cel.library.base import LibraryError
    from webhook.cel.library.semver import Semver

    try:
        return to_runtime(Semver.from_key(str(value)))
    except LibraryError:
        return str(value)


def _capacity_value(raw: Any) -> str:
    # DeviceCapacity is {value: Quantity, requestPolicy: ...}; a bare quantity is accepted too.
    if isinstance(raw, Mapping):
        raw = raw.get("value")
    return str(raw)


def _qualify(items: Mapping | None, driver: str, convert) -> dict[str, dict[str, Any]]:
    by_domain: dict[str, dict[str, Any]] = {}
    for qualified, raw in (items or {}).items():
        domain, _, name = str(qualified).rpartition("/")
        by_domain.setdefault(domain or driver, {})[name] = convert(raw)
    return by_domain


def devices_from_slices(slices: Iterable[Mapping]) -> list[Device]:
    """Every device published in ``slices``, in a stable order (pool, node, name)."""
    devices = []
    for resource_slice in slices:
        spec = resource_slice.get("spec") or {}
        driver = spec.get("driver", "")
        pool = (spec.get("pool") or {}).get("name", "")
        node = spec.get("nodeName") or pool
        for raw in spec.get("devices") or ():
            devices.append(
                Device(
                    driver=driver,
                    pool=pool,
                    node=node,
                    name=raw.get("name", ""),
                    attributes=_qualify(raw.get("attributes"), driver, _attribute_value),
                    capacity=_qualify(raw.get("capacity"), driver, _capacity_value),
                    allow_multiple_allocations=bool(raw.get("allowMultipleAllocations")),
                )
            )
    devices.sort(key=lambda d: (d.pool, d.node, d.name))
    return devices


@dataclass(frozen=True)
class DeviceClassOffer:
    """What one DeviceClass can give an order."""

    name: str
    devices: tuple[Device, ...]
    placement_mode: str
    sharing_mode: str
    memory_bytes: Decimal | None  # of its smallest device: the scheduler may hand out any
    product_name: str | None
    max_devices_per_node: int
    problems: tuple[str, ...] = field(default=())  # selector errors, devices without memory


def sharing_strategy(device_class: Mapping) -> str | None:
    for config in (device_class.get("spec") or {}).get("config") or ():
        parameters = ((config or {}).get("opaque") or {}).get("parameters") or {}
        strategy = (parameters.get("sharing") or {}).get("strategy") if isinstance(parameters, Mapping) else None
        if strategy in SHARING_STRATEGIES:
            return strategy
    return None


def _selectors(device_class: Mapping) -> list[str]:
    return [
        ((selector or {}).get("cel") or {}).get("expression", "")
        for selector in (device_class.get("spec") or {}).get("selectors") or ()
    ]


class DeviceProfiles:
    """Devices grouped by what CEL sees of them (driver, attributes, capacity, sharing).

    A selector is a pure function of that value, so it is evaluated once per distinct
    profile, not once per device: a cluster of 1,000 identical GPUs is one evaluation.
    """

    def __init__(self, devices: Iterable[Device]):
        groups: dict[str, list[Device]] = {}
        for device in devices:
            groups.setdefault(device.profile_key(), []).append(device)
        self.groups = [(members[0], {"device": members[0].cel_value()}, members) for members in groups.values()]


def offer_of(device_class: Mapping, profiles: DeviceProfiles, evaluator: Evaluator) -> DeviceClassOffer:
    """Evaluate the class's selectors against every device profile and summarise what matched."""
    from webhook.cel import CelCompileError, CelError

    name = (device_class.get("metadata") or {}).get("name", "")
    problems: list[str] = []
    programs = []
    for index, expression in enumerate(_selectors(device_class)):
        try:
            # Kubernetes types ``device`` (DRA's selector env): its fields may join typed literals
            programs.append(evaluator.compile(expression, ["device"], mixed_literals=True))
        except CelCompileError as exc:
            problems.append(f"selectors[{index}]: {exc}")
    candidates: list[Device] = []
    if not problems:
        for first, activation, members in profiles.groups:
            try:
                if all(program.evaluate(activation, routes=evaluator.routes) is True for program in programs):
                    candidates.extend(members)
            except CelError as exc:
                # The scheduler fails the allocation on a selector error; the device is no
                # candidate, and the first such error is kept for the message.
                if not problems:
                    problems.append(f"device {first.pool}/{first.name}: {exc}")
    candidates.sort(key=lambda d: (d.pool, d.node, d.name))
    with_memory = [d for d in candidates if d.memory_bytes is not None]
    if len(with_memory) < len(candidates):
        problems.append(f"{len(candidates) - len(with_memory)} candidate device(s) publish no memory capacity")
    smallest = min(with_memory, key=lambda d: (d.memory_bytes, d.product_name or "", d.pool, d.name), default=None)
    shared = sharing_strategy(device_class) is not None or (
        bool(candidates) and all(d.allow_multiple_allocations for d in candidates)
    )
    per_node = Counter(d.node for d in with_memory)
    return DeviceClassOffer(
        name=name,
        devices=tuple(with_memory),
        placement_mode=PARTITION if candidates and all(d.is_partition for d in candidates) else WHOLE_DEVICE,
        sharing_mode=SHARED if shared else DEDICATED,
        memory_bytes=smallest.memory_bytes if smallest else None,
        product_name=smallest.product_name if smallest else None,
        max_devices_per_node=max(per_node.values(), default=0),
        problems=tuple(problems),
    )


class Inventory:
    """Every DeviceClass's offer, computed once per (DeviceClasses, ResourceSlices) snapshot."""

    def __init__(self, offers: Mapping[str, DeviceClassOffer]):
        self.offers = dict(offers)
        self._names = sorted(self.offers)

    @classmethod
    def build(cls, device_classes: Iterable[Mapping], slices: Iterable[Mapping], evaluator: Evaluator) -> "Inventory":
        """The offers of ``device_classes`` over ``slices``' devices, their CEL selectors
        evaluated with ``evaluator``."""
        profiles = DeviceProfiles(devices_from_slices(slices))
        offers = {}
        for device_class in device_classes:
            offer = offer_of(device_class, profiles, evaluator)
            offers[offer.name] = offer
        return cls(offers)

    def names(self) -> list[str]:
        return self._names

    def get(self, name: str) -> DeviceClassOffer | None:
        return self.offers.get(name)
