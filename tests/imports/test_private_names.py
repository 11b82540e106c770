"""Tests reach the code through its public seams: no test imports a ``_private`` name, reads or
writes one on another object (``x._y``: only ``self`` and ``cls`` have privates of their own),
or monkeypatches one (``setattr``, ``mock.patch``, by object or by dotted path). Python code a
test hands to a subprocess (a string that imports ``webhook``) is held to the same rules."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO

PATCHERS = ("setattr", "setitem", "patch", "object", "delattr")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dotted_private(text: str) -> bool:
    return any(_private(part) for part in text.split("."))


def private_reaches(source: str, where: str = "<source>") -> list[str]:
    """Every reach into a private name in ``source``, as ``where:line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names if _private(alias.name)]
            if names or _dotted_private(node.module or ""):
                found.append(f"{where}:{line}: from {node.module} import {', '.join(names) or '...'}")
        elif isinstance(node, ast.Import):
            found += [f"{where}:{line}: import {a.name}" for a in node.names if _dotted_private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"{where}:{line}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if callee in PATCHERS:
                for argument in node.args[:2]:
                    if isinstance(argument, ast.Constant) and isinstance(argument.value, str) \
                            and _dotted_private(argument.value):
                        found.append(f"{where}:{line}: {callee}(..., {argument.value!r})")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "webhook" in node.value \
                and ("import " in node.value):
            try:
                found += private_reaches(node.value, f"{where}:{line} (code run by the test)")
            except SyntaxError:
                pass  # prose that names a module, not code
    return found


def test_the_check_finds_each_kind_of_reach():
    source = '''
from webhook.cel.cost.estimate import _path_size
import webhook.cel._hidden
value = policy._state_values
monkeypatch.setattr(CelExprProgram, "_eval", spy)
mock.patch.object(LoopBatch, "_run", spy)
monkeypatch.setattr("webhook.cel.engine.cel_expr._measure", spy)
code = "from webhook.cel.engine import cel_python; print(cel_python._compile.cache_info())"
self._own = 1
monkeypatch.setattr(policy.exact, "validate", spy)
'''
    reaches = private_reaches(source)
    assert len(reaches) == 7, reaches
    assert not [r for r in reaches if "self._own" in r or "validate" in r]


def test_no_test_reaches_into_a_private_name():
    found = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path == Path(__file__):
            continue
        found += private_reaches(path.read_text(), str(path.relative_to(REPO)))
    assert found == []
