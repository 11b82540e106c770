"""``infergate reconcile``: the status every object would get, offline.

    infergate reconcile --state examples/                 # every owned object in the state
    infergate reconcile --state examples/ my-order.yaml   # "where would this order land?"

Reads a directory of manifests as the cluster view, runs the same pure reconcilers as the
controller, prints the statuses (``-o text`` a summary that answers where each
InferenceService lands and if not why; ``-o yaml``/``-o json`` the objects with their
status as the controller would write them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

from webhook import command_line
from webhook import kinds
from webhook.controller.conditions import TRUE
from webhook.controller.context import ReconcileContext, Settings
from webhook.controller.ownership import StatusWritesError, other_writer, status_writes
from webhook.controller.reconcilers import RECONCILERS
from webhook.state.memory import MemoryState
from webhook.controller.timeutil import parse_time
from webhook.shipped_data import examples_dir


class InputError(Exception):
    """Input the command cannot use: reported in one line, never as a traceback."""


EXAMPLES = """\
infergate reconcile                                       # every owned object of the example cluster
infergate reconcile my-order.yaml                         # where would this InferenceService land?
infergate reconcile --state my-cluster-dump/ -o yaml      # every object with the status the controller writes
kubectl get inferenceservices -A -o yaml | infergate reconcile -
"""

EXIT_CODES = """\
exit status:
  0  every status computed
  1  an object's status could not be computed (said on stderr)
  2  usage or input error (a bad flag, a missing or unreadable file, broken YAML)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = command_line.epilog(EXAMPLES, exit_codes=EXIT_CODES)
    parser.add_argument("files", nargs="*", metavar="PATH",
                        help="manifests (files, directories, - for stdin) laid over the state; only their statuses are printed")
    parser.add_argument("-f", "--filename", action="append", default=[], metavar="PATH",
                        help="the same as a PATH argument; repeatable")
    parser.add_argument("--state", type=Path, default=None, help="directory of manifests: the cluster view (default: the shipped examples)")
    parser.add_argument("-o", "--output", choices=("text", "yaml", "json"), default="text",
                        help="text (default: where each object lands, or why not), yaml or json (the objects with "
                             "their status)")
    parser.add_argument("--now", default=None, help="the clock, RFC 3339 (default: now); makes output reproducible")
    parser.add_argument("--replan-timeout", type=float, default=300.0, metavar="SECONDS",
                        help="a ResourceClaim unallocated this long triggers a replan (default 300)")
    parser.add_argument("--replan-limit", type=int, default=3, help="replans before Planned=False (default 3)")
    parser.add_argument("--public-domain-template", default=None,
                        help="Deckhouse publicDomainTemplate for External endpoints (default: ModuleConfig global)")
    parser.add_argument("--status-writes", action="append", default=[], metavar="KIND=on|off",
                        help="as the controller's flag: write status of KIND (<plural>.<group>) or not; default: "
                             "every infergate kind, not KubeAI's Model (its own controller writes that)")


def read_manifests(sources: list[str]) -> list[dict]:
    """The objects in files, directories or ``-`` (stdin), read as ``infergate validate`` does."""
    from webhook import documents as reader

    documents, errors = reader.read(sources)
    if errors:
        raise InputError(str(errors[0]))
    objects = []
    for document in documents:
        obj = document.content
        if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind") or not isinstance(
            obj.get("metadata"), dict
        ):
            raise InputError(f"{document.where}: not a Kubernetes object (apiVersion, kind and metadata)")
        objects.append(obj)
    return objects


def load_state(directory: Path | None, extra: list[dict]):
    """The cluster view: the directory's manifests (the state layer's ``FileState``), with
    ``extra`` laid over them."""
    from webhook.state import FileState, StateLoadError

    try:
        base = FileState(directory if directory is not None else examples_dir())
    except StateLoadError as exc:
        raise InputError(str(exc)) from None
    return MemoryState.overlay(base, extra, kinds.WATCHED) if extra else base


def owned_objects(state, writes: frozenset[kinds.Kind] = frozenset(kinds.OWNED)) -> list[dict]:
    objects = []
    for kind in kinds.OWNED:
        if kind in writes:
            objects.extend(state.list(kind.api_version, kind.kind))
    return objects


def others_status(objects: Iterable[Mapping], writes: frozenset[kinds.Kind]) -> list[str]:
    """For the objects whose status another controller writes: who, in one line each."""
    lines = []
    for obj in objects:
        writer = other_writer(obj, writes)
        if writer is not None:
            meta = obj.get("metadata") or {}
            name = "/".join(n for n in (meta.get("namespace"), meta.get("name")) if n)
            lines.append(f"{obj.get('kind')} {name}: status written by {writer}; infergate writes none of it")
    return lines


