"""The offline answers for the same objects: ``infergate validate`` (the apiserver and the
webhook as infergate emulates them) and ``infergate reconcile`` (the controller's status).
The e2e scenarios compare them with what the real cluster answers."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from . import selection
from .cluster import KUBEAI_CRD, STATE_DIR
from .processes import REPLAN_LIMIT, REPLAN_TIMEOUT_S, run_infergate


def _with_manifests(objects: Sequence[Mapping], args: list[str], tmp: Path) -> list[str]:
    path = tmp / "objects.yaml"
    path.write_text(yaml.safe_dump_all([dict(o) for o in objects], sort_keys=False))
    return [*args, str(path)]


def validate(objects: Sequence[Mapping], *, crd_only: bool = False, old: Sequence[Mapping] = (),
             state: Path | None = None, apiserver_policies: bool = False) -> list[dict[str, Any]]:
    """``infergate validate -o json``: one answer per object ({allowed, status, warnings, object});
    an object with one of the same kind, namespace and name in ``old`` is an UPDATE of it.

    In a native run (``INFERGATE_E2E_NATIVE_POLICIES=1``) the cluster has the generated
    ValidatingAdmissionPolicies in force and the webhook leaves their rules to them: the policies
    are those of ``native.policies_directory`` (``crd_only``: the apiserver alone, its VAPs with
    the CRDs)."""
    with tempfile.TemporaryDirectory() as tmp:
        # Warn: the e2e client's requests name no fieldValidation, so the apiserver applies its default
        args = ["validate", "-o", "json", "--kubeai-crd", KUBEAI_CRD, "--state", str(state or STATE_DIR),
                "--field-validation", "Warn"]
        if crd_only:
            args += ["--crd-only"]
        elif selection.native_policies():
            from .native import policies_directory

            args += ["--policies", str(policies_directory(webhook=not apiserver_policies))]
        if old:
            old_path = Path(tmp) / "old.yaml"
            old_path.write_text(yaml.safe_dump_all([dict(o) for o in old]))
            args += ["--old", str(old_path)]
        result = run_infergate(*_with_manifests(objects, args + ["-f"], Path(tmp)))
    if result.returncode not in (0, 1):
        raise RuntimeError(f"infergate validate failed ({result.returncode}): {result.stderr}")
    answers = json.loads(result.stdout)
    if crd_only and selection.native_policies():
        return _with_native_policies(answers, validate(objects, old=old, state=state, apiserver_policies=True))
    return answers


def _with_native_policies(crd_only: list[dict[str, Any]], with_vaps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The apiserver alone in a native run: its CRDs (``crd_only``) and its generated MAPs and
    VAPs. From the answers with those as the only policies (``with_vaps``; the built-in Python
    policy still judging there), a VAP's denial (the chain stops there, before any webhook) or
    the VAPs' warnings after the CRDs', and the object as the MAPs left it."""
    from .native import VAP_PREFIX

    out = []
    for alone, vaps in zip(crd_only, with_vaps):
        message = (vaps.get("status") or {}).get("message", "")
        if not vaps["allowed"] and VAP_PREFIX in message and alone["allowed"]:
            out.append(vaps)
            continue
        extra = [w for w in vaps["warnings"] if w.startswith(f"Validation failed for {VAP_PREFIX}")]
        mutated = {"object": vaps["object"]} if alone["allowed"] and vaps.get("object") is not None else {}
        out.append({**alone, **mutated, "warnings": list(alone["warnings"]) + extra})
    return out


def reconcile(objects: Sequence[Mapping], *, state: Path | None = None) -> list[dict[str, Any]]:
    """``infergate reconcile -o json``: the status the controller would write for each object
    (with the replan settings the e2e controller runs with)."""
    args = ["reconcile", "-o", "json", "--state", str(state or STATE_DIR),
            "--replan-timeout", str(REPLAN_TIMEOUT_S), "--replan-limit", str(REPLAN_LIMIT)]
    with tempfile.TemporaryDirectory() as tmp:
        result = run_infergate(*_with_manifests(objects, args, Path(tmp)))
    if result.returncode:
        raise RuntimeError(f"infergate reconcile failed ({result.returncode}): {result.stderr}")
    data = json.loads(result.stdout)
    return data["items"] if data.get("kind") == "List" else [data]


def comparable_status(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """A controller status without what depends on the clock or the write (transition times,
    observedGeneration): the part the offline and online answers must agree on."""
    out = {k: v for k, v in (status or {}).items() if k != "observedGeneration"}
    if "conditions" in out:
        out["conditions"] = sorted(
            ({k: v for k, v in c.items() if k not in ("lastTransitionTime", "observedGeneration")}
             for c in out["conditions"]), key=lambda c: c["type"])
    return out


def comparable_denial(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """A metav1.Status as both sides must give it: code, reason, message, causes."""
    status = status or {}
    details = status.get("details") or {}
    return {"code": status.get("code"), "reason": status.get("reason"), "message": status.get("message"),
            "causes": details.get("causes")}
