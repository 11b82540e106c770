"""Test helpers: the worked example's cluster (tests/controller/cluster) as plain objects."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from pathlib import Path

import yaml

HERE = Path(__file__).parent
CLUSTER = HERE / "cluster"
ORDERS = HERE / "orders"
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def load_yaml(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def cluster_objects() -> list[dict]:
    return [obj for path in sorted(CLUSTER.glob("*.yaml")) for obj in load_yaml(path)]


def order(name: str = "hf-embedding") -> dict:
    return copy.deepcopy(load_yaml(ORDERS / f"{name}.yaml")[0])


async def settled(controller, *, scheduled: bool = True, timeout: float = 10.0) -> None:
    """Until the controller has answered every change (its ``idle`` signal; ``quiet`` with
    ``scheduled=False``: retries and re-checks may wait for later), within ``timeout``."""
    import asyncio

    signal = controller.idle if scheduled else controller.quiet
    await asyncio.wait_for(signal.wait(), timeout)
