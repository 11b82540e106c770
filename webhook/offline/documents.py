"""Reading manifests: files, directories (recursively) and stdin, YAML or JSON, many documents each."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import yaml

from webhook.nesting import may_alias, tree_problem

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


# libyaml's parser when PyYAML has it: ten times faster than the pure-Python one, which is most
# of ``infergate validate``'s time on a large repository. It refuses nesting beyond 1000 levels
# with a ScannerError (an input error with its line), far beyond any Kubernetes object.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestLoader(_SafeLoader):
    """YAML as kubectl reads it: timestamps stay strings (they reach the apiserver as JSON text)."""


ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml(text: str) -> Any:
    """One YAML document, timestamps kept as text; one too deep or large through aliases
    is a ``yaml.YAMLError`` too (``webhook.nesting``)."""
    data = yaml.load(text, Loader=ManifestLoader)
    problem = tree_problem(data) if may_alias(text) else None
    if problem is not None:
        raise yaml.constructor.ConstructorError(None, None, f"document {problem}", None)
    return data


class InputError(ValueError):
    """A source that cannot be read or parsed (the message names the file and line)."""


@dataclass(frozen=True)
class Document:
    source: str  # file name or "-"
    line: int  # 1-based line where the document starts
    content: Any

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def parse_documents(text: str, source: str) -> list[Document]:
    """All non-empty documents of a YAML (or JSON) stream, with the line each starts on.

    A document that YAML aliases make too deep or too large for the server is an input
    error (``webhook.nesting``): the same limit as the server's, whatever the format."""
    loader = ManifestLoader(text)
    out: list[Document] = []
    check = may_alias(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            content = loader.construct_document(node)
            problem = tree_problem(content) if check else None
            if problem is not None:
                raise InputError(f"{source}:{node.start_mark.line + 1}: document {problem}")
            if content is not None:
                out.append(Document(source, node.start_mark.line + 1, content))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{where}: invalid YAML: {problem}") from None
    except RecursionError:
        raise InputError(f"{source}: a document is nested too deeply to be read") from None
    finally:
        loader.dispose()
    return out


def expand_lists(documents: list[Document]) -> list[Document]:
    """``kind: List`` documents (as ``kubectl get -o yaml`` writes them) become their items."""
    out: list[Document] = []
    for doc in documents:
        content = doc.content
        if isinstance(content, dict) and content.get("kind") == "List" and isinstance(content.get("items"), list):
            out += [Document(doc.source, doc.line, item) for item in content["items"] if item is not None]
        else:
            out.append(doc)
    return out


def manifest_files(path: Path) -> list[Path]:
    """``path``, or the manifests under it in ``sorted(path.rglob("*"))`` order (symbolic links
    to directories not followed), listed with ``os.scandir``: its entries know their type, so
    ten thousand files need no ``stat`` each."""
    if not path.is_dir():
        return [path]
    found: list[str] = []
    pending = [str(path)]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    if entry.is_dir() and not entry.is_symlink():
                        pending.append(entry.path)
                    elif os.path.splitext(entry.name)[1] in MANIFEST_SUFFIXES and entry.is_file():
                        found.append(entry.path)
        except PermissionError:  # as rglob: a directory that cannot be listed has nothing to read
            continue
    return sorted(map(Path, found))


@dataclass
class Source:
    """One input file (or stdin), read but perhaps not yet parsed: a large ``infergate validate``
    reads its files in the parent and parses them in the worker processes that judge them
    (which inherit the text on fork: nothing is sent)."""

    name: str  # file name or "-"
    text: str | None = None
    documents: list[Document] | None = None  # once parsed, ``kind: List`` expanded
    error: str | None = None  # why it cannot be read (reported in its turn, as a parse error is)

    def parse(self) -> list[Document]:
        """The documents, parsed now if need be (and not kept: a run that judges file by file
        holds one file's documents at a time); ``InputError`` names the file and line."""
        if self.error is not None:
            raise InputError(self.error)
        if self.documents is not None:
            return self.documents
        return expand_lists(parse_documents(self.text or "", self.name))


def read_texts(sources: Iterable[str]) -> list[Source]:
    """Every file of every source, in order, read but not parsed (stdin is parsed: it can be read only
    once). Never raises: a source that cannot be read carries its error, to be reported in order."""
    out: list[Source] = []
    for source in sources:
        if source == "-":
            stdin = Source("-")
            try:
                stdin.text = sys.stdin.read()
                stdin.documents = stdin.parse()
            except UnicodeDecodeError as exc:
                stdin.error = f"-: cannot read: {exc}"
            except InputError as exc:
                stdin.error = str(exc)
            out.append(stdin)
            continue
        path = Path(source)
        if not path.exists():
            out.append(Source(source, error=f"{source}: no such file or directory"))
            continue
        for file in manifest_files(path):
            try:
                out.append(Source(str(file), text=file.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError) as exc:
                out.append(Source(str(file), error=f"{file}: cannot read: {getattr(exc, 'strerror', None) or exc}"))
    return out


def read_sources(sources: Iterable[str]) -> list[Document]:
    """Documents of every source, in order; ``-`` is stdin. ``InputError`` names the first bad one."""
    return [doc for source in read_texts(sources) for doc in source.parse()]
