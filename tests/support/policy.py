"""Helpers for the policy and chain tests: requests, the shipped chain, both state backends."""

from __future__ import annotations

import copy
import functools
from typing import Any

import jsonpatch

from webhook import shipped_data
from webhook.admission.chain import AdmissionChain, is_attribution
from webhook.admission.review import AdmissionRequest
from webhook.policy import PolicySet
from webhook.schema import CRDRegistry
from webhook.state import ClusterState, FileState
from tests.support.cel import EVALUATOR


@functools.cache
def registry() -> CRDRegistry:
    return CRDRegistry.shipped("v0.12.0", evaluator=EVALUATOR)  # the seed-era Model these policies were written for


@functools.cache
def shipped_policies() -> PolicySet:
    return PolicySet.load(shipped_data.policies_dir(), evaluator=EVALUATOR)


def example_state(*extra: dict[str, Any]) -> FileState:
    return FileState(shipped_data.examples_dir(), objects=list(extra))


def chain(state: ClusterState | None = None, policies: PolicySet | None = None, *, schema: bool = True) -> AdmissionChain:
    return AdmissionChain(registry() if schema else None, policies or shipped_policies(), state or example_state())


def request(obj: dict | None, operation: str = "CREATE", *, old: dict | None = None, namespace: str | None = None,
            subresource: str = "", username: str = "alice") -> AdmissionRequest:
    subject = obj if obj is not None else old
    group, _, version = subject["apiVersion"].rpartition("/")
    meta = subject.get("metadata") or {}
    return AdmissionRequest(
        uid="test-uid",
        kind={"group": group, "version": version, "kind": subject["kind"]},
        resource={"group": group, "version": version, "resource": subject["kind"].lower() + "s"},
        subResource=subresource,
        name=meta.get("name", ""),
        namespace=namespace if namespace is not None else meta.get("namespace", ""),
        operation=operation,
        userInfo={"username": username},
        object=copy.deepcopy(obj),
        oldObject=copy.deepcopy(old),
    )


def patched(obj: dict, patch: list[dict]) -> dict:
    """Apply a chain's patch with the RFC 6902 reference library."""
    return jsonpatch.JsonPatch(patch).apply(obj)


def messages(result) -> list[str]:
    """Each denial as ``<field>: <message>`` (how kubectl prints a cause); the last cause,
    naming the webhook and policies, is not a denial (``attribution`` reads it)."""
    causes = (result.status or {}).get("details", {}).get("causes", [])
    return [f"{c['field']}: {c['message']}" if "field" in c else c["message"] for c in causes if not is_attribution(c)]


def attribution(result) -> str:
    """The cause naming the webhook and the policies that denied."""
    (cause,) = [c for c in (result.status or {}).get("details", {}).get("causes", []) if is_attribution(c)]
    return cause["message"]
