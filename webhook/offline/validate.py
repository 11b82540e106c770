"""``infergate validate``: what the cluster would answer to each manifest, before applying it.

Every document is judged by ``judge_document`` — the seam where the admission chain (the
webhook's policies) joins the apiserver's own handling; ``--crd-only`` keeps to the latter.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import orjson
import yaml

from webhook.admission.chain import AdmissionChain, offline_request
from webhook.offline.documents import Document, InputError, Source, read_sources, read_texts
from webhook.offline.parallel import available_cpus, map_ordered
from webhook.offline.progress import Progress
from webhook.policy import PolicyLoadError, PolicySet
from webhook.schema import CRDLoadError, CRDRegistry, Outcome
from webhook.schema.bundled import DEFAULT_KUBEAI_CRD, KUBEAI_CRDS
from webhook.state import FileState, StateLoadError

_CRD_KIND = "CustomResourceDefinition"


@dataclass
class Judgement:
    """The answer for one document: as ``-o json`` prints it."""

    allowed: bool
    status: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)
    object: dict[str, Any] | None = None
    patch: list[dict[str, Any]] = field(default_factory=list)  # the mutating webhook's JSON patch
    explain: list[dict[str, Any]] | None = None  # per policy rule: expression, values seen, verdict

    def as_dict(self) -> dict[str, Any]:
        out = {"allowed": self.allowed, "status": self.status, "warnings": self.warnings, "object": self.object}
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
                   explain: bool = False) -> Judgement:
    """Judge one write as the cluster would: the apiserver's handling of the custom resource.

    This is the one place a document is judged; the webhook's admission chain joins here
    (it runs between ``CRDRegistry.prepare`` and ``CRDRegistry.validate``) unless ``crd_only``.
    """
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
        raise UnknownKind("the document has no apiVersion and kind")
    if registry.served(api_version, kind) is None:
        raise UnknownKind(f"no CustomResourceDefinition serves kind {kind!r} in apiVersion {api_version!r}")
    if chain is not None and not crd_only:
        whole = chain.run(offline_request(obj, old, subresource, namespace=namespace), explain=explain)
        traces = [dataclasses.asdict(t) for t in whole.traces] if explain else None
        return Judgement(whole.allowed, whole.status, whole.warnings, whole.object, whole.patch, traces)
    outcome: Outcome = registry.handle("UPDATE" if old is not None else "CREATE", obj, old, subresource,
                                       namespace=namespace)
    return Judgement(outcome.allowed, outcome.status, outcome.warnings, outcome.object)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--filename", action="append", required=True, metavar="FILE|DIR|-",
                        help="manifests to validate (YAML or JSON, many documents; directories recursively; "
                             "- for stdin); repeatable")
    parser.add_argument("--old", action="append", default=[], metavar="FILE",
                        help="the objects as stored: documents matching one by kind/namespace/name are UPDATEs")
    parser.add_argument("--subresource", choices=["status"], help="validate writes to the /status subresource")
    parser.add_argument("--crd", action="append", default=[], metavar="DIR",
                        help="CRDs to validate against: files or directories, also `kubectl get crd -o yaml` "
                             "dumps (default: the bundled CRDs); repeatable")
    parser.add_argument("--kubeai-crd", choices=list(KUBEAI_CRDS),
                        help=f"the bundled KubeAI Model CRD (default {DEFAULT_KUBEAI_CRD}: the current one)")
    parser.add_argument("--crd-only", action="store_true",
                        help="only the apiserver's own handling (schema, defaults, CEL rules), no webhook policies")
    parser.add_argument("-n", "--namespace", default="default",
                        help="namespace of namespaced objects that name none (default: default)")
    parser.add_argument("--state", metavar="DIR",
                        help="the cluster to check against: a directory of manifests (default: the embedded "
                             "example state)")
    parser.add_argument("--policies", metavar="DIR", help="admission policies (default: the shipped policies/)")
    parser.add_argument("--explain", action="store_true",
                        help="show every policy rule evaluated: its expression, the values it saw, the verdict")
    parser.add_argument("-o", "--output", choices=["text", "json", "yaml"], default="text")
    parser.add_argument("-j", "--jobs", type=int, default=available_cpus(), metavar="N",
                        help="processes judging documents in large runs (default: the CPUs available)")


def _identity(obj: Any) -> tuple[Any, ...]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return obj.get("apiVersion"), obj.get("kind"), meta.get("namespace"), meta.get("name")


def _registry(args: argparse.Namespace, documents: list[Document], warn: Callable[[str], None]) -> CRDRegistry:
    """The shipped CRDs, or ``--crd``; CRDs among the manifests too (as after ``kubectl apply``).
    CRDs that did not come with infergate are first checked as the apiserver would admit them."""
    registry = (CRDRegistry.load([Path(p) for p in args.crd], check=True) if args.crd
                else CRDRegistry.shipped(args.kubeai_crd))
    for doc in documents:
        if _is_crd(doc.content):
            for warning in registry.add_checked(doc.content, doc.where):
                warn(f"Warning: {doc.where}: {warning}")
    return registry


def _chain(args: argparse.Namespace, registry: CRDRegistry) -> AdmissionChain:
    from webhook import resources

    policies = PolicySet.load(Path(args.policies) if args.policies else resources.policies_dir())
    state = FileState(Path(args.state) if args.state else resources.examples_dir())
    return AdmissionChain(registry, policies, state)


def _is_crd(content: Any) -> bool:
    return isinstance(content, dict) and content.get("kind") == _CRD_KIND


# A file larger than this is parsed in the parent and its documents judged one by one across the
# workers (one worker parsing a file of thousands of documents would leave the others idle).
_LARGE_FILE = 64 * 1024


def _parse_here(source: Source) -> bool:
    """Whether the parent parses ``source`` before the workers start: a file that may hold a CRD
    (every CRD joins the registry before anything is judged; ``kind`` spelled through an escape —
    JSON's ``\\u``, YAML's ``\\x`` — counts as may) or a large one. The rest the workers parse."""
    text = source.text
    return text is not None and (len(text) > _LARGE_FILE or _CRD_KIND in text or "\\" in text)


@dataclass
class Verdict:
    """One document's answer as printed: small, it is all that comes back from a worker."""

    summary: str  # the line kubectl would print (``describe``)
    judgement: Judgement


