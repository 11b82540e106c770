"""Reading native policies: the ``admissionregistration.k8s.io/v1`` documents of a policies
directory (beside AdmissionPolicy files) into a :class:`NativePolicies`, every expression
compiled, or a :class:`webhook.policy.PolicyLoadError` naming file, line and field as the
apiserver's API validation would refuse it."""

from __future__ import annotations

import re

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from webhook import documents
from webhook.cel import Evaluator
from webhook.documents import Document
from webhook.gocompat.fmt import go_quote
from webhook.policy.loader import PolicyLoadError, policy_files
from webhook.cel.checker.checker import check
from webhook.cel.common.types import BOOL, DYN, NULL, STRING, CelType
from webhook.cel.syntax.parser import CelSyntaxError, parse
from webhook.policy.native.expressions import VARIABLES, CompileError, Program, compile_expression
from webhook.policy.native.typecheck import type_warnings
from webhook.policy.typecheck import KindSchemas, shipped_schemas
from webhook.cel.mutation import APPLY_RESULT, JSON_PATCH_RESULT
from webhook.policy.native.model import (BINDING, GROUP, MUTATING_BINDING, MUTATING_POLICY, POLICY, Binding,
                                         MutatingPolicy, NativePolicy, ValidatingPolicy, is_native, read_binding,
                                         read_mutating_binding, read_mutating_policy, read_policy)


@dataclass(frozen=True)
class CompiledValidation:
    expression: Program
    message_expression: Program | None
    message: str
    reason: str | None
    source: str


@dataclass(frozen=True)
class CompiledNativePolicy:
    """What both compiled kinds share: the policy, its file:line (``where``), and its
    matchConditions and variables compiled."""

    definition: NativePolicy
    where: str
    match_conditions: tuple[tuple[str, Program], ...]
    variables: dict[str, Program]

    @property
    def name(self) -> str:
        return self.definition.name


@dataclass(frozen=True)
class CompiledPolicy(CompiledNativePolicy):
    """A ValidatingAdmissionPolicy with every expression compiled."""

    definition: ValidatingPolicy
    validations: tuple[CompiledValidation, ...]
    audit_annotations: tuple[tuple[str, Program], ...]


@dataclass(frozen=True)
class CompiledMutation:
    patch_type: str  # ApplyConfiguration | JSONPatch
    expression: Program


@dataclass(frozen=True)
class CompiledMutatingPolicy(CompiledNativePolicy):
    """A MutatingAdmissionPolicy with every expression compiled."""

    definition: MutatingPolicy
    mutations: tuple[CompiledMutation, ...]


@dataclass(frozen=True)
class NativePolicies:
    """The native policies of a directory: each policy with its bindings, in name order (the
    apiserver's order across policies is a Go map's, unspecified: see ``validating``)."""

    policies: tuple[CompiledPolicy, ...] = ()
    bindings: dict[str, tuple[Binding, ...]] = field(default_factory=dict)  # policy name -> its bindings
    # the apiserver's status.typeChecking warnings, each ``file:line: spec.validations[i].expression: <warning>``
    warnings: tuple[str, ...] = ()
    mutating: tuple[CompiledMutatingPolicy, ...] = ()  # MutatingAdmissionPolicies, in name order
    mutating_bindings: dict[str, tuple[Binding, ...]] = field(default_factory=dict)  # policy name -> its bindings

    def __bool__(self) -> bool:
        return bool(self.policies or self.mutating)

    def kinds_read(self) -> frozenset[tuple[str, str]]:
        """(apiVersion, kind) of what the policies read from the cluster view: their params
        and Namespaces (selectors, ``namespaceObject``)."""
        found = {p.definition.param_kind for p in (*self.policies, *self.mutating)
                 if p.definition.param_kind is not None}
        return frozenset({("v1", "Namespace"), *found})

    def bound(self) -> list[tuple[CompiledPolicy, tuple[Binding, ...]]]:
        """Each policy that has a binding, with its bindings (a policy without one does nothing)."""
        return [(p, self.bindings[p.name]) for p in self.policies if self.bindings.get(p.name)]

    def mutating_bound(self) -> list[tuple[CompiledMutatingPolicy, tuple[Binding, ...]]]:
        """Each MutatingAdmissionPolicy that has a binding, with its bindings."""
        return [(p, self.mutating_bindings[p.name]) for p in self.mutating if self.mutating_bindings.get(p.name)]


