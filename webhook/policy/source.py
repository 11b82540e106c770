"""Reading policy files with the line of every node, so errors can point at it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from webhook.nesting import may_alias, tree_problem

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster, same nodes and marks
Path_ = tuple[Any, ...]  # ("spec", "validations", 2, "expression")


@dataclass(frozen=True)
class SourceDocument:
    file: Path
    line: int  # of the document's first node
    data: Any
    lines: dict[Path_, int]  # 1-based line of every key/item

    def line_of(self, path: Path_) -> int:
        """The line of ``path``, or of its nearest ancestor the file has."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.line

    def where(self, path: Path_ = ()) -> str:
        return f"{self.file}:{self.line_of(path)}"


class SourceError(ValueError):
    pass


def _index(node: yaml.Node, path: Path_, lines: dict[Path_, int]) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = path + (key.value,)
            _index(value, child, lines)
            lines[child] = key.start_mark.line + 1  # the key's line reads best
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, path + (i,), lines)


def read_documents(file: Path) -> list[SourceDocument]:
    """Every YAML document of ``file`` with its node lines; raises SourceError."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"{file}: cannot read: {exc}") from exc
    loader = _LOADER(text)
    docs: list[SourceDocument] = []
    check = may_alias(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            data = loader.construct_document(node)
            problem = tree_problem(data) if check else None
            if problem is not None:  # aliases: checked before walking the nodes (webhook.nesting)
                raise SourceError(f"{file}:{node.start_mark.line + 1}: document {problem}")
            lines: dict[Path_, int] = {}
            _index(node, (), lines)
            docs.append(SourceDocument(file, node.start_mark.line + 1, data, lines))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{file}:{mark.line + 1}" if mark is not None else str(file)
        raise SourceError(f"{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from exc
    finally:
        loader.dispose()
    return docs
