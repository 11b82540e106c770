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

DOCUMENTS = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "RELIABILITY.md",
             *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
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


def _benchmark_sections() -> dict[str, str]:
    """BENCHMARKS.md's sections of one script each: the script's name -> the section's text."""
    text = (REPO / "BENCHMARKS.md").read_text()
    sections = {}
    for section in re.split(r"^(?=## )", text, flags=re.M):
        script = re.search(r"`bench/(\w+\.py)`", section.partition("\n")[0])
        if script:
            sections[script[1]] = section
    return sections


def test_every_benchmark_section_gives_the_command_of_its_figures():
    without = [script for script, section in _benchmark_sections().items()
               if not any(f"python bench/{script}" in block for block in _FENCE.findall(section))]
    assert not without, f"BENCHMARKS.md sections without the command that reproduces them: {without}"


def test_benchmarks_is_a_reference_not_a_notebook():
    # current figures and their commands; how they got there is in git
    size = len((REPO / "BENCHMARKS.md").read_bytes())
    assert size < 15_000, f"BENCHMARKS.md is {size} bytes: keep the current figures, cut the history"


# -- every module, file and command a document names exists ------------------------------------

NAMED_IN = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "RELIABILITY.md",
            *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
_PATH = re.compile(r"^\.?[\w.-]+(?:/[\w.*-]+)*/?$")
# ``webhook.cel.ladder``, ``webhook.cel.ladder.LADDER``: not a chart value (``webhook.failurePolicy``)
_MODULE = re.compile(r"^webhook(?:\.(?:[a-z_][a-z0-9_]*|[A-Z][A-Za-z0-9_]*))+$")


@cache
def _tracked() -> tuple[str, ...]:
    files = [str(p.relative_to(REPO)) for p in REPO.rglob("*")
             if not {".git", ".venv", "__pycache__", "node_modules"} & set(p.relative_to(REPO).parts)]
    return tuple(sorted(files))


def _path_exists(text: str) -> bool:
    """A path from the repository's root, or the end of one (``cel/ladder.py`` stands for
    ``webhook/cel/ladder.py`` in a table about ``webhook``)."""
    text = text.rstrip("/")
    if "*" in text:
        return any(Path(f).match(text) for f in _tracked())
    return (REPO / text).exists() or any(f == text or f.endswith("/" + text) for f in _tracked())


def _names_a_path(text: str) -> bool:
    """A span that names a file or folder of this repository (not an upstream one: a Go file,
    ``k8s.io/...``, a URL)."""
    if not _PATH.match(text) or "://" in text:
        return False
    first = text.split("/", 1)[0]
    top = {p.name for p in REPO.iterdir()}
    if "/" in text and first in top:
        return True
    # a Python module or a document by its name alone (a YAML file may be anybody's: a release's)
    return text.endswith((".py", ".md")) and not text.startswith(".")


@cache
def _chart_values() -> dict:
    import yaml

    return yaml.safe_load((REPO / "chart" / "values.yaml").read_text())


def _module_exists(dotted: str) -> bool:
    """``webhook.a.b`` a module (file or package), or a name a module defines or imports
    (``webhook.cel.ladder.LADDER``, ``webhook.server.serve``); or else a value of the chart
    (``webhook.port``)."""
    parts = dotted.split(".")
    values = _chart_values()
    for part in parts:
        values = values.get(part) if isinstance(values, dict) else None
    if values is not None:
        return True
    for cut in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            rest = parts[cut:]
            if not rest:
                return True
            return rest[0] in _defined(module)
    return False


@cache
def _defined(module: Path) -> frozenset[str]:
    names = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return frozenset(names)


