"""The policy format (``policies/*.yaml``): pydantic models and their JSON schema.

Modelled on ValidatingAdmissionPolicy and MutatingAdmissionPolicy so Kubernetes users
read it at sight, with two additions: ``lookups`` (objects of the cluster state bound
for CEL before evaluation, which keeps the expressions pure and fast) and
``paramRef`` resolved from the state (e.g. KubeAI's system config).

Every ``expression`` is CEL and sees ``object``, ``oldObject``, ``request``,
``namespaceObject``, ``params``, ``lookups`` and ``variables``.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from webhook.policy.actions import action_problems

API_VERSION = "policy.infergate.io/v1alpha1"
KIND = "AdmissionPolicy"

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT", "*"]
ValidationAction = Literal["Deny", "Warn", "Audit"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LabelSelectorRequirement(_Strict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(_Strict):
    matchLabels: dict[str, str] = Field(default_factory=dict)
    matchExpressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class ResourceRule(_Strict):
    """Which requests a policy sees. ``kinds`` are kinds (``Model``), not resources."""

    apiGroups: list[str] = Field(min_length=1, description='API groups; "" is the core group, "*" any')
    kinds: list[str] = Field(min_length=1, description='kinds, e.g. InferenceService; "*" any')
    operations: list[Operation] = Field(default_factory=lambda: ["CREATE", "UPDATE"])
    subresources: list[str] = Field(
        default_factory=list,
        description='subresources also matched (e.g. "status"); writes to a subresource not listed '
        "here never see the policy, so spec rules do not judge /status writes",
    )


class MatchConstraints(_Strict):
    resourceRules: list[ResourceRule] = Field(min_length=1)
    namespaceSelector: LabelSelector | None = None
    objectSelector: LabelSelector | None = None


class NamedExpression(_Strict):
    """A variable: ``variables.<name>`` in later expressions."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    expression: str = Field(min_length=1)


class MatchCondition(_Strict):
    """The policy applies only when every match condition is true."""

    name: str = Field(pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", max_length=63)
    expression: str = Field(min_length=1)


class GetLookup(_Strict):
    """One object by name: bound to ``lookups.<name>`` (``null`` when absent)."""

    apiVersion: str
    kind: str
    name: str = Field(description="CEL: the object's name (null: no lookup)")
    namespace: str | None = Field(default=None, description="CEL: its namespace (namespaced kinds)")


class ListLookup(_Strict):
    """Objects of a kind: bound to ``lookups.<name>`` (a list, in namespace/name order)."""

    apiVersion: str
    kind: str
    namespace: str | None = Field(default=None, description="CEL: one namespace (default: all)")
    labelSelector: str | None = Field(default=None, description="CEL: a label selector string")
    selector: str | None = Field(
        default=None,
        description="CEL: a metav1.LabelSelector map (matchLabels, matchExpressions), e.g. an "
        "object's own spec.selector; null selects nothing, {} everything",
    )

    @model_validator(mode="after")
    def _one_selector(self) -> "ListLookup":
        if self.labelSelector is not None and self.selector is not None:
            raise ValueError("give labelSelector or selector, not both")
        return self


class Lookup(_Strict):
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    get: GetLookup | None = None
    list: ListLookup | None = None

    @model_validator(mode="after")
    def _one_source(self) -> "Lookup":
        if (self.get is None) == (self.list is None):
            raise ValueError("exactly one of get or list is required")
        return self


class ParamRef(_Strict):
    """Where ``params`` comes from: a cluster object, or one YAML-valued key of its data."""

    apiVersion: str
    kind: str
    name: str
    namespace: str | None = Field(default=None, description="default: the first match in any namespace")
    dataKey: str | None = Field(default=None, description="parse data[dataKey] as YAML (ConfigMaps)")


class Validation(_Strict):
    """Denies the request when ``expression`` is false."""

    expression: str = Field(min_length=1)
    message: str | None = None
    messageExpression: str | None = None
    reason: str = Field(default="Invalid", pattern=r"^[A-Za-z][A-Za-z0-9]*$")
    fieldPath: str | None = Field(default=None, description="the field the denial names, e.g. spec.engine")


class WarningRule(_Strict):
    """Adds an admission warning when ``expression`` is false."""

    expression: str = Field(min_length=1)
    message: str | None = None
    messageExpression: str | None = None


class AuditAnnotation(_Strict):
    key: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    valueExpression: str = Field(min_length=1, description="CEL: a string, or null for none")


class Mutation(_Strict):
    """``JSONPatch``: the expression yields RFC 6902 operations (maps of op/path/value);
    ``ApplyConfiguration``: it yields a partial object merged into the object (maps merge,
    everything else replaces)."""

    patchType: Literal["JSONPatch", "ApplyConfiguration"]
    expression: str = Field(min_length=1)


class PolicySpec(_Strict):
    description: str | None = None
    failurePolicy: Literal["Fail", "Ignore"] = "Fail"
    validationStage: Literal["Validating", "Mutating"] = Field(
        default="Validating",
        description="where validations, warnings and audit annotations run: in the validating webhook "
        "(after the apiserver's schema validation), or in the mutating webhook (before it: to explain "
        "what the schema would reject, e.g. with a hint)",
    )
    validationActions: list[ValidationAction] = Field(
        default_factory=lambda: ["Deny"],
        description="what a failed validation does, as a ValidatingAdmissionPolicyBinding's: Deny refuses the "
        "request; Warn admits it with the failure as an admission warning; Audit admits it and records the "
        "failure in the response's audit annotations. A non-empty set; Deny and Warn together are invalid",
        json_schema_extra={"minItems": 1, "uniqueItems": True,
                           "not": {"allOf": [{"contains": {"const": "Deny"}}, {"contains": {"const": "Warn"}}]}},
    )
    matchConstraints: MatchConstraints
    paramRef: ParamRef | None = None
    lookups: list[Lookup] = Field(default_factory=list)
    matchConditions: list[MatchCondition] = Field(default_factory=list)
    variables: list[NamedExpression] = Field(default_factory=list)
    mutations: list[Mutation] = Field(default_factory=list)
    validations: list[Validation] = Field(default_factory=list)
    warnings: list[WarningRule] = Field(default_factory=list)
    auditAnnotations: list[AuditAnnotation] = Field(default_factory=list)

    @field_validator("validationActions")
    @classmethod
    def _valid_actions(cls, actions: list[str]) -> list[str]:
        """VAP's checks in its words: no duplicates, not Deny with Warn, not empty."""
        problems = action_problems(actions)
        if problems:
            raise PydanticCustomError("validation_actions", "; ".join(text for _, text in problems))
        return actions


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)


class AdmissionPolicy(_Strict):
    apiVersion: Literal["policy.infergate.io/v1alpha1"]
    kind: Literal["AdmissionPolicy"]
    metadata: Metadata
    spec: PolicySpec


def json_schema() -> dict:
    schema = AdmissionPolicy.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def json_schema_text() -> str:
    """The text of ``policies/admission-policy.schema.json`` (kept current by a test)."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m webhook.policy.model > policies/admission-policy.schema.json
    print(json_schema_text(), end="")