def reconcile_all(objects: Iterable[Mapping], ctx: ReconcileContext, problems: list[str] | None = None) -> list[dict]:
    """Each object with the status the controller would write.

    An object too malformed to reconcile (a field of the wrong type: the apiserver would
    have refused it) is left out and described in ``problems``.
    """
    results = []
    for obj in objects:
        kind = kinds.BY_KEY.get((obj.get("apiVersion", ""), obj.get("kind", "")))
        if kind not in RECONCILERS:
            continue
        meta = obj.get("metadata") or {}
        identity = {k: meta[k] for k in ("name", "namespace") if meta.get(k)}
        try:
            status = RECONCILERS[kind](obj, ctx)
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            name = "/".join(identity[k] for k in ("namespace", "name") if k in identity)
            if problems is not None:
                problems.append(f"{obj['kind']} {name}: malformed, not reconciled ({type(exc).__name__}: {exc})")
            continue
        results.append({"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": identity, "status": status})
    return results


def _condition_lines(status: Mapping) -> list[str]:
    """The conditions that are not True; an order's Ready only when nothing else explains it
    (it repeats the first condition that is not True)."""
    pending = [c for c in status.get("conditions") or () if c.get("status") != TRUE]
    if len(pending) > 1:
        pending = [c for c in pending if c["type"] != "Ready"]
    return [f"    {c['type']}={c['status']} {c['reason']}: {c['message']}" for c in pending]


def _summary(result: Mapping) -> list[str]:
    meta, status = result["metadata"], result["status"]
    name = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
    head = f"{result['kind']} {name}"
    if result["kind"] == "InferenceService":
        lines = [f"{head}: {status.get('phase')}"]
        resolved = status.get("resolved") or {}
        if resolved.get("deviceClass"):
            product = f", {resolved['acceleratorProductName']}" if resolved.get("acceleratorProductName") else ""
            lines.append(
                f"    lands on DeviceClass {resolved['deviceClass']}: {resolved['placementMode']}, "
                f"{resolved['sharingMode']} {resolved['sharePercent']}%, {resolved['acceleratorMemoryGiB']} GiB{product}"
            )
        if status.get("endpoint", {}).get("url"):
            lines.append(f"    endpoint {status['endpoint']['url']} ({status.get('model', {}).get('endpointType')})")
        return lines + _condition_lines(status)
    if result["kind"] == "Model" and "replicas" in status:
        cache = f", cache loaded: {status['cache']['loaded']}" if "cache" in status else ""
        return [f"{head}: {status['replicas']['ready']}/{status['replicas']['all']} replicas ready{cache}"]
    phase = f": {status['phase']}" if status.get("phase") else ""
    conditions = ", ".join(f"{c['type']}={c['status']} ({c['reason']})" for c in status.get("conditions") or ())
    return [f"{head}{phase} {conditions}".rstrip()] + [
        line for line in _condition_lines(status) if result["kind"] != "InferenceServiceClass" or "Validated" in line
    ]


def render(results: list[dict], output: str) -> str:
    if output == "json":
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": results}, indent=2) + "\n"
    if output == "yaml":
        return yaml.safe_dump_all(results, sort_keys=False)
    if not results:
        return "no InferenceService, InferenceServiceClass, InferenceModel, InferencePool or KubeAI Model found\n"
    return "\n".join(line for result in results for line in _summary(result)) + "\n"


def run(args: argparse.Namespace) -> int:
    try:
        now = datetime.now(timezone.utc)
        if args.now is not None:
            now = parse_time(args.now)
            if now is None:
                raise InputError(f"--now {args.now!r}: expected an RFC 3339 time such as 2026-01-01T00:00:00Z")
        if args.replan_limit < 0 or args.replan_timeout < 0:
            raise InputError("--replan-limit and --replan-timeout must not be negative")
        args.files = [*args.files, *args.filename]
        extra = read_manifests(args.files) if args.files else []
        state = load_state(args.state, extra)
        writes = status_writes(args.status_writes)
    except (StatusWritesError, InputError) as exc:
        return command_line.error(f"reconcile: {exc}")
    settings = Settings(
        replan_timeout=timedelta(seconds=args.replan_timeout),
        replan_limit=args.replan_limit,
        public_domain_template=args.public_domain_template,
    )
    ctx = ReconcileContext(state=state, now=now, evaluator=args.evaluator, settings=settings)
    if args.files:
        wanted = {kinds.key_of(obj) for obj in extra}
        objects = [obj for obj in owned_objects(state, writes) if kinds.key_of(obj) in wanted]
    else:
        objects = owned_objects(state, writes)
    problems: list[str] = []
    results = reconcile_all(objects, ctx, problems)
    elsewhere = others_status(extra, writes)  # the files' objects infergate writes no status of
    if args.output == "text" and elsewhere:
        sys.stdout.write((render(results, args.output) if results else "") + "\n".join(elsewhere) + "\n")
    else:
        sys.stdout.write(render(results, args.output))
        sys.stdout.flush()
        for line in elsewhere:  # the objects left out of the List: why, where a reader of stdout cannot miss it
            print(f"note: {line}", file=sys.stderr)
    for problem in problems:
        command_line.error(f"reconcile: {problem}")
    return 1 if problems else 0
