"""Loading ``policies/``: YAML -> validated model -> compiled policy, or a precise error.

A load error names the file and line, the field (and expression) and why, e.g.::

    policies/kubeai.yaml:42: spec.validations[1].expression: ERROR: <input>:1:5: Syntax error ...

Expressions that compile are then type-checked against the schemas of the kinds the policy
matches (``typecheck.py``), as the apiserver checks a ValidatingAdmissionPolicy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from pydantic import ValidationError

from webhook import documents, kinds
from webhook.cel import CelCompileError, Evaluator
from webhook.documents import Document
from webhook.policy.compiled import CompiledPolicy
from webhook.policy.expression import CEL_VARIABLES, Expression
from webhook.policy.messages import audit_key_problems
from webhook.policy.model import API_VERSION, KIND, AdmissionPolicy
from webhook.policy.typecheck import KindSchemas, check_policy, reach_problems, shipped_schemas

SUFFIXES = (".yaml", ".yml")  # not .json: JSON schemas (policy-suite.schema.json) live beside policies


class PolicyLoadError(ValueError):
    """One or more policy files are wrong; ``problems`` lists each as ``file:line: what``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _dotted(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def policy_files(directory: Path) -> list[Path]:
    """The policy files of ``directory`` (recursively, in path order), as ``webhook.documents``
    finds files: symlinks followed, names starting with "." skipped (a mounted ConfigMap, the
    Helm chart's policies volume, is read once, through its links)."""
    return documents.manifest_files(directory, SUFFIXES)


def _compile_document(doc: Document, evaluator: Evaluator, schemas: KindSchemas | None) -> CompiledPolicy:
    data = doc.content
    if not isinstance(data, dict) or data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        raise PolicyLoadError([f"{doc.where}: not an {KIND} (expected apiVersion: {API_VERSION}, kind: {KIND})"])
    try:
        model = AdmissionPolicy.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            problems.append(f"{doc.where_of(loc)}: {_dotted(loc) or '(document)'}: {err['msg']}")
        raise PolicyLoadError(problems) from None

    problems: list[str] = []
    for path, message in reach_problems(model, schemas if schemas is not None else shipped_schemas()):
        problems.append(f"{doc.where_of(path)}: {_dotted(path)}: {message}")
    for i, problem in audit_key_problems(model.metadata.name, [a.key for a in model.spec.auditAnnotations]):
        path = ("spec", "auditAnnotations", i, "key")
        problems.append(f"{doc.where_of(path)}: {_dotted(path)}: {problem}")

    compile_ = _compiler(evaluator, problems, lambda path: f"{doc.where_of(path)}: {_dotted(path)}")
    compiled = CompiledPolicy(model, compile_, doc.origin.file, evaluator)
    if not problems:  # then as the apiserver type-checks a ValidatingAdmissionPolicy: against the kinds' schemas
        for path, message in check_policy(model, schemas if schemas is not None else shipped_schemas()):
            problems.append(f"{doc.where_of(path)}: {_dotted(path)}: {message}")
    if problems:
        raise PolicyLoadError(problems)
    return compiled


def _is_test_suite(data: Any) -> bool:
    """Test suites of policies (``infergate test``) may live beside them, e.g. ``policies/tests/``."""
    return isinstance(data, dict) and data.get("kind") == "PolicySuite"


# Kubernetes' own admission policy kinds: a policy file may hold them (``webhook.policy.native``)
NATIVE_POLICY_KINDS = frozenset(k.kind for k in (kinds.VALIDATING_ADMISSION_POLICY, kinds.VALIDATING_ADMISSION_POLICY_BINDING,
                                                 kinds.MUTATING_ADMISSION_POLICY, kinds.MUTATING_ADMISSION_POLICY_BINDING))


def _is_policy_kind(data: Any) -> bool:
    """Whether a document is of a kind a policy file holds: an AdmissionPolicy, one of
    Kubernetes' own admission policy kinds, or a PolicySuite beside them."""
    if not isinstance(data, dict):
        return False
    api_version, kind = data.get("apiVersion"), data.get("kind")
    return (api_version, kind) == (API_VERSION, KIND) or _is_test_suite(data) or (
        isinstance(api_version, str) and api_version.startswith("admissionregistration.k8s.io/")
        and kind in NATIVE_POLICY_KINDS)


def _is_native(data: Any) -> bool:
    """One of Kubernetes' own admission policies: the offline commands read them
    (``webhook.policy.native``), ``serve`` leaves them to the apiserver, which runs them itself."""
    return isinstance(data, dict) and isinstance(data.get("apiVersion"), str) \
        and data["apiVersion"].startswith("admissionregistration.k8s.io/") and data.get("kind") in NATIVE_POLICY_KINDS


def load_file(file: Path, evaluator: Evaluator, schemas: KindSchemas | None = None) -> list[CompiledPolicy]:
    """The policies of one file, compiled for ``evaluator``. ``schemas``: the kinds their
    expressions are type-checked against (default: the shipped CRDs'). A file that holds no
    document of a policy kind (an empty one, a stray file) is an error: what its author meant
    to enforce would be silently not there."""
    parsed = documents.read_file(file).parse(node_lines=True, unwrap_lists=False)
    policies: list[CompiledPolicy] = []
    problems = [str(parsed.error)] if parsed.error is not None else []
    for doc in parsed.documents:
        if _is_test_suite(doc.content) or _is_native(doc.content):
            continue
        try:
            policies.append(_compile_document(doc, evaluator, schemas))
        except PolicyLoadError as exc:
            problems += exc.problems
    if not problems and not any(_is_policy_kind(doc.content) for doc in parsed.documents):
        problems.append(f"{file}: no {KIND} ({API_VERSION}) and no ValidatingAdmissionPolicy, "
                        "MutatingAdmissionPolicy or binding (admissionregistration.k8s.io) in the file")
    if problems:
        raise PolicyLoadError(problems)
    return policies


def policy_names(directory: Path) -> list[str]:
    """The names of the policies under ``directory``, read without compiling them (what a
    start-up check of ``--policy-actions`` needs in milliseconds); documents that are not
    policies, or do not parse, are left to :func:`load_directory` to report."""
    names = []
    for file in policy_files(directory):
        parsed = documents.read_file(file).parse(unwrap_lists=False)
        for doc in parsed.documents:
            data = doc.content
            if isinstance(data, dict) and data.get("apiVersion") == API_VERSION and data.get("kind") == KIND:
                name = (data.get("metadata") or {}).get("name") if isinstance(data.get("metadata"), dict) else None
                if isinstance(name, str):
                    names.append(name)
    return names


def load_directory(directory: Path, evaluator: Evaluator, schemas: KindSchemas | None = None) -> list[CompiledPolicy]:
    """All policies under ``directory``; every problem of every file in one error."""
    if not directory.is_dir():
        raise PolicyLoadError([f"{directory}: not a directory"])
    policies, problems = [], []
    for file in policy_files(directory):
        try:
            policies += load_file(file, evaluator, schemas)
        except PolicyLoadError as exc:
            problems += exc.problems
    seen: dict[str, str] = {}
    for policy in policies:
        if policy.name in seen:
            problems.append(f"{policy.file}: policy name {policy.name!r} is also used in {seen[policy.name]}")
        seen[policy.name] = policy.file
    if problems:
        raise PolicyLoadError(problems)
    return policies


def _compiler(evaluator: Evaluator, problems: list[str],
              where_of: Callable[[tuple[Any, ...]], str]) -> Callable[[str, tuple[Any, ...]], Expression]:
    """Compiles a policy's expression at ``path``; one that does not compile is added to
    ``problems`` (named by ``where_of``) and kept without a program."""

    def compile_(source: str, path: tuple[Any, ...]) -> Expression:
        where = where_of(path)
        try:
            # infergate's policies mix dyn and typed values in literals (JSON patch maps)
            program = evaluator.compile(source, CEL_VARIABLES, mixed_literals=True)
        except CelCompileError as exc:
            problems.append(f"{where}: expression {' '.join(source.split())!r} does not compile: {exc}")
            program = None
        return Expression(program, source, where, evaluator.routes)

    return compile_


def compile_policy(model: AdmissionPolicy, file: str, evaluator: Evaluator) -> CompiledPolicy:
    """A policy already loaded (and checked) from ``file``, compiled again from ``model``: what
    the webhook runs once some of its rules are left to the apiserver
    (``webhook.policy.handed_over``). An expression that does not compile raises
    ``PolicyLoadError``."""
    problems: list[str] = []

    compile_ = _compiler(evaluator, problems, lambda path: f"{file}: {_dotted(path)}")
    compiled = CompiledPolicy(model, compile_, file, evaluator)
    if problems:
        raise PolicyLoadError(problems)
    return compiled
