"""``infergate audit``: existing objects judged against the policies and the CRDs' schemas,
read-only — a dump (``kubectl get models -A -o yaml``: a ``List``, multi-document YAML, JSON;
directories recursed) or a live cluster (``--kubeconfig``).

Each object is judged by ``webhook.audit.Auditor`` as an object at rest (see there: a CREATE
without ``oldObject``, the CRD's schema without ratcheting as policy ``crd-schema``). Outputs:
``table`` (every result that is not a pass, then a summary), ``json`` (every result),
``junit`` (one test case per object), ``openreports`` (the Report objects the controller would
write, as a YAML ``List``). With ``--baseline-policies`` it is the impact preview: only the
objects whose verdict (denied, warned, audited) differs between the baseline policies and
``--policies``, grouped as ``newly denied: 3 Models in team-a``.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from webhook import command_line, documents
from webhook.audit import Auditor, ObjectAudit, ResourceRef, build_report
from webhook.offline.ci import Finding, junit_xml
from webhook.offline.validate import json_text
from webhook.inputs.crds import CRDSource, crd_registry
from webhook.inputs.kube import KubeClientConfig
from webhook.kinds import CUSTOM_RESOURCE_DEFINITION
from webhook.inputs.policies import PolicySource, load_policy_set
from webhook.policy import PolicyLoadError, PolicySet
from webhook.policy.actions import ActionsError
from webhook.schema import CRDLoadError, CRDRegistry
from webhook.schema.registry import crd_documents, one_crd_per_name
from webhook.schema.bundled import DEFAULT_KUBEAI_CRD, KUBEAI_CRDS
from webhook.policy.unknown import unchecked_text
from webhook.inputs.watches import native_policy_watches
from webhook.kinds import VALIDATING_ADMISSION_POLICY as VAP, VALIDATING_ADMISSION_POLICY_BINDING as VAP_BINDING, Kind
from webhook.policy.native.cluster import ClusterNativePolicies
from webhook.state.kube import WatchedKind
from webhook.state import FileState, StateLoadError, kinds_held, read_objects

if TYPE_CHECKING:
    from webhook.cel import Evaluator

DESCRIPTION = """\
Audit existing objects: judge a dump of a cluster (or the live cluster, --kubeconfig) against the
admission policies and the CRDs' own schemas, as the background audit of `infergate controller`
does. An object is judged as it is stored: as a CREATE without an old object (rules about a
transition do not apply), and against its CRD without ratcheting (a field stored before the CRD
tightened is reported under the policy crd-schema). Nothing is written.

With --baseline-policies: the impact preview of a policy change. Only the objects whose verdict
(denied, warned, audited) changes from the baseline policies to --policies are listed."""

EXAMPLES = """\
infergate audit dump.yaml                                        # a table of every finding, e.g. of a dump
                                                                 # (kubectl get models,inferencepools -A -o yaml)