@dataclass
class _Setup:
    units: list[Source]  # a file to parse and judge, or parsed documents to judge
    olds: dict[tuple[Any, ...], dict[str, Any]]
    has_old: bool  # whether --old held any document
    registry: CRDRegistry
    chain: AdmissionChain | None
    warnings: list[str]  # the CRDs' warnings, printed once every file has parsed


_SETUP_ERRORS = (InputError, CRDLoadError, StateLoadError, PolicyLoadError)


def _setup(args: argparse.Namespace) -> _Setup:
    """Everything loaded once before judging (workers fork after this and share it). The error
    raised is the one a run parsing every file first would meet first: a file's input error
    before ``--old``'s, before the CRDs', the policies' and the state's."""
    sources = read_texts(args.filename)
    warnings: list[str] = []
    try:
        for source in sources:
            if _parse_here(source):
                source.documents = source.parse()
        old_documents = read_sources(args.old)
        parsed = [doc for source in sources if source.documents for doc in source.documents]
        registry = _registry(args, parsed, warnings.append)
        chain = None if args.crd_only else _chain(args, registry)
    except _SETUP_ERRORS:
        first = _first_input_error(sources)
        if first is not None:
            raise first from None
        for warning in warnings:
            print(warning, file=sys.stderr)
        raise
    units: list[Source] = []
    for source in sources:  # parsed documents go one by one: any worker can judge any of them
        if source.documents is None:
            units.append(source)
        else:
            units += [Source(source.name, documents=[doc]) for doc in source.documents if not _is_crd(doc.content)]
    olds = {_identity(d.content): d.content for d in old_documents if isinstance(d.content, dict)}
    return _Setup(units, olds, bool(old_documents), registry, chain, warnings)


