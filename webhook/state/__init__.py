"""The cluster view: :class:`FileState` (a directory of manifests), :class:`KubeState`
(a watch cache) and :class:`MemoryState` (filled by its owner), all behind :class:`ClusterState`."""

from webhook.state.base import ClusterState, ObjectStore, sanitize, trim_pod
from webhook.state.files import (FileState, StateLoadError, is_kustomize_file, read_manifests,
                                 read_objects, state_objects)
from webhook.state.memory import MemoryState
from webhook.state.knowledge import EVERYTHING, PRESENCE, Knowledge, kinds_held, place_namespace, unknown_answer
from webhook.state.selectors import Selector, SelectorError, from_label_selector, parse_selector

__all__ = [
    "EVERYTHING",
    "PRESENCE",
    "ClusterState",
    "Knowledge",
    "FileState",
    "KubeState",
    "MemoryState",
    "ObjectStore",
    "Selector",
    "SelectorError",
    "StateLoadError",
    "WatchedKind",
    "from_label_selector",
    "is_kustomize_file",
    "kinds_held",
    "place_namespace",
    "state_objects",
    "unknown_answer",
    "parse_selector",
    "read_manifests",
    "read_objects",
    "sanitize",
    "trim_pod",
]


def __getattr__(name: str):
    # the watch cache pulls in the kubernetes client: import it only when asked for
    if name in ("KubeState", "WatchedKind"):
        from webhook.state import kube

        return getattr(kube, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
