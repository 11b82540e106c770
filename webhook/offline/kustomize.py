"""Kustomize repositories as ``infergate validate`` reads them: which files are kustomize's own
input and never applied alone, and, with ``--kustomize``, the objects kustomize renders.

A kustomization is a directory holding ``kustomization.yaml``, ``kustomization.yml`` or
``Kustomization`` (kustomize's own three names; ``apiVersion``/``kind`` are optional in it).
What it names:

- ``resources`` (and the older ``bases``): files, which are objects as written, or directories,
  which are other kustomizations; ``components``: directories of ``kind: Component``;
- ``patches`` (``path:``), ``patchesStrategicMerge`` and ``patchesJson6902`` (``path:``): files
  that are patches, partial objects or JSON patches, never applied alone: they are skipped as
  "kustomize patch (not applied alone)".

A kustomization another one includes, or a Component, is a *base*: its resources are judged as
written, but a problem with one says "in a kustomize base; overlays may complete it" (upstream
bases often leave fields to their overlays). With ``--kustomize`` the kustomizations no other one
includes (the overlays, the lone ones) are rendered by ``kustomize build`` or ``kubectl
kustomize``, whichever is on PATH; the objects rendered are judged in place of the files of
their trees, each attributed to its kustomization file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

from webhook import documents
from webhook.documents import Document, InputFile, Origin, Parsed, ReadError

__all__ = ["KUSTOMIZATION_NAMES", "BASE_NOTE", "KUSTOMIZE_FILE", "PATCH", "KustomizeLayout", "Renderer",
           "RendererMissing", "find_renderer", "is_kustomization_file", "render", "rendered_inputs"]

# kustomize's KustomizationFileNames: the names it looks for in a directory
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KUSTOMIZE_FILE = "kustomize file, not applied"
PATCH = "kustomize patch (not applied alone)"
BASE_NOTE = "in a kustomize base; overlays may complete it"
RENDER_TIMEOUT = 300.0  # seconds; remote bases are fetched by kustomize itself


def is_kustomization_file(name: str | Path) -> bool:
    """Whether a file is a kustomization by its name (with or without apiVersion/kind in it)."""
    return Path(name).name in KUSTOMIZATION_NAMES


def _real(path: str | Path) -> str:
    return os.path.realpath(path)


def _local(entry: Any) -> bool:
    """A path kustomize reads from disk: not a URL nor a remote repository (``github.com/...?ref=``)."""
    return isinstance(entry, str) and bool(entry) and "://" not in entry and "?ref=" not in entry \
        and not entry.startswith(("github.com/", "git@", "gitlab.com/", "bitbucket.org/"))


@dataclass
class Kustomization:
    """One kustomization file and what it names (real paths)."""

    file: str  # as the inputs name it
    directory: str  # real path
    component: bool = False
    resource_files: set[str] = field(default_factory=set)
    included: set[str] = field(default_factory=set)  # directories: bases, resource directories, components
    patches: set[str] = field(default_factory=set)
    error: str | None = None  # it cannot be read: left to the document's own judgement

    @classmethod
    def read(cls, file: str, content: Any) -> Kustomization:
        directory = Path(_real(file)).parent
        found = cls(file, str(directory))
        if not isinstance(content, dict):
            found.error = "not a mapping"
            return found
        found.component = content.get("kind") == "Component"

        def listed(key: str) -> list[Any]:
            value = content.get(key)
            return value if isinstance(value, list) else []

        for entry in listed("resources") + listed("bases") + listed("components"):
            if not _local(entry):
                continue
            target = directory / entry
            if target.is_dir():
                found.included.add(_real(target))
            else:
                found.resource_files.add(_real(target))
        for entry in listed("patches") + listed("patchesJson6902"):
            if isinstance(entry, dict) and _local(entry.get("path")):
                found.patches.add(_real(directory / entry["path"]))
        for entry in listed("patchesStrategicMerge"):  # a file's path, or an inline patch
            if _local(entry) and "\n" not in entry:
                found.patches.add(_real(directory / entry))
        return found


def _kustomization_in(directory: str | Path) -> str | None:
    for name in KUSTOMIZATION_NAMES:
        candidate = Path(directory) / name
        if candidate.is_file():
            return str(candidate)
    return None


def _first_document(source: InputFile) -> Any:
    parsed = source.parse()
    return parsed.documents[0].content if parsed.documents else None


@dataclass
class KustomizeLayout:
    """The kustomizations of a run's inputs and the role of every file in them."""

    kustomizations: dict[str, Kustomization] = field(default_factory=dict)  # by real directory
    given: set[str] = field(default_factory=set)  # real paths of the kustomization files among the inputs
    rendered: set[str] = field(default_factory=set)  # real paths of the kustomization files rendered

    @classmethod
    def of(cls, inputs: Iterable[InputFile | str]) -> KustomizeLayout:
        """The kustomizations among ``inputs`` (files read, or file names), those beside an input
        file (a patch named alone is still known as one) and, transitively, those they include."""
        layout = cls()
        inputs = [source if isinstance(source, InputFile) else InputFile(source) for source in inputs]
        inputs = [source for source in inputs if source.name != documents.STDIN]
        pending: list[tuple[str, InputFile | None]] = []
        for source in inputs:
            if is_kustomization_file(source.name):
                layout.given.add(_real(source.name))
                pending.append((source.name, source if source.text is not None or source.error else None))
        for directory in sorted({str(Path(source.name).parent) for source in inputs}):
            beside = _kustomization_in(directory)
            if beside is not None:
                pending.append((beside, None))
        while pending:
            file, source = pending.pop()
            directory = str(Path(_real(file)).parent)
            if directory in layout.kustomizations:
                continue
            source = source or documents.read_file(file)
            kustomization = Kustomization.read(file, _first_document(source))
            layout.kustomizations[directory] = kustomization
            for included in sorted(kustomization.included):
                inner = _kustomization_in(included)
                if inner is not None and included not in layout.kustomizations:
                    pending.append((inner, None))
        return layout

    def _included(self) -> set[str]:
        return {d for k in self.kustomizations.values() for d in k.included}

    @cached_property
    def _roles(self) -> dict[str, str]:
        """Real path -> ``PATCH`` or ``BASE_NOTE`` (a file some kustomization names as a resource
        is one, whatever another names it)."""
        bases = self._included()
        roles: dict[str, str] = {}
        for k in self.kustomizations.values():
            roles.update(dict.fromkeys(k.patches, PATCH))
        for k in self.kustomizations.values():
            for file in k.resource_files:
                if k.directory in bases or k.component:
                    roles[file] = BASE_NOTE
                elif roles.get(file) == PATCH:
                    del roles[file]
        return roles

    def role(self, file: str) -> str | None:
        """Why a file's documents are not judged as objects (``KUSTOMIZE_FILE``, ``PATCH``), or
        ``BASE_NOTE`` for a base's resource (judged, with the note), or None. A kustomization
        rendered (``--kustomize``) names its objects: they are judged."""
        if not self.kustomizations and not is_kustomization_file(file):
            return None
        real = _real(file)
        if real in self.rendered:
            return None
        if is_kustomization_file(file):
            return KUSTOMIZE_FILE
        return self._roles.get(real)

    def roots(self) -> list[Kustomization]:
        """The kustomizations among the inputs that none includes and that are no Component:
        what ``kubectl apply -k`` is pointed at. Their bases are rendered through them."""
        included = self._included()
        return sorted((k for k in self.kustomizations.values()
                       if _real(k.file) in self.given and k.directory not in included and not k.component),
                      key=lambda k: k.file)

    def tree(self, root: Kustomization) -> set[str]:
        """The real paths of every file ``root`` renders from: its kustomization files, resources
        and patches, and those of the kustomizations it includes."""
        out: set[str] = set()
        pending, seen = [root.directory], set()
        while pending:
            directory = pending.pop()
            if directory in seen:
                continue
            seen.add(directory)
            kustomization = self.kustomizations.get(directory)
            if kustomization is None:
                continue
            out |= {_real(kustomization.file)} | kustomization.resource_files | kustomization.patches
            pending += sorted(kustomization.included)
        return out


