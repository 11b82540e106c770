"""The one way every command builds its CRD registry offline (the schema the apiserver would
apply): a :class:`CRDSource` says which CRDs, :func:`crd_registry` compiles them. In a cluster
the cluster's CRDs take the registry's place (``webhook.schema.watched``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook.schema import CRDLoadError, CRDRegistry

if TYPE_CHECKING:
    from webhook.cel import Evaluator
    from webhook.documents import Document

__all__ = ["CRDSource", "crd_registry"]


@dataclass(frozen=True)
class CRDSource:
    # CRD files and directories that are the whole schema (``serve --crds-dir``, a suite's
    # ``crds``); None: the bundled CRDs
    paths: tuple[Path, ...] | None = None
    kubeai_crd: str | None = None  # the bundled KubeAI Model CRD (None: the current one)
    bundled: bool = True  # with the bundled CRDs (``validate --no-bundled-crds``: without)
    # CRDs added to the bundled ones, each in place of the bundled CRD of its name (``--crd``)
    added: Sequence[Document] = ()


def crd_registry(source: CRDSource, evaluator: Evaluator) -> CRDRegistry:
    """The CRDs of ``source`` compiled for ``evaluator``; ``CRDLoadError`` names the file at
    fault (a path that does not exist, a CRD the apiserver would not admit)."""
    if source.paths is not None:
        missing = [str(p) for p in source.paths if not Path(p).exists()]
        if missing:
            raise CRDLoadError(f"no such file or directory: {', '.join(missing)}")
        return CRDRegistry.load(source.paths, evaluator=evaluator)
    registry = (CRDRegistry.shipped(source.kubeai_crd, evaluator=evaluator) if source.bundled
                else CRDRegistry(evaluator=evaluator))
    for doc in source.added:
        content: Any = doc.content
        registry.add_checked(content, doc.where, replace=True)
    return registry
