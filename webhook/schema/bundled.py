"""The CRDs infergate bundles: the schemas ``validate`` knows offline, and which of their kinds
the webhook serves.

Two questions, two names:

- **known** (``known_kinds``, ``crds``): every kind whose schema infergate carries, so that
  ``infergate validate`` (and ``test``, ``audit``) judges its documents offline instead of
  skipping them;
- **served by the webhook** (``webhook_kinds``, ``served_kinds``): the versions the bundled
  CRDs serve of the kinds the registry (``webhook.kinds``) declares ``served``: the webhook's
  configurations' rules. A kind is served only when a shipped policy may apply to it: serving one
  puts infergate on the write path of every object of that kind in a cluster (``tests/chart``
  checks both directions; ``tests/schema`` that the registry's served kinds are exactly the
  bundled CRDs' but the schema-only ones).

The files, each set in one place (``webhook.shipped_data``):

- ``own``: infergate's own kinds (``chart/crds``: ai.deckhouse.io InferenceServiceClass and
  InferenceService), which the chart always installs; served;
- ``upstream``: the current upstream CRDs of the third-party kinds (``chart/files/crds/upstream``,
  provenance in its ``SOURCES.md``): GIE's InferencePool v1, InferenceObjective,
  InferenceModelRewrite and InferencePoolImport, llm-d's InferenceObjective and
  InferenceModelRewrite, KubeAI's Model, Gateway API's HTTPRoute; served;
- ``schema-only``: upstream CRDs of kinds users publish beside those, known but not served
  (``chart/files/crds/upstream/schema-only``): Gateway API v1.6.1's standard Gateway,
  GatewayClass, GRPCRoute and ReferenceGrant. No shipped policy applies to them;
- ``legacy``: earlier versions (``chart/files/crds/legacy``): GIE's InferencePool v1alpha1
  (v0.1.0) and v1alpha2 (v1.4.0), InferenceModel v1alpha1 (v0.1.0) and v1alpha2 (v0.5.1),
  KubeAI v0.12.0's Model; served (``removed-api-versions`` warns on every one of them).

One CRD name, one CRD. A cluster serves one CRD per name, but GIE released the versions of
``inferencepools.inference.networking.x-k8s.io`` and ``inferencemodels.inference.networking.x-k8s.io``
in different CRD files (v0.1.0's serves only ``v1alpha1``, v1.4.0's and v0.5.1's only
``v1alpha2``), and no release served both. ``crds`` therefore builds one CRD object of the files
bundled under one name (``combined``): the newest file's metadata and names, the versions of
every file (each schema byte for byte as released), the newest file's storage version the only
storage one. The files themselves stay as upstream published them. The combined CRD is for
judging offline, not for installing: a cluster storing v1alpha2 would prune v1alpha1's
``status.conditions`` on every read (the e2e cluster installs the released files).

KubeAI's Model is one kind with two schemas, so exactly one of its CRDs is bundled at a time:
the current one unless ``kubeai_crd="v0.12.0"`` (``--kubeai-crd``). In a cluster the CRDs the
cluster serves take the bundled ones' place (``webhook.schema.watched``); the kinds the webhook
judges are ``webhook_kinds`` either way.
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from webhook import kinds
from webhook.apiversion import api_version_of

__all__ = ["DEFAULT_KUBEAI_CRD", "KUBEAI_CRDS", "SCHEMA_ONLY", "ServedKind", "combined", "crd_files", "crds",
           "known_kinds", "served_kinds", "version_priority", "webhook_kinds"]

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# choice -> (set, file name) of KubeAI's Model CRD
KUBEAI_CRDS: dict[str, tuple[str, str]] = {
    "v0.23": ("upstream", "kubeai.org_models_v1-kubeai-main-2b0ab6e-2026-07-17.yaml"),  # upstream main, about v0.23
    "v0.12.0": ("legacy", "kubeai.org_models_v1-kubeai-v0.12.0.yaml"),
}
DEFAULT_KUBEAI_CRD = "v0.23"
_KUBEAI_FILES = {name for _, name in KUBEAI_CRDS.values()}
SCHEMA_ONLY = "schema-only"  # the set whose kinds validate knows and the webhook does not serve


@dataclass(frozen=True, slots=True)
class ServedKind:
    """One version a bundled CRD serves (in the apiserver's sense: ``versions[].served``)."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    source: str  # "own", "upstream", "schema-only" or "legacy"

    @property
    def api_version(self) -> str:
        return api_version_of(self.group, self.version)

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def webhook_serves(self) -> bool:
        declared = kinds.declared(self.group, self.kind)
        return declared is not None and declared.served


def _directories() -> dict[str, Path]:
    from webhook import shipped_data

    upstream = shipped_data.data_dir("upstream_crds")
    return {"own": shipped_data.crds_dir(), "upstream": upstream, SCHEMA_ONLY: upstream / "schema-only",
            "legacy": shipped_data.data_dir("legacy_crds")}


def _check_choice(kubeai_crd: str) -> None:
    if kubeai_crd not in KUBEAI_CRDS:
        raise ValueError(f"unknown KubeAI Model CRD {kubeai_crd!r}: choose one of {', '.join(KUBEAI_CRDS)}")


def crd_files(kubeai_crd: str = DEFAULT_KUBEAI_CRD) -> list[tuple[str, Path]]:
    """``(set, path)`` of every bundled CRD file, with the chosen KubeAI Model CRD only."""
    _check_choice(kubeai_crd)
    chosen = KUBEAI_CRDS[kubeai_crd][1]
    found = []
    for source, directory in _directories().items():
        for path in sorted(directory.glob("*.yaml")):
            if path.name in _KUBEAI_FILES and path.name != chosen:
                continue
            found.append((source, path))
    return found


@functools.cache
def _read(path: Path) -> tuple[dict[str, Any], ...]:
    docs = yaml.load_all(path.read_text(encoding="utf-8"), Loader=_LOADER)
    return tuple(d for d in docs if isinstance(d, dict) and d.get("kind") == kinds.CUSTOM_RESOURCE_DEFINITION.kind)


def version_priority(name: str) -> tuple[int, int, int]:
    """Kubernetes' version priority (GA > beta > alpha, then the numbers), as a sort key."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", name)
    if match is None:
        return (-1, 0, 0)
    major, level, minor = match.groups()
    return (int(major), {"alpha": 0, "beta": 1, None: 2}[level], int(minor or 0))


def _storage(crd: dict[str, Any]) -> str:
    return next((v["name"] for v in crd["spec"].get("versions") or () if v.get("storage")), "")


def combined(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One CRD of several released CRD files of one name that serve different versions.

    The base is the part whose storage version is newest (Kubernetes' version priority): its
    metadata, group, names, scope and conversion. Its versions come first, then the others'
    versions, each as released; only the base's storage version stays ``storage: true``. Refused
    (``ValueError``): parts of different groups, kinds, plurals or scopes, or two parts serving
    one version.
    """
    if len(parts) == 1:
        return parts[0]
    ordered = sorted(parts, key=lambda crd: version_priority(_storage(crd)), reverse=True)
    base = copy.deepcopy(ordered[0])
    spec = base["spec"]
    identity = (spec["group"], spec["names"]["kind"], spec["names"]["plural"], spec.get("scope"))
    seen = {v["name"] for v in spec["versions"]}
    for part in ordered[1:]:
        other = part["spec"]
        if (other["group"], other["names"]["kind"], other["names"]["plural"], other.get("scope")) != identity:
            raise ValueError(f"{base['metadata']['name']}: the files differ in group, kind, plural or scope")
        for version in other["versions"]:
            if version["name"] in seen:
                raise ValueError(f"{base['metadata']['name']}: version {version['name']} is in two files")
            seen.add(version["name"])
            spec["versions"].append({**copy.deepcopy(version), "storage": False})
    return base


@functools.cache
def _crds(kubeai_crd: str) -> tuple[tuple[str, str, dict[str, Any]], ...]:
    by_name: dict[str, list[tuple[str, Path, dict[str, Any]]]] = {}
    for source, path in crd_files(kubeai_crd):
        for crd in _read(path):
            by_name.setdefault(crd["metadata"]["name"], []).append((source, path, crd))
    out = []
    for name, parts in by_name.items():
        where = " + ".join(path.name for _, path, _ in parts)
        out.append((parts[0][0], where, combined([crd for _, _, crd in parts])))
    return tuple(out)


def crds(kubeai_crd: str = DEFAULT_KUBEAI_CRD) -> list[tuple[str, str, dict[str, Any]]]:
    """``(set, file names, CRD)``: one CRD object per bundled CRD name (``combined`` when GIE
    released its versions in several files), the chosen KubeAI Model CRD only. Copies: callers
    may keep or change them."""
    return [(source, where, copy.deepcopy(crd)) for source, where, crd in _crds(kubeai_crd)]


def shared_crds(kubeai_crd: str = DEFAULT_KUBEAI_CRD) -> tuple[tuple[str, str, dict[str, Any]], ...]:
    """``crds`` without the copies, for readers that only read them (the policies' type
    checks): the same objects on every call, which nobody may change."""
    _check_choice(kubeai_crd)
    return _crds(kubeai_crd)


def known_kinds(kubeai_crd: str = DEFAULT_KUBEAI_CRD) -> list[ServedKind]:
    """Every served version of every bundled CRD: the kinds ``validate`` judges offline. Sorted
    by group, kind and version."""
    found = []
    for source, _, crd in _crds(kubeai_crd):
        spec = crd["spec"]
        for version in spec.get("versions") or ():
            if version.get("served", True):
                found.append(ServedKind(spec["group"], version["name"], spec["names"]["kind"],
                                        spec["names"]["plural"], spec.get("scope", "Namespaced") != "Cluster",
                                        source))
    return sorted(found, key=lambda k: (k.group, k.kind, k.version))


def webhook_kinds(kubeai_crd: str = DEFAULT_KUBEAI_CRD) -> list[ServedKind]:
    """The known kinds the webhook serves (the registry's ``served``): its configurations' rules
    (``webhook.webhook_config``, the chart's ``infergate.webhookRules``). Not the ``schema-only``
    ones."""
    return [kind for kind in known_kinds(kubeai_crd) if kind.webhook_serves]


def served_kinds(kubeai_crd: str = DEFAULT_KUBEAI_CRD) -> list[kinds.Kind]:
    """Every version of every kind the webhook serves, sorted by group and plural, the newest
    version of each first (the KubeAI Model CRD chosen makes no difference: same kind, same
    version)."""
    served = webhook_kinds(kubeai_crd)
    served.sort(key=lambda k: version_priority(k.version), reverse=True)
    served.sort(key=lambda k: (k.group, k.plural))
    return [kinds.Kind(k.api_version, k.kind, k.plural, k.namespaced) for k in served]
