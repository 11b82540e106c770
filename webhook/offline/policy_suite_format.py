"""The policy test suite format (``kind: PolicySuite``): pydantic models and their JSON schema.

A suite names the policies, CRDs and cluster state to test with, and holds cases: one write
each (the AdmissionRequest the apiserver would send) and what the cluster should answer.
``policies/policy-suite.schema.json`` is generated from these models (a test keeps it current).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

API_VERSION = "policy.infergate.io/v1alpha1"
KIND = "PolicySuite"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UserInfo(_Strict):
    """Who makes the request (``request.userInfo`` in policies)."""

    username: str = "infergate-test"
    uid: str = ""
    groups: list[str] = Field(default_factory=list)
    extra: dict[str, list[str]] = Field(default_factory=dict)


class Expectation(_Strict):
    """What the cluster answers. Only the keys given are checked."""

    allowed: bool | None = Field(default=None, description="the verdict")
    code: int | None = Field(default=None, description="denied: the HTTP code of the Status (422, 403, ...)")
    reason: str | None = Field(default=None, description="denied: the Status reason (Invalid, Forbidden, ...)")
    errors: list[str] | None = Field(
        default=None,
        description='denied: every cause as "<field>: <message>", compared as a multiset (order free)')
    errorsMatch: list[str] | None = Field(
        default=None, description="denied: regular expressions, each matching at least one error")
    message: str | None = Field(default=None, description="a regular expression searched in the Status message")
    warnings: list[str] | None = Field(
        default=None, description="every warning, compared as a multiset; [] asserts there are none")
    patched: dict[str, Any] | None = Field(
        default=None, description="the object after the MutatingAdmissionPolicies, the mutating webhook and the "
        "apiserver's defaults, as it would be stored (compared exactly)")
    patch: list[dict[str, Any]] | None = Field(
        default=None, description="the mutating webhook's RFC 6902 JSON patch (compared exactly)")
    auditAnnotations: dict[str, str] | None = Field(
        default=None, description='audit annotations, keyed "<policy>.<key>", and "validation_failure" '
        "(the failures admitted under Audit, VAP's JSON list) (compared exactly)")
    actions: dict[str, list[Literal["Deny", "Warn", "Audit"]]] | None = Field(
        default=None, description="each policy that failed -> the validation actions its failures met "
        "(Deny: denied; Warn: admitted with a warning; Audit: recorded in the validation_failure audit "
        "annotation), compared exactly, the order of actions free; {} asserts that no policy failed")


class SuiteCase(_Strict):
    """One write and the expected answer."""

    name: str = Field(min_length=1, description="unique in the suite; --run REGEX selects by it")
    description: str | None = None
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"] | None = Field(
        default=None, description="default: UPDATE when old is given, else CREATE")
    object: dict[str, Any] | None = Field(default=None, description="the object written (not for DELETE)")
    old: dict[str, Any] | None = Field(default=None, description="UPDATE/DELETE: the object as stored")
    namespace: str | None = Field(
        default=None, description="default: the object's metadata.namespace, else the suite's namespace "
        "(cluster-scoped kinds: none)")
    subresource: str | None = Field(default=None, description='e.g. "status"')
    userInfo: UserInfo = Field(default_factory=UserInfo)
    dryRun: bool = False
    expect: Expectation = Field(default_factory=Expectation, description="--update records it")


class PolicySuite(_Strict):
    apiVersion: Literal["policy.infergate.io/v1alpha1"]
    kind: Literal["PolicySuite"]
    name: str | None = Field(default=None, description="default: the file name")
    description: str | None = None
    policies: list[str] | None = Field(
        default=None, description="policy files or directories, relative to the suite file "
        "(default: the shipped policies, with the built-in ones)")
    builtin: bool | None = Field(
        default=None, description="also run the built-in Python policies (default: only with the shipped policies)")
    crds: list[str] | None = Field(
        default=None, description="CRD files or directories, relative to the suite file (default: the shipped CRDs)")
    state: list[str | dict[str, Any]] = Field(
        default_factory=list, description="the cluster that lookups and paramRef read: objects inline, or "
        "manifest files/directories relative to the suite file (default: an empty cluster)")
    namespace: str = Field(default="default", description="the namespace of cases that name none")
    actions: dict[str, Any] | None = Field(
        default=None, description="validation actions per policy name instead of the policies' own, as an "
        "operator sets them (the chart's policies.actions, serve --policy-actions): {NAME: [ACTION, ...]} or "
        "{NAME: [{namespaceSelector, actions}, ...]}; namespaces are matched by their labels in state")
    cases: list[SuiteCase] = Field(min_length=1)


def json_schema() -> dict:
    schema = PolicySuite.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://infergate.io/schemas/policy-suite.json"
    return schema


def json_schema_text() -> str:
    """The text of ``policies/policy-suite.schema.json`` (kept current by a test)."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m webhook.offline.policy_suite_format > policies/policy-suite.schema.json
    print(json_schema_text(), end="")