infergate audit dump.yaml -o json                                # every result, for scripts
infergate audit --kubeconfig ~/.kube/config                      # the live cluster (read-only)
infergate audit --kubeconfig ~/.kube/config --native-policies    # ... judged by its own VAPs and bindings too
infergate audit dump.yaml --policies new/ --baseline-policies policies/   # what a policy edit changes
infergate audit dump.yaml -o openreports > reports.yaml          # the reports the controller writes
"""

EXIT_CODES = """\
exit status:
  0  no object is denied (impact preview: no object is newly denied)
  1  an object fails a policy whose actions include Deny (or it cannot be evaluated and
     fails closed), or its CRD (crd-schema)
     (impact preview: an object is newly denied)
  2  usage or input error (a bad flag, an unreadable file or cluster, broken YAML)"""

OUTPUTS = ("table", "json", "junit", "openreports")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.epilog = command_line.epilog(EXAMPLES, exit_codes=EXIT_CODES)
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="the objects: files (YAML or JSON, a List or many documents each), directories "
                             "(recursively) or - for stdin")
    parser.add_argument("-f", "--filename", action="append", default=[], metavar="PATH",
                        help="the same as a PATH argument; repeatable")
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="audit the live cluster of this kubeconfig instead of files (read-only)")
    parser.add_argument("--context", help="the kubeconfig context (default: its current one)")
    parser.add_argument("--native-policies", action="store_true",
                        help="with --kubeconfig: also judge by the cluster's own ValidatingAdmissionPolicies and "
                             "their bindings (not those infergate generated), with the params they name")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="how long reading the cluster may take (default 60)")
    parser.add_argument("--policies", metavar="DIR",
                        help="admission policies (default: the shipped policies/): AdmissionPolicy files, and "
                             "ValidatingAdmissionPolicies with their bindings (a result per binding)")
    parser.add_argument("--baseline-policies", metavar="DIR",
                        help="impact preview: list only the objects whose verdict differs under these policies")
    parser.add_argument("--policy-actions", action="append", default=[], metavar="OVERRIDE",
                        help="an operator's choice of a policy's validation actions, as infergate serve takes it: "
                             "NAME=ACTION[,ACTION][@NAMESPACE-SELECTOR] or a mapping; repeatable")
    parser.add_argument("--state", action="append", default=[], metavar="PATH",
                        help="more of the cluster the policies look up (classes, namespaces, KubeAI's config, "
                             "...): files or directories; the objects audited are part of it already; repeatable")
    parser.add_argument("--crd", action="append", default=[], metavar="PATH",
                        help="CRDs to judge against besides the bundled ones, each in place of the bundled CRD of its "
                             "name (with --kubeconfig: instead of the cluster's); "
                             "repeatable")
    parser.add_argument("--kubeai-crd", choices=list(KUBEAI_CRDS),
                        help=f"the bundled KubeAI Model CRD (default {DEFAULT_KUBEAI_CRD})")
    parser.add_argument("--allow-empty", action="store_true",
                        help="no objects at all in the files (an empty dump, a directory without manifests) is "
                             "success (default: an error, exit 2, as validate)")
    parser.add_argument("-n", "--namespace", default="default",
                        help="namespace of namespaced objects that name none (default: default)")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="table",
                        help="table (default), json (every result), junit (JUnit XML, one case per object), "
                             "openreports (the OpenReports Report objects, a YAML List)")


class SetupError(ValueError):
    """What stops the run before any object is judged (one line on stderr, exit 2)."""


NO_OBJECTS = ("audit: no objects in the input (an empty stdin or file, or no .yaml, .yml or .json file under the "
              "directories); --allow-empty accepts that")


@dataclass
class Judged:
    """One object's audit and where it came from."""

    audit: ObjectAudit
    file: str = "cluster"
    line: int | None = None
    baseline: ObjectAudit | None = None
    seconds: float = 0.0  # the time its audit took (JUnit's time)