def _first_input_error(sources: list[Source]) -> InputError | None:
    for source in sources:
        try:
            source.parse()
        except InputError as exc:
            return exc
    return None


def run(args: argparse.Namespace) -> int:
    try:
        setup = _setup(args)
    except _SETUP_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    registry, units = setup.registry, setup.units

    def judge(doc: Document) -> Verdict | str:
        """One document's verdict, or the error that ends the run (as text: it crosses processes)."""
        obj = doc.content
        if not isinstance(obj, dict):
            return f"{doc.where}: a document must be a mapping, got {type(obj).__name__}"
        old = setup.olds.get(_identity(obj))
        if args.subresource and old is None:
            return f"{doc.where}: no stored object in --old matches this document"
        try:
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else args.namespace
            judgement = judge_document(registry, obj, old, args.subresource, namespace=namespace,
                                       crd_only=args.crd_only, chain=setup.chain, explain=args.explain)
            return Verdict(describe(obj, judgement), judgement)
        except UnknownKind as exc:
            known = ", ".join(f"{kind} ({api})" for api, kind in registry.kinds()) or "none"
            return f"{doc.where}: {exc} (served: {known})"
        except Exception as exc:  # a bug must still end in a message, not a traceback
            return f"{doc.where}: internal error: {type(exc).__name__}: {exc}"

    def judge_unit(i: int) -> list[Verdict | str] | InputError:
        """Parse (in the worker: the parse is a large share of the work) and judge one unit."""
        try:
            documents = units[i].parse()
        except InputError as exc:
            return exc
        return [judge(doc) for doc in documents if not _is_crd(doc.content)]

    progress = Progress(len(units), "validating")
    try:
        answers = map_ordered(judge_unit, len(units), jobs=args.jobs, progress=progress.advance)
    finally:
        progress.close()
    for answer in answers:  # an input error anywhere comes first, as if every file were parsed first
        if isinstance(answer, InputError):
            print(f"error: {answer}", file=sys.stderr)
            return 2
    for warning in setup.warnings:
        print(warning, file=sys.stderr)
    if args.subresource and not setup.has_old:  # (judging was quick: no document found its stored object)
        print("error: --subresource status needs --old (the stored objects)", file=sys.stderr)
        return 2
    verdicts: list[Verdict] = []
    for answer in answers:
        for verdict in answer:
            if isinstance(verdict, str):
                print(f"error: {verdict}", file=sys.stderr)
                return 2
            verdicts.append(verdict)
    _print(args.output, verdicts)
    return 0 if all(v.judgement.allowed for v in verdicts) else 1


def _print(output: str, verdicts: list[Verdict]) -> None:
    if output == "json":
        sys.stdout.write(json_text([v.judgement.as_dict() for v in verdicts]))
        return
    if output == "yaml":
        yaml.safe_dump([v.judgement.as_dict() for v in verdicts], sys.stdout, sort_keys=False, allow_unicode=True)
        return
    for verdict in verdicts:
        for warning in verdict.judgement.warnings:
            print(f"Warning: {warning}", file=sys.stderr)
        print(verdict.summary)
        for rule in verdict.judgement.explain or ():
            print(explain_line(rule))


def json_text(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, thirty times faster (orjson writes the
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
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    if judgement.allowed:
        resource = f"{kind.lower()}.{group}" if group else kind.lower()
        return f"{resource}/{name} valid"
    status = judgement.status or {}
    if status.get("reason") != "Invalid":
        return f"Error from server ({status.get('reason', 'BadRequest')}): {status.get('message', '')}"
    details = status.get("details") or {}
    name = details.get("name", name)
    causes = details.get("causes") or []
    lines = [f"{c.get('field')}: {c.get('message')}" for c in causes]
    unique = list(dict.fromkeys(lines))
    if len(unique) == 1:
        return f'The {kind} "{name}" is invalid: {unique[0]}'
    return f'The {kind} "{name}" is invalid: \n' + "\n".join(f"* {line}" for line in unique)
