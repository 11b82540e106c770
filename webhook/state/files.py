"""The cluster view from a directory of YAML/JSON manifests (offline and embedded use)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import yaml

from webhook.nesting import may_alias, tree_problem
from webhook.state.base import ClusterState, group_of

__all__ = ["FileState", "StateLoadError", "KUBEAI_CONFIG", "read_manifests"]

# A bare KubeAI system config file (its own format: resourceProfiles, cacheProfiles, ...)
# is served as the ConfigMap KubeAI's Helm chart creates, so policies read one shape.
KUBEAI_CONFIG = {"namespace": "kubeai", "name": "kubeai-config", "key": "system.yaml"}
_KUBEAI_CONFIG_KEYS = {"resourceProfiles", "cacheProfiles", "modelServers", "modelLoading"}

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster, same nodes and marks
_SUFFIXES = {".yaml", ".yml", ".json"}


class StateLoadError(ValueError):
    """A manifest that cannot be read; the message names the file (and line)."""


def _documents(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise StateLoadError(f"{path}: cannot read: {exc}") from exc
    loader = _LOADER(text)  # JSON is YAML
    check = may_alias(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            document = loader.construct_document(node)
            problem = tree_problem(document) if check else None
            if problem is not None:  # the same limit as the server's (webhook.nesting)
                raise StateLoadError(f"{path}:{node.start_mark.line + 1}: document {problem}")
            yield node.start_mark.line + 1, document
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise StateLoadError(f"{path}{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from exc
    finally:
        loader.dispose()


def _kubeai_config_map(config: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": KUBEAI_CONFIG["name"], "namespace": KUBEAI_CONFIG["namespace"]},
        "data": {KUBEAI_CONFIG["key"]: yaml.safe_dump(config, sort_keys=False)},
    }


def _objects(path: Path) -> Iterator[dict[str, Any]]:
    for line, doc in _documents(path):
        if not isinstance(doc, dict):
            raise StateLoadError(f"{path}:{line}: expected a Kubernetes object (a mapping), got {type(doc).__name__}")
        if "kind" not in doc and _KUBEAI_CONFIG_KEYS & doc.keys():
            yield _kubeai_config_map(doc)
            continue
        is_list = str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list)
        items = doc["items"] if is_list else [doc]
        for obj in items:
            if not isinstance(obj, dict):
                raise StateLoadError(f"{path}:{line}: list item is not an object")
            missing = [f for f in ("apiVersion", "kind") if not isinstance(obj.get(f), str) or not obj.get(f)]
            name = (obj.get("metadata") or {}).get("name")
            if missing or not isinstance(name, str) or not name:
                what = ", ".join(missing + ([] if name else ["metadata.name"]))
                raise StateLoadError(f"{path}:{line}: object without {what}")
            yield obj


def _manifest_files(directory: Path) -> list[Path]:
    """Manifests under ``directory`` in name order; hidden entries skipped (a mounted ConfigMap
    shows each file twice: as a link and inside kubelet's hidden ``..<timestamp>`` directory)."""
    found = []
    for root, dirs, files in os.walk(directory, followlinks=True):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [Path(root, f) for f in files if not f.startswith(".") and Path(f).suffix in _SUFFIXES]
    return sorted(found)


def read_manifests(path: Path) -> list[dict[str, Any]]:
    """The objects of a manifest file, or of every file under a directory, as :class:`FileState`
    reads them; raises :class:`StateLoadError`."""
    if path.is_dir():
        files = _manifest_files(path)
    elif path.is_file():
        files = [path]
    else:
        raise StateLoadError(f"{path}: no such file or directory")
    return [obj for file in files for obj in _objects(file)]


class FileState(ClusterState):
    """All manifests under ``directory`` (recursively, files in name order).

    Multi-document YAML, ``kind: List`` and JSON are accepted; a document without
    ``kind`` holding KubeAI's ``resourceProfiles``/``cacheProfiles`` is KubeAI's system
    config. Secrets keep metadata only. A bad file raises :class:`StateLoadError`.
    """

    def __init__(self, directory: str | Path | None = None, *, objects: list[dict[str, Any]] | None = None) -> None:
        super().__init__()
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
