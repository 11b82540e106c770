"""The reader's documents point at things that exist: every test RELIABILITY.md (or another
document) names is a test function in that file, every benchmark script has its section in
BENCHMARKS.md, and every script the documents name is in ``bench/``."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tests.support.paths import REPO

DOCUMENTS = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "RELIABILITY.md", "docs/install.md"]
# `tests/x/test_y.py::test_z`, then `::test_w` of the same file until the next file is named
_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`|`::(\w+)`")
_BENCH = re.compile(r"bench/(\w+\.py)")


@cache
def _functions(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text())
    return frozenset(node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _references(text: str) -> list[tuple[str, str | None]]:
    found, current = [], None
    for match in _REFERENCE.finditer(text):
        path, name, continued = match.groups()
        if path:
            current = path
            found.append((path, name))
        elif current:
            found.append((current, continued))
    return found


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_named_test_exists(document):
    missing = []
    for path, name in _references((REPO / document).read_text()):
        file = REPO / path
        if not file.is_file():
            missing.append(path)
        elif name and name not in _functions(file):
            missing.append(f"{path}::{name}")
    assert not missing, f"{document} names tests that do not exist: {missing}"


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_named_benchmark_exists(document):
    named = set(_BENCH.findall((REPO / document).read_text()))
    missing = sorted(name for name in named if not (REPO / "bench" / name).is_file())
    assert not missing, f"{document} names scripts bench/ does not have: {missing}"


def test_every_benchmark_has_its_section():
    headings = [line for line in (REPO / "BENCHMARKS.md").read_text().splitlines() if line.startswith("## ")]
    scripts = sorted(p.name for p in (REPO / "bench").glob("*.py") if not p.name.startswith("_"))
    missing = [s for s in scripts if not any(f"`bench/{s}`" in h for h in headings)]
    assert not missing, f"BENCHMARKS.md has no section for {missing}"