@dataclass(frozen=True)
class AuditConfig:
    """What ``infergate audit`` runs with, from its flags (checked by :meth:`from_flags`)."""

    evaluator: Evaluator
    paths: tuple[str, ...]  # files, directories, "-" (stdin); empty: the cluster's objects
    cluster: KubeClientConfig | None  # the live cluster read instead of files (--kubeconfig, --context)
    timeout: float  # seconds reading the cluster may take
    policies: PolicySource
    baseline: PolicySource | None  # the impact preview's (--baseline-policies)
    state: tuple[str, ...] = ()  # more of the cluster the policies look up (files, directories)
    crds: tuple[str, ...] = ()  # --crd: files and directories
    kubeai_crd: str | None = None
    allow_empty: bool = False
    namespace: str = "default"  # of namespaced objects that name none
    output: str = "table"
    native_policies: bool = False  # also judge by the cluster's ValidatingAdmissionPolicies (--native-policies)

    @classmethod
    def from_flags(cls, args: argparse.Namespace, evaluator: Evaluator) -> AuditConfig:
        """The configuration of ``add_arguments``' flags; ``SetupError`` (one line) for a wrong one."""
        paths = (*args.paths, *args.filename)
        if paths and args.kubeconfig:
            raise SetupError("audit: give PATHs or --kubeconfig, not both")
        if not paths and not args.kubeconfig:
            raise SetupError("audit: no input: give files, directories, - (stdin) or --kubeconfig")
        if args.baseline_policies and args.output not in ("table", "json"):
            raise SetupError("audit: the impact preview (--baseline-policies) prints -o table or json")
        if args.timeout <= 0:
            raise SetupError("audit: --timeout must be above 0")
        if args.native_policies and not args.kubeconfig:
            raise SetupError("audit: --native-policies reads the cluster's own policies: give --kubeconfig")
        actions = tuple(args.policy_actions)
        return cls(
            evaluator=evaluator, paths=paths,
            cluster=KubeClientConfig(kubeconfig=Path(args.kubeconfig), context=args.context, in_cluster=False)
            if args.kubeconfig else None,
            timeout=args.timeout,
            policies=PolicySource(Path(args.policies) if args.policies else None, actions),
            baseline=PolicySource(Path(args.baseline_policies), actions) if args.baseline_policies else None,
            state=tuple(args.state), crds=tuple(args.crd), kubeai_crd=args.kubeai_crd, allow_empty=args.allow_empty,
            namespace=args.namespace, output=args.output, native_policies=args.native_policies)


def run(args: argparse.Namespace) -> int:
    try:
        config = AuditConfig.from_flags(args, args.evaluator)
        judged, note = _judge_cluster(config) if config.cluster is not None else _judge_files(config)
    except SetupError as exc:
        return command_line.error(str(exc))
    if note is not None:  # on stderr, before the results: stdout stays the format's own
        print(note, file=sys.stderr)
    if config.baseline is not None:
        return _print_impact(config.output, judged)
    return _print(config.output, judged)


# -- inputs ------------------------------------------------------------------------------------
def _registry(config: AuditConfig) -> CRDRegistry:
    """The bundled CRDs with the ``--crd`` ones added, each in place of the bundled CRD of its
    name (as ``validate``)."""
    try:
        given = [doc for raw in config.crds for doc in crd_documents(Path(raw))
                 if isinstance(doc.content, dict) and doc.content.get("kind") == CUSTOM_RESOURCE_DEFINITION.kind]
        one_crd_per_name(given)
        return crd_registry(CRDSource(kubeai_crd=config.kubeai_crd, added=tuple(given)), config.evaluator)
    except CRDLoadError as exc:
        raise SetupError(f"--crd: {exc}") from None


def _policies(source: PolicySource, flag: str, evaluator: Evaluator, registry: CRDRegistry) -> PolicySet:
    try:
        return load_policy_set(source, evaluator, registry, native=True)
    except ActionsError as exc:
        raise SetupError(str(exc)) from None
    except PolicyLoadError as exc:
        raise SetupError(f"{flag}: {exc}") from None


def _policy_sets(config: AuditConfig, registry: CRDRegistry) -> tuple[PolicySet, PolicySet | None]:
    """The policies, and the impact preview's baseline (None: no preview)."""
    policies = _policies(config.policies, "--policies", config.evaluator, registry)
    baseline = _policies(config.baseline, "--baseline-policies", config.evaluator, registry) \
        if config.baseline is not None else None
    return policies, baseline