class RendererMissing(RuntimeError):
    """Neither ``kustomize`` nor ``kubectl`` is on PATH."""


@dataclass(frozen=True)
class Renderer:
    """The command that renders a kustomization directory: ``kustomize build`` or ``kubectl kustomize``."""

    command: tuple[str, ...]

    def __str__(self) -> str:
        return " ".join(Path(self.command[0]).name if i == 0 else word for i, word in enumerate(self.command))


def find_renderer() -> Renderer:
    """``kustomize build`` if ``kustomize`` is on PATH, else ``kubectl kustomize`` (kubectl has had it
    built in since 1.14); :class:`RendererMissing` when neither is."""
    kustomize = shutil.which("kustomize")
    if kustomize is not None:
        return Renderer((kustomize, "build"))
    kubectl = shutil.which("kubectl")
    if kubectl is not None:
        return Renderer((kubectl, "kustomize"))
    raise RendererMissing("neither kustomize nor kubectl is on PATH (kubectl has kustomize built in: "
                          "install either, or leave out --kustomize)")


def render(renderer: Renderer, kustomization: Kustomization) -> Parsed:
    """The objects ``kustomization`` renders, each attributed to its kustomization file (its line
    unknown: the object is kustomize's output); a failed build is a :class:`ReadError` with
    kustomize's own last words."""
    directory = str(Path(kustomization.file).parent)
    try:
        done = subprocess.run([*renderer.command, directory], capture_output=True, text=True, timeout=RENDER_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Parsed([], ReadError(kustomization.file, None, f"{renderer} {directory}: no answer in "
                                                              f"{RENDER_TIMEOUT:.0f} s"))
    except OSError as exc:
        return Parsed([], ReadError(kustomization.file, None, f"{renderer} {directory}: {exc.strerror or exc}"))
    if done.returncode != 0:
        words = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        why = words[-1] if words else f"exit status {done.returncode}"
        return Parsed([], ReadError(kustomization.file, None, f"{renderer} {directory} failed: {why}"))
    parsed = documents.parse(done.stdout, kustomization.file)
    rendered = [Document(Origin(kustomization.file, None, i), doc.content) for i, doc in enumerate(parsed.documents)]
    if parsed.error is not None:  # kustomize writes YAML it can read: this would be a bug of its own
        return Parsed(rendered, ReadError(kustomization.file, None, f"{renderer} {directory}: {parsed.error.message}"))
    return Parsed(rendered)


def rendered_inputs(inputs: list[InputFile], layout: KustomizeLayout, renderer: Renderer) -> list[InputFile]:
    """``inputs`` with every file of a rendered kustomization's tree replaced by what it renders
    (one input per kustomization, in the place of its kustomization file)."""
    roots = layout.roots()
    covered = set().union(*(layout.tree(root) for root in roots)) if roots else set()
    by_file = {_real(root.file): root for root in roots}
    out: list[InputFile] = []
    for source in inputs:
        real = _real(source.name) if source.name != documents.STDIN else None
        root = by_file.get(real) if real is not None else None
        if root is not None:
            out.append(InputFile(source.name, text="", parsed=render(renderer, root)))
            layout.rendered.add(real)
        elif real is None or real not in covered:
            out.append(source)
    return out
