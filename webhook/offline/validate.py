"""``infergate validate``: what the cluster would answer to each manifest, before applying it.

Every document is judged by ``judge_document`` — the seam where the admission chain (the
webhook's policies) joins the apiserver's own handling; ``--crd-only`` keeps to the latter.
Every document gets one :class:`Result` naming its source (file, line, index): valid,
invalid, skipped (a kind with no schema, a file that is no Kubernetes object) or an error
(it cannot be read); a problem with one file never stops the others. Built-in kinds
(ConfigMap, Deployment, ...) are checked against Kubernetes' own schemas (``builtin_kinds.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import yaml

from webhook import command_line, documents
from webhook.admission.chain import (AdmissionChain, is_attribution, native_mutation, native_validation,
                                     offline_request)
from webhook.policy.native.mutating import MutatingAnswer, Reinvocation
from webhook.apiversion import group_of
from webhook.documents import Document, InputFile, Origin
from webhook.kinds import CUSTOM_RESOURCE_DEFINITION
from webhook.offline.builtin_kinds import BuiltinSchemas, is_builtin_group, status_as_admitted
from webhook.offline import findings
from webhook.offline.ci import Finding, Note, Status, github_annotations, junit_xml, sarif
from webhook.offline.kustomize import (BASE_NOTE, KUSTOMIZATION_NAMES, KUSTOMIZE_FILE, PATCH, KustomizeLayout,
                                       RendererMissing, find_renderer, rendered_inputs)
from webhook.offline.parallel import available_cpus, map_ordered
from webhook.offline.progress import Progress
from webhook.offline.request_limits import too_large_status
from webhook.inputs.crds import CRDSource, crd_registry
from webhook.inputs.kube import KubeClientConfig
from webhook.inputs.policies import PolicySource, load_policy_set
from webhook.policy import PolicyLoadError, PolicySet
from webhook.policy.actions import ActionsError
from webhook.schema import CRDLoadError, CRDRegistry, Outcome
from webhook.schema.near_miss import hint
from webhook.schema.registry import crd_documents, one_crd_per_name
from webhook.schema.bundled import DEFAULT_KUBEAI_CRD, KUBEAI_CRDS
from webhook.schema.field_validation import DIRECTIVES, FieldValidation
from webhook.policy.unknown import kinds_read, unchecked_text
from webhook.state import (EVERYTHING, ClusterState, FileState, Knowledge, is_kustomize_file, kinds_held,
                           place_namespace, state_objects)
from webhook.state.knowledge import cluster_scoped_builtin, presence

if TYPE_CHECKING:
    from webhook.cel import Evaluator

_CRD_KIND = CUSTOM_RESOURCE_DEFINITION.kind


@dataclass
class Judgement:
    """The answer for one document: as ``-o json`` prints it."""

    allowed: bool
    status: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)
    object: dict[str, Any] | None = None
    patch: list[dict[str, Any]] = field(default_factory=list)  # the mutating webhook's JSON patch
    explain: list[dict[str, Any]] | None = None  # per policy rule: expression, values seen, verdict
    audit: list[dict[str, Any]] = field(default_factory=list)  # failures admitted under Audit (VAP's records)
    rules: dict[str, str] = field(default_factory=dict)  # a denial's or warning's text -> its policy rule
    # what rules were left unchecked for, the state not showing it: (what, unit) each (the note)
    unchecked: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = {"allowed": self.allowed, "status": self.status, "warnings": self.warnings, "object": self.object}
        if self.audit:
            out["audit"] = self.audit
        if self.patch:
            out["patch"] = self.patch
        if self.explain is not None:
            out["explain"] = self.explain
        return out


class UnknownKind(ValueError):
    """No CRD serves the document's apiVersion/kind."""


def judge_document(registry: CRDRegistry, obj: dict[str, Any], old: dict[str, Any] | None = None,
                   subresource: str | None = None, *, namespace: str | None = None,
                   crd_only: bool = False, chain: AdmissionChain | None = None,
                   explain: bool = False, field_validation: FieldValidation = "Strict") -> Judgement:
    """Judge one write as the cluster would: the apiserver's handling of the custom resource.

    This is the one place a document is judged; the webhook's admission chain joins here
    (it runs between ``CRDRegistry.prepare`` and ``CRDRegistry.validate``) unless ``crd_only``.
    ``field_validation``: the client's ``?fieldValidation=`` (kubectl's default, Strict).
    """
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
        raise UnknownKind("the document has no apiVersion and kind")
    if registry.served(api_version, kind) is None:
        raise UnknownKind(f"no CustomResourceDefinition serves kind {kind!r} in apiVersion {api_version!r}")
    if chain is not None and not crd_only:
        request = offline_request(obj, old, subresource, namespace=namespace, field_validation=field_validation)
        whole = chain.run(request, explain=explain)
        traces = [dataclasses.asdict(t) for t in whole.traces] if explain else None
        return Judgement(whole.allowed, whole.status, whole.warnings, whole.object, whole.patch, traces,
                         whole.audit_failures, whole.rules, whole.unchecked)
    outcome: Outcome = registry.handle("UPDATE" if old is not None else "CREATE", obj, old, subresource,
                                       namespace=namespace, field_validation=field_validation)
    return Judgement(outcome.allowed, outcome.status, outcome.warnings, outcome.object)