def _judge_files(config: AuditConfig) -> tuple[list[Judged], str | None]:
    """The objects of the files judged, and the note on what was not checked (None: nothing).
    A dump is the cluster's view of the kinds it holds (``kubectl get models -A`` lists them
    all), not of the kinds it does not hold: those are unknown unless --state shows them, as
    ``validate --state`` takes a state (``webhook.state.knowledge``)."""
    found, errors = documents.read(list(config.paths), node_lines=config.output == "junit")  # (lines cost: junit only)
    if errors:
        raise SetupError(str(errors[0]))
    registry = _registry(config)
    policies, baseline = _policy_sets(config, registry)
    extra, state_errors = documents.read(list(config.state))
    if state_errors:
        raise SetupError(f"--state: {state_errors[0]}")
    inputs: list[tuple[dict[str, Any], documents.Document]] = []
    for doc in found:
        obj = doc.content
        if isinstance(obj, dict) and isinstance(obj.get("apiVersion"), str) and isinstance(obj.get("kind"), str) \
                and obj["apiVersion"] and obj["kind"]:
            inputs.append((_namespaced(registry, obj, config.namespace), doc))
    if not inputs and not config.allow_empty:  # a pipeline that lost its dump must not pass
        raise SetupError(NO_OBJECTS)
    # the objects audited are the state too (a dump is the cluster's view), then --state
    objects = [obj for obj, _ in inputs if _named(obj)]
    try:
        objects += read_objects(extra)
    except StateLoadError as exc:
        raise SetupError(f"--state: {exc}") from None
    knowledge = kinds_held(objects, "state" if config.state else "dump")
    state = FileState(objects=objects, knowledge=knowledge)
    auditor = Auditor(registry, policies, state)
    before = Auditor(registry, baseline, state) if baseline is not None else None
    out = []
    for obj, doc in inputs:
        start = time.perf_counter()
        audit = auditor.audit(obj)
        if audit.results:  # a kind nothing judges (a Deployment in the dump) says nothing
            out.append(Judged(audit, doc.origin.file, doc.line_of(("metadata",)),
                              before.audit(obj) if before else None, time.perf_counter() - start))
    unchecked = Counter(item for j in out for item in j.audit.unchecked)
    note = f"note: {unchecked_text(unchecked)}; pass them with --state PATH, or audit the cluster " \
           "(--kubeconfig FILE)" if unchecked else None
    return out, note


def _named(obj: dict[str, Any]) -> bool:
    name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
    return isinstance(name, str) and bool(name)