@cache
def _command_flags() -> dict[str, frozenset[str]]:
    """Every ``infergate`` subcommand and the flags it takes (its subcommands' too), the global
    ones (``--cel-engine``, ``--version``, ``--help``) with each."""
    import argparse
    import importlib

    from webhook import command_line
    from webhook.cli import COMMANDS, build_parser

    def flags(parser: argparse.ArgumentParser) -> set[str]:
        found = set()
        for line in parser.format_help().splitlines():
            found |= set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", line.split("  ")[1] if line.startswith("  ") and "  " in line[2:] else line))
        return found

    common = flags(build_parser())
    out = {}
    for name, (module_name, help_text) in COMMANDS.items():
        made: list[argparse.ArgumentParser] = []
        init = argparse.ArgumentParser.__init__

        def recording(parser, *args, **kwargs):
            init(parser, *args, **kwargs)
            made.append(parser)

        argparse.ArgumentParser.__init__ = recording
        try:
            parser = command_line.Parser(prog=f"infergate {name}", description=help_text)
            importlib.import_module(module_name).add_arguments(parser)
        finally:
            argparse.ArgumentParser.__init__ = init
        out[name] = frozenset(common.union(*(flags(p) for p in made)))
    return out


def _command_problems(line: str) -> list[str]:
    """What is wrong with an ``infergate ...`` (or ``python -m webhook ...``) command line."""
    words = line.replace("python -m webhook", "infergate").strip().removeprefix("$ ").split()
    if not words or words[0] != "infergate":
        return []  # (``helm install infergate ./chart``: a release name)
    words = words[1:]
    words = [w for w in words if w not in ("--cel-engine", "cel-python", "cel-expr") and not w.startswith("--cel-engine=")]
    if not words or words[0].startswith("-") or words[0] in ("COMMAND", "...", "--help"):
        return []
    command, rest = words[0], words[1:]
    known = _command_flags()
    if command not in known:
        return [f"no command {command!r}"]
    problems = []
    for word in rest:
        if word in ("#", "|", "&&", ";") or word.startswith("#"):
            break
        flag = word.split("=", 1)[0]
        if re.fullmatch(r"--?[a-zA-Z][\w-]*", flag) and flag not in known[command]:
            problems.append(f"infergate {command}: no flag {flag}")
    return problems


def named_problems(text: str) -> list[str]:
    """The modules, files and commands ``text`` (Markdown) names that do not exist."""
    problems = []
    for block in _FENCE.findall(text):
        for line in block.splitlines():
            problems += _command_problems(line)
    for span in _SPAN.findall(_FENCE.sub("", text)):
        span = span.strip()
        if span.startswith(("infergate ", "python -m webhook")):
            problems += _command_problems(span)
        elif _MODULE.match(span) and not _module_exists(span):
            problems.append(f"no module or name {span}")
        elif _names_a_path(span.split("::")[0].split(":")[0]) and not _path_exists(span.split("::")[0].split(":")[0]):
            problems.append(f"no file {span}")
    return problems


def test_the_check_finds_what_does_not_exist():
    text = ("`webhook/cel/ladder.py` `cel/ladder.py` `webhook.cel.ladder.LADDER` `webhook.server.serve` "
            "`infergate validate -o github` `k8s.io/apiserver/pkg/cel/library` `library/lists.go`\n"
            "`policy/source.py` `webhook.cel.get_engine` `webhook.cel.nowhere` `infergate verify x` "
            "`infergate validate --no-such-flag`\n```\ninfergate test --coverage\ninfergate lint x\n```\n")
    assert named_problems(text) == [
        "no command 'lint'", "no file policy/source.py", "no module or name webhook.cel.get_engine",
        "no module or name webhook.cel.nowhere", "no command 'verify'", "infergate validate: no flag --no-such-flag"]


@pytest.mark.parametrize("document", NAMED_IN)
def test_every_named_module_file_and_command_exists(document):
    assert named_problems((REPO / document).read_text()) == []


def test_the_map_names_every_package():
    """ARCHITECTURE.md is the map of ``webhook/``: every package (``webhook/cel/native``) is on
    it, by its path or, in its parent's table, as ``native/``."""
    text = (REPO / "ARCHITECTURE.md").read_text()
    packages = sorted(str(p.parent.relative_to(REPO)) for p in (REPO / "webhook").rglob("__init__.py"))
    missing = [p for p in packages[1:] if p not in text and f"{Path(p).name}/" not in text]
    assert packages[1:] and missing == []


