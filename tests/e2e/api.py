"""A thin REST layer over the official client: every answer as the apiserver gave it.

The generated typed clients hide what the e2e tests are about (the exact ``metav1.Status``
of a denial, the ``Warning`` headers, ``dryRun``), so requests go through
``ApiClient.call_api`` and come back as a :class:`Reply`: HTTP status, JSON body, warnings.
Resource paths come from the apiserver's discovery, so any served kind works (CRDs too).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

# RFC 7234 warn-value as the apiserver writes it: 299 - "text" (quotes and backslashes escaped)
_WARNING = re.compile(r'299 - "((?:[^"\\]|\\.)*)"')

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
FIELD_MANAGER = "infergate-e2e"


def parse_warnings(header: str | None) -> list[str]:
    """The texts of the ``Warning`` header (several values arrive joined by commas)."""
    return [re.sub(r"\\(.)", r"\1", text) for text in _WARNING.findall(header or "")]


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def message(self) -> str:
        return self.body.get("message", "") if not self.ok else ""

    def expect_ok(self) -> dict[str, Any]:
        assert self.ok, f"HTTP {self.status}: {self.body.get('message', self.body)}"
        return self.body


@dataclass(frozen=True)
class Resource:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if subresource:
            base += f"/{subresource}"
        return base


class NotServed(LookupError):
    pass


class Kube:
    def __init__(self, client: ApiClient):
        self.client = client
        self.discovered: dict[str, dict[str, Resource]] = {}

    # -- the one request --------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, *, params: Iterable[tuple[str, str]] = (),
                content_type: str = "application/json", timeout: float = 30) -> Reply:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        # param_serialize adds the query, the host and the kubeconfig's credentials
        method, url, headers, _, _ = self.client.param_serialize(
            method, path, query_params=list(params), header_params=headers, auth_settings=["BearerToken"])
        try:  # the client serializes ``body`` as JSON for every application/*json content type
            response = self.client.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)
            status, raw, header = response.status, response.read(), response.headers.get("Warning")
        except ApiException as exc:  # a TLS failure: no HTTP answer
            status, raw, header = exc.status or 0, (exc.reason or "").encode(), None
        except urllib3.exceptions.HTTPError as exc:  # no connection: no HTTP answer either
            status, raw, header = 0, str(exc).encode(), None
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = {"message": raw.decode(errors="replace")}
        return Reply(status, parsed, parse_warnings(header))

    def text(self, path: str, *, timeout: float = 30) -> str:
        """A GET answered in plain text (a Pod's log); empty when it could not be read."""
        method, url, headers, _, _ = self.client.param_serialize(
            "GET", path, header_params={"Accept": "*/*"}, auth_settings=["BearerToken"])
        try:
            response = self.client.call_api(method, url, header_params=headers, _request_timeout=timeout)
            return response.read().decode(errors="replace") if response.status == 200 else ""
        except (ApiException, urllib3.exceptions.HTTPError):
            return ""

    # -- discovery ----------------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> Resource:
        if api_version not in self.discovered:
            self.rediscover(api_version)
        try:
            return self.discovered[api_version][kind]
        except KeyError:
            raise NotServed(f"{kind} ({api_version}) is not served by this cluster") from None

    def rediscover(self, api_version: str) -> None:
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        reply = self.request("GET", path)
        found = {}
        for r in reply.body.get("resources", []) if reply.ok else []:
            if "/" not in r["name"]:
                found[r["kind"]] = Resource(api_version, r["kind"], r["name"], r["namespaced"])
        self.discovered[api_version] = found

    def serves(self, api_version: str, kind: str) -> bool:
        self.rediscover(api_version)
        return kind in self.discovered[api_version]

    def resource_of(self, obj: Mapping) -> Resource:
        return self.resource(obj["apiVersion"], obj["kind"])

    # -- verbs ------------------------------------------------------------------------------

    def create(self, obj: Mapping, *, dry_run: bool = False) -> Reply:
        meta = obj.get("metadata") or {}
        path = self.resource_of(obj).path(meta.get("namespace"))
        return self.request("POST", path, dict(obj), params=[("dryRun", "All")] if dry_run else ())

    def replace(self, obj: Mapping, *, subresource: str | None = None, dry_run: bool = False) -> Reply:
        meta = obj["metadata"]
        path = self.resource_of(obj).path(meta.get("namespace"), meta["name"], subresource)
        return self.request("PUT", path, dict(obj), params=[("dryRun", "All")] if dry_run else ())

    def patch(self, api_version: str, kind: str, name: str, patch: Any, *, namespace: str | None = None,
              content_type: str = MERGE_PATCH, subresource: str | None = None, dry_run: bool = False) -> Reply:
        path = self.resource(api_version, kind).path(namespace, name, subresource)
        return self.request("PATCH", path, patch, content_type=content_type,
                            params=[("dryRun", "All")] if dry_run else ())

    def apply(self, obj: Mapping, *, dry_run: bool = False) -> Reply:
        """Server-side apply (``kubectl apply --server-side``), owned by the e2e field manager."""
        meta = obj["metadata"]
        path = self.resource_of(obj).path(meta.get("namespace"), meta["name"])
        params = [("fieldManager", FIELD_MANAGER), ("force", "true")] + ([("dryRun", "All")] if dry_run else [])
        return self.request("PATCH", path, json.dumps(dict(obj)), content_type=APPLY_PATCH, params=params)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        reply = self.request("GET", self.resource(api_version, kind).path(namespace, name))
        if reply.status == 404:
            return None
        return reply.expect_ok()

    def list(self, api_version: str, kind: str, namespace: str | None = None, *,
             label_selector: str | None = None) -> list[dict]:
        params = [("labelSelector", label_selector)] if label_selector else []
        reply = self.request("GET", self.resource(api_version, kind).path(namespace), params=params)
        if reply.status == 404:  # discovery said served, but its CRD has gone since
            self.discovered.pop(api_version, None)
            raise NotServed(f"{kind} ({api_version}) is no longer served by this cluster")
        return reply.expect_ok().get("items", [])

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Reply:
        path = self.resource(api_version, kind).path(namespace, name)
        return self.request("DELETE", path, {"propagationPolicy": "Background"})


def wait_for(what: str, probe: Callable[[], Any], *, timeout: float = 60, interval: float = 0.5) -> Any:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` and its last value."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")
        time.sleep(interval)