def _namespaced(registry: CRDRegistry, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """``obj``, in ``namespace`` when its kind is namespaced and it names none (as kubectl applies it)."""
    served = registry.served(obj["apiVersion"], obj["kind"])
    meta = obj.get("metadata")
    if served is None or not served.namespaced or not isinstance(meta, dict) or meta.get("namespace"):
        return obj
    obj = copy.copy(obj)
    obj["metadata"] = {**meta, "namespace": namespace}
    return obj


def _judge_cluster(config: AuditConfig) -> tuple[list[Judged], str | None]:
    from webhook.offline.cluster_read import ClusterReadError, api_client, read_cluster, read_state

    assert config.cluster is not None and config.cluster.kubeconfig is not None
    where = f"--kubeconfig {config.cluster.kubeconfig}"
    if not config.cluster.kubeconfig.is_file():
        raise SetupError(f"{where}: no such file")
    shipped = _registry(config)
    policies, baseline = _policy_sets(config, shipped)
    kinds = Auditor(shipped, policies, FileState(objects=[])).audited_kinds()
    if baseline is not None:
        kinds = sorted(set(kinds) | set(Auditor(shipped, baseline, FileState(objects=[])).audited_kinds()))
    native: tuple[WatchedKind, ...] = ()
    params: tuple[WatchedKind, ...] = ()
    discover = None
    try:
        client = api_client(config.cluster)
        if config.native_policies:
            from webhook.controller.kubeapi import KubeApi

            # a param kind of a custom resource: its plural and scope as discovery serves them
            discover = KubeApi(client, timeout=config.timeout).served_kind
            # the cluster's policies first: what their params are decides what else is read
            policy_state = read_state(client, timeout=config.timeout, kinds=native_policy_watches())
            native = native_policy_watches()
            params = tuple(w for w in native_policy_watches(*_param_kinds(policy_state, config.evaluator, discover))
                           if w not in native)
            kinds = sorted(set(kinds) | set(_served_kinds(shipped)))  # a VAP may match any kind judged
        found = read_cluster(client, kinds, config.evaluator, timeout=config.timeout, native=native, params=params)
    except ClusterReadError as exc:
        raise SetupError(f"{where}: {exc}") from None
    try:
        notes: list[str] = []
        if config.native_policies:
            cluster_policies = ClusterNativePolicies(policies, found.state, config.evaluator, discover=discover)
            policies = cluster_policies.current()
            if baseline is not None:
                baseline = ClusterNativePolicies(baseline, found.state, config.evaluator, discover=discover).current()
            notes += [f"note: left out: {line.splitlines()[0]}"
                      for line in (*cluster_policies.read.problems, *cluster_policies.read.unsupported)]
            notes += [f"note: not judged, params unknown: {line}" for line in cluster_policies.unknown]
        registry = shipped if config.crds else found.registry
        auditor = Auditor(registry, policies, found.state)
        before = Auditor(registry, baseline, found.state) if baseline is not None else None
        out = []
        for obj in found.objects:
            start = time.perf_counter()
            audit = auditor.audit(obj)
            if audit.results:
                out.append(Judged(audit, baseline=before.audit(obj) if before else None,
                                  seconds=time.perf_counter() - start))
        # a live cluster's view knows every kind: only what no view knows (the authorizer) is unchecked
        unchecked = Counter(item for j in out for item in j.audit.unchecked)
        if unchecked:
            notes.append(f"note: {unchecked_text(unchecked)}")
        return out, "\n".join(notes) or None
    finally:
        found.state.stop()


def _param_kinds(state: Any, evaluator: Any, discover: Any) -> tuple[frozenset[tuple[str, str]], Any]:
    """The param kinds the cluster's policies name, and a custom resource's as discovered."""
    from webhook.policy.native.cluster import read

    found = read(state.list(VAP.api_version, VAP.kind), state.list(VAP_BINDING.api_version, VAP_BINDING.kind),
                 evaluator, discover=discover)
    return found.param_kinds, found.discovered


def _served_kinds(registry: CRDRegistry) -> list[Kind]:
    """Every kind ``registry`` serves (at every version)."""
    found = []
    for api_version, kind in registry.kinds():
        served = registry.served(api_version, kind)
        if served is not None:
            found.append(Kind(api_version, kind, served.plural, served.namespaced))
    return found


# -- outputs -----------------------------------------------------------------------------------
def _results(judged: list[Judged]) -> list[dict[str, Any]]:
    return [{"resource": j.audit.resource.as_dict(), "policy": r.policy, "rule": r.rule, "result": r.result,
             "message": r.message} for j in judged for r in j.audit.results]


def summary(judged: list[Judged]) -> str:
    verdicts = [j.audit.verdict for j in judged]
    denied = sum(v.denied for v in verdicts)
    counts = Counter(r.result for j in judged for r in j.audit.results)
    return (f"{len(judged)} object{'s' if len(judged) != 1 else ''} audited: {denied} denied, "
            f"{sum(v.warned for v in verdicts)} warned, {sum(v.audited for v in verdicts)} audited; "
            f"results: {counts['pass']} pass, {counts['fail']} fail, {counts['warn']} warn, {counts['error']} error")


def _print(output: str, judged: list[Judged]) -> int:
    denied = any(j.audit.verdict.denied for j in judged)
    if output == "json":
        sys.stdout.write(json_text(_results(judged)))
        print(summary(judged), file=sys.stderr)
    elif output == "junit":
        sys.stdout.write(junit_xml((_finding(j) for j in judged), "infergate audit"))
        print(summary(judged), file=sys.stderr)
    elif output == "openreports":
        items = [build_report(j.audit) for j in judged]
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout, sort_keys=False,
                       allow_unicode=True)
        print(summary(judged), file=sys.stderr)
    else:
        _table(judged)
    return command_line.FAILED if denied else command_line.OK


def _finding(j: Judged) -> Finding:
    verdict = j.audit.verdict
    problems = [r for r in j.audit.results if r.result in ("fail", "error")]
    status = "failed" if verdict.denied else "error" if verdict.error else "passed"
    message = "\n".join(f"{r.policy} {r.rule}: {r.message}".replace("  ", " ") for r in problems) \
        if status != "passed" else ""
    return Finding(j.file, j.audit.resource.label(), status, j.file, j.line, message,
                   "denied" if verdict.denied else "", j.seconds)


