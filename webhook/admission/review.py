"""AdmissionReview (admission.k8s.io/v1 and v1beta1): the typed edge with the apiserver.

The server checks a request body's envelope (apiVersion, kind, request, uid), decodes its
request into :class:`AdmissionRequest` for the admission chain and encodes the chain's
answer with :func:`response_review`, in the apiVersion the apiserver asked for.
:class:`AdmissionReview` is the whole body as a model, for tools and tests.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

from webhook.policy.actions import WARNING_PREFIX

SUPPORTED_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")


class GroupVersionKind(BaseModel):
    model_config = ConfigDict(extra="allow")
    group: str = ""
    version: str = ""
    kind: str = ""


class GroupVersionResource(BaseModel):
    model_config = ConfigDict(extra="allow")
    group: str = ""
    version: str = ""
    resource: str = ""


class UserInfo(BaseModel):
    model_config = ConfigDict(extra="allow")
    username: str = ""
    uid: str = ""
    groups: list[str] = Field(default_factory=list)
    extra: dict[str, list[str]] = Field(default_factory=dict)


class AdmissionRequest(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    uid: str = Field(min_length=1)
    kind: GroupVersionKind
    resource: GroupVersionResource
    subResource: str = ""
    requestKind: GroupVersionKind | None = None
    requestResource: GroupVersionResource | None = None
    requestSubResource: str = ""
    name: str = ""
    namespace: str = ""
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    userInfo: UserInfo = Field(default_factory=UserInfo)
    object: dict[str, Any] | None = None
    oldObject: dict[str, Any] | None = None
    dryRun: bool = False
    options: dict[str, Any] | None = None

    @field_validator("object", "oldObject")
    @classmethod
    def _metadata_decodes(cls, obj: dict[str, Any] | None) -> dict[str, Any] | None:
        # The apiserver decodes metadata strictly (metav1.ObjectMeta) before any webhook sees
        # the object, so everything downstream may rely on its shape; only a client other than
        # the apiserver can send anything else, and it gets a 400 rather than an internal error.
        if obj is not None and "metadata" in obj:
            problem = object_meta_problem(obj["metadata"])
            if problem:
                raise ValueError(problem)
        return obj


# What metav1.ObjectMeta's decoding checks, by field: a string, a map of strings, a list
# of strings, a list of objects. Other fields are not checked here.
_META_FIELDS = {
    **dict.fromkeys(("name", "generateName", "namespace", "uid", "resourceVersion", "creationTimestamp",
                     "deletionTimestamp"), "string"),
    **dict.fromkeys(("labels", "annotations"), "string map"),
    "finalizers": "string list",
    **dict.fromkeys(("ownerReferences", "managedFields"), "object list"),
}


def object_meta_problem(meta: Any) -> str | None:
    """Why ``meta`` would not decode as metav1.ObjectMeta, or None when it would.

    One pass over the fields present (a review's metadata has a handful)."""
    if meta is None:
        return None
    if not isinstance(meta, dict):
        return f"metadata must be an object, not {_json_type(meta)}"
    for key, value in meta.items():
        shape = _META_FIELDS.get(key)
        if shape is None or value is None:
            continue
        if shape == "string":
            if not isinstance(value, str):
                return f"metadata.{key} must be a string, not {_json_type(value)}"
        elif shape == "string map":
            if not isinstance(value, dict):
                return f"metadata.{key} must be an object of strings, not {_json_type(value)}"
            for k, v in value.items():
                if not isinstance(v, str):
                    return f"metadata.{key}[{k!r}] must be a string, not {_json_type(v)}"
        else:
            item, what = (str, "strings") if shape == "string list" else (dict, "objects")
            if not isinstance(value, list):
                return f"metadata.{key} must be a list of {what}"
            for v in value:
                if not isinstance(v, item):
                    return f"metadata.{key} must be a list of {what}"
    return None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


class AdmissionReview(BaseModel):
    model_config = ConfigDict(extra="allow")

    apiVersion: Literal["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


@dataclass(slots=True)
class AdmissionResult:
    """What the admission chain decided for one request (independent of the wire version).

    Made by our own code, never decoded: a plain dataclass, not a validated model (pydantic
    would re-check our own values on every review)."""

    allowed: bool
    status: dict[str, Any] | None = None  # metav1.Status on denial: code, reason, message, details
    patch: list[dict[str, Any]] = field(default_factory=list)  # RFC 6902 operations
    warnings: list[str] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)
    # a denial's message or a warning -> the policy rule that said it ("<policy>/validations[2]";
    # "<policy>" alone for a policy written in Python); for the CI formats, never sent
    rules: dict[str, str] = field(default_factory=dict)
    # what rules were left unchecked for, the cluster view not knowing it: (what, unit) each
    # (``webhook.policy.unknown``; offline only: a live cluster's view knows every kind); never sent
    unchecked: list[tuple[str, str]] | tuple = ()


MAX_WARNING_LENGTH = 120
# A validation failure admitted under Warn is all its author hears of a denial: clipped where
# the apiserver clips a warning once a response's warnings pass 4 KiB (256 characters,
# k8s.io/apiserver's warning recorder), not at 120
MAX_FAILURE_WARNING_LENGTH = 256


def _clip_warning(text: str) -> str:
    # The apiserver truncates longer warnings itself; clipping here keeps them readable.
    text = " ".join(text.split())
    limit = MAX_FAILURE_WARNING_LENGTH if text.startswith(WARNING_PREFIX) else MAX_WARNING_LENGTH
    return text if len(text) <= limit else text[: limit - 3] + "..."


# A denial names the problem; it never needs to carry megabytes of the object (a policy
# message quoting a 3 MiB field would otherwise travel back to the user, twice: message
# and cause). Far above any real message.
MAX_MESSAGE_LENGTH = 16 * 1024


def clip_message(text: str, limit: int = MAX_MESSAGE_LENGTH) -> str:
    if len(text) <= limit:
        return text
    more = f"... ({len(text) - limit} more characters)"
    return text[: limit - len(more)] + more


def _clip_status(status: dict[str, Any]) -> dict[str, Any]:
    status = dict(status)
    if isinstance(status.get("message"), str):
        status["message"] = clip_message(status["message"])
    details = status.get("details")
    if isinstance(details, dict) and isinstance(details.get("causes"), list):
        causes = [dict(c, message=clip_message(c["message"])) if isinstance(c, dict) and isinstance(c.get("message"), str)
                  else c for c in details["causes"]]
        status["details"] = dict(details, causes=causes)
    return status


def response_review(api_version: str, uid: str, result: AdmissionResult, *, with_patch: bool) -> dict[str, Any]:
    """The AdmissionReview response body for ``result``.

    ``patch``/``patchType`` appear only when ``with_patch`` (the mutating endpoint), the
    request is allowed and the patch is non-empty; ``status`` only on denial.
    """
    response: dict[str, Any] = {"uid": uid, "allowed": result.allowed}
    if not result.allowed and result.status:
        response["status"] = _clip_status(result.status)
    if with_patch and result.allowed and result.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(result.patch)).decode("ascii")
    if result.warnings:
        response["warnings"] = [_clip_warning(w) for w in result.warnings]
    if result.audit_annotations:
        response["auditAnnotations"] = dict(result.audit_annotations)
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}