DESCRIPTION = """\
Validate manifests as the cluster would answer them: the CRDs' own schema, defaults and CEL
rules exactly as kube-apiserver applies them, then the webhook's admission policies. Built-in
kinds (ConfigMap, Deployment, ...) are checked against Kubernetes 1.36's own schemas. Bundled:
GIE v1 InferencePool, llm-d.ai v1alpha2 InferenceObjective/InferenceModelRewrite, KubeAI v0.23
Model, Deckhouse InferenceServiceClass/InferenceService, Gateway API v1.6 HTTPRoute, Gateway,
GatewayClass, GRPCRoute and ReferenceGrant, and GIE's earlier inference.networking.x-k8s.io
InferencePool and InferenceModel (v1alpha1, v1alpha2). --crd adds CRDs and replaces one of the
same name; --no-bundled-crds drops the bundled ones.

Every document gets one line naming its file and line (valid, invalid, skipped or an error),
then one summary: "N valid, M invalid, K skipped, E errors, in F files". Unknown fields are
refused as kubectl's requests are (--field-validation Strict); so are documents over the
apiserver's size limits. A document of a kind with no schema (a Kustomization, another
project's CRD) is skipped and counted (--strict: an error), with a did-you-mean when its
apiVersion or kind is a near miss of a known one: that skip is a warning in every CI format
(--fail-on-warning makes warnings fail the run); a file that cannot be read is
reported in its place, and the other files are still validated; no documents at all is an
error (--allow-empty). In a kustomize repository the kustomization files and the patches they
name are skipped (never judged as objects), a base's refusal says its overlays may complete it,
and --kustomize validates what each overlay renders instead.

The policies' lookups (pools, classes, namespaces, Services, Pods, the KubeAI config) read the
documents given unless --state or a live cluster (--cluster, --kubeconfig, --context) is named:
what the inputs do not show is unknown, neither denied nor warned about, and one note on stderr
says what was not checked ("note: not checked: no InferencePool of inference.networking.k8s.io in
the input (2 lookups), ...")."""

EXAMPLES = """\
infergate validate manifests/                           # every .yaml/.yml/.json, recursively
helm template charts/app | infergate validate -         # stdin
infergate validate new.yaml --old stored.yaml           # an UPDATE: transition rules, ratcheting
infergate validate manifests/ --state examples/state   # policies look up the demo cluster's objects
infergate validate manifests/ --kubeconfig ~/.kube/prod # ... or a live cluster's (read-only)
infergate validate manifests/ -o github                 # GitHub Actions annotations on the pull request
infergate validate . --exclude 'charts/*/templates/*'   # leave out what is not a manifest yet
infergate validate manifests/ --field-validation Warn   # unknown fields warned, as the apiserver's default
infergate validate manifests/ -o junit > report.xml     # JUnit XML for CI (summary on stderr)
infergate validate deploy/ --kustomize                  # each overlay as kustomize renders it
"""

