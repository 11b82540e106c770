"""Whether this pytest run talks to a cluster: only when asked to, never by accident."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parent
MARKER = "e2e"


def why_not_selected(environ: Mapping[str, str] = os.environ) -> str | None:
    """None when the e2e tests run; else the one-line reason they are deselected."""
    if environ.get("INFERGATE_E2E") != "1":
        return "INFERGATE_E2E=1 not set (they need a real cluster: INFERGATE_E2E=1 KUBECONFIG=... pytest tests/e2e)"
    kubeconfig = environ.get("KUBECONFIG")
    if not kubeconfig:
        return "KUBECONFIG not set (INFERGATE_E2E=1 needs a cluster to run against)"
    missing = [p for p in kubeconfig.split(os.pathsep) if p and not Path(p).is_file()]
    if missing:
        return f"KUBECONFIG names no file: {', '.join(missing)}"
    return None


def mode(environ: Mapping[str, str] = os.environ) -> str:
    """``local``: infergate serve/controller run here; ``chart``: the Helm chart in the cluster."""
    value = environ.get("INFERGATE_E2E_MODE", "local")
    if value not in ("local", "chart"):
        raise ValueError(f"INFERGATE_E2E_MODE must be local or chart, got {value!r}")
    return value


def native_policies(environ: Mapping[str, str] = os.environ) -> bool:
    """``INFERGATE_E2E_NATIVE_POLICIES=1``: the whole run with ``policies.native.enabled`` (the
    controller applies the generated ValidatingAdmissionPolicies, the webhook leaves the rules
    it marked to the apiserver; docs/native-policies.md, "In a cluster")."""
    value = environ.get("INFERGATE_E2E_NATIVE_POLICIES", "")
    if value not in ("", "0", "1"):
        raise ValueError(f"INFERGATE_E2E_NATIVE_POLICIES must be 0 or 1, got {value!r}")
    return value == "1"


NATIVE_VALUES = {"policies": {"native": {"enabled": True}}}
