"""The ``infergate`` command.

Each subcommand lives beside the layer it drives and exposes two functions:
``add_arguments(parser)`` and ``run(args) -> int`` (the exit code). This module only
wires them together, importing a subcommand's module when that subcommand runs, so
``infergate validate`` never pays for the server's imports and vice versa.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from webhook.cel.engine import DEFAULT_ENGINE, ENGINE_VARIABLE, engine_names

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("webhook.server.command", "serve the admission webhook over HTTPS"),
    "validate": ("webhook.offline.validate", "validate manifests as the apiserver and the webhook would"),
    "test": ("webhook.offline.suites", "run recorded apiserver cases and policy test suites"),
    "reconcile": ("webhook.controller.offline", "print the status the controller would write (offline)"),
    "controller": ("webhook.controller.runner", "run the status controller against a cluster"),
    "certs": ("webhook.certs", "generate or inspect the webhook's certificates"),
    "webhook-config": ("webhook.webhook_config", "print the webhook configurations to register"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="infergate", description=__doc__.splitlines()[0])
    from webhook import __version__

    parser.add_argument("--version", action="version", version=f"infergate {__version__}")
    parser.add_argument("--cel-engine", choices=engine_names(),
                        help=f"CEL backend for every command (default {DEFAULT_ENGINE}; env {ENGINE_VARIABLE})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv[:1] == ["--cel-engine"] or argv[:1] and argv[0].startswith("--cel-engine="):
        # a global option before the command: it selects the backend for this process and its children
        split = 1 if "=" in argv[0] else 2
        known, _ = parser.parse_known_args(argv[:split])
        os.environ[ENGINE_VARIABLE] = known.cel_engine
        argv = argv[split:]
    if not argv or argv[0] not in COMMANDS:
        args = parser.parse_args(argv)  # prints help / version / usage errors
        parser.print_help()
        return 2
    name = argv[0]
    module_name, help_text = COMMANDS[name]
    module = importlib.import_module(module_name)
    command_parser = argparse.ArgumentParser(prog=f"infergate {name}", description=help_text)
    module.add_arguments(command_parser)
    args = command_parser.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        return 130
