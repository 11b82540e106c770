"""The webhook configurations a run registers: exactly what ``infergate webhook-config``
prints for the local server, named and labelled for the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .cluster import RUN_LABEL
from .processes import run_infergate


def webhook_configurations(url: str, ca_file: Path, run_id: str, *, name: str,
                           failure_policy: str = "Fail") -> list[dict[str, Any]]:
    result = run_infergate("webhook-config", "--url", url, "--ca-file", str(ca_file), "--name", name,
                           "--failure-policy", failure_policy)
    if result.returncode:
        raise RuntimeError(f"infergate webhook-config failed: {result.stderr}")
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    for obj in objects:
        obj["metadata"].setdefault("labels", {})[RUN_LABEL] = run_id
    return objects


def with_failure_policy(config: dict[str, Any], policy: str) -> dict[str, Any]:
    return {**config, "webhooks": [{**hook, "failurePolicy": policy} for hook in config["webhooks"]]}


def with_ca_bundle(config: dict[str, Any], ca_b64: str) -> dict[str, Any]:
    return {**config, "webhooks": [{**hook, "clientConfig": {**hook["clientConfig"], "caBundle": ca_b64}}
                                   for hook in config["webhooks"]]}
