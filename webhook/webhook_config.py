"""The Mutating- and ValidatingWebhookConfiguration that register infergate.

:func:`build_webhook_configurations` is the one definition of these objects: ``infergate
webhook-config`` prints it and the chart's templates render the same (its tests compare).
The rules come from the kinds the webhook serves (``webhook.kinds``, declared ``served``:
infergate's own and the third-party kinds a shipped policy may apply to) at the versions their
bundled CRDs serve (``webhook.schema.bundled.served_kinds``: current and earlier; not the
schema-only kinds ``validate`` merely knows): every served version of every
kind, the operations the webhook judges, never the ``/status`` subresource (status writes
belong to the controller and carry no spec to judge). A rule for a kind whose CRD the
cluster does not have matches nothing and costs nothing; with ``matchPolicy: Equivalent`` a
version the rules do not name still reaches the webhook, converted to one they do.
"""

from __future__ import annotations

import argparse
import base64
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from webhook import documents, kinds
from webhook.apiversion import api_version_of
from webhook.kinds import Kind
from webhook.schema.bundled import served_kinds as bundled_served_kinds

WEBHOOK_PATHS = {"mutate": "/mutate", "validate": "/validate"}
OPERATIONS = {"mutate": ("CREATE", "UPDATE"), "validate": ("CREATE", "UPDATE")}
# HTTPRoutes are Gateway API's, and most of a cluster's routes have nothing to do with
# inference: only a route with a backendRef to an InferencePool is sent, so a webhook outage
# under failurePolicy Fail never blocks the others' writes.
ROUTE_REFERENCES_A_POOL = (
    "request.resource.group != 'gateway.networking.k8s.io' || (has(object.spec) && has(object.spec.rules)"
    " && object.spec.rules.exists(r, has(r.backendRefs) && r.backendRefs.exists(b, has(b.kind) && b.kind == 'InferencePool')))"
)
# The apiserver's webhook timeout is 10s by default; a slow webhook blocks every write,
# so infergate asks for at most 5.
MAX_TIMEOUT_SECONDS = 5


def served_kinds(crds_dir: Path | None = None) -> list[Kind]:
    """Every served version of every CRD in ``crds_dir`` (default: the kinds the webhook serves,
    at the versions of their bundled CRDs), sorted by group and plural."""
    if crds_dir is None:
        return bundled_served_kinds()
    read, errors = documents.read([Path(crds_dir)])  # as CRDRegistry reads CRDs
    if errors:
        raise ValueError(str(errors[0]))
    found = []
    for doc in (d.content for d in read):
        if not isinstance(doc, dict) or doc.get("kind") != kinds.CUSTOM_RESOURCE_DEFINITION.kind:
            continue
        spec = doc["spec"]
        found += [Kind(api_version_of(spec["group"], v["name"]), spec["names"]["kind"], spec["names"]["plural"],
                       spec.get("scope", "Namespaced") == "Namespaced")
                  for v in spec.get("versions", []) if v.get("served", True)]
    if not found:
        raise ValueError(f"no CustomResourceDefinition in {crds_dir}")
    return sorted(found, key=lambda k: (k.group, k.plural))


def rules(served: Iterable[Kind], operations: Sequence[str]) -> list[dict[str, Any]]:
    """One rule per group and version (the resources of a group share their version)."""
    grouped: dict[tuple[str, str], list[Kind]] = {}
    for kind in served:
        grouped.setdefault((kind.group, kind.version), []).append(kind)
    return [
        {
            "apiGroups": [group],
            "apiVersions": [version],
            "operations": list(operations),
            "resources": sorted(r.plural for r in members),
            "scope": "*",
        }
        for (group, version), members in sorted(grouped.items())
    ]


def client_config(endpoint: str, *, url: str | None, service: str | None, port: int, ca_bundle: bytes | None) -> dict[str, Any]:
    path = WEBHOOK_PATHS[endpoint]
    if (url is None) == (service is None):
        raise ValueError("give exactly one of url and service")
    config: dict[str, Any]
    if url is not None:
        if not url.startswith("https://"):
            raise ValueError(f"the apiserver calls webhooks over https only, got {url!r}")
        config = {"url": url.rstrip("/") + path}
    else:
        namespace, _, name = service.partition("/")
        if not namespace or not name:
            raise ValueError(f"service must be NAMESPACE/NAME, got {service!r}")
        config = {"service": {"namespace": namespace, "name": name, "path": path, "port": port}}
    if ca_bundle:
        config["caBundle"] = base64.b64encode(ca_bundle).decode("ascii")
    return config


