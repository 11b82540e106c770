"""No state hides in modules: choices and caches are values built at the edge and passed down.

Two checks, on the source (``ast``), so that they hold for code no test runs:

1. **No ``global`` statement** anywhere in ``webhook/``: a function that rebinds a module's
   name keeps state that no caller passed in.

2. **No module-level mutable cache in ``webhook/cel/``**: the engine's caches (compiled
   programs, environments, the checking step) live on the engine an ``Evaluator`` owns.
   A module of ``webhook/cel/`` fails when it has either of:

   a. a module-level name bound to a mutable container (a ``dict``/``list``/``set`` display or
      comprehension, or a call of ``dict``, ``list``, ``set``, ``OrderedDict``,
      ``defaultdict``, ``deque``, ``WeakKeyDictionary`` or ``WeakValueDictionary``) that a
      function or method of the module writes: stores or deletes an item of it
      (``name[k] = v``, ``del name[k]``, ``name[k] += v``) or calls one of its mutating
      methods (``setdefault``, ``update``, ``pop``, ``popitem``, ``clear``, ``append``,
      ``extend``, ``insert``, ``remove``, ``discard``, ``add``, ``move_to_end``,
      ``appendleft``). Tables filled while the module is imported and only read afterwards
      are constants, not caches, and pass.
   b. a module-level function memoised by ``functools.cache`` or ``functools.lru_cache`` (any
      spelling) whose parameters are not all annotated as immutable values (``str``,
      ``bytes``, ``int``, ``float``, ``bool``, ``None``, ``tuple[...]``, ``frozenset[...]``),
      or that takes ``*args``/``**kwargs``. A memo keyed by immutable values is a pure
      function's table (a regex compiled from its pattern, a quantity parsed from its text, a
      constant built on first use): its key is its whole input, so an entry can never answer
      for anything else. A memo keyed by a mutable object's identity or contents could.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO

PACKAGE = REPO / "webhook"
CEL = PACKAGE / "cel"

CONTAINER_CALLS = {"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "WeakKeyDictionary",
                   "WeakValueDictionary"}
MUTATING_METHODS = {"setdefault", "update", "pop", "popitem", "clear", "append", "extend", "insert", "remove",
                    "discard", "add", "move_to_end", "appendleft"}
MEMOISERS = {"cache", "lru_cache"}
IMMUTABLE_NAMES = {"str", "bytes", "int", "float", "bool", "None"}
IMMUTABLE_GENERICS = {"tuple", "frozenset"}


def _modules(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"


def global_statements(path: Path, source: str) -> list[str]:
    return [f"{_where(path, node)}: global {', '.join(node.names)}"
            for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Global)]


def _callee_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _is_container(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    return isinstance(value, ast.Call) and _callee_name(value) in CONTAINER_CALLS


def _module_containers(tree: ast.Module) -> dict[str, ast.stmt]:
    found = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and _is_container(statement.value):
            found.update({t.id: statement for t in statement.targets if isinstance(t, ast.Name)})
        elif isinstance(statement, ast.AnnAssign) and _is_container(statement.value) \
                and isinstance(statement.target, ast.Name):
            found[statement.target.id] = statement
    return found


def _writes(function: ast.AST, names: set[str]) -> set[str]:
    """The names of ``names`` that ``function``'s body writes into (see the module docstring)."""
    written = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and isinstance(node.value, ast.Name) and node.value.id in names:
            written.add(node.value.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in MUTATING_METHODS and isinstance(node.func.value, ast.Name) \
                and node.func.value.id in names:
            written.add(node.func.value.id)
    return written


def _immutable(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant):  # a string annotation, or None
        if annotation.value is None:
            return True
        return isinstance(annotation.value, str) and _immutable(ast.parse(annotation.value, mode="eval").body)
    if isinstance(annotation, ast.Name):
        return annotation.id in IMMUTABLE_NAMES
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name) \
            and annotation.value.id in IMMUTABLE_GENERICS:
        inner = annotation.slice
        parts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        return all(isinstance(p, ast.Constant) and p.value is Ellipsis or _immutable(p) for p in parts)
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):  # X | None
        return _immutable(annotation.left) and _immutable(annotation.right)
    return False


def _memoised(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(_callee_name(d) in MEMOISERS for d in function.decorator_list)


def _keyed_by_values(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    arguments = function.args
    if arguments.vararg or arguments.kwarg:
        return False
    every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
    return all(_immutable(a.annotation) for a in every)


def module_caches(path: Path, source: str) -> list[str]:
    """The module-level mutable caches of one module (see the module docstring)."""
    tree = ast.parse(source)
    containers = _module_containers(tree)
    found = []
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    written: set[str] = set()
    for function in functions:
        written |= _writes(function, set(containers))
    found += [f"{_where(path, containers[name])}: {name}, written by a function" for name in sorted(written)]
    found += [f"{_where(path, f)}: {f.name}, memoised on more than immutable values"
              for f in tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              and _memoised(f) and not _keyed_by_values(f)]
    return found


def test_no_global_statement_in_the_package():
    found = [line for path in _modules(PACKAGE) for line in global_statements(path, path.read_text())]
    assert found == []


def test_no_module_level_mutable_cache_in_cel():
    found = [line for path in _modules(CEL) for line in module_caches(path, path.read_text())]
    assert found == []


# The checks themselves, on code that breaks each rule and code that keeps it.

def test_the_checks_find_what_they_are_for():
    here = PACKAGE / "cel" / "example.py"
    assert global_statements(here, "x = 0\ndef f():\n    global x\n    x = 1\n") == ["webhook/cel/example.py:3: global x"]
    keyed_by_identity = "_SIZES: dict[int, int] = {}\ndef remember(obj):\n    _SIZES[id(obj)] = len(obj)\n"
    assert module_caches(here, keyed_by_identity) == ["webhook/cel/example.py:1: _SIZES, written by a function"]
    lru = ("from collections import OrderedDict\n_programs = OrderedDict()\n"
           "def keep(key, program):\n    _programs.move_to_end(key)\n")
    assert module_caches(here, lru) == ["webhook/cel/example.py:2: _programs, written by a function"]
    memo_on_objects = "from functools import lru_cache\n@lru_cache(maxsize=8)\ndef compile_(variables: dict) -> int:\n    return 1\n"
    assert module_caches(here, memo_on_objects) == ["webhook/cel/example.py:3: compile_, memoised on more than immutable values"]
    untyped = "import functools\n@functools.cache\ndef parse(text):\n    return text\n"
    assert module_caches(here, untyped) == ["webhook/cel/example.py:3: parse, memoised on more than immutable values"]


def test_the_checks_pass_constants_and_pure_memos():
    here = PACKAGE / "cel" / "example.py"
    constants = "_TABLE = {'a': 1}\nfor k in 'bc':\n    _TABLE[k] = 2\ndef read(k):\n    return _TABLE.get(k)\n"
    assert module_caches(here, constants) == []
    pure = ("from functools import cache, lru_cache\n@lru_cache(maxsize=64)\n"
            "def parse(text: str, strict: bool, names: tuple[str, ...], limit: int | None) -> int:\n    return 1\n"
            "@cache\ndef table() -> dict:\n    return {}\n")
    assert module_caches(here, pure) == []