def _reliability_rows() -> list[list[str]]:
    """RELIABILITY.md's table rows, each as its cells (the heading rows left out)."""
    return [[cell.strip() for cell in line.strip().strip("|").split(" | ")]
            for line in (REPO / "RELIABILITY.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith(("| guarantee", "|---"))]


def test_reliability_rows_are_one_guarantee_each_with_its_proof():
    """RELIABILITY.md is a table of what is tested: every row is one guarantee, short (under 250
    characters), and what shows it (a test, a recorded case file or a benchmark script); the
    prose around the tables is a line or two per section."""
    text = (REPO / "RELIABILITY.md").read_text()
    rows = _reliability_rows()
    not_two = [" | ".join(row)[:80] for row in rows if len(row) != 2]
    long = [row[0][:80] for row in rows if len(" | ".join(row)) >= 250]
    unproven = [row[0][:80] for row in rows if len(row) == 2 and not re.search(r"`(tests/|bench/)", row[1])]
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip() and not p.lstrip().startswith(("|", "#"))]
    prose = [p[:80] for p in paragraphs if len(p) > 500]
    assert len(rows) > 100 and not_two == [] and long == [] and unproven == [] and prose == []


def test_every_proof_reliability_names_exists():
    """Each row's proof is there: its test files, the test functions it names in them, its
    recorded case files and its benchmark scripts."""
    missing, named = [], 0
    for row in _reliability_rows():
        proof = row[-1]
        for path, name in _references(proof):
            named += 1
            if not (REPO / path).is_file():
                missing.append(path)
            elif name and name not in _functions(REPO / path):
                missing.append(f"{path}::{name}")
        for path in re.findall(r"`((?:tests|bench)/[^`\s]+\.(?:yaml|py))`", proof):
            named += 1
            if not (REPO / path).is_file():
                missing.append(path)
    assert named > 100 and missing == [], f"RELIABILITY.md names proofs that do not exist: {missing}"


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(document: str, text: str) -> list[str]:
    """The relative links of ``text`` (``document``'s, Markdown) whose file, or heading in it, is
    not there; links in code blocks and to other sites are not followed."""
    broken = []
    for link in _LINK.findall(_FENCE.sub("", text)):
        if "://" in link or link.startswith("mailto:"):
            continue
        path, _, anchor = link.partition("#")
        target = (REPO / document).parent / path if path else REPO / document
        if not target.exists():
            broken.append(link)
        elif anchor and target.suffix == ".md":
            headings = [_slug(line.lstrip("#")) for line in target.read_text().splitlines() if line.startswith("#")]
            if anchor not in headings:
                broken.append(link)
    return broken


def test_the_link_check_finds_a_broken_link():
    text = "[a](docs/limits.md) [b](docs/nowhere.md) [c](ARCHITECTURE.md#the-ladder-routes-a-crd-rule-takes) " \
           "[d](#no-such-heading) [e](https://example.com/x)\n```\n[f](gone.md)\n```\n"
    assert broken_links("README.md", text) == ["docs/nowhere.md", "#no-such-heading"]


@pytest.mark.parametrize("document", NAMED_IN)
def test_every_link_resolves(document):
    assert broken_links(document, (REPO / document).read_text()) == []


def test_the_readme_leads_and_links_every_page():
    """README.md is short (what it is, the two commands, a tour) and links every page of
    ``docs/``, where the reference lives."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) <= 15_000, f"README.md is {len(readme.encode())} bytes: move the reference to docs/"
    pages = sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))
    unlinked = [page for page in pages if f"]({page})" not in readme]
    assert pages and unlinked == [], f"README.md does not link {unlinked}"


_MODULE_PATH = re.compile(r"(?<![\w./-])((?:webhook/)?(?:[a-z_]+/)+(?:[a-z_]+\.py)?|webhook/[a-z_]+\.py)(?![\w/-])")
_DOTTED = re.compile(r"(?<![\w.])(webhook(?:\.[a-z_]+)+)(?![\w(])")


def _architecture_modules(text: str) -> tuple[set[str], set[str]]:
    """The module paths (``webhook/server/http.py``, ``policy/scope.py``, ``controller/planner/``)
    and dotted modules (``webhook.state``) ARCHITECTURE.md names, its diagrams included."""
    paths = {m for m in _MODULE_PATH.findall(text)
             if (m.endswith(".py") or m.startswith("webhook/")) and not m.startswith(("tests/", "chart/", "bench/", "docs/"))}
    return paths, set(_DOTTED.findall(text))


def test_every_module_architecture_names_exists():
    """Every module and package ARCHITECTURE.md names, in its prose, tables and diagrams, is in
    ``webhook/`` (by its whole path, or by its end: ``policy/scope.py`` in the policy layer's line),
    or a file at that path from the repository's root (``scripts/...``)."""
    paths, dotted = _architecture_modules((REPO / "ARCHITECTURE.md").read_text())
    modules = [str(p.relative_to(REPO)) for p in (REPO / "webhook").rglob("*.py")]
    folders = {str(p.parent.relative_to(REPO)) + "/" for p in (REPO / "webhook").rglob("__init__.py")}

    def exists(path: str) -> bool:
        if "/" in path and path.split("/")[0] != "webhook" and (REPO / path).exists():
            return True  # a script beside the package (scripts/...), named by its path from the root
        names = folders if path.endswith("/") else modules
        return any(name == path or name.endswith("/" + path) for name in names)

    missing = sorted(p for p in paths if not exists(p)) + sorted(d for d in dotted if not _module_exists(d))
    assert len(paths) > 50 and missing == [], f"ARCHITECTURE.md names modules that do not exist: {missing}"


_BARE_MODULE = re.compile(r"(?<![\w/.-])([a-z_][a-z0-9_]*\.py)(?![\w/])")


def test_every_module_architecture_names_by_its_file_name_exists():
    """A module ARCHITECTURE.md names by its file name alone (``batch_path.py`` in a path or a
    package's table) is a module of ``webhook/`` (or, in the tests' section, of ``tests/``)."""
    named = set(_BARE_MODULE.findall((REPO / "ARCHITECTURE.md").read_text()))
    files = {p.name for folder in ("webhook", "tests") for p in (REPO / folder).rglob("*.py")}
    assert len(named) > 50 and sorted(named - files) == []


_MEMBER = re.compile(r"(?<![\w.])([A-Z][A-Za-z0-9]+)\.([a-z_][a-z0-9_]*)\b")


@cache
def _class_members() -> dict[str, frozenset[str]]:
    """Every class of ``webhook/`` by name: what its body defines and what its methods set on
    ``self``."""
    members: dict[str, set[str]] = {}
    for path in (REPO / "webhook").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            names = members.setdefault(node.name, set())
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.Assign):
                    names |= {target.id for target in item.targets if isinstance(target, ast.Name)}
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
            names |= {sub.attr for sub in ast.walk(node) if isinstance(sub, ast.Attribute)
                      and isinstance(sub.value, ast.Name) and sub.value.id == "self" and isinstance(sub.ctx, ast.Store)}
    return {name: frozenset(found) for name, found in members.items()}


def test_every_method_architecture_names_exists():
    """``Class.member`` in ARCHITECTURE.md (``Scheduler.judge_if_quick``, ``KubeApi.apply_status``
    in the paths) is a class of ``webhook/`` with that member."""
    named = {(cls, member) for cls, member in _MEMBER.findall((REPO / "ARCHITECTURE.md").read_text())
             if member not in ("md", "py", "yaml")}  # (a file: README.md)
    members = _class_members()
    missing = sorted(f"{cls}.{member}" for cls, member in named if member not in members.get(cls, ()))
    assert len(named) > 10 and missing == [], f"ARCHITECTURE.md names members that do not exist: {missing}"


_SNAKE = re.compile(r"(?<![\w./-])(_?[a-z][a-z0-9]*(?:_[a-z0-9]+)+|_[a-z][a-z0-9]*)(?![\w/.-])")


@cache
def _defined_anywhere() -> frozenset[str]:
    """Every function, class, variable and attribute ``webhook/`` defines, and the ladder's
    route names (``cel_expr``, ``object_batch``)."""
    names = set()
    for path in (REPO / "webhook").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, (ast.Name, ast.Attribute)):
                        names.add(target.id if isinstance(target, ast.Name) else target.attr)
    from webhook.cel.ladder import LADDER

    return frozenset(names | {route.name for route in LADDER})


