"""The ``infergate`` command.

Each subcommand lives beside the layer it drives and exposes two functions:
``add_arguments(parser)`` and ``run(args) -> int`` (the exit code). This module only
wires them together, importing a subcommand's module when that subcommand runs, so
``infergate validate`` never pays for the server's imports and vice versa. What every
subcommand shares on the command line (the error style, exit codes, colour) is
``webhook.command_line``.

The CEL engine is chosen here, once, for every subcommand: ``--cel-engine NAME`` anywhere on
the command line, else ``INFERGATE_CEL_ENGINE``, else the default; the subcommand gets it as
``args.evaluator`` (a ``webhook.cel.Evaluator``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping

from webhook import command_line
from webhook.cel import DEFAULT_ENGINE, Evaluator, engine_names

ENGINE_VARIABLE = "INFERGATE_CEL_ENGINE"  # the engine when no --cel-engine is given

DESCRIPTION = """\
infergate: a Kubernetes admission webhook and offline validator for AI-inference APIs: Gateway
API Inference Extension v1 InferencePool (inference.networking.k8s.io/v1), llm-d's
InferenceObjective and InferenceModelRewrite (llm-d.ai/v1alpha2), KubeAI v0.23's Model
(kubeai.org/v1) and Deckhouse InferenceServiceClass/InferenceService (ai.deckhouse.io); the
legacy inference.networking.x-k8s.io kinds (v1alpha1 InferencePool and InferenceModel, v1alpha2
InferenceObjective, ...) are still served. It answers exactly as kube-apiserver does for the
CRDs (schema, defaults, CEL rules), then applies admission policies written as data
(ValidatingAdmissionPolicy-like CEL), and writes the objects' status as a controller."""

EXAMPLES = """\
infergate validate manifests/ -o github       # in CI: every manifest as the cluster would answer it
infergate test policies/tests --coverage      # policy test suites
infergate reconcile my-order.yaml             # where would this InferenceService land?
infergate serve                               # the webhook, on https://0.0.0.0:8443
infergate COMMAND --help                      # a command's flags, examples and exit codes
"""

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("webhook.server.command", "serve the admission webhook over HTTPS"),
    "validate": ("webhook.offline.validate", "validate manifests as the apiserver and the webhook would"),
    "test": ("webhook.offline.run_suites", "run policy test suites and recorded apiserver cases"),
    "audit": ("webhook.offline.audit_command", "judge existing objects (a dump or the live cluster) against the policies"),
    "reconcile": ("webhook.offline.reconcile", "print the status the controller would write (offline)"),
    "controller": ("webhook.controller.runner", "run the status controller against a cluster"),
    "certs": ("webhook.certs.command", "generate or inspect the webhook's certificates"),
    "webhook-config": ("webhook.webhook_config", "print the webhook configurations to register"),
    "native-policies": ("webhook.offline.native_policies",
                        "print the policies' rules the apiserver can run alone as ValidatingAdmissionPolicies and "
                        "MutatingAdmissionPolicies"),
}

_ENGINE_FLAG = "--cel-engine"


def build_parser() -> argparse.ArgumentParser:
    parser = command_line.Parser(prog="infergate", description=DESCRIPTION, epilog=command_line.epilog(EXAMPLES))
    from webhook import __version__

    parser.add_argument("--version", action="version", version=f"infergate {__version__}")
    parser.add_argument(_ENGINE_FLAG, choices=engine_names(),
                        help=f"CEL backend for every command, anywhere on the command line (default "
                             f"{DEFAULT_ENGINE}; env {ENGINE_VARIABLE})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def take_engine(argv: list[str]) -> tuple[str | None, list[str]]:
    """``--cel-engine NAME`` (or ``=NAME``) wherever it stands before ``--``: the engine named
    (checked against the engines there are), and the arguments without it."""
    rest: list[str] = []
    engine: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        if arg == _ENGINE_FLAG or arg.startswith(_ENGINE_FLAG + "="):
            if "=" in arg:
                engine = arg.split("=", 1)[1]
            elif i + 1 < len(argv):
                engine = argv[i + 1]
                i += 1
            else:
                raise ValueError(f"argument {_ENGINE_FLAG}: expected one argument")
            if engine not in engine_names():
                choices = ", ".join(repr(n) for n in engine_names())
                raise ValueError(f"argument {_ENGINE_FLAG}: invalid choice: {engine!r} (choose from {choices})")
        else:
            rest.append(arg)
        i += 1
    return engine, rest


def chosen_engine(flag: str | None, environ: Mapping[str, str]) -> str:
    """The engine the command line names (``--cel-engine``), else ``INFERGATE_CEL_ENGINE``'s,
    else the default."""
    return flag or environ.get(ENGINE_VARIABLE) or DEFAULT_ENGINE


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        engine, argv = take_engine(argv)
        evaluator = Evaluator(chosen_engine(engine, os.environ))
    except ValueError as exc:
        parser.error(str(exc))
    if not argv or argv[0] not in COMMANDS:
        parser.parse_args(argv)  # prints help / version / usage errors
        parser.print_help(sys.stderr)
        return command_line.USAGE
    name = argv[0]
    module_name, help_text = COMMANDS[name]
    module = importlib.import_module(module_name)
    command_parser = command_line.Parser(prog=f"infergate {name}", description=help_text)
    module.add_arguments(command_parser)
    args = command_parser.parse_args(argv[1:])
    args.evaluator = evaluator
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        return 130