def _dotted(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def compile_policy(policy: ValidatingPolicy, evaluator: Evaluator, doc: Document | None = None) -> CompiledPolicy:
    """Every expression of ``policy`` compiled; a :class:`PolicyLoadError` names each that does not."""
    problems: list[str] = []
    where = doc.where if doc is not None else policy.name
    names = tuple(name for name, _ in policy.variables)

    sources = dict(policy.variables)

    def compile_(source: str, path: tuple[Any, ...], *expected: CelType) -> Program | None:
        at = doc.where_of(path) if doc is not None else policy.name
        try:
            program = compile_expression(source, evaluator, names)
        except CompileError as exc:
            problems.append(f"{at}: {_dotted(path)}: Invalid value: {go_quote(source)}: compilation failed: {exc}")
            return None
        found = _result_type(source, sources) if expected and not program.unknown else None
        if found is not None and found not in expected:  # exactly: dyn is not a bool
            wanted = _type_name(expected[0]) if len(expected) == 1 else \
                "one of [" + " ".join(_type_name(e) for e in expected) + "]"
            problems.append(f"{at}: {_dotted(path)}: Invalid value: {go_quote(source)}: must evaluate to {wanted} "
                            f"but got {_type_name(found)}")
        return program

    conditions, variables = _compile_shared(policy, compile_)
    validations = tuple(CompiledValidation(
        compile_(v.expression, ("spec", "validations", i, "expression"), BOOL),
        compile_(v.message_expression, ("spec", "validations", i, "messageExpression"), STRING)
        if v.message_expression else None,
        v.message, v.reason, v.expression) for i, v in enumerate(policy.validations))
    audit = tuple((key, compile_(src, ("spec", "auditAnnotations", i, "valueExpression"), STRING, NULL))
                  for i, (key, src) in enumerate(policy.audit_annotations))
    if problems:
        raise PolicyLoadError(problems)
    return CompiledPolicy(policy, where, conditions, variables, validations, audit)  # type: ignore[arg-type]


def compile_mutating_policy(policy: MutatingPolicy, evaluator: Evaluator,
                            doc: Document | None = None) -> CompiledMutatingPolicy:
    """Every expression of a MutatingAdmissionPolicy compiled: matchConditions and variables
    as a ValidatingAdmissionPolicy's, each mutation in the environment with the patch types,
    returning ``Object`` (ApplyConfiguration) or ``list(JSONPatch)`` (JSONPatch)."""
    problems: list[str] = []
    names = tuple(name for name, _ in policy.variables)
    sources = dict(policy.variables)

    def at(path: tuple[Any, ...]) -> str:
        return doc.where_of(path) if doc is not None else policy.name

    def compile_(source: str, path: tuple[Any, ...], expected: CelType | None = None,
                 returns: CelType | None = None) -> Program | None:
        try:
            program = compile_expression(source, evaluator, names, returns=returns)
        except CompileError as exc:
            problems.append(f"{at(path)}: {_dotted(path)}: Invalid value: {go_quote(source)}: compilation failed: {exc}")
            return None
        found = _result_type(source, sources) if expected is not None and not program.unknown else None
        if returns is not None and not program.unknown:
            expected, found = returns, program.result_type
        if expected is not None and found is not None and found != expected:
            problems.append(f"{at(path)}: {_dotted(path)}: Invalid value: {go_quote(source)}: must evaluate to "
                            f"{_type_name(expected)} but got {_type_name(found)}")
        return program

    conditions, variables = _compile_shared(policy, compile_)
    mutations = []
    for i, item in enumerate(policy.mutations):
        key, returns = ("jsonPatch", JSON_PATCH_RESULT) if item.patch_type == "JSONPatch" else \
            ("applyConfiguration", APPLY_RESULT)
        mutations.append(CompiledMutation(item.patch_type, compile_(item.expression, ("spec", "mutations", i, key,
                                                                                      "expression"), returns=returns)))
    if problems:
        raise PolicyLoadError(problems)
    return CompiledMutatingPolicy(policy, doc.where if doc is not None else policy.name, conditions,
                                  variables, tuple(mutations))  # type: ignore[arg-type]


def _compile_shared(policy: NativePolicy, compile_: Any) -> tuple[tuple[tuple[str, Any], ...], dict[str, Any]]:
    """Either kind's matchConditions (each a bool) and variables, by ``compile_(source, path[, type])``."""
    conditions = tuple((name, compile_(src, ("spec", "matchConditions", i, "expression"), BOOL))
                       for i, (name, src) in enumerate(policy.match_conditions))
    variables = {name: compile_(src, ("spec", "variables", i, "expression"))
                 for i, (name, src) in enumerate(policy.variables)}
    return conditions, variables


_VARIABLE = re.compile(r"(?<![.\w])variables\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")


def _result_type(source: str, variables: dict[str, str], depth: int = 0) -> CelType | None:
    """What ``source`` evaluates to as the apiserver checks a policy when it is written: every
    variable ``dyn`` but ``variables.<name>``, typed by what its expression evaluates to (read
    here by putting the expression in its place; the kinds' schemas come into play only in the
    status's type check). None: it cannot be said (a syntax error, a deep chain)."""
    if depth > 16:
        return None

    def inline(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"({variables[name]})" if name in variables else match.group(0)

    text = _VARIABLE.sub(inline, source)
    if text != source:
        return _result_type(text, variables, depth + 1)
    try:
        checked = check(parse(source), {name: DYN for name in VARIABLES}, {}, validate_literals=False)
    except CelSyntaxError:
        return None
    return None if checked.errors else checked.result_type


def _type_name(found: CelType) -> str:
    """A type as cel-go's ``Type.String()`` writes it."""
    text = str(found)
    return "null_type" if text == "null" else text


def load_documents(docs: Iterable[Document], evaluator: Evaluator, schemas: KindSchemas | None = None) -> NativePolicies:
    """The native policies and bindings among ``docs`` (other documents are ignored); each policy
    type-checked against ``schemas`` (default: the CRDs infergate bundles) as the apiserver does."""
    schemas = schemas if schemas is not None else shipped_schemas()
    warnings: list[str] = []
    policies: dict[str, CompiledPolicy] = {}
    bindings: dict[str, list[Binding]] = {}
    binding_names: dict[str, str] = {}
    problems: list[str] = []
    mutating: dict[str, CompiledMutatingPolicy] = {}
    mutating_bindings: dict[str, list[Binding]] = {}
    mutating_binding_names: dict[str, str] = {}
    readers = {POLICY: read_policy, BINDING: read_binding, MUTATING_POLICY: read_mutating_policy,
               MUTATING_BINDING: read_mutating_binding}
    for doc in docs:
        content = doc.content
        if not is_native(content):
            continue
        kind = content["kind"]
        value, found = readers[kind](content)
        for path, text in found:
            problems.append(f"{doc.where_of(path)}: {_dotted(path)}: {text}")
        if value is None:
            continue
        if isinstance(value, MutatingPolicy):
            if value.name in mutating:
                problems.append(f"{doc.where}: {MUTATING_POLICY} {value.name!r} is also defined at "
                                f"{mutating[value.name].where}")
                continue
            try:
                mutating[value.name] = compile_mutating_policy(value, evaluator, doc)
            except PolicyLoadError as exc:
                problems += exc.problems
            continue
        if kind == MUTATING_BINDING:
            if value.name in mutating_binding_names:
                problems.append(f"{doc.where}: {MUTATING_BINDING} {value.name!r} is also defined at "
                                f"{mutating_binding_names[value.name]}")
                continue
            mutating_binding_names[value.name] = doc.where
            mutating_bindings.setdefault(value.policy_name, []).append(value)
            continue
        if isinstance(value, ValidatingPolicy):
            if value.name in policies:
                problems.append(f"{doc.where}: {POLICY} {value.name!r} is also defined at {policies[value.name].where}")
                continue
            try:
                policies[value.name] = compile_policy(value, evaluator, doc)
            except PolicyLoadError as exc:
                problems += exc.problems
                continue
            for path, text in type_warnings(value, schemas.kind_of, schemas):
                warnings.append(f"{doc.where_of(path)}: {_dotted(path)}: {text.rstrip()}")
        else:
            if value.name in binding_names:
                problems.append(f"{doc.where}: {BINDING} {value.name!r} is also defined at {binding_names[value.name]}")
                continue
            binding_names[value.name] = doc.where
            bindings.setdefault(value.policy_name, []).append(value)
    if problems:
        raise PolicyLoadError(problems)
    ordered = tuple(policies[name] for name in sorted(policies))
    return NativePolicies(ordered, {name: tuple(sorted(found, key=lambda b: b.name)) for name, found in bindings.items()},
                          tuple(warnings), tuple(mutating[name] for name in sorted(mutating)),
                          {name: tuple(sorted(found, key=lambda b: b.name))
                           for name, found in mutating_bindings.items()})


def load_native(location: Path | Sequence[Path], evaluator: Evaluator,
                schemas: KindSchemas | None = None) -> NativePolicies:
    """The native policies under ``location``: a directory (the policy files
    ``webhook.policy.loader`` reads), or files and directories read as one set."""
    files = [file for path in ([location] if isinstance(location, Path) else location) for file in policy_files(path)]
    docs: list[Document] = []
    problems: list[str] = []
    for file in files:
        source = documents.read_file(file)
        if source.text is not None and GROUP not in source.text:  # no native policy: no second parse
            continue
        parsed = source.parse(node_lines=True, unwrap_lists=True)
        if parsed.error is not None:
            problems.append(str(parsed.error))
        docs += parsed.documents
    if problems:
        raise PolicyLoadError(problems)
    return load_documents(docs, evaluator, schemas)