def test_every_function_the_paths_name_exists():
    """The names in ARCHITECTURE.md's diagrams (``_review``, ``judge_document``,
    ``applied_unchanged``) are defined in ``webhook/``."""
    text = "\n".join(_FENCE.findall((REPO / "ARCHITECTURE.md").read_text()))
    named = set(_SNAKE.findall(text))
    missing = sorted(named - _defined_anywhere())
    assert len(named) > 10 and missing == [], f"ARCHITECTURE.md's paths name what does not exist: {missing}"


def test_the_architecture_check_finds_a_missing_module():
    paths, dotted = _architecture_modules("webhook/server/http.py → policy/nowhere.py, webhook.cel.nowhere, state/\n")
    assert paths == {"webhook/server/http.py", "policy/nowhere.py"} and dotted == {"webhook.cel.nowhere"}


# -- docs/denial-rule.md classes every shipped rule ----------------------------------------------

_RULE = re.compile(r"`([a-z0-9-]+)/(validations|warnings)\[(\d+)\]`")


def denial_rule_rows(text: str) -> dict[str, str]:
    """The rules a table row of ``text`` (docs/denial-rule.md) names in its first cell,
    ``<policy>/validations[i]`` or ``<policy>/warnings[i]``, each with its row's verdict (the
    first word of the second cell)."""
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if line.startswith("| `") and len(cells) > 2:
            for policy, where, index in _RULE.findall(cells[0]):
                rows[f"{policy}/{where}[{index}]"] = cells[1].split(",")[0].split()[0]
    return rows


