"""The controller's writes (and the reads they need) through the official ``kubernetes`` client.

Every call is blocking HTTP; the runner calls them in a worker thread, never on the event
loop. Every write names the controller's own field manager (``ownership.FIELD_MANAGER``: the
apiserver would otherwise record the client library's User-Agent, ``OpenAPI-Generator``).
Status is a server-side apply to the ``/status`` subresource of only the fields the controller
owns, with the resourceVersion it was computed from: a stale write is refused with 409
Conflict, and so is an unforced apply of a field another manager owns (``OwnedElsewhere``),
instead of overwriting someone else's change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from webhook.apiversion import group_of
from webhook.kinds import Kind
from webhook.controller.ownership import FIELD_MANAGER, FORCED

APPLY_PATCH = "application/apply-patch+yaml"  # JSON is YAML: the client sends the body as JSON


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


class Conflict(ApiError):
    """409: the object changed since it was read."""


class NotFound(ApiError):
    """404."""


class OwnedElsewhere(Conflict):
    """409 on an apply: a field it sets is owned by another field manager (the apiserver's
    "Apply failed with N conflicts")."""


def object_path(kind: Kind, name: str | None = None, namespace: str | None = None, subresource: str | None = None) -> str:
    base = f"/apis/{kind.api_version}" if group_of(kind.api_version) else f"/api/{kind.api_version}"
    scope = f"/namespaces/{namespace}" if kind.namespaced and namespace else ""
    path = f"{base}{scope}/{kind.plural}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path


class KubeApi:
    """GET, POST, PUT and DELETE of plain JSON objects, errors as ``Conflict``/``NotFound``/``ApiError``."""

    def __init__(self, api_client: ApiClient | None = None, *, timeout: float = 30.0):
        self.api_client = api_client or ApiClient()
        self.api_client.user_agent = FIELD_MANAGER  # what the apiserver and its audit log name
        self.timeout = timeout
        self.writes = 0  # status writes, for metrics and tests

    def _request(self, method: str, path: str, body: Mapping | None = None, *,
                 content_type: str = "application/json", force: bool = False,
                 field_manager: str = FIELD_MANAGER, query: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        query = list(query or ())
        if body is not None:
            headers["Content-Type"] = content_type
            query.append(("fieldManager", field_manager))
        if force:
            query.append(("force", "true"))
        request = self.api_client.param_serialize(
            method=method, resource_path=path, query_params=query, header_params=headers, body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api_client.call_api(*request, _request_timeout=self.timeout)
            response.read()
        except ApiException as exc:
            raise ApiError(exc.status or 0, str(exc.reason or exc)) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # unreachable, reset, timed out
            raise ApiError(0, str(exc)) from None
        if not 200 <= response.status <= 299:
            try:
                message = json.loads(response.data).get("message", "")
            except (ValueError, AttributeError):
                message = (response.data or b"")[:200].decode("utf-8", "replace")
            error = {409: Conflict, 404: NotFound}.get(response.status, ApiError)
            if error is Conflict and content_type == APPLY_PATCH and message.startswith("Apply failed"):
                error = OwnedElsewhere
            raise error(response.status, message)
        return json.loads(response.data) if response.data else {}

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any]:
        obj = self._request("GET", object_path(kind, name, namespace))
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        return obj

    def create(self, kind: Kind, obj: Mapping, namespace: str | None = None) -> dict[str, Any]:
        return self._request("POST", object_path(kind, None, namespace), obj)

    def replace(self, kind: Kind, obj: Mapping) -> dict[str, Any]:
        meta = obj.get("metadata") or {}
        return self._request("PUT", object_path(kind, meta.get("name"), meta.get("namespace")), obj)

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any]:
        """DELETE with background propagation (dependents go by the garbage collector)."""
        return self._request("DELETE", object_path(kind, name, namespace),
                             {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})

    def apply_status(self, kind: Kind, obj: Mapping, status: Mapping) -> dict[str, Any]:
        """Server-side apply of ``status`` (the fields this controller owns) to ``obj``'s
        ``/status``, as of ``obj``'s resourceVersion; forced only on infergate's own kinds
        (``ownership.FORCED``)."""
        meta = obj.get("metadata") or {}
        body = {
            "apiVersion": kind.api_version,
            "kind": kind.kind,
            "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if meta.get(k)},
            "status": status,
        }
        path = object_path(kind, meta.get("name"), meta.get("namespace"), "status")
        result = self._request("PATCH", path, body, content_type=APPLY_PATCH, force=kind in FORCED)
        self.writes += 1
        return result

    def list(self, kind: Kind, label_selector: str | None = None) -> list[dict[str, Any]]:
        """Every object of ``kind`` (cluster-wide) that ``label_selector`` selects."""
        query = [("labelSelector", label_selector)] if label_selector else []
        listing = self._request("GET", object_path(kind), query=query)
        items = listing.get("items") or []
        for item in items:
            item.setdefault("apiVersion", kind.api_version)
            item.setdefault("kind", kind.kind)
        return items

    def apply(self, kind: Kind, obj: Mapping, field_manager: str) -> dict[str, Any]:
        """Server-side apply of the whole object ``obj`` under ``field_manager``, forced: the
        fields it sets are its own (a field it set before and leaves out is removed)."""
        meta = obj.get("metadata") or {}
        return self._request("PATCH", object_path(kind, meta.get("name"), meta.get("namespace")), obj,
                             content_type=APPLY_PATCH, force=True, field_manager=field_manager)

    def merge_patch(self, kind: Kind, name: str, patch: Mapping, field_manager: str,
                    namespace: str | None = None) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386: ``null`` removes a field)."""
        return self._request("PATCH", object_path(kind, name, namespace), patch,
                             content_type="application/merge-patch+json", field_manager=field_manager)

    def dry_run_create(self, kind: Kind, obj: Mapping, namespace: str | None = None) -> dict[str, Any]:
        """A create with ``dryRun=All``: admitted (the object as it would be stored) or refused
        (``ApiError`` with the apiserver's message); nothing is stored."""
        return self._request("POST", object_path(kind, None, namespace), obj, query=[("dryRun", "All")])

    def served_resources(self, api_version: str) -> set[str]:
        """The resource names (plurals) the apiserver serves for ``api_version``; empty when
        the group/version is not installed (e.g. cert-manager or the ai-models catalog)."""
        path = f"/apis/{api_version}" if group_of(api_version) else f"/api/{api_version}"
        try:
            listing = self._request("GET", path)
        except NotFound:
            return set()
        return {r.get("name", "") for r in listing.get("resources") or () if "/" not in r.get("name", "")}

    def served_kind(self, api_version: str, kind: str) -> Kind | None:
        """``kind`` at ``api_version`` as discovery serves it (its plural and scope, what the
        apiserver's REST mapper reads for a policy's ``paramKind``); None when not served.
        ``ApiError`` when discovery does not answer."""
        path = f"/apis/{api_version}" if group_of(api_version) else f"/api/{api_version}"
        try:
            listing = self._request("GET", path)
        except NotFound:
            return None
        for resource in listing.get("resources") or ():
            name = str(resource.get("name", ""))
            if resource.get("kind") == kind and name and "/" not in name:
                return Kind(api_version, kind, name, bool(resource.get("namespaced")))
        return None
