"""Reading YAML and JSON documents, the one way every edge reads them.

Files, directories (recursively) and ``-`` (stdin); many documents a file; ``kind: List``
(and ``<Kind>List``, as ``kubectl get -o yaml`` and the API write them) unwrapped into its
items. Every document knows where it came from (:class:`Origin`: file, line of its first
line, index in the file). Every decoded value is within the one nesting limit
(``webhook.document_limits``).

A problem is a result, not an exception that stops the others: :func:`parse` returns the
documents it could read and the :class:`ReadError` (with file:line) that stopped it, and
:func:`read` reads every other file still. Callers that must stop at the first problem
(the policies, the CRDs) raise their own error from it.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple

import yaml

from webhook.document_limits import may_alias, tree_problem

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"

# libyaml's parser when PyYAML has it: parsing is most of ``infergate validate``'s time on a large
# repository, and the C parser is far cheaper than the pure-Python one. It refuses nesting beyond 1000 levels
# of text with a ScannerError (an input error with its line), far beyond any Kubernetes object.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestLoader(_SafeLoader):
    """YAML as kubectl reads it: timestamps stay strings (they reach the apiserver as JSON text)."""


ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

NodePath = tuple[Any, ...]  # ("spec", "validations", 2, "expression")


class Origin(NamedTuple):
    """Where a document came from: its file (``-`` for stdin), the line its document starts
    on (1-based), its index among the file's documents (0-based); ``item``: its index in the
    ``List`` document it was unwrapped from (the List's file, line and index are kept). A tuple:
    one is made for every document read, ten thousand at a time."""

    file: str
    line: int | None  # None: a whole file that cannot be read
    index: int | None = None
    item: int | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "line": self.line, "index": self.index}
        if self.item is not None:
            out["item"] = self.item
        return out


@dataclass(slots=True)
class Document:
    """One document read (not to be changed: many hold it; slots, not frozen, for speed)."""

    origin: Origin
    content: Any
    # with ``node_lines``: the 1-based line of every key and item, for errors that point inside
    lines: dict[NodePath, int] | None = field(default=None, compare=False, repr=False)

    @property
    def where(self) -> str:
        return self.origin.where

    def line_of(self, path: Iterable[Any] = ()) -> int:
        """The line of ``path`` in the document, or of its nearest ancestor the file has."""
        path = tuple(path)
        while path and self.lines:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.origin.line

    def where_of(self, path: Iterable[Any] = ()) -> str:
        return f"{self.origin.file}:{self.line_of(path)}"


@dataclass(frozen=True)
class ReadError:
    """A file, or a document in it, that cannot be read; ``line`` when known."""

    file: str
    line: int | None
    message: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    @property
    def origin(self) -> Origin:
        return Origin(self.file, self.line)

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class Parsed:
    """A file's documents, and the problem that stopped its reading (those before it are kept)."""

    documents: list[Document]
    error: ReadError | None = None


def is_list(content: Any) -> bool:
    """A Kubernetes list (``kind: List``, ``ConfigMapList``, ...): its ``items`` are the objects."""
    return (isinstance(content, dict) and isinstance(content.get("items"), list)
            and isinstance(content.get("kind"), str) and content["kind"].endswith("List"))


def _list_items(content: dict[str, Any]) -> Iterator[tuple[int, Any]]:
    """A list's items, by index. The API's ``<Kind>List`` (``CustomResourceDefinitionList``) leaves
    its items' ``apiVersion`` and ``kind`` out: they are the list's, and are filled in."""
    kind = content["kind"][: -len("List")]
    for i, item in enumerate(content["items"]):
        if item is None:
            continue
        if kind and isinstance(item, dict) and "kind" not in item:
            item = {"apiVersion": content.get("apiVersion"), "kind": kind, **item}
        yield i, item


def parse(text: str, file: str, *, node_lines: bool = False, unwrap_lists: bool = True) -> Parsed:
    """Every non-empty document of a YAML (or JSON) stream, with its origin.

    ``node_lines``: also the line of every key and item (policy files: errors point inside).
    A document that YAML aliases make too deep or too large for the server is a
    :class:`ReadError` (``webhook.document_limits``): the same limit as the server's, whatever the format.
    """
    loader = ManifestLoader(text)
    out: list[Document] = []
    check = may_alias(text)
    index = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            line = node.start_mark.line + 1
            content = loader.construct_document(node)
            problem = tree_problem(content) if check else None
            if problem is not None:
                return Parsed(out, ReadError(file, line, f"document {problem}"))
            if content is None:
                index += 1
                continue
            lines = _node_lines(node) if node_lines else None
            if unwrap_lists and is_list(content):
                out += [Document(Origin(file, line, index, i), item, _item_lines(lines, i))
                        for i, item in _list_items(content)]
            else:
                out.append(Document(Origin(file, line, index), content, lines))
            index += 1
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        return Parsed(out, ReadError(file, mark.line + 1 if mark is not None else None, f"invalid YAML: {problem}"))
    except RecursionError:
        return Parsed(out, ReadError(file, None, "a document is nested too deeply to be read"))
    finally:
        loader.dispose()
    return Parsed(out)


def _node_lines(node: yaml.Node) -> dict[NodePath, int]:
    lines: dict[NodePath, int] = {}
    pending: list[tuple[yaml.Node, NodePath]] = [(node, ())]
    while pending:  # iterative: libyaml's own depth limit is the bound, not Python's stack
        current, path = pending.pop()
        lines.setdefault(path, current.start_mark.line + 1)
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                child = path + (key.value,)
                lines[child] = key.start_mark.line + 1  # the key's line reads best
                pending.append((value, child))
        elif isinstance(current, yaml.SequenceNode):
            pending += [(item, path + (i,)) for i, item in enumerate(current.value)]
    return lines


def _item_lines(lines: dict[NodePath, int] | None, item: int) -> dict[NodePath, int] | None:
    if lines is None:
        return None
    prefix = ("items", item)
    return {path[2:]: line for path, line in lines.items() if path[:2] == prefix}


def excluded(relative: str, name: str, patterns: tuple[str, ...], *, directory: bool = False) -> bool:
    """Whether an entry under a directory argument is left out by ``--exclude`` ``patterns``:
    a glob (``fnmatch``: ``*`` also matches ``/``) matching its path relative to that directory,
    forward slashes (``charts/*/templates/*``), or its name (``*.tpl.yaml``, ``vendor``). A
    pattern ending in ``/`` (``vendor/``, ``charts/app/``) matches directories only, as in
    ``.gitignore``. A directory left out is not entered."""
    for pattern in patterns:
        pattern = pattern.removeprefix("./")  # relative to the directory argument, as written in a shell
        if pattern.endswith("/"):
            if not directory:
                continue
            pattern = pattern.rstrip("/")
        if fnmatch.fnmatchcase(relative, pattern) or fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def manifest_files(path: Path, suffixes: tuple[str, ...] = MANIFEST_SUFFIXES,
                   exclude: tuple[str, ...] = (), names: tuple[str, ...] = ()) -> list[Path]:
    """``path``, or the files under it with one of ``suffixes`` or one of ``names``
    (``Kustomization``), in path order (those ``exclude`` names left out: :func:`excluded`).

    Entries whose name starts with "." are skipped (``.git``, ``.github``; a mounted
    ConfigMap shows each file twice, as a link and inside kubelet's hidden
    ``..<timestamp>`` directory, and is read once, through the links). Symbolic links are
    followed, each directory read once. Listed with ``os.scandir``: its entries know their
    type, so ten thousand files need no ``stat`` each."""
    if not path.is_dir():
        return [path]
    found: list[str] = []
    seen: set[str] = set()
    pending = [str(path)]
    while pending:
        directory = pending.pop()
        real = os.path.realpath(directory)
        if real in seen:
            continue
        seen.add(real)
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    is_dir = entry.is_dir()
                    if exclude and excluded(os.path.relpath(entry.path, path).replace(os.sep, "/"), entry.name,
                                            exclude, directory=is_dir):
                        continue
                    if is_dir:
                        pending.append(entry.path)
                    elif (os.path.splitext(entry.name)[1] in suffixes or entry.name in names) and entry.is_file():
                        found.append(entry.path)
        except PermissionError:  # a directory that cannot be listed has nothing to read
            continue
    return sorted(map(Path, found))


@dataclass
class InputFile:
    """One input file (or stdin), read but perhaps not yet parsed: a large ``infergate validate``
    reads its files in the parent and parses them in the worker processes that judge them
    (which inherit the text on fork: nothing is sent)."""

    name: str  # file name or "-"
    text: str | None = None
    error: ReadError | None = None  # it cannot be read at all
    parsed: Parsed | None = None  # once parsed (kept when the parent must see it first)

    def parse(self, **options: Any) -> Parsed:
        if self.error is not None:
            return Parsed([], self.error)
        if self.parsed is not None:
            return self.parsed
        return parse(self.text or "", self.name, **options)


def read_file(file: Path | str) -> InputFile:
    """The text of one file; never raises (the error is in the result)."""
    name = str(file)
    if name == STDIN:
        try:
            return InputFile(STDIN, text=sys.stdin.read())
        except (OSError, UnicodeDecodeError) as exc:
            return InputFile(STDIN, error=ReadError(STDIN, None, f"cannot read: {exc}"))
    try:
        return InputFile(name, text=Path(file).read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        return InputFile(name, error=ReadError(name, None, f"cannot read: not UTF-8 text ({exc.reason})"))
    except OSError as exc:
        return InputFile(name, error=ReadError(name, None, f"cannot read: {exc.strerror or exc}"))


def read_inputs(paths: Iterable[str | Path], suffixes: tuple[str, ...] = MANIFEST_SUFFIXES,
                exclude: tuple[str, ...] = (), names: tuple[str, ...] = ()) -> list[InputFile]:
    """Every file of every path, in order, read but not parsed (under a directory, those
    ``exclude`` names left out, those of ``names`` read whatever their suffix; a file named
    itself is read). Never raises: a path that cannot be read carries its error, in its place."""
    out: list[InputFile] = []
    for raw in paths:
        if str(raw) == STDIN:
            out.append(read_file(STDIN))
            continue
        path = Path(raw)
        if not path.exists():
            out.append(InputFile(str(raw), error=ReadError(str(raw), None, "no such file or directory")))
            continue
        out += [read_file(file) for file in manifest_files(path, suffixes, exclude, names)]
    return out


def read(paths: Iterable[str | Path], *, suffixes: tuple[str, ...] = MANIFEST_SUFFIXES,
         node_lines: bool = False, unwrap_lists: bool = True) -> tuple[list[Document], list[ReadError]]:
    """The documents of every path, in order, and every problem met (each file read on its own)."""
    documents: list[Document] = []
    errors: list[ReadError] = []
    for source in read_inputs(paths, suffixes):
        parsed = source.parse(node_lines=node_lines, unwrap_lists=unwrap_lists)
        documents += parsed.documents
        if parsed.error is not None:
            errors.append(parsed.error)
    return documents, errors