OUTPUTS = ("text", "json", "yaml", "junit", "github", "sarif")
EXIT_CODES = """\
exit status:
  0  every document valid (or skipped)
  1  some document is invalid: the cluster would refuse it; with --fail-on-warning, also any warning
     (the apiserver's or a policy's, or a document skipped as a near miss of a known kind)
  2  usage or input error (a bad flag, a missing or unreadable file, broken YAML, no documents at all)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.epilog = command_line.epilog(EXAMPLES, exit_codes=EXIT_CODES)
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="manifests to validate: files (YAML or JSON, many documents each), directories "
                             "(.yaml, .yml and .json, recursively) or - for stdin")
    parser.add_argument("-f", "--filename", action="append", default=[], metavar="PATH",
                        help="the same as a PATH argument (kubectl's spelling); repeatable")
    parser.add_argument("--old", action="append", default=[], metavar="PATH",
                        help="the objects as stored: a document matching one by apiVersion/kind/namespace/name is "
                             "an UPDATE (an --old object that no document matches is an error); repeatable")
    parser.add_argument("--subresource", choices=["status"], help="validate writes to the /status subresource")
    parser.add_argument("--crd", action="append", default=[], metavar="PATH",
                        help="more CRDs to validate against: files or directories, also `kubectl get crd -o yaml` "
                             "dumps; repeatable. They add to the bundled CRDs, and one named like a bundled CRD "
                             "(metadata.name) replaces it, every version; CRDs among the manifests do the same. "
                             "Two different CRDs of one name among these files are an error")
    parser.add_argument("--no-bundled-crds", action="store_true",
                        help="leave out the bundled CRDs: only --crd and the CRDs among the manifests are known")
    parser.add_argument("--kubeai-crd", choices=list(KUBEAI_CRDS),
                        help=f"the bundled KubeAI Model CRD (default {DEFAULT_KUBEAI_CRD}: the current one)")
    parser.add_argument("--crd-only", action="store_true",
                        help="only the apiserver's own handling (schema, defaults, CEL rules), no webhook policies")
    parser.add_argument("--field-validation", choices=DIRECTIVES, default="Strict",
                        help="a field the kind's schema does not have, as kube-apiserver's ?fieldValidation= "
                             "(built-in and custom kinds alike): Strict (default, kubectl's) refuses the object "
                             '(400: unknown field "spec.x", every one listed), Warn warns (the apiserver\'s default '
                             "for clients that name none), Ignore drops it without a word")
    parser.add_argument("--strict", action="store_true",
                        help="a document of a kind with no schema, or that is no Kubernetes object, is an error "
                             "(default: skipped and counted)")
    parser.add_argument("--kustomize", action="store_true",
                        help="render every kustomization among the inputs that no other one includes (the "
                             "overlays) with `kustomize build`, or `kubectl kustomize` when kustomize is not on "
                             "PATH, and validate what it renders in place of its files, each object attributed to "
                             "its kustomization file (default: the files as written; patches are skipped, and a "
                             "base's problems say overlays may complete it)")
    parser.add_argument("--fail-on-warning", action="store_true",
                        help="exit 1 when anything warns, as when a document is invalid: a warning of the apiserver "
                             "or of a policy, or a document skipped whose apiVersion or kind is a near miss of a "
                             "known one (kubeai.org/v1beta1 for kubeai.org/v1)")
    parser.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="leave out the files and directories under a directory PATH whose path relative to "
                             "it (charts/*/templates/*) or whose name (*.tpl.yaml, vendor) matches GLOB (* also "
                             "matches /; a trailing / matches directories only: vendor/); files named on the "
                             "command line are always read; repeatable")
    parser.add_argument("--allow-empty", action="store_true",
                        help="no documents at all in the input (empty stdin, a directory without manifests) is "
                             "success (default: an error, exit 2)")
    parser.add_argument("-n", "--namespace", default="default",
                        help="namespace of namespaced objects that name none (default: default)")
    parser.add_argument("--state", action="append", default=[], metavar="PATH",
                        help="the cluster the policies look up (classes, catalog, namespaces, Pods, Services, "
                             "pools, the KubeAI config, ...): manifest files or directories, e.g. a GitOps "
                             "repository or examples/state (the demo cluster); a kind with no object there is "
                             "not checked, documents that are no Kubernetes objects (kustomization.yaml, Helm "
                             "values) are skipped and counted. Default: the inputs themselves, where only what "
                             "they show is known (an absent pool, namespace, class or profile is not checked, "
                             "and a note says what was not); repeatable")
    parser.add_argument("--cluster", action="store_true",
                        help="the policies look up the live cluster of the current kubeconfig context ($KUBECONFIG, "
                             "else ~/.kube/config), read-only, instead of --state")
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="the same as --cluster, with this kubeconfig")
    parser.add_argument("--context", help="the same as --cluster, with this kubeconfig context")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="how long reading the live cluster may take (default: 30)")
    parser.add_argument("--policies", metavar="DIR",
                        help="admission policies (default: the shipped policies/): AdmissionPolicy files, and "
                             "ValidatingAdmissionPolicies with their bindings (admissionregistration.k8s.io/v1), "
                             "judged as kube-apiserver does before the webhook; their params are read from the state")
    parser.add_argument("--policy-actions", action="append", metavar="NAME=ACTION[,ACTION][@SELECTOR]",
                        help="validation actions of a policy instead of its own, as serve takes them (Warn: a "
                             "warning, Audit: an audit line, neither fails the run); SELECTOR matches the labels "
                             "of namespaces in --state; repeatable")
    parser.add_argument("--explain", action="store_true",
                        help="show every policy rule evaluated: its expression, the values it saw, the verdict")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text",
                        help="text (default: one line per document, colour on a terminal unless NO_COLOR), "
                             "json/yaml (every answer with its source), junit (JUnit XML), github (workflow "
                             "command annotations: ::error and ::warning with file and line), sarif (SARIF 2.1.0 "
                             "for code scanning: errors and warnings, a rule per policy rule)")
    parser.add_argument("-j", "--jobs", type=int, default=available_cpus(), metavar="N",
                        help="processes judging documents in large runs (default: the CPUs available)")


def _identity(obj: Any) -> tuple[Any, ...]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return obj.get("apiVersion"), obj.get("kind"), meta.get("namespace"), meta.get("name")


def _is_crd(content: Any) -> bool:
    return isinstance(content, dict) and content.get("kind") == _CRD_KIND


@dataclass(slots=True)
class Result:
    """One document's answer, or why it has none; small, it is all that comes back from a worker."""

    origin: Origin
    outcome: str  # "valid" | "invalid" | "skipped" | "error"
    summary: str  # valid/invalid: the line kubectl would print; skipped/error: why
    judgement: Judgement | None = None
    name: str = ""  # Kind/name, for the CI formats
    old: tuple[Any, ...] | None = None  # the --old object it was judged against
    near_miss: bool = False  # skipped, its apiVersion or kind a near miss of a known one: a warning
    seconds: float = 0.0  # the time it took to read and judge

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.origin.as_dict(), "result": self.outcome}
        if self.judgement is not None:
            out.update(self.judgement.as_dict())
        elif self.outcome == "skipped":
            out["reason"] = self.summary
            if self.near_miss:
                out["warnings"] = [self.summary]
        else:
            out["error"] = self.summary
        return out

    @property
    def warnings(self) -> list[str]:
        """Its warnings: the apiserver's and the policies', or the near miss it was skipped for."""
        if self.judgement is not None:
            return self.judgement.warnings
        return [self.summary] if self.near_miss else []

    def finding(self) -> Finding:
        status, rule = _FINDINGS[self.outcome]
        message = self.summary if self.outcome != "valid" else ""  # a denial: what kubectl prints
        judgement = self.judgement
        problems = findings.problems(judgement.status, judgement.rules) if judgement and not judgement.allowed else ()
        warned = findings.warnings(judgement.warnings, judgement.rules) if judgement else ()
        if self.near_miss:
            warned = (Note(self.summary, findings.NEAR_MISS),)
        return Finding(self.origin.file, self.name or self.origin.where, status, self.origin.file, self.origin.line,
                       message, rule, self.seconds, problems=problems, warnings=warned)


# a result's outcome -> (its status in the CI formats, the SARIF rule of a problem)
_FINDINGS: dict[str, tuple[Status, str]] = {
    "valid": ("passed", ""), "invalid": ("failed", "denied"), "skipped": ("skipped", ""),
    "error": ("error", "input-error"),
}


def _error(origin: Origin, message: str) -> Result:
    return Result(origin, "error", message)


