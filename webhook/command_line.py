"""What every subcommand shares on the command line: its parser, the one error style, the exit
codes, colour.

Errors read ``infergate: error: <what>`` on stderr and exit 2, whichever subcommand meets
them, argparse's usage errors included. Colour only on a terminal, and never with
``NO_COLOR`` set (https://no-color.org).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO, NoReturn

OK, FAILED, USAGE = 0, 1, 2

EXIT_CODES = """\
exit status:
  0  everything valid (every case passed)
  1  something was denied or failed
  2  usage or input error (a bad flag, a missing or unreadable file, broken YAML)"""


SERVICE_EXIT_CODES = """\
exit status:
  0  stopped cleanly (SIGTERM or SIGINT)
  2  usage or start-up error (a bad flag, path or configuration; reported in one line)"""


class Parser(argparse.ArgumentParser):
    """argparse with the one error style, and help text kept as written (examples stay lines)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"infergate: error: {message}\n")


def epilog(examples: str, *, exit_codes: str = EXIT_CODES) -> str:
    """A subcommand's ``--help`` ending: its examples, then what its exit status means."""
    lines = "\n".join(f"  {line}" if line else "" for line in examples.strip("\n").splitlines())
    return f"examples:\n{lines}\n\n{exit_codes}" if exit_codes else f"examples:\n{lines}"


def error(message: str, stream: IO[str] | None = None) -> int:
    """Print ``infergate: error: message`` on stderr; returns the usage/input exit code (2)."""
    print(f"infergate: error: {message}", file=stream or sys.stderr)
    return USAGE


def log_level(value: str) -> str:
    """A ``--log-level`` value, whatever its case."""
    level = value.strip().lower()
    if level not in ("debug", "info", "warning", "error"):
        raise argparse.ArgumentTypeError(f"invalid log level {value!r} (choose from debug, info, warning, error)")
    return level


def colour_enabled(stream: IO[str]) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


_CODES = {"green": "32", "red": "31", "yellow": "33", "bold": "1", "dim": "2"}


class Painter:
    """``paint(text, "red")``: ANSI colour when the stream is a terminal, the text unchanged otherwise."""

    def __init__(self, stream: IO[str]) -> None:
        self.enabled = colour_enabled(stream)

    def __call__(self, text: str, colour: str) -> str:
        return f"\x1b[{_CODES[colour]}m{text}\x1b[0m" if self.enabled else text
