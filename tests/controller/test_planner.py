"""The placement planner: devices and CEL selection, memory need, the intersection table,
share and count bounds, deterministic order, replans."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from webhook.controller.planner import (
    DEDICATED,
    PARTITION,
    SHARED,
    WHOLE_DEVICE,
    AcceleratorPolicy,
    DeviceClassOffer,
    Inventory,
    Placement,
    PlanFailure,
    bytes_per_parameter,
    devices_from_slices,
    effective_device_classes,
    memory_need_gib,
    plan,
    stuck_claim,
)
from webhook.state.memory import MemoryState
from webhook.controller.context import build_inventory

from tests.controller.helpers import NOW, cluster_objects

GIB = Decimal(2) ** 30


def offer(name, gib, placement=WHOLE_DEVICE, sharing=DEDICATED, per_node=8, product="x"):
    return DeviceClassOffer(
        name=name, devices=(), placement_mode=placement, sharing_mode=sharing,
        memory_bytes=Decimal(gib) * GIB, product_name=product, max_devices_per_node=per_node,
    )


def policy(**overrides):
    values = dict(
        allowed_device_classes=(), placement_types=frozenset({PARTITION, WHOLE_DEVICE}),
        sharing_modes=frozenset({SHARED, DEDICATED}), max_count=1, min_share=1, max_share=100,
    )
    values.update(overrides)
    return AcceleratorPolicy(**values)


INVENTORY = Inventory({o.name: o for o in [offer("a", 24), offer("b", 80), offer("c", 12), offer("d", 40)]})


# -- the intersection table (docs/design.md, "Devices and placement") -------------------------

@pytest.mark.parametrize(
    "order_classes, allowed, expected",
    [
        (None, (), ["a", "b", "c", "d"]),                 # absent × absent: every DeviceClass, by name
        (None, ("d", "a"), ["d", "a"]),                   # absent × L: L in class order
        (["c", "a"], (), ["c", "a"]),                     # O × absent: O in order order
        (["c", "b", "a"], ("a", "b"), ["b", "a"]),        # O × L: O ∩ L in order order
    ],
)
def test_effective_set_rows(order_classes, allowed, expected):
    assert effective_device_classes(order_classes, policy(allowed_device_classes=allowed), INVENTORY.names()) == expected


def test_empty_intersection_is_claim_device_missing():
    result = effective_device_classes(["b"], policy(allowed_device_classes=("a", "c")), INVENTORY.names())
    assert result.reason == "ClaimDeviceMissing"
    assert "[b]" in result.message and "[a, c]" in result.message


def test_order_list_without_class_list_must_name_existing_classes():
    result = effective_device_classes(["a", "nope"], policy(), INVENTORY.names())
    assert result == PlanFailure("ClaimDeviceMissing", result.message)
    assert "nope" in result.message and "does not exist" in result.message


def test_no_device_classes_at_all():
    assert effective_device_classes(None, policy(), []).reason == "ClaimDeviceMissing"


def test_exclusions_are_removed_and_exhaustion_is_claim_device_missing():
    assert effective_device_classes(None, policy(allowed_device_classes=("a", "b")), INVENTORY.names(), ["a"]) == ["b"]
    result = effective_device_classes(None, policy(allowed_device_classes=("a", "b")), INVENTORY.names(), ["a", "b"])
    assert result.reason == "ClaimDeviceMissing" and "excluded" in result.message


# -- memory need -----------------------------------------------------------------------------

@pytest.mark.parametrize(
    "quantization, expected",
    [(None, 2), ("bf16", 2), ("int8", 1), ("FP8", 1), ("int4", 0.5), ("w4a16", 0.5), ("AWQ", 0.5), ("gptq", 0.5), ("q4_k_m", 0.5)],
)
def test_bytes_per_parameter(quantization, expected):
    assert bytes_per_parameter(quantization) == expected


def test_memory_need_rounds_up_exactly():
    # 4.022e9 × 0.5 × 1.2 = 2.4132e9 bytes = 2.247 GiB -> 3
    assert memory_need_gib(4_022_000_000, "w4a16", "Latency") == 3
    # 8e9 × 2 × 1.5 = 24e9 bytes = 22.35 GiB -> 23
    assert memory_need_gib(8_000_000_000, None, "Throughput") == 23
    assert memory_need_gib(8_000_000_000, None, "Balance") == 21  # 21.6e9 B = 20.1 GiB
    # exactly 10 GiB stays 10: 2^30 × 10 / (2 × 1.2) parameters is not an integer, so use int8 × 1.5
    assert memory_need_gib(int(GIB * 10 / Decimal("1.5")) + 0, "int8", "Throughput") == 10
    assert memory_need_gib(None, None, "Latency") is None


# -- Dedicated: fewest devices; Shared: smallest share -------------------------------------------

def test_dedicated_takes_the_fewest_devices_within_the_count_bound():
    inventory = Inventory({"h": offer("h", 80, per_node=8)})
    placed = plan(None, policy(max_count=4), inventory, 150)
    assert placed == Placement("h", WHOLE_DEVICE, DEDICATED, 2, 100, 160, "x")
    refused = plan(None, policy(max_count=1), inventory, 150)
    assert refused.reason == "NoFeasiblePlacement"
    assert "needs 150 GiB" in refused.message and "largest offer is 80 GiB" in refused.message


def test_dedicated_count_is_bounded_by_devices_on_one_node():
    inventory = Inventory({"h": offer("h", 80, per_node=2)})
    assert plan(None, policy(max_count=4), inventory, 150).count == 2
    refused = plan(None, policy(max_count=4), inventory, 200)
    assert refused.reason == "NoFeasiblePlacement" and "largest offer is 160 GiB" in refused.message


@pytest.mark.parametrize(
    "need, low, high, expected_share",
    [
        (3, 25, 50, 26),     # 26% of 11.75 GiB = 3.06 >= 3
        (1, 25, 50, 25),     # the lower bound when less would do
        (None, 30, 50, 30),  # unknown size: the smallest allowed allocation
        (5, 1, 100, 43),     # 43% of 11.75 = 5.05
    ],
)
def test_shared_takes_the_smallest_share_in_bounds(need, low, high, expected_share):
    inventory = Inventory({"m": DeviceClassOffer("m", (), PARTITION, SHARED, Decimal(12032) * 2**20, "a30-pcie", 1)})
    placed = plan(None, policy(min_share=low, max_share=high), inventory, need)
    assert placed.share_percent == expected_share and placed.count == 1
    assert placed.accelerator_memory_gib == int(Decimal(12032) / 1024 * expected_share / 100)


def test_shared_above_the_upper_bound_is_infeasible():
    inventory = Inventory({"m": offer("m", 12, placement=PARTITION, sharing=SHARED)})
    refused = plan(None, policy(min_share=25, max_share=50), inventory, 7)
    assert refused.reason == "NoFeasiblePlacement"
    assert "largest offer is 6 GiB" in refused.message and "at most 50%" in refused.message


def test_dedicated_is_always_100_percent_whatever_the_share_bounds():
    placed = plan(None, policy(min_share=10, max_share=20), Inventory({"a": offer("a", 24)}), 3)
    assert placed.share_percent == 100 and placed.accelerator_memory_gib == 24


def test_modes_not_allowed_are_skipped_in_candidate_order():
    inventory = Inventory({
        "mig": offer("mig", 12, placement=PARTITION),
        "mps": offer("mps", 12, placement=PARTITION, sharing=SHARED),
        "whole": offer("whole", 24),
    })
    only_whole = policy(placement_types=frozenset({WHOLE_DEVICE}))
    assert plan(["mig", "mps", "whole"], only_whole, inventory, 3).device_class == "whole"
    only_shared = policy(sharing_modes=frozenset({SHARED}))
    assert plan(["mig", "mps", "whole"], only_shared, inventory, 3).device_class == "mps"
    refused = plan(["mig"], only_whole, inventory, 3)
    assert refused.reason == "NoFeasiblePlacement" and "placement Partition not allowed" in refused.message


def test_first_feasible_in_order_wins_and_order_is_deterministic():
    assert plan(["c", "a", "b"], policy(), INVENTORY, 20).device_class == "a"  # c is too small
    assert plan(None, policy(), INVENTORY, 20).device_class == "a"  # by name: a (24) before b
    assert plan(None, policy(allowed_device_classes=("d", "b")), INVENTORY, 20).device_class == "d"


def test_class_without_accelerator_policy_allows_anything_with_one_device():
    unrestricted = AcceleratorPolicy.of_class({})
    assert unrestricted.max_count == 1 and unrestricted.allowed_device_classes == ()
    assert plan(None, unrestricted, INVENTORY, 70).device_class == "b"
    assert plan(None, unrestricted, INVENTORY, 90).reason == "NoFeasiblePlacement"


# -- devices and CEL selectors -----------------------------------------------------------------

def test_devices_from_v1_slices_qualify_attribute_domains():
    state = MemoryState(cluster_objects())
    devices = devices_from_slices(state.list("resource.k8s.io/v1", "ResourceSlice"))
    assert [d.name for d in devices][:2] == ["mig-0000-02-00-0-p5-s0-n2", "mig-0000-02-00-0-p5-s2-n2"]
    mig = devices[0]
    assert mig.attributes["gpu.deckhouse.io"]["migProfile"] == "2g.12gb"
    assert mig.is_partition and mig.allow_multiple_allocations and mig.memory_bytes == 12032 * 2**20
    h100 = devices[-1]
    assert h100.attributes["gpu.deckhouse.io"]["deviceType"] == "Physical" and not h100.is_partition
    assert h100.product_name == "h100-sxm"


def test_inventory_from_cel_selectors():
    inventory = build_inventory(MemoryState(cluster_objects()), EVALUATOR)
    mps = inventory.get("nvidia-a30-mig-2g12-mps")
    assert (mps.placement_mode, mps.sharing_mode, len(mps.devices)) == (PARTITION, SHARED, 1)
    dedicated = inventory.get("nvidia-a30-mig-2g12")
    assert (dedicated.placement_mode, dedicated.sharing_mode, len(dedicated.devices)) == (PARTITION, DEDICATED, 1)
    h100 = inventory.get("nvidia-h100-physical")
    assert (h100.placement_mode, h100.sharing_mode, h100.max_devices_per_node) == (WHOLE_DEVICE, DEDICATED, 2)
    assert h100.memory_bytes == 80 * GIB


def test_nvidia_driver_attributes_and_a_broken_selector():
    slices = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1"}, "devices": [
            {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100 80GB HBM3"}},
             "capacity": {"memory": {"value": "81559Mi"}}},
            {"name": "mig-1", "attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.10gb"},
                                              "productName": {"string": "NVIDIA H100 80GB HBM3"}},
             "capacity": {"memory": {"value": "9984Mi"}}},
        ]},
    }]
    classes = [
        {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}},
        {"metadata": {"name": "mig.nvidia.com"}, "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"}}],
                                                   "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"sharing": {"strategy": "TimeSlicing"}}}}]}},
        {"metadata": {"name": "broken"}, "spec": {"selectors": [{"cel": {"expression": "device.driver ==="}}]}},
    ]
    inventory = Inventory.build(classes, slices, EVALUATOR)
    assert inventory.get("gpu.nvidia.com").product_name == "NVIDIA H100 80GB HBM3"
    assert inventory.get("gpu.nvidia.com").placement_mode == WHOLE_DEVICE
    mig = inventory.get("mig.nvidia.com")
    assert (mig.placement_mode, mig.sharing_mode) == (PARTITION, SHARED)
    broken = inventory.get("broken")
    assert broken.memory_bytes is None and broken.problems and "selectors[0]" in broken.problems[0]
    refused = plan(["broken"], AcceleratorPolicy.of_class({}), inventory, 1)
    assert refused.reason == "NoFeasiblePlacement" and "selectors[0]" in refused.message


# -- stuck claims --------------------------------------------------------------------------------

def claim(name, device_class, age, allocated=False):
    created = (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ")
    obj = {"metadata": {"name": name, "creationTimestamp": created},
           "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class, "count": 1}}]}},
           "status": {}}
    if allocated:
        obj["status"]["allocation"] = {"devices": {"results": []}}
    return obj


def test_stuck_claim_needs_the_class_the_age_and_no_allocation():
    timeout = timedelta(minutes=5)
    assert stuck_claim([claim("a", "x", timedelta(minutes=4))], "x", NOW, timeout) is None
    assert stuck_claim([claim("a", "x", timedelta(minutes=6), allocated=True)], "x", NOW, timeout) is None
    assert stuck_claim([claim("a", "y", timedelta(minutes=6))], "x", NOW, timeout) is None
    found = stuck_claim([claim("b", "x", timedelta(minutes=6)), claim("a", "x", timedelta(minutes=9))], "x", NOW, timeout)
    assert found["metadata"]["name"] == "a"


# -- properties: whatever the inputs, a placement keeps every bound and is the smallest ---------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tests.support.cel import EVALUATOR


@st.composite
def planning_inputs(draw):
    count = draw(st.integers(1, 5))
    offers = {}
    for i in range(count):
        name = f"dc-{i}"
        offers[name] = DeviceClassOffer(
            name=name, devices=(), placement_mode=draw(st.sampled_from([PARTITION, WHOLE_DEVICE])),
            sharing_mode=draw(st.sampled_from([SHARED, DEDICATED])),
            memory_bytes=Decimal(draw(st.integers(1024, 200 * 1024))) * 2**20, product_name="p",
            max_devices_per_node=draw(st.integers(1, 8)),
        )
    low = draw(st.integers(1, 100))
    chosen = policy(
        allowed_device_classes=tuple(draw(st.lists(st.sampled_from(sorted(offers)), unique=True))),
        placement_types=frozenset(draw(st.sets(st.sampled_from([PARTITION, WHOLE_DEVICE]), min_size=1))),
        sharing_modes=frozenset(draw(st.sets(st.sampled_from([SHARED, DEDICATED]), min_size=1))),
        max_count=draw(st.integers(1, 8)), min_share=low, max_share=draw(st.integers(low, 100)),
    )
    need = draw(st.one_of(st.none(), st.integers(1, 600)))
    return Inventory(offers), chosen, need


@settings(max_examples=300, deadline=None)
@given(planning_inputs())
def test_a_placement_keeps_every_bound_and_is_the_smallest(inputs):
    inventory, chosen, need = inputs
    result = plan(None, chosen, inventory, need)
    if isinstance(result, PlanFailure):
        assert result.reason == "NoFeasiblePlacement"
        for name in chosen.allowed_device_classes or inventory.names():  # brute force: none fits
            offer = inventory.get(name)
            if offer.placement_mode not in chosen.placement_types or offer.sharing_mode not in chosen.sharing_modes:
                continue
            device_gib = Decimal(offer.memory_bytes) / GIB
            most = (device_gib * min(chosen.max_count, offer.max_devices_per_node) if offer.sharing_mode == DEDICATED
                    else device_gib * chosen.max_share / 100)
            assert need is not None and most < need
        return
    offer = inventory.get(result.device_class)
    assert not chosen.allowed_device_classes or result.device_class in chosen.allowed_device_classes
    assert result.placement_mode in chosen.placement_types and result.sharing_mode in chosen.sharing_modes
    device_gib = Decimal(offer.memory_bytes) / GIB
    if result.sharing_mode == DEDICATED:
        assert result.share_percent == 100
        assert 1 <= result.count <= min(chosen.max_count, offer.max_devices_per_node)
        if need:
            assert result.count * device_gib >= need
            assert result.count == 1 or (result.count - 1) * device_gib < need  # the fewest
    else:
        assert result.count == 1 and chosen.min_share <= result.share_percent <= chosen.max_share
        if need:
            assert device_gib * result.share_percent / 100 >= need
            assert result.share_percent == chosen.min_share or device_gib * (result.share_percent - 1) / 100 < need
    assert result.accelerator_memory_gib == int(device_gib * result.count * result.share_percent / 100)


def test_selectors_see_quantities_and_semvers():
    slices = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1"}, "devices": [
            {"name": "big", "attributes": {"type": {"string": "gpu"}, "driverVersion": {"version": "570.86.15"}},
             "capacity": {"memory": {"value": "80Gi"}}},
            {"name": "small", "attributes": {"type": {"string": "gpu"}, "driverVersion": {"version": "535.1.0"}},
             "capacity": {"memory": {"value": "24Gi"}}},
        ]},
    }]
    classes = [{"metadata": {"name": "at-least-40gi"}, "spec": {"selectors": [{"cel": {"expression":
                "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"}}]}},
               {"metadata": {"name": "under-32g"}, "spec": {"selectors": [{"cel": {"expression":
                "device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('32G'))"}}]}},
               {"metadata": {"name": "driver-550-plus"}, "spec": {"selectors": [{"cel": {"expression":
                "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))"}}]}}]
    inventory = Inventory.build(classes, slices, EVALUATOR)
    assert [d.name for d in inventory.get("at-least-40gi").devices] == ["big"]
    assert [d.name for d in inventory.get("under-32g").devices] == ["small"]
    assert [d.name for d in inventory.get("driver-550-plus").devices] == ["big"]