def _shipped_rules() -> dict[str, str]:
    """Every validation and warning of the shipped policy files: its name -> its verdict."""
    import yaml

    from tests.support.paths import POLICIES

    rules = {}
    for path in sorted(POLICIES.glob("*.yaml")):
        for policy in yaml.safe_load_all(path.read_text()):
            if not policy or policy.get("kind") != "AdmissionPolicy":
                continue
            for where, verdict in (("validations", "deny"), ("warnings", "warn")):
                for index, _ in enumerate(policy["spec"].get(where) or ()):
                    rules[f"{policy['metadata']['name']}/{where}[{index}]"] = verdict
    return rules


def test_the_denial_rule_check_reads_rows():
    text = ("| rule | verdict | why |\n|---|---|---|\n"
            "| `a-b/validations[0]`: x, `a-b/warnings[1]` | deny, only when known | y |\n"
            "| `c/warnings[2]`: z | warn | w |\n| `d/validations[0]` in prose |\n")
    assert denial_rule_rows(text) == {"a-b/validations[0]": "deny", "a-b/warnings[1]": "deny", "c/warnings[2]": "warn"}


def test_the_denial_rule_classes_every_shipped_rule():
    """docs/denial-rule.md has a row for every validation and warning of ``policies/``, and no
    other; a row says deny for a validation, warn for a warning."""
    documented = denial_rule_rows((REPO / "docs" / "denial-rule.md").read_text())
    shipped = _shipped_rules()
    assert len(shipped) > 30
    assert sorted(set(shipped) - set(documented)) == [], "shipped rules docs/denial-rule.md does not class"
    assert sorted(set(documented) - set(shipped)) == [], "rows of docs/denial-rule.md naming no shipped rule"
    assert {rule: verdict for rule, verdict in documented.items() if shipped[rule] != verdict} == {}


def test_every_package_says_its_job():
    """ARCHITECTURE.md is the map and leaves the reference to the code: every package of
    ``webhook/`` says its job in its ``__init__``'s docstring."""
    packages = sorted((REPO / "webhook").rglob("__init__.py"))
    silent = [str(p.parent.relative_to(REPO)) for p in packages if not ast.get_docstring(ast.parse(p.read_text()))]
    assert len(packages) > 20 and silent == []
