"""The cluster view from a directory of YAML/JSON manifests (offline and embedded use)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import yaml

from webhook import documents as documents_reader
from webhook.documents import Document
from webhook.apiversion import group_of
from webhook.state.base import ClusterState
from webhook.state.knowledge import EVERYTHING, Knowledge

__all__ = ["FileState", "StateLoadError", "KUBEAI_CONFIG", "is_kustomize_file", "read_manifests",
           "read_objects", "state_objects"]

# A bare KubeAI system config file (its own format: resourceProfiles, cacheProfiles, ...)
# is served as the ConfigMap KubeAI's Helm chart creates, so policies read one shape.
KUBEAI_CONFIG = {"namespace": "kubeai", "name": "kubeai-config", "key": "system.yaml"}
_KUBEAI_CONFIG_KEYS = {"resourceProfiles", "cacheProfiles", "modelServers", "modelLoading"}


class StateLoadError(ValueError):
    """A manifest that cannot be read; the message names the file (and line)."""


def _kubeai_config_map(config: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": KUBEAI_CONFIG["name"], "namespace": KUBEAI_CONFIG["namespace"]},
        "data": {KUBEAI_CONFIG["key"]: yaml.safe_dump(config, sort_keys=False)},
    }


def _objects(document: Document) -> Iterator[dict[str, Any]]:
    doc, where = document.content, document.where
    if not isinstance(doc, dict):
        raise StateLoadError(f"{where}: expected a Kubernetes object (a mapping), got {type(doc).__name__}")
    if "kind" not in doc and _KUBEAI_CONFIG_KEYS & doc.keys():
        yield _kubeai_config_map(doc)
        return
    missing = [f for f in ("apiVersion", "kind") if not isinstance(doc.get(f), str) or not doc.get(f)]
    name = (doc.get("metadata") or {}).get("name")
    if missing or not isinstance(name, str) or not name:
        what = ", ".join(missing + ([] if name else ["metadata.name"]))
        raise StateLoadError(f"{where}: object without {what}")
    yield doc


def is_kustomize_file(doc: Any) -> bool:
    """A kustomize ``Kustomization`` (or ``Component``): input to kustomize, never applied."""
    return isinstance(doc, dict) and isinstance(doc.get("apiVersion"), str) \
        and doc["apiVersion"].startswith("kustomize.config.k8s.io/")


def state_objects(documents: list[Document]) -> tuple[list[dict[str, Any]], int]:
    """The named Kubernetes objects of ``documents`` (a KubeAI system config as its ConfigMap)
    and how many documents were none (a kustomization.yaml, a Helm values file, a bare list):
    what ``infergate validate --state DIR`` reads of a repository."""
    out: list[dict[str, Any]] = []
    skipped = 0
    for document in documents:
        if is_kustomize_file(document.content):
            skipped += 1
            continue
        try:
            out += _objects(document)
        except StateLoadError:
            skipped += 1
    return out, skipped


def read_objects(documents: list[Document]) -> list[dict[str, Any]]:
    """The objects of ``documents``; the first that is none raises :class:`StateLoadError`."""
    return [obj for document in documents for obj in _objects(document)]


def read_manifests(*paths: Path) -> list[dict[str, Any]]:
    """The objects of manifest files, or of every file under directories, as :class:`FileState`
    reads them (``webhook.documents``); raises :class:`StateLoadError` at the first problem."""
    documents, errors = documents_reader.read(paths)
    if errors:
        raise StateLoadError(str(errors[0]))
    return read_objects(documents)


class FileState(ClusterState):
    """All manifests under ``directory`` (recursively, files in name order).

    Multi-document YAML, ``kind: List`` and JSON are accepted; a document without
    ``kind`` holding KubeAI's ``resourceProfiles``/``cacheProfiles`` is KubeAI's system
    config. Secrets keep metadata only. A bad file raises :class:`StateLoadError`.
    ``knowledge``: the kinds it holds whole (default: every kind, as the webhook's embedded
    state has always been read; ``infergate validate`` says what it knows).
    """

    def __init__(self, directory: str | Path | None = None, *, objects: list[dict[str, Any]] | None = None,
                 knowledge: Knowledge = EVERYTHING) -> None:
        super().__init__()
        self.knowledge = knowledge
        self.directory = Path(directory) if directory is not None else None
        loaded: list[dict[str, Any]] = list(objects or ())
        if self.directory is not None:
            if not self.directory.is_dir():
                raise StateLoadError(f"{self.directory}: not a directory")
            loaded.extend(read_manifests(self.directory))
        by_kind: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for obj in loaded:
            by_kind.setdefault((group_of(obj["apiVersion"]), obj["kind"]), []).append(obj)
        for (group, kind), items in by_kind.items():
            self._store.replace(group, kind, items)

    @property
    def ready(self) -> bool:
        return True
