"""Settings of ``infergate serve``: flags override ``INFERGATE_*`` environment variables,
which override the embedded default (local certificates, shipped policies, example state).

A plain pydantic model read by :meth:`Settings.load` (pydantic-settings would do the same, and
its imports alone would slow the server's start): each field ``name`` has the variable
``INFERGATE_<NAME>``, list fields take a JSON list or comma-separated values.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MiB = 1024 * 1024


ENV_PREFIX = "INFERGATE_"


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)  # built once in run(), read everywhere

    host: str = "0.0.0.0"
    port: int = Field(8443, ge=0, le=65535)

    # Certificates. "self": generated and rotated in cert_dir (the embedded default);
    # "files": provided by someone else (cert-manager, a mounted Secret), reloaded on change;
    # "secret": generated, rotated and kept in the Secret `cert_secret` (NAMESPACE/NAME),
    # with the bundle injected into the webhook configurations named `webhook_name`.
    cert_mode: Literal["self", "files", "secret"] = "self"
    cert_dir: Path = Path("certs")
    cert_secret: str | None = None
    service: str | None = None  # NAMESPACE/NAME: adds the Service's DNS names to the SANs
    extra_sans: list[str] = Field(default_factory=list)
    client_ca_file: Path | None = None  # reviews require a client certificate signed by this CA (mTLS)
    cert_check_interval: float = Field(60.0, gt=0)  # seconds between rotation checks
    cert_watch_interval: float = Field(2.0, gt=0)  # seconds between looks at mounted files
    ca_validity_days: float = Field(365 * 5, gt=0)
    serving_validity_days: float = Field(90, gt=0)
    rotation_overlap_seconds: float = Field(600, ge=0)
    webhook_name: str = "infergate"
    kubeconfig: Path | None = None  # outside a pod; in one, its service account is used

    # What the webhook judges with: None = the shipped data (webhook.shipped_data).
    crds_dir: Path | None = None  # with kube_state, the cluster's CRDs (watched) are the schema
    kubeai_crd: Literal["v0.23", "v0.12.0"] = "v0.23"  # which bundled KubeAI Model CRD (webhook.schema.bundled)
    policies_dir: Path | None = None
    # operators' validation actions per policy (webhook.policy.actions.parse_overrides):
    # NAME=ACTION[,ACTION][@SELECTOR] or a JSON mapping each; INFERGATE_POLICY_ACTIONS: a JSON
    # list of them, or one
    policy_actions: list[str] = Field(default_factory=list)
    state_dir: Path | None = None  # None: the example cluster state (examples/)
    kube_state: bool = False  # watch the cluster instead of reading state_dir
    # leave to the apiserver the rules whose generated ValidatingAdmissionPolicies the controller
    # marked enforced (webhook.policy.handed_over); needs kube_state
    native_policies: bool = False

    # Request handling.
    max_body_bytes: int = Field(7 * MiB, gt=0)
    default_timeout: float = Field(10.0, gt=0)  # when the apiserver sends no ?timeout=
    timeout_margin: float = Field(0.25, ge=0)  # seconds kept back to answer in time
    # An idle kept-alive connection stays open idle_timeout: longer than the apiserver's
    # client keeps one (90 s), so that it never writes to a connection just closed. Slow
    # clients (slowloris): a request's headers within header_timeout of their first byte (of
    # the connection's opening, for the first request); its body within body_timeout of them.
    idle_timeout: float = Field(120.0, gt=0)
    header_timeout: float = Field(10.0, gt=0)
    body_timeout: float = Field(10.0, gt=0)
    failure_mode: Literal["deny", "allow"] = "deny"  # on internal timeout or error
    workers: int = Field(4, ge=0)  # threads judging large or slow reviews; 0: all on the event loop
    shutdown_timeout: float = Field(25.0, ge=0)  # finish in-flight reviews this long on SIGTERM
    # Keep answering this long after SIGTERM with /readyz failing, so the Service's endpoints
    # drop this pod before the listener closes (the apiserver reuses kept-alive connections).
    shutdown_delay: float = Field(0.0, ge=0)
    # Server processes sharing the port (SO_REUSEPORT): a count, or "auto" (the cgroup's CPU
    # quota, else the pod's CPU request, else 1: webhook.server.processes).
    processes: str = "auto"

    log_level: Literal["debug", "info", "warning", "error"] = "info"

    @field_validator("log_level", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value  # INFO, Info, info: one level

    @field_validator("processes", mode="before")
    @classmethod
    def _process_count(cls, value: object) -> object:
        from webhook.server.processes import parse_processes

        parse_processes(value)  # ProcessCountError: a ValueError, reported under the field's name
        return str(value).strip().lower()

    @field_validator("cert_secret", "service")
    @classmethod
    def _namespaced(cls, value: str | None) -> str | None:
        if value is not None:
            namespace, sep, name = value.partition("/")
            if not (sep and namespace and name and "/" not in name):
                raise ValueError(f"must be NAMESPACE/NAME, got {value!r}")
        return value

    @property
    def ca_validity(self) -> dt.timedelta:
        return dt.timedelta(days=self.ca_validity_days)

    @property
    def serving_validity(self) -> dt.timedelta:
        return dt.timedelta(days=self.serving_validity_days)

    @classmethod
    def load(cls, flags: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> Settings:
        """Flags given (None = not given) over ``INFERGATE_*`` variables over the defaults;
        raises pydantic's ValidationError naming the field."""
        given: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            text = environ.get(ENV_PREFIX + name.upper())
            if text is not None:
                listed = typing.get_origin(info.annotation) is list
                given[name] = (_list(text) if name not in _WHOLE else _one_or_list(text)) if listed else text
        given.update((k, v) for k, v in flags.items() if v is not None)
        return cls(**given)


# list settings whose items hold commas themselves: one item, or a JSON list
_WHOLE = {"policy_actions"}


def _one_or_list(text: str) -> list[str] | str:
    if text.lstrip().startswith("["):
        return _list(text)
    return [text] if text.strip() else []


def _list(text: str) -> list[str] | str:
    if text.lstrip().startswith("["):
        try:
            return json.loads(text)
        except ValueError:
            return text  # pydantic names the field and says it is not a list
    return [part.strip() for part in text.split(",") if part.strip()]