def _table(judged: list[Judged]) -> None:
    paint = command_line.Painter(sys.stdout)
    colours = {"fail": "red", "error": "red", "warn": "yellow"}
    rows = [(r.result if r.result != "fail" or r.denies else "audit", j.audit.resource.label(), r.policy, r.rule,
             r.message) for j in judged for r in j.audit.results if r.result != "pass"]
    if rows:
        widths = [max(len(row[i]) for row in rows + [("RESULT", "OBJECT", "POLICY", "RULE", "")]) for i in range(4)]
        header = ("RESULT", "OBJECT", "POLICY", "RULE", "MESSAGE")
        print("  ".join(h.ljust(w) for h, w in zip(header, widths)) + "  MESSAGE")
        for row in rows:
            cells = [cell.ljust(width) for cell, width in zip(row, widths)]
            cells[0] = paint(cells[0], colours.get(row[0], "yellow")) if paint.enabled else cells[0]
            print("  ".join(cells) + "  " + " ".join(row[4].split()))
    print(summary(judged))


# -- the impact preview ------------------------------------------------------------------------
CHANGES = ("newly denied", "no longer denied", "newly warned", "no longer warned", "newly audited",
           "no longer audited")


def changes(judged: list[Judged]) -> list[tuple[str, Judged]]:
    """(change, object) for every verdict that differs from the baseline's, in ``CHANGES`` order
    then the objects' order; an object whose verdict is the same is never listed."""
    out = []
    for change in CHANGES:
        field = change.rsplit(" ", 1)[1]
        wanted = change.startswith("newly")
        for j in judged:
            before, after = getattr(j.baseline.verdict, field), getattr(j.audit.verdict, field)
            if before != after and after == wanted:
                out.append((change, j))
    return out


def _why(j: Judged, change: str) -> list[str]:
    """The results behind a change: the new failures (newly ...), or the old ones (no longer ...)."""
    field = change.rsplit(" ", 1)[1]
    audit = j.audit if change.startswith("newly") else j.baseline
    test = {"denied": lambda r: r.denies, "warned": lambda r: r.result == "warn", "audited": lambda r: r.audited}[field]
    return [f"{r.policy} {r.rule}: {' '.join(r.message.split())}" if r.rule else f"{r.policy}: {r.message}"
            for r in audit.results if test(r)]


def _print_impact(output: str, judged: list[Judged]) -> int:
    found = changes(judged)
    if output == "json":
        sys.stdout.write(json_text([{"change": change, "resource": j.audit.resource.as_dict(),
                                     "results": _why(j, change)} for change, j in found]))
    else:
        groups: dict[tuple[str, str, str], list[Judged]] = {}
        for change, j in found:
            groups.setdefault((change, j.audit.resource.kind, j.audit.resource.namespace), []).append(j)
        for (change, kind, namespace), members in groups.items():
            where = f"in {namespace}" if namespace else "(cluster-scoped)"
            print(f"{change}: {len(members)} {_plural(kind, len(members))} {where}")
            for j in members:
                print(f"  {_name(j.audit.resource)}")
                for line in _why(j, change):
                    print(f"    {line}")
    counts = Counter(change for change, _ in found)
    line = ", ".join(f"{counts[c]} {c}" for c in CHANGES if counts[c]) or "no verdict changes"
    print(f"{len(judged)} objects compared: {line}", file=sys.stderr if output == "json" else sys.stdout)
    return command_line.FAILED if counts["newly denied"] else command_line.OK


def _plural(kind: str, n: int) -> str:
    if n == 1:
        return kind
    return kind + ("es" if kind.endswith(("s", "x", "ch", "sh")) else "s")


def _name(resource: ResourceRef) -> str:
    return f"{resource.kind} {resource.namespace}/{resource.name}" if resource.namespace else \
        f"{resource.kind} {resource.name}"