def _label(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = meta.get("name") or meta.get("generateName") or ""
    return f"{obj.get('kind')}/{name}" if name else str(obj.get("kind"))


# A file larger than this is parsed in the parent and its documents judged one by one across the
# workers (one worker parsing a file of thousands of documents would leave the others idle).
_LARGE_FILE = 64 * 1024


def _parse_here(source: InputFile) -> bool:
    """Whether the parent parses ``source`` before the workers start: stdin, a file that may hold a
    CRD (every CRD joins the registry before anything is judged; ``kind`` spelled through an escape —
    JSON's ``\\u``, YAML's ``\\x`` — counts as may) or a large one. The rest the workers parse."""
    text = source.text
    return text is not None and (source.name == documents.STDIN or len(text) > _LARGE_FILE
                                 or _CRD_KIND in text or "\\" in text)


Unit = InputFile | Document | Result  # parse and judge; judge; already answered


@dataclass
class _Setup:
    inputs: list[InputFile]
    units: list[Unit]
    olds: dict[tuple[Any, ...], Document]
    registry: CRDRegistry
    chain: AdmissionChain | None
    state: StateSource | None = None
    kustomize: KustomizeLayout = dataclasses.field(default_factory=KustomizeLayout)


@dataclass(frozen=True)
class StateSource:
    """Where the policies' cluster view came from, for the note: ``knowledge.source`` is
    "inputs" (no --state: the documents given), "state" (--state) or "cluster" (--kubeconfig);
    ``skipped``: documents of --state that are no Kubernetes objects."""

    knowledge: Knowledge
    skipped: int = 0


class SetupError(ValueError):
    """What stops the run before any document is judged: a bad --crd, --old, --state or --policies."""


@dataclass(frozen=True)
class ValidateConfig:
    """What ``infergate validate`` runs with, from its flags (checked by :meth:`from_flags`)."""

    evaluator: Evaluator
    paths: tuple[str, ...]  # files, directories, "-" (stdin)
    policies: PolicySource
    old: tuple[str, ...] = ()  # the objects as stored (an UPDATE)
    subresource: str | None = None  # "status": writes to /status
    crds: tuple[str, ...] = ()  # --crd: files and directories
    bundled_crds: bool = True
    kubeai_crd: str | None = None
    crd_only: bool = False  # the apiserver's own handling, no webhook policies
    field_validation: str = "Strict"
    strict: bool = False
    kustomize: bool = False
    fail_on_warning: bool = False
    exclude: tuple[str, ...] = ()
    allow_empty: bool = False
    namespace: str = "default"  # of namespaced objects that name none
    state: tuple[str, ...] = ()  # --state: files and directories
    cluster: KubeClientConfig | None = None  # the live cluster the policies look up (instead of --state)
    timeout: float = 30.0  # seconds reading the cluster may take
    explain: bool = False
    output: str = "text"
    jobs: int = 1

    @classmethod
    def from_flags(cls, args: argparse.Namespace, evaluator: Evaluator) -> ValidateConfig:
        """The configuration of ``add_arguments``' flags; ``SetupError`` (one line) for a wrong one."""
        paths = (*args.paths, *args.filename)
        if not paths:
            raise SetupError("validate: no input: give files, directories or - (stdin)")
        if args.jobs < 1:
            raise SetupError("validate: -j/--jobs must be at least 1")
        if args.timeout <= 0:
            raise SetupError("validate: --timeout must be above 0")
        live = bool(args.cluster or args.kubeconfig or args.context)  # --cluster, --kubeconfig or --context
        if args.state and live:
            raise SetupError("validate: give --state or a cluster (--cluster, --kubeconfig, --context), not both")
        return cls(
            evaluator=evaluator, paths=paths,
            policies=PolicySource(Path(args.policies) if args.policies else None, tuple(args.policy_actions or ())),
            old=tuple(args.old), subresource=args.subresource, crds=tuple(args.crd),
            bundled_crds=not args.no_bundled_crds, kubeai_crd=args.kubeai_crd, crd_only=args.crd_only,
            field_validation=args.field_validation, strict=args.strict, kustomize=args.kustomize,
            fail_on_warning=args.fail_on_warning, exclude=tuple(args.exclude), allow_empty=args.allow_empty,
            namespace=args.namespace, state=tuple(args.state),
            cluster=KubeClientConfig(kubeconfig=Path(args.kubeconfig) if args.kubeconfig else None,
                                     context=args.context, in_cluster=False) if live else None,
            timeout=args.timeout, explain=args.explain, output=args.output, jobs=args.jobs)


def _setup(config: ValidateConfig) -> _Setup:
    """Everything loaded once before judging (workers fork after this and share it)."""
    inputs = documents.read_inputs(list(config.paths), exclude=config.exclude, names=KUSTOMIZATION_NAMES)
    kustomize = KustomizeLayout.of(inputs)
    if config.kustomize:
        try:
            renderer = find_renderer()
        except RendererMissing as exc:
            raise SetupError(f"validate: --kustomize: {exc}") from None
        inputs = rendered_inputs(inputs, kustomize, renderer)
    old_documents, old_errors = documents.read(list(config.old))
    if old_errors:
        raise SetupError(f"--old: {old_errors[0]}")
    for source in inputs:
        if _parse_here(source):
            source.parsed = source.parse()
    registry = _registry(config, inputs)
    policies = None if config.crd_only else _policies(config.policies, config.evaluator, registry)
    # without --state the inputs are the state: the parent parses the files that may hold an
    # object the policies read (the workers parse the others, as they judge them)
    state_kinds = _kind_pattern(kinds_read(policies.policies)
                                | (policies.native.kinds_read() if policies.native is not None else frozenset())) \
        if policies is not None and not config.state and config.cluster is None else None
    if state_kinds is not None:
        for source in inputs:
            if source.parsed is None and _may_hold(source, state_kinds):
                source.parsed = source.parse()
    units: list[Unit] = []
    for source in inputs:
        if source.parsed is None:
            units.append(source)
            continue
        for doc in source.parsed.documents:  # one by one: any worker can judge any of them
            units.append(_add_crd(registry, doc) if _is_crd(doc.content) else doc)
        if source.parsed.error is not None:
            units.append(_error(source.parsed.error.origin, source.parsed.error.message))
    chain, state = None, None
    if policies is not None:
        cluster, state = _state(config, registry, inputs, policies, kustomize)
        chain = AdmissionChain(registry, policies, cluster)
    olds: dict[tuple[Any, ...], Document] = {}
    for doc in old_documents:
        if isinstance(doc.content, dict):
            olds.setdefault(_identity(doc.content), doc)
    return _Setup(inputs, units, olds, registry, chain, state, kustomize)


def _kind_pattern(kinds: frozenset[tuple[str, str]]) -> list[tuple[re.Pattern[str], re.Pattern[str], str]]:
    """Per group of ``kinds`` (apiVersion, kind): a document's top-level ``kind:`` of one of them
    (YAML: at the start of a line), the same anywhere (JSON, flow mappings, a ``List``'s items),
    and the group the document must name (KubeAI's Model is not the catalog's); last, a bare
    KubeAI config."""
    by_group: dict[str, set[str]] = {}
    for api_version, kind in kinds:
        by_group.setdefault(group_of(api_version), set()).add(re.escape(kind))
    out = []
    for group, names in sorted(by_group.items()):
        alternatives = "|".join(sorted(names))
        out.append((re.compile(rf"""^kind\s*:\s*["']?(?:{alternatives})\b""", re.MULTILINE),
                    re.compile(rf"""\bkind["']?\s*:\s*["']?(?:{alternatives})\b"""), group))
    config = re.compile(r"^(?:resourceProfiles|cacheProfiles)\s*:", re.MULTILINE)
    return out + [(config, config, "")]


# a document whose kind may not start a line: JSON, a flow mapping, a List's items
_NESTED = re.compile(r"""^\s*[{\[]|\n[{\[]|^kind\s*:\s*["']?\w*List\b""", re.MULTILINE)


def _may_hold(source: InputFile, kinds: list[tuple[re.Pattern[str], re.Pattern[str], str]]) -> bool:
    """Whether ``source`` may hold an object of the kinds the policies read (a cheap look at its
    text: a false yes costs a parse in the parent, never a wrong answer)."""
    text = source.text
    if text is None:
        return False
    nested = _NESTED.search(text) is not None
    return any(group in text and (top if not nested else anywhere).search(text) is not None
               for top, anywhere, group in kinds)


def _registry(config: ValidateConfig, inputs: list[InputFile]) -> CRDRegistry:
    """The bundled CRDs (unless ``--no-bundled-crds``) with the ``--crd`` ones added, each
    replacing the bundled CRD of its name. Two different CRDs of one name among the ``--crd``
    files and the manifests are a ``SetupError`` naming both (the same CRD twice is fine)."""
    try:
        given = [doc for raw in config.crds for doc in crd_documents(Path(raw)) if _is_crd(doc.content)]
    except CRDLoadError as exc:
        raise SetupError(f"--crd: {exc}") from None
    among_inputs = [doc for source in inputs if source.parsed is not None
                    for doc in source.parsed.documents if _is_crd(doc.content)]
    try:
        one_crd_per_name([*given, *among_inputs])
    except CRDLoadError as exc:
        raise SetupError(str(exc)) from None
    try:
        return crd_registry(CRDSource(kubeai_crd=config.kubeai_crd, bundled=config.bundled_crds, added=tuple(given)),
                            config.evaluator)
    except CRDLoadError as exc:
        raise SetupError(f"--crd: {exc}") from None


def _add_crd(registry: CRDRegistry, doc: Document) -> Result:
    """A CRD among the manifests joins the registry (as after ``kubectl apply``: in place of the
    one of its name), if the apiserver would admit it."""
    try:
        warnings = registry.add_checked(doc.content, doc.where, replace=True)
    except CRDLoadError as exc:
        return _error(doc.origin, str(exc).removeprefix(f"{doc.where}: "))
    name = (doc.content.get("metadata") or {}).get("name") or ""
    judgement = Judgement(True, None, warnings, doc.content)
    return Result(doc.origin, "valid", f"customresourcedefinition.apiextensions.k8s.io/{name} valid", judgement,
                  f"{_CRD_KIND}/{name}")


def _policies(source: PolicySource, evaluator: Evaluator, registry: CRDRegistry) -> PolicySet:
    """``--policies`` under ``--policy-actions`` (as ``serve`` takes it; namespaces are matched
    by their labels in ``--state``), type-checked against ``registry``'s CRDs."""
    try:
        policies = load_policy_set(source, evaluator, registry, native=True)
    except ActionsError as exc:
        raise SetupError(str(exc)) from None
    except PolicyLoadError as exc:
        raise SetupError(f"--policies: {exc}") from None
    if policies.native is not None:  # what the apiserver would write into status.typeChecking
        for warning in policies.native.warnings:
            print(f"Warning: {warning}", file=sys.stderr)
    return policies


def _state(config: ValidateConfig, registry: CRDRegistry, inputs: list[InputFile],
           policies: PolicySet | None, kustomize: KustomizeLayout) -> tuple[ClusterState, StateSource]:
    """The cluster view the policies read: the live cluster's (--cluster/--kubeconfig/--context),
    the manifests of --state, or else the inputs themselves; and what it knows."""
    if config.cluster is not None:
        params = policies.native.kinds_read() if policies is not None and policies.native is not None else frozenset()
        return _cluster_state(config.cluster, config.timeout, registry, params), StateSource(EVERYTHING)

    def namespaced(obj: dict[str, Any]) -> dict[str, Any]:
        return place_namespace(obj, config.namespace, _namespaced(registry, obj))

    if not config.state:
        parsed = [doc for source in inputs if source.parsed is not None for doc in source.parsed.documents
                  if kustomize.role(doc.origin.file) not in (PATCH, KUSTOMIZE_FILE)]  # a patch is no object
        objects, _ = state_objects(parsed)  # (what is no object is said in its place among the results)
        knowledge = presence(objects)
        return FileState(objects=[namespaced(o) for o in objects], knowledge=knowledge), StateSource(knowledge)
    # the state may be the inputs themselves (a repository of mixed files): what is wrong with an
    # input is said in its place among the results; the rest must be readable
    names = {source.name for source in inputs}
    found, errors = documents.read(list(config.state))
    errors = [e for e in errors if e.file not in names]
    if errors:
        raise SetupError(f"--state: {errors[0]}")
    layout = KustomizeLayout.of(sorted({doc.origin.file for doc in found}))
    whole = [doc for doc in found if layout.role(doc.origin.file) != PATCH]  # a patch is a partial object
    objects, skipped = state_objects(whole)
    skipped += len(found) - len(whole)
    objects = [namespaced(o) for o in objects]
    knowledge = kinds_held(objects, "state")
    return FileState(objects=objects, knowledge=knowledge), StateSource(knowledge, skipped)


def _namespaced(registry: CRDRegistry, obj: dict[str, Any]) -> bool:
    """Whether ``obj``'s kind is namespaced: a CRD's says so, a built-in kind's is known; a kind
    of neither (no CRD here serves it) is left where the document puts it."""
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    served = registry.served(api_version, kind)
    if served is not None:
        return served.namespaced
    return is_builtin_group(api_version) and not cluster_scoped_builtin(group_of(api_version), kind)


def _cluster_state(cluster: KubeClientConfig, timeout: float, registry: CRDRegistry | None = None,
                   wanted: frozenset[tuple[str, str]] = frozenset()) -> ClusterState:
    """The live cluster's view, listed once, read-only (``cluster_read.read_state``): what the
    policies look up, and ``wanted``, kinds to list whole besides (the params of native policies:
    every ConfigMap, not only KubeAI's config)."""
    from webhook.offline.cluster_read import ClusterReadError, api_client, read_state
    from webhook.inputs.watches import lookup_watches_with

    where = f"--kubeconfig {cluster.kubeconfig}" if cluster.kubeconfig else "the cluster"
    if cluster.kubeconfig and not cluster.kubeconfig.is_file():
        raise SetupError(f"{where}: no such file")
    kinds = lookup_watches_with(wanted, registry.served if registry is not None else None)
    try:
        return read_state(api_client(cluster), timeout=timeout, kinds=kinds)
    except ClusterReadError as exc:
        raise SetupError(f"{where}: {exc}") from None


class Judge:
    """Gives every document its :class:`Result`; the workers share one (forked, nothing sent)."""

    def __init__(self, config: ValidateConfig, setup: _Setup) -> None:
        self.config, self.setup, self.registry = config, setup, setup.registry
        self.builtins = BuiltinSchemas()

    def unit(self, i: int) -> list[Result]:
        """Parse (in the worker: the parse is a large share of the work) and judge one unit."""
        unit = self.setup.units[i]
        if isinstance(unit, Result):
            return [unit]
        if isinstance(unit, Document):
            return [self.timed(unit)]
        start = time.perf_counter()
        parsed = unit.parse()
        out = [self.timed(doc) for doc in parsed.documents]
        if parsed.error is not None:
            out.append(_error(parsed.error.origin, parsed.error.message))
        parse = (time.perf_counter() - start - sum(r.seconds for r in out)) / len(out) if out else 0.0
        for result in out:  # the file's parse shared by its documents (JUnit's time)
            result.seconds += max(parse, 0.0)
        return out

    def timed(self, doc: Document) -> Result:
        """``document``'s result with the time judging it took."""
        start = time.perf_counter()
        result = self.document(doc)
        result.seconds = time.perf_counter() - start
        return result

    def document(self, doc: Document) -> Result:
        obj, strict = doc.content, self.config.strict
        role = self.setup.kustomize.role(doc.origin.file)
        if role == PATCH:  # a partial object (or a JSON patch): only kustomize applies it, to its target
            return Result(doc.origin, "skipped", PATCH, name=_label(obj) if isinstance(obj, dict) else "")
        if role == KUSTOMIZE_FILE:  # input to kustomize, with or without apiVersion and kind
            return _error(doc.origin, KUSTOMIZE_FILE) if strict else Result(doc.origin, "skipped", KUSTOMIZE_FILE)
        result = self._object(doc, obj, strict)
        if role == BASE_NOTE and result.outcome == "invalid":
            result.summary = in_base(result.summary)
        return result

    def _object(self, doc: Document, obj: Any, strict: bool) -> Result:
        if not isinstance(obj, dict):  # other YAML in the repository (a list of hooks, a value)
            why = f"not a Kubernetes object (a {type(obj).__name__}, not a mapping)"
            return _error(doc.origin, why) if strict else Result(doc.origin, "skipped", why)
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
            why = "not a Kubernetes object (no apiVersion and kind)"
            return _error(doc.origin, why) if strict else Result(doc.origin, "skipped", why)
        too_large = too_large_status(obj)  # the apiserver reads no further, whatever the kind
        if too_large is not None:
            judgement = Judgement(False, too_large, [], None)
            return Result(doc.origin, "invalid", describe(obj, judgement), judgement, _label(obj))
        if self.registry.served(api_version, kind) is None:
            return self._without_crd(doc, obj, api_version, kind)
        key = _identity(obj)
        old_doc = self.setup.olds.get(key)
        old = old_doc.content if old_doc is not None else None
        if self.config.subresource and old is None:
            return _error(doc.origin, "no stored object in --old matches this document")
        try:
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else self.config.namespace
            judgement = judge_document(self.registry, obj, old, self.config.subresource, namespace=namespace,
                                       crd_only=self.config.crd_only, chain=self.setup.chain, explain=self.config.explain,
                                       field_validation=self.config.field_validation)
        except Exception as exc:  # a bug must still end in a message, not a traceback
            return _error(doc.origin, f"internal error: {type(exc).__name__}: {exc}")
        return Result(doc.origin, "valid" if judgement.allowed else "invalid", describe(obj, judgement), judgement,
                      _label(obj), key if old_doc is not None else None)

    def _without_crd(self, doc: Document, obj: dict[str, Any], api_version: str, kind: str) -> Result:
        """A kind no CRD serves: a built-in one against Kubernetes' own schema, else skipped."""
        label = _label(obj)
        answer = self.builtins.answer(obj, self.config.field_validation)
        if answer is not None:
            if answer.allowed and self.config.field_validation != "Strict":
                obj = self.builtins.decoded(obj)  # unknown fields: warned or not, dropped before admission
            key = _identity(obj)
            old_doc = self.setup.olds.get(key)
            old = old_doc.content if old_doc is not None else None
            native = self.setup.chain.policies.current().native if self.setup.chain is not None else None
            unchecked: list[tuple[str, str]] = []
            if answer.allowed and native and native.mutating:
                # the apiserver's MutatingAdmissionPolicies mutate built-in kinds too, before their validation
                mutated = self._native_mutation(native, obj, old)
                if not mutated.allowed:
                    judgement = Judgement(False, mutated.status, answer.warnings, obj, unchecked=mutated.unchecked)
                    return Result(doc.origin, "invalid", describe(obj, judgement), judgement, label,
                                  key if old_doc is not None else None)
                unchecked = mutated.unchecked
                if mutated.object != obj:
                    # a write of the main resource: what the mutations did to status is not kept
                    obj = mutated.object if self.config.subresource else status_as_admitted(obj, mutated.object)
                    decoding = answer.warnings  # the request's own unknown fields, warned at decoding
                    answer = self.builtins.answer(obj, self.config.field_validation) or answer
                    answer.warnings = list(dict.fromkeys([*decoding, *answer.warnings]))
            judgement = Judgement(answer.allowed, answer.status, answer.warnings, obj, unchecked=unchecked)
            if answer.allowed and native:  # the apiserver's ValidatingAdmissionPolicies judge built-in kinds too
                judgement = self._native(native, obj, old, judgement)
                judgement.unchecked[:0] = unchecked
            return Result(doc.origin, "valid" if judgement.allowed else "invalid", describe(obj, judgement), judgement,
                          label, key if old_doc is not None else None)
        if is_kustomize_file(obj):  # input to kustomize: no Kubernetes object at all
            why = "kustomize file, not applied"
            return _error(doc.origin, why) if self.config.strict else Result(doc.origin, "skipped", why, name=label)
        near = hint(api_version, kind, self.registry.kinds())  # "; did you mean ...?" or ""
        why = f"{label} ({api_version}): no schema for this kind{near}"
        if self.config.strict:
            return Result(doc.origin, "error", why, name=label)
        return Result(doc.origin, "skipped", why, name=label, near_miss=bool(near))


    def _builtin_request(self, obj: dict[str, Any], old: dict[str, Any] | None) -> Any:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        group = group_of(obj.get("apiVersion"))
        namespace = "" if cluster_scoped_builtin(group, str(obj.get("kind"))) else \
            meta.get("namespace") if isinstance(meta.get("namespace"), str) else self.config.namespace
        return offline_request(obj, old, self.config.subresource, namespace=namespace,
                               field_validation=self.config.field_validation)

    def _native_mutation(self, native: Any, obj: dict[str, Any], old: dict[str, Any] | None) -> Any:
        """A built-in object through the MutatingAdmissionPolicies (one pass: no webhook of ours
        mutates built-in kinds, so nothing comes after them to reinvoke them for)."""
        request = self._builtin_request(obj, old)
        if request.operation not in ("CREATE", "UPDATE"):
            return MutatingAnswer(obj)
        return native_mutation(native, request, obj, self.registry, self.setup.chain.state, Reinvocation(),
                               self.builtins.unknown_fields)

    def _native(self, native: Any, obj: dict[str, Any], old: dict[str, Any] | None, judged: Judgement) -> Judgement:
        """A built-in object its schema admits, through the ValidatingAdmissionPolicies."""
        request = self._builtin_request(obj, old)
        answer, status = native_validation(native, request, obj, self.registry, self.setup.chain.state)
        warnings = list(dict.fromkeys([*judged.warnings, *answer.warnings]))
        return Judgement(status is None, status, warnings, obj, audit=list(answer.failures),
                         unchecked=list(answer.unchecked))


def in_base(summary: str) -> str:
    """A refusal's line for an object of a kustomize base, which its overlays may complete."""
    first, newline, rest = summary.partition("\n")
    if not newline:
        return f"{summary} ({BASE_NOTE})"
    return f"{first.rstrip().removesuffix(':')} ({BASE_NOTE}): \n{rest}"


def run(args: argparse.Namespace) -> int:
    try:
        config = ValidateConfig.from_flags(args, args.evaluator)
        setup = _setup(config)
    except SetupError as exc:
        return command_line.error(str(exc))
    judge = Judge(config, setup)
    progress = Progress(len(setup.units), "validating")
    try:
        answers = map_ordered(judge.unit, len(setup.units), jobs=config.jobs, progress=progress.advance)
    finally:
        progress.close()
    results = [result for answer in answers for result in answer]
    used = {result.old for result in results if result.old is not None}
    for key, doc in setup.olds.items():  # an --old nothing matched would have quietly made a CREATE
        if key not in used:
            api_version, kind, namespace, name = key
            what = f"{kind} {namespace + '/' if namespace else ''}{name} ({api_version})"
            results.append(_error(doc.origin, f"--old: no document to validate matches {what}"))
    note = state_note(unchecked_counts(results), setup.state) if setup.state is not None else None
    _print(config.output, results, len(setup.inputs), note)
    counts = Counter(result.outcome for result in results)
    if not results and not config.allow_empty:  # a pipeline that lost its manifests must not pass
        return command_line.error("validate: no documents in the input (an empty stdin or file, or no .yaml, "
                                  ".yml or .json file under the directories); --allow-empty accepts that")
    if counts["error"]:
        return command_line.USAGE
    if counts["invalid"] or (config.fail_on_warning and any(result.warnings for result in results)):
        return command_line.FAILED
    return command_line.OK


def unchecked_counts(results: list[Result]) -> Counter:
    """(what, unit) -> how many times rules were left out for it, over every document."""
    return Counter(item for r in results if r.judgement is not None for item in r.judgement.unchecked)


def state_note(unchecked: Counter, state: StateSource) -> str | None:
    """The one note on what the policies did not check, the state not showing it, and how to
    check it; also the documents of --state skipped as no Kubernetes objects. None: nothing to say."""
    parts = []
    if unchecked:
        parts.append(f"{unchecked_text(unchecked)}; pass --state DIR or --kubeconfig FILE")
    if state.skipped:
        parts.append(f"--state: {state.skipped} document{'s' if state.skipped != 1 else ''} skipped, not "
                     "Kubernetes objects (kustomization.yaml, kustomize patches, Helm values)")
    return "note: " + "; ".join(parts) if parts else None


def summary(counts: Counter, files: int) -> str:
    """The closing line: every result counted, "0 objects" when there was nothing to judge."""
    where = f"in {files} file{'s' if files != 1 else ''}"
    if not sum(counts.values()):
        return f"0 objects, {where}"
    errors = counts["error"]
    return (f"{counts['valid']} valid, {counts['invalid']} invalid, {counts['skipped']} skipped, "
            f"{errors} error{'s' if errors != 1 else ''}, {where}")


def _print(output: str, results: list[Result], files: int, note: str | None = None) -> None:
    """The results in ``output``'s format, then ``note`` (what the state could not check: on
    stderr, or a ``::notice`` workflow command with -o github) and the closing summary, last."""
    counts = Counter(result.outcome for result in results)
    closing = summary(counts, files)

    def say_note() -> None:
        if note is not None and output == "github":  # a workflow command: shown on the run's summary
            print(f"::notice title=infergate validate::{note.removeprefix('note: ')}")
        elif note is not None:
            sys.stdout.flush()
            print(note, file=sys.stderr)

    if output in ("json", "yaml"):
        answers = [result.as_dict() for result in results]
        if output == "json":
            sys.stdout.write(json_text(answers))
        else:
            yaml.safe_dump(answers, sys.stdout, sort_keys=False, allow_unicode=True)
        say_note()
        print(closing, file=sys.stderr)
        return
    if output == "junit":
        sys.stdout.write(junit_xml((r.finding() for r in results), "infergate validate"))
        say_note()
        print(closing, file=sys.stderr)
        return
    if output == "sarif":
        from webhook import __version__

        sys.stdout.write(sarif((r.finding() for r in results), version=__version__))
        say_note()
        print(closing, file=sys.stderr)
        return
    paint = command_line.Painter(sys.stdout)
    colours = {"valid": "green", "invalid": "red", "skipped": "yellow"}
    for result in results:
        if result.judgement is not None:
            for warning in result.judgement.warnings:
                print(f"Warning: {result.origin.where}: {warning}", file=sys.stderr)
            for failure in result.judgement.audit:
                print(f"Audit: {result.origin.where}: {audit_line(failure)}", file=sys.stderr)
        if result.outcome == "error":
            sys.stdout.flush()
            command_line.error(f"{result.origin.where}: {result.summary}")
        else:
            text = result.summary if result.outcome != "skipped" else f"skipped {result.summary}"
            print(f"{paint(result.origin.where, 'dim')}: {paint(text, colours[result.outcome])}"
                  if paint.enabled else f"{result.origin.where}: {text}")
            for rule in (result.judgement.explain if result.judgement else None) or ():
                print(explain_line(rule))
        if output == "github":
            for annotation in github_annotations(result.finding()):
                print(annotation)
    say_note()
    print(closing)


def audit_line(failure: dict[str, Any]) -> str:
    """A failure admitted under Audit, as ``validate`` prints it beside the warnings."""
    return (f"policy {failure['policy']} validations[{failure['expressionIndex']}] "
            f"({', '.join(failure['validationActions'])}): {failure['message']}")


def json_text(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, written by orjson (far faster, the
    same text); integers beyond 64 bits, which orjson refuses, take the slow path."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n"
    except TypeError:
        return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def explain_line(rule: dict[str, Any]) -> str:
    """One evaluated rule: policy/rule => verdict, the expression, the values it read."""
    lines = [f"  {rule['policy']} {rule['rule']} => {rule['verdict']}",
             f"      {' '.join(rule['expression'].split())}"]
    lines += [f"      {name} = {json.dumps(value, default=str)[:160]}" for name, value in rule["values"].items()]
    return "\n".join(lines)


def describe(obj: dict[str, Any], judgement: Judgement) -> str:
    """One verdict the way kubectl reports it."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    kind = str(obj.get("kind"))
    name = (judgement.object or {}).get("metadata", {}).get("name") or meta.get("name") or ""
    group = group_of(obj.get("apiVersion"))
    if judgement.allowed:
        resource = f"{kind.lower()}.{group}" if group else kind.lower()
        return f"{resource}/{name} valid"
    status = judgement.status or {}
    if status.get("reason") != "Invalid":
        return f"Error from server ({status.get('reason', 'BadRequest')}): {status.get('message', '')}"
    details = status.get("details") or {}
    name = details.get("name", name)
    # one line per document: the cause naming the webhook and policy stays in -o json/yaml
    causes = [c for c in details.get("causes") or () if not is_attribution(c)]
    lines = [f"{c.get('field')}: {c.get('message')}" if c.get("field") else str(c.get("message")) for c in causes]
    unique = list(dict.fromkeys(lines))
    if len(unique) == 1:
        return f'The {kind} "{name}" is invalid: {unique[0]}'
    return f'The {kind} "{name}" is invalid: \n' + "\n".join(f"* {line}" for line in unique)
