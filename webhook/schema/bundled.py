"""The CRDs infergate bundles: which kinds and versions it serves without a cluster.

Three sets of files, each in one place (``webhook.shipped_data``):

- ``own``: infergate's own kinds (``chart/crds``: ai.deckhouse.io InferenceServiceClass and
  InferenceService), which the chart always installs;
- ``upstream``: the current upstream CRDs of the third-party kinds (``chart/files/crds/upstream``,
  provenance in its ``SOURCES.md``): GIE's InferencePool v1, InferenceObjective,
  InferenceModelRewrite and InferencePoolImport, llm-d's InferenceObjective and
  InferenceModelRewrite, KubeAI's Model, Gateway API's HTTPRoute;
- ``legacy``: earlier versions still served (``chart/files/crds/legacy``): GIE's v1alpha1
  InferenceModel and InferencePool, KubeAI v0.12.0's Model.

KubeAI's Model is one kind with two schemas, so exactly one of its CRDs is bundled at a time:
the current one unless ``kubeai_crd="v0.12.0"`` (``--kubeai-crd``). In a cluster the CRDs the
cluster serves take the bundled ones' place (``webhook.schema.watched``); the kinds infergate
judges (its webhook configurations' rules, the CRDs it watches) are the bundled ones either way.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["DEFAULT_KUBEAI_CRD", "KUBEAI_CRDS", "ServedKind", "crd_files", "crd_names", "served_kinds"]

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# choice -> (set, file name) of KubeAI's Model CRD
KUBEAI_CRDS: dict[str, tuple[str, str]] = {
    "v0.23": ("upstream", "kubeai.org_models_v1-kubeai-main-2b0ab6e-2026-07-17.yaml"),  # upstream main, about v0.23
    "v0.12.0": ("legacy", "kubeai.org_models_v1-kubeai-v0.12.0.yaml"),
}
DEFAULT_KUBEAI_CRD = "v0.23"
_KUBEAI_FILES = {name for _, name in KUBEAI_CRDS.values()}


@dataclass(frozen=True, slots=True)
class ServedKind:
    """One served version of a bundled kind."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    source: str  # "own", "upstream" or "legacy"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"


def _directories() -> dict[str, Path]:
    from webhook import shipped_data

    return {"own": shipped_data.crds_dir(), "upstream": shipped_data.data_dir("upstream_crds"),
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
    return tuple(d for d in docs if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition")


def served_kinds(kubeai_crd: str = DEFAULT_KUBEAI_CRD) -> list[ServedKind]:
    """Every served version of every bundled kind, sorted by group, kind and version."""
    found = []
    for source, path in crd_files(kubeai_crd):
        for crd in _read(path):
            spec = crd["spec"]
            for version in spec.get("versions") or ():
                if version.get("served", True):
                    found.append(ServedKind(spec["group"], version["name"], spec["names"]["kind"],
                                            spec["names"]["plural"], spec.get("scope", "Namespaced") != "Cluster",
                                            source))
    return sorted(found, key=lambda k: (k.group, k.kind, k.version))


def crd_names() -> frozenset[str]:
    """``metadata.name`` of every bundled CRD (``<plural>.<group>``): the CRDs a cluster may
    serve for the kinds infergate judges."""
    return frozenset(kind.crd_name for kind in served_kinds())