def build_webhook_configurations(
    *,
    url: str | None = None,
    service: str | None = None,
    port: int = 443,
    ca_bundle: bytes | None = None,
    name: str = "infergate",
    namespace: str = "infergate",
    failure_policy: str = "Fail",
    timeout_seconds: int = MAX_TIMEOUT_SECONDS,
    served: Sequence[Kind] | None = None,
    labels: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(MutatingWebhookConfiguration, ValidatingWebhookConfiguration) for the webhook at
    ``url`` or the Service ``service`` (NAMESPACE/NAME; ``namespace`` defaults to its).

    The webhook's own namespace and kube-system are excluded, so a broken webhook can
    never lock out the namespace it would be repaired from. Objects being deleted (an
    UPDATE that removes a finalizer) are never judged: a policy tightened since their
    creation must not keep them from going away.
    """
    if failure_policy not in ("Fail", "Ignore"):
        raise ValueError(f"failurePolicy must be Fail or Ignore, got {failure_policy!r}")
    if not 1 <= timeout_seconds <= MAX_TIMEOUT_SECONDS:
        raise ValueError(f"timeoutSeconds must be within 1..{MAX_TIMEOUT_SECONDS}, got {timeout_seconds}")
    if service is not None:
        namespace = service.partition("/")[0] or namespace
    served = list(served) if served is not None else served_kinds()

    def webhook(endpoint: str) -> dict[str, Any]:
        hook: dict[str, Any] = {
            "name": f"{endpoint}.infergate.io",
            "admissionReviewVersions": ["v1"],
            "clientConfig": client_config(endpoint, url=url, service=service, port=port, ca_bundle=ca_bundle),
            "rules": rules(served, OPERATIONS[endpoint]),
            "failurePolicy": failure_policy,
            "matchPolicy": "Equivalent",
            "sideEffects": "None",
            "timeoutSeconds": timeout_seconds,
            "namespaceSelector": {
                "matchExpressions": [{
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": sorted({"kube-system", namespace}),
                }]
            },
            "matchConditions": [
                {"name": "not-being-deleted",
                 "expression": "request.operation != 'UPDATE' || !has(object.metadata.deletionTimestamp)"},
                {"name": "inference-routes-only", "expression": ROUTE_REFERENCES_A_POOL},
            ],
        }
        if endpoint == "mutate":
            hook["reinvocationPolicy"] = "IfNeeded"  # defaults again if a later webhook changed the object
        return hook

    metadata = {"name": name, "labels": {"app.kubernetes.io/name": "infergate", **(labels or {})}}
    mutating = {
        "apiVersion": kinds.MUTATING_WEBHOOK_CONFIGURATION.api_version,
        "kind": kinds.MUTATING_WEBHOOK_CONFIGURATION.kind,
        "metadata": dict(metadata),
        "webhooks": [webhook("mutate")],
    }
    validating = {
        "apiVersion": kinds.VALIDATING_WEBHOOK_CONFIGURATION.api_version,
        "kind": kinds.VALIDATING_WEBHOOK_CONFIGURATION.kind,
        "metadata": dict(metadata),
        "webhooks": [webhook("validate")],
    }
    return mutating, validating


EXAMPLES = """\
infergate webhook-config --service infergate-system/infergate | kubectl apply -f -
infergate webhook-config --url https://127.0.0.1:8443 --ca-file certs/ca.crt   # a webhook outside the cluster
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from webhook import command_line

    parser.epilog = command_line.epilog(EXAMPLES, exit_codes="""\
exit status:
  0  printed
  2  usage error, or a CA bundle or CRDs that cannot be read (said in one line)""")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="https URL the apiserver calls (the webhook outside the cluster)")
    where.add_argument("--service", help="NAMESPACE/NAME of the webhook's Service")
    parser.add_argument("--port", type=int, default=443, help="the Service's port (default 443)")
    parser.add_argument("--ca-file", type=Path, default=Path("certs/ca.crt"),
                        help="CA bundle (PEM) to put into caBundle (default certs/ca.crt; '' to leave it out)")
    parser.add_argument("--name", default="infergate", help="name of both configurations (default infergate)")
    parser.add_argument("--failure-policy", default="Fail", choices=["Fail", "Ignore"],
                        help="what the apiserver does when the webhook cannot answer (default Fail)")
    parser.add_argument("--timeout-seconds", type=int, default=MAX_TIMEOUT_SECONDS,
                        help=f"how long the apiserver waits for an answer, 1..{MAX_TIMEOUT_SECONDS} "
                             f"(default {MAX_TIMEOUT_SECONDS})")
    parser.add_argument("--crds-dir", type=Path, help="CRDs the webhook serves (default: the bundled ones)")


def run(args: argparse.Namespace) -> int:
    from webhook import command_line

    try:
        ca_bundle = args.ca_file.read_bytes() if str(args.ca_file) not in ("", ".") else None
    except OSError as exc:
        return command_line.error(f"webhook-config: cannot read CA bundle {args.ca_file}: {exc.strerror} "
                             "(run `infergate certs generate` or pass --ca-file '')")
    try:
        objects = build_webhook_configurations(
            url=args.url, service=args.service, port=args.port, ca_bundle=ca_bundle, name=args.name,
            failure_policy=args.failure_policy, timeout_seconds=args.timeout_seconds,
            served=served_kinds(args.crds_dir) if args.crds_dir else None,
        )
    except (ValueError, OSError, yaml.YAMLError) as exc:
        return command_line.error(f"webhook-config: {exc}")
    sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
    return 0
