"""The command line as a whole: one error style and exit codes for every subcommand, help with
examples and a description for every flag, ``--cel-engine`` anywhere, log levels in any case."""

import argparse
import importlib
import io
import os
import subprocess
import sys
import types

import pytest

from webhook import command_line
from webhook.cli import COMMANDS, ENGINE_VARIABLE, chosen_engine, main, take_engine


def test_help_says_what_infergate_is_and_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "webhook", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "admission webhook and offline validator for AI-inference APIs" in out.stdout
    assert "examples:" in out.stdout
    for name in COMMANDS:
        assert name in out.stdout


def test_unknown_command_is_a_usage_error():
    out = subprocess.run([sys.executable, "-m", "webhook", "frobnicate"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.splitlines()[-1].startswith("infergate: error: ")


def _parser(name: str) -> argparse.ArgumentParser:
    module_name, help_text = COMMANDS[name]
    parser = command_line.Parser(prog=f"infergate {name}", description=help_text)
    importlib.import_module(module_name).add_arguments(parser)
    return parser


def _undescribed(help_text: str) -> list[str]:
    """The arguments a ``--help`` lists without a description: an invocation line
    (``  --flag VALUE``) with no text beside it and none indented under it."""
    lines, found, listing = help_text.splitlines(), [], False
    for i, line in enumerate(lines):
        if line and not line.startswith(" "):
            listing = line in ("options:", "positional arguments:")
            continue
        if not listing or not line.startswith("  ") or line.startswith("   "):
            continue
        if "  " not in line.strip() and not (i + 1 < len(lines) and lines[i + 1].startswith("   ")):
            found.append(line.strip())
    return found


def test_an_argument_without_a_description_is_found():
    parser = command_line.Parser(prog="probe")
    parser.add_argument("--described", help="what it does")
    parser.add_argument("--bare")
    assert _undescribed(parser.format_help()) == ["--bare BARE"]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_subcommand_help_has_examples_exit_codes_and_a_description_for_every_flag(name, monkeypatch):
    made = []  # the command's parser and its subcommands' (``infergate certs generate``)
    init = argparse.ArgumentParser.__init__
    monkeypatch.setattr(argparse.ArgumentParser, "__init__",
                        lambda parser, *args, **kwargs: init(parser, *args, **kwargs) or made.append(parser))
    text = _parser(name).format_help()
    assert "examples:\n  infergate " in text and "exit status:\n  0  " in text and "\n  2  usage" in text
    assert made and [(parser.prog, _undescribed(parser.format_help())) for parser in made] == \
        [(parser.prog, []) for parser in made]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_subcommand_reports_a_bad_flag_in_the_one_style(name):
    out = subprocess.run([sys.executable, "-m", "webhook", name, "--no-such-flag"], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1] == "infergate: error: unrecognized arguments: --no-such-flag" or \
        out.stderr.splitlines()[-1].startswith("infergate: error: "), out.stderr


def test_input_errors_read_the_same_in_every_offline_subcommand(tmp_path, capsys):
    missing = str(tmp_path / "missing.yaml")
    for argv in (["validate", missing], ["test", missing], ["reconcile", missing]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("infergate: error: ") and "missing.yaml" in err and "no such file" in err, (argv, err)


def test_cel_engine_anywhere_on_the_command_line(monkeypatch):
    assert take_engine(["validate", "x.yaml", "--cel-engine", "cel-python", "-o", "json"]) == (
        "cel-python", ["validate", "x.yaml", "-o", "json"])
    assert take_engine(["--cel-engine=cel-python", "test", "s.yaml"]) == ("cel-python", ["test", "s.yaml"])
    assert take_engine(["validate", "--", "--cel-engine"]) == (None, ["validate", "--", "--cel-engine"])
    with pytest.raises(ValueError, match="invalid choice: 'nope'"):
        take_engine(["validate", "--cel-engine", "nope"])
    out = subprocess.run([sys.executable, "-m", "webhook", "validate", "--cel-engine", "nope"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "infergate: error: argument --cel-engine: invalid choice" in out.stderr


def test_the_engine_chosen_anywhere_reaches_the_command(monkeypatch):
    """The command runs with the evaluator of the engine the command line names (before or
    after the command), else ``INFERGATE_CEL_ENGINE``'s, else the default: chosen once, here."""
    seen = []
    probe = types.ModuleType("probe_command")
    probe.add_arguments = lambda parser: parser.add_argument("-x", action="store_true")
    probe.run = lambda args: seen.append(args.evaluator.name) or 0
    monkeypatch.setitem(sys.modules, "probe_command", probe)
    monkeypatch.setitem(COMMANDS, "probe", ("probe_command", "records the evaluator it is given"))
    monkeypatch.delenv(ENGINE_VARIABLE, raising=False)
    assert main(["probe", "-x", "--cel-engine", "cel-python"]) == 0
    assert main(["--cel-engine=cel-python", "probe"]) == 0
    assert main(["probe"]) == 0
    monkeypatch.setenv(ENGINE_VARIABLE, "cel-python")
    assert main(["probe"]) == 0
    assert main(["probe", "--cel-engine", "cel-expr"]) == 0
    assert seen == ["cel-python", "cel-python", "cel-expr", "cel-python", "cel-expr"]
    assert chosen_engine(None, {ENGINE_VARIABLE: "cel-python"}) == "cel-python"
    assert chosen_engine("cel-expr", {ENGINE_VARIABLE: "cel-python"}) == "cel-expr"
    assert chosen_engine(None, {}) == "cel-expr"


def test_an_engine_named_in_the_environment_is_checked_at_the_edge(tmp_path):
    manifest = tmp_path / "empty.yaml"
    manifest.write_text("")
    argv = [sys.executable, "-m", "webhook", "validate", str(manifest), "--allow-empty"]
    ran = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, ENGINE_VARIABLE: "cel-python"})
    assert ran.returncode == 0, ran.stderr
    refused = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, ENGINE_VARIABLE: "cel-cpp"})
    assert refused.returncode == 2 and "infergate: error: unknown CEL engine 'cel-cpp'" in refused.stderr


def test_log_levels_in_any_case():
    from webhook.server.settings import Settings

    assert [command_line.log_level(v) for v in ("DEBUG", "Info", "warning", " ERROR ")] == ["debug", "info", "warning", "error"]
    with pytest.raises(argparse.ArgumentTypeError):
        command_line.log_level("loud")
    assert Settings(log_level="WARNING").log_level == "warning"
    for name in ("serve", "controller"):
        args = _parser(name).parse_args(["--log-level", "DEBUG"])
        assert args.log_level == "debug"


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    class Terminal:
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert command_line.Painter(Terminal())("valid", "green") == "\x1b[32mvalid\x1b[0m"
    assert command_line.Painter(io.StringIO())("valid", "green") == "valid"  # a pipe, a CI log
    monkeypatch.setenv("NO_COLOR", "1")
    assert command_line.Painter(Terminal())("valid", "green") == "valid"


def test_the_commands_the_docs_show_for_offline_use_and_ci_parse():
    """Every ``infergate ...`` command in docs/validate.md and docs/ci.md is accepted by
    its subcommand's parser (no stale flag), and the GitHub Actions example annotates with -o github."""
    import re
    import shlex

    from tests.support.paths import REPO

    ci = (REPO / "docs" / "ci.md").read_text()
    sections = (REPO / "docs" / "validate.md").read_text() + ci
    commands = [m.group(1) for m in re.finditer(r"(?:^|run: |- |\| |`)(infergate [a-z-]+ [^`#|>\n]*)", sections, re.M)]
    assert len(commands) >= 10
    for command in commands:
        words = shlex.split(command.replace("<", "").replace(">", ""))
        if words[1] not in COMMANDS:
            continue
        parsed = _parser(words[1]).parse_args(words[2:])
        assert parsed is not None, command
    actions = ci[ci.index("GitHub Actions (in your repository"):ci.index("GitLab CI")]
    assert "infergate validate" in actions and "-o github" in actions


def test_the_validate_pages_update_example_says_when_the_url_is_immutable(tmp_path):
    """docs/validate.md's UPDATE example changes a Model's url: refused because the Model has a
    cacheProfile (KubeAI's rule), as its comment says; the same change without one is valid."""
    import re

    from tests.support.paths import REPO

    page = (REPO / "docs" / "validate.md").read_text()
    found = re.search(r"^sed 's/([^/]+)/([^/]+)/' (\S+) \|\n\s+infergate validate - --old (\S+)\s+# (.*)$", page, re.M)
    assert found is not None
    before, after, new_file, old_file, comment = found.groups()
    assert new_file == old_file and "url is immutable with a cacheProfile" in comment
    stored = (REPO / old_file).read_text()
    assert "cacheProfile:" in stored and before in stored

    def validate(old_text: str) -> subprocess.CompletedProcess:
        old = tmp_path / "stored.yaml"
        old.write_text(old_text)
        return subprocess.run([sys.executable, "-m", "webhook", "validate", "-", "--old", str(old)], cwd=REPO,
                              input=old_text.replace(before, after), capture_output=True, text=True, timeout=120)

    refused = validate(stored)
    assert refused.returncode == 1 and "url is immutable when using cacheProfile" in refused.stdout
    without = "".join(line for line in stored.splitlines(keepends=True) if "cacheProfile:" not in line)
    allowed = validate(without)
    assert allowed.returncode == 0 and " valid\n" in allowed.stdout, allowed.stdout + allowed.stderr
