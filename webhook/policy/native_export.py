"""AdmissionPolicies as the apiserver's own policies: ValidatingAdmissionPolicy (VAP) and
MutatingAdmissionPolicy (MAP), ``admissionregistration.k8s.io/v1``, with their bindings.

For each policy, what the apiserver can evaluate alone goes out as

- ``infergate-<policy>``: a VAP of its ``validations`` (and ``auditAnnotations``) and its
  binding(s), with the policy's ``validationActions`` (or an operator's override);
- ``infergate-<policy>-warn``: a VAP of its ``warnings`` bound with ``[Warn]``;
- ``infergate-<policy>``: a MAP of its ``mutations`` (typed ``Object{}`` / ``JSONPatch{}``);

each with the policy's match constraints, match conditions, failure policy and only the
variables its rules read. Every other rule stays with the webhook, named with the reason
(``Kept``). The reasons, each decided from the expression's syntax tree:

- it reads ``lookups`` (cluster state), directly, through a variable or a match condition;
- it does not type-check as the apiserver checks a VAP (``TypeCheck``: the apiserver would
  refuse the VAP, or its status would carry an expression warning);
- it calls a function the apiserver's CEL environment lacks (``webhook.cel.checker.declarations``:
  the Kubernetes 1.36 base environment);
- its ``reason`` is not one a VAP may give (Forbidden, Invalid, RequestEntityTooLarge:
  ``pkg/apis/admissionregistration/validation``, ``supportedValidationPolicyReason``);
- it reads params a binding cannot pass (``dataKey``: one YAML-valued key of a ConfigMap; a
  ``paramRef`` without a namespace, which infergate resolves in any namespace);
- it validates in the mutating stage (``validationStage: Mutating``: judged before the schema,
  a VAP only after it);
- an operator's actions override a binding cannot express (a namespace-scoped entry for a
  policy matching cluster-scoped kinds, whose objects a binding's namespaceSelector never skips);
- a mutation that is not written as literal patches (MAP needs typed ``Object``/``JSONPatch``
  values), or sets a list (MAP merges lists by their listType, infergate replaces them), or
  merges into an atomic map or one the schema does not describe (MAP replaces or refuses).

Pure: policies (the model) in, objects and kept rules out; the command is
``webhook.offline.native_policies``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from webhook.cel.checker.checker import check
from webhook.cel.checker.declarations import functions
from webhook.cel.common.decl import DeclType
from webhook.cel.common.types import BOOL, DYN, STRING, CelType
from webhook.cel.crd import object_types
from webhook.cel.syntax import ast
from webhook.cel.syntax.parser import format_errors, parse, parse_with_spans
from webhook.kinds import VALIDATING_ADMISSION_POLICY
from webhook.policy.actions import ActionOverrides, ordered
from webhook.policy.model import AdmissionPolicy, ResourceRule
from webhook.policy.typecheck import KindSchemas, KindType, bundled_crds, matched_types, shipped_schemas
from webhook.state.selectors import Requirement, Selector

API_VERSION = VALIDATING_ADMISSION_POLICY.api_version  # also MutatingAdmissionPolicy's, the bindings'
MANAGED_BY = {"app.kubernetes.io/managed-by": "infergate"}
PREFIX = "infergate-"
WARN_SUFFIX = "-warn"
# supportedValidationPolicyReason (pkg/apis/admissionregistration/validation/validation.go)
VAP_REASONS = frozenset({"Forbidden", "Invalid", "RequestEntityTooLarge"})
# supportedMutatingOperations: a MAP matches only these
MUTATING_OPERATIONS = ("CREATE", "UPDATE")
# the mutating webhook's reinvocationPolicy (webhook.webhook_config): MAP does the same
REINVOCATION = "IfNeeded"
MAX_BINDINGS = 16  # an override split into more namespace regions than this is not exported
_JSONPATCH_FIELDS = frozenset({"op", "path", "value", "from"})
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ROOTS = ("object", "oldObject", "request", "namespaceObject", "params", "lookups", "variables", "authorizer")
# what a VAP's matchConditions may read (VAP gives them no variables nor namespaceObject)
_MATCH_CONDITION_ROOTS = frozenset({"object", "oldObject", "request", "params", "authorizer"})


@dataclass(frozen=True)
class KindResource:
    """A kind's resource as the apiserver names it (a CRD's plural) and its scope."""

    group: str
    kind: str
    plural: str
    namespaced: bool


@dataclass(frozen=True)
class Kept:
    """A rule that stays with the webhook, and why."""

    policy: str
    rule: str  # validations[i], warnings[i], mutations[i], auditAnnotations[i]
    reason: str

    def line(self) -> str:
        return f"{self.policy}: {self.rule}: stays with the webhook: {self.reason}"


@dataclass
class Export:
    objects: list[dict[str, Any]] = field(default_factory=list)
    kept: list[Kept] = field(default_factory=list)
    # each generated ValidatingAdmissionPolicy's policy and the rules it holds
    # (``validations[i]``, ``warnings[i]``, ``auditAnnotations[i]``): what the webhook may leave
    # to the apiserver once it enforces them (``webhook.policy.native_handover``)
    rules: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    # each generated MutatingAdmissionPolicy's policy and the mutations it holds (``mutations[i]``)
    mutating_rules: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    def as_list(self) -> dict[str, Any]:
        """The objects as a ``v1`` ``List`` (what ``kubectl get -o json`` prints)."""
        return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": self.objects}


# ---------------------------------------------------------------------------------------
# What an expression reads and calls


@dataclass(frozen=True)
class Reads:
    roots: frozenset[str]           # object, request, lookups, ...
    variables: frozenset[str]       # variables.<name>
    lookups: frozenset[str]         # lookups.<name> ("*": indexed otherwise)
    unknown_functions: frozenset[str]


def reads(source: str) -> Reads:
    expr, _ = parse_with_spans(source)
    roots: set[str] = set()
    variables: set[str] = set()
    lookups: set[str] = set()
    calls: set[str] = set()
    named: set[int] = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Select) and isinstance(node.operand, ast.Ident) and \
                node.operand.name in ("variables", "lookups"):
            (variables if node.operand.name == "variables" else lookups).add(node.field)
            named.add(node.operand.id)
        elif isinstance(node, ast.Ident) and node.name in _ROOTS:
            roots.add(node.name)
            if node.name == "lookups" and node.id not in named:
                lookups.add("*")
            if node.name == "variables" and node.id not in named:
                variables.add("*")
        elif isinstance(node, ast.Call):
            calls.add(node.function)
    known = functions()
    return Reads(frozenset(roots), frozenset(variables), frozenset(lookups),
                 frozenset(c for c in calls if c not in known))


@dataclass
class Needs:
    """What keeps an expression with the webhook, gathered through the variables it reads."""

    lookups: set[str] = field(default_factory=set)
    params: bool = False
    functions: set[str] = field(default_factory=set)

    def add(self, other: "Needs") -> None:
        self.lookups |= other.lookups
        self.params |= other.params
        self.functions |= other.functions

    def reasons(self, params_reason: str | None) -> list[str]:
        out = []
        if self.lookups:
            names = ", ".join(f"lookups.{n}" for n in sorted(self.lookups) if n != "*") or "lookups"
            out.append(f"reads {names} (cluster state)")
        if self.functions:
            out.append("calls " + ", ".join(sorted(self.functions)) + ", which the apiserver's CEL environment lacks")
        if self.params and params_reason:
            out.append(params_reason)
        return out


def _needs(found: Reads) -> Needs:
    return Needs(set(found.lookups) if "lookups" in found.roots else set(), "params" in found.roots,
                 set(found.unknown_functions))


# ---------------------------------------------------------------------------------------
# Match constraints


def kind_resources(kinds: Iterable[Any]) -> dict[tuple[str, str], KindResource]:
    """``(group, kind) -> KindResource`` from served kinds (``webhook.schema.bundled.known_kinds``)."""
    return {(k.group, k.kind): KindResource(k.group, k.kind, k.plural, k.namespaced) for k in kinds}


def _resource_rules(rules: Sequence[ResourceRule], resources: Mapping[tuple[str, str], KindResource],
                    operations_allowed: Sequence[str] | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """VAP resourceRules for the policy's kinds (one per group and kind: a cross product of
    groups and plurals could name a resource of another kind), or the reason there are none."""
    out: list[dict[str, Any]] = []
    for rule in rules:
        operations = list(rule.operations)
        if "*" in operations:
            operations = ["*"]
        if operations_allowed is not None:
            operations = [o for o in (operations_allowed if operations == ["*"] else operations) if o in operations_allowed]
            if not operations:
                continue
        for group in rule.apiGroups:
            for kind in rule.kinds:
                if kind == "*":
                    plurals = ["*"]
                elif group == "*":
                    return [], f"kind {kind} in any group: a resource rule names resources, and no CRD tells them"
                else:
                    found = resources.get((group, kind))
                    if found is None:
                        return [], f"kind {group or 'core'}/{kind}: no bundled CRD names its resource"
                    plurals = [found.plural]
                names = plurals + [f"{p}/{s}" for p in plurals for s in rule.subresources]
                out.append({"apiGroups": [group], "apiVersions": ["*"], "operations": operations,
                            "resources": names, "scope": "*"})
    return out, None


def _selector_dict(selector: Any) -> dict[str, Any]:
    return selector.model_dump(exclude_defaults=True) if selector is not None else {}


def _match_constraints(policy: AdmissionPolicy, rules: list[dict[str, Any]]) -> dict[str, Any]:
    spec = policy.spec.matchConstraints
    out: dict[str, Any] = {"resourceRules": rules}
    if spec.namespaceSelector is not None:
        out["namespaceSelector"] = _selector_dict(spec.namespaceSelector)
    if spec.objectSelector is not None:
        out["objectSelector"] = _selector_dict(spec.objectSelector)
    out["matchPolicy"] = "Equivalent"
    return out


def _cluster_scoped(policy: AdmissionPolicy, resources: Mapping[tuple[str, str], KindResource]) -> list[str]:
    """The cluster-scoped kinds (other than Namespace) the policy matches ("*": any)."""
    found = []
    for rule in policy.spec.matchConstraints.resourceRules:
        for group in rule.apiGroups:
            for kind in rule.kinds:
                r = resources.get((group, kind))
                if kind == "*" or (r is not None and not r.namespaced and not (group == "" and kind == "Namespace")):
                    found.append(kind if r is None else f"{group}/{kind}")
    return found


# ---------------------------------------------------------------------------------------
# Validation actions: a policy's own or an operator's override, as bindings


def _negations(selector: Selector) -> list[list[Requirement]]:
    """``not selector`` as disjoint conjunctions: not r1; r1 and not r2; ..."""
    flip = {"In": "NotIn", "NotIn": "In", "Exists": "DoesNotExist", "DoesNotExist": "Exists"}
    reqs = list(selector.requirements)
    return [reqs[:i] + [Requirement(r.key, flip[r.operator], r.values)] for i, r in enumerate(reqs)]


def action_regions(own: Sequence[str], entries: Sequence[Any]) -> list[tuple[list[list[Requirement]] | None, list[str], str]]:
    """Where each override entry is in force, as bindings can select namespaces: ``(terms,
    actions, label)``; ``terms``: conjunctions of requirements (OR-ed), ``None``: every request.
    Entries are tried in order, the first whose selector selects wins, else ``own``."""
    out: list[tuple[list[list[Requirement]] | None, list[str], str]] = []
    earlier: list[Selector] = []
    for i, entry in enumerate(entries):
        terms: list[list[Requirement]] = [list(entry.selector.requirements)] if entry.selector is not None else [[]]
        for selector in earlier:
            terms = [t + n for t in terms for n in _negations(selector)]
        out.append((None if terms == [[]] else terms, ordered(entry.actions), f"override[{i}]"))
        if entry.selector is None:
            return out
        earlier.append(entry.selector)
    terms = [[]]
    for selector in earlier:
        terms = [t + n for t in terms for n in _negations(selector)]
    out.append((None if terms == [[]] else terms, list(own), ""))
    return out


def _requirement(r: Requirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": r.key, "operator": r.operator}
    if r.operator in ("In", "NotIn"):
        out["values"] = sorted(r.values)
    return out


def _contradictory(term: list[Requirement]) -> bool:
    """A conjunction that selects no namespace (a key both required and excluded)."""
    for a in term:
        for b in term:
            if a.key != b.key:
                continue
            if a.operator == "Exists" and b.operator == "DoesNotExist":
                return True
            if a.operator == "In" and (b.operator == "DoesNotExist" or (b.operator == "NotIn" and a.values <= b.values)):
                return True
    return False


# ---------------------------------------------------------------------------------------
# Mutations: infergate's map literals as MAP's typed values


class NotLiteral(ValueError):
    """A patch expression that cannot be written with MAP's types."""


def atomic_maps(policy: AdmissionPolicy, crds: Iterable[Mapping[str, Any]]) -> Any:
    """A function of a field path (``("spec", "model")``): whether, in the schema of some kind
    the policy matches, the object there is ``x-kubernetes-map-type: atomic`` (an apply
    configuration replaces it whole, where infergate merges into it) or not described (the
    apiserver cannot merge into what its schema does not describe)."""
    kinds = {(g, k) for r in policy.spec.matchConstraints.resourceRules for g in r.apiGroups for k in r.kinds}
    roots = [v["schema"]["openAPIV3Schema"] for crd in crds
             if (crd["spec"]["group"], crd["spec"]["names"]["kind"]) in kinds
             for v in crd["spec"].get("versions") or () if (v.get("schema") or {}).get("openAPIV3Schema")]

    def replaced(path: tuple[str, ...]) -> str | None:
        described = False
        for root in roots:
            node: Any = root
            for name in path:
                node = (node.get("properties") or {}).get(name) if isinstance(node, Mapping) else None
                if node is None:
                    break
                if node.get("x-kubernetes-map-type") == "atomic":
                    return f"{'.'.join(path)} is an atomic map: MAP replaces it whole, infergate merges into it"
            described = described or node is not None
        return None if described else f"{'.'.join(path)} is in no schema of the kinds matched"

    return replaced


def _patch_rewrite(source: str, patch_type: str, replaced: Any = None) -> str:
    """``source`` with its patch literals typed: JSON patch operations ``{'op': ...}`` become
    ``JSONPatch{op: ...}``; an apply configuration ``{'spec': {...}}`` becomes
    ``Object{spec: Object.spec{...}}``. The literals must be where the result comes from
    (the whole expression, a branch of ``?:``, an element of a listed patch)."""
    expr, spans = parse_with_spans(source)
    edits: list[tuple[int, int, str]] = []

    def key_edit(entry: ast.MapEntry) -> str:
        if not isinstance(entry.key, ast.Literal) or entry.key.kind != "string" or entry.optional:
            raise NotLiteral("a key that is not a string literal")
        name = entry.key.value
        if not _FIELD_NAME.match(name):
            raise NotLiteral(f"key {name!r} is not a field name CEL can write")
        start, end = spans[entry.key.id]
        edits.append((start, end, name))
        return name

    def operation(node: ast.Expr) -> None:
        if not isinstance(node, ast.CreateMap):
            raise NotLiteral("a JSON patch operation that is not a map literal")
        start, _ = spans[node.id]
        edits.append((start, start, "JSONPatch"))
        names = [key_edit(e) for e in node.entries]
        if set(names) - _JSONPATCH_FIELDS or "op" not in names:
            raise NotLiteral("a JSON patch operation with fields other than op, path, value, from")

    def operations(node: ast.Expr) -> None:
        if isinstance(node, ast.Call) and node.function == "_?_:_":
            operations(node.args[1])
            operations(node.args[2])
        elif isinstance(node, ast.Call) and node.function == "_+_" and len(node.args) == 2:
            operations(node.args[0])
            operations(node.args[1])
        elif isinstance(node, ast.CreateList) and not node.optional_indices:
            for element in node.elements:
                operation(element)
        else:
            raise NotLiteral("JSON patch operations that are not a list literal")

    def partial(node: ast.Expr, type_name: str) -> None:
        if isinstance(node, ast.Call) and node.function == "_?_:_":
            partial(node.args[1], type_name)
            partial(node.args[2], type_name)
            return
        if not isinstance(node, ast.CreateMap):
            raise NotLiteral("an apply configuration that is not a map literal")
        start, _ = spans[node.id]
        edits.append((start, start, type_name))
        for entry in node.entries:
            name = key_edit(entry)
            value = entry.value
            if isinstance(value, ast.CreateMap):
                path = tuple(type_name.split(".")[1:]) + (name,)
                problem = replaced(path) if replaced is not None else None
                if problem:
                    raise NotLiteral(f"sets {type_name}.{name}: {problem}")
                partial(value, f"{type_name}.{name}")
            elif isinstance(value, ast.CreateList):
                raise NotLiteral(f"sets a list ({type_name}.{name}): MAP merges lists by their listType, "
                                 "infergate replaces them")
            elif isinstance(value, ast.Literal) and value.kind == "null":
                raise NotLiteral(f"sets {type_name}.{name} to null: MAP removes the field, infergate stores null")

    if patch_type == "JSONPatch":
        operations(expr)
    else:
        partial(expr, "Object")
    out = source
    for start, end, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:start] + text + out[end:]
    return out


# ---------------------------------------------------------------------------------------
# Type checking as the apiserver does it for a VAP's status.typeChecking


_VARIABLES_TYPE = "kubernetes.variables"


class TypeCheck:
    """A policy's expressions checked as the apiserver checks a VAP, twice
    (``apiserver/pkg/admission/plugin/policy/validating/typechecking.go``, ``cel/composition.go``):

    - when it is written (API validation): every expression, variables included, with ``object``
      and ``oldObject`` of type ``dyn``; an error refuses the VAP;
    - for ``status.typeChecking``: the validations' expressions and message expressions against
      each matched kind's schema; an error is an expression warning. A variable is typed by its
      expression there, ``dyn`` when that does not check (the apiserver warns of no variable).

    Both with aggregate literals of one type, and ``variables`` typed by their expressions (in
    order). infergate's own load-time check is looser: its policies may mix types in literals,
    and its variables are ``dyn``. An expression passes for a kind when it checks against one of
    that kind's schema variants."""

    def __init__(self, policy: AdmissionPolicy, schemas: KindSchemas) -> None:
        self.targets: list[KindType | None] = [t for t in matched_types(policy, schemas) if t is not None]
        self.variables = [(v.name, v.expression) for v in policy.spec.variables]
        self._scopes: dict[int, tuple[dict[str, CelType], dict[str, DeclType], dict[str, str]]] = {}

    def _scope(self, index: int) -> tuple[dict[str, CelType], dict[str, DeclType], dict[str, str]]:
        """Names and object types for target ``index`` (-1: the ``dyn`` object of API
        validation), and each variable's problem there."""
        scope = self._scopes.get(index)
        if scope is not None:
            return scope
        target = self.targets[index] if index >= 0 else None
        names: dict[str, CelType] = {n: DYN for n in ("request", "namespaceObject", "params", "authorizer")}
        objects: dict[str, DeclType] = {}
        if target is not None:
            names["object"] = names["oldObject"] = target.decl.cel
            objects = dict(object_types(target.decl))
        else:
            names["object"] = names["oldObject"] = DYN
        fields: dict[str, DeclType] = {}
        variables = DeclType(CelType("object", name=_VARIABLES_TYPE), fields=fields)
        objects[_VARIABLES_TYPE] = variables
        names["variables"] = variables.cel
        problems: dict[str, str] = {}
        for name, source in self.variables:
            checked = check(parse(source), names, objects, validate_literals=True)
            if checked.errors:
                problems[name] = _first_line(format_errors(source, checked.errors))
            fields[name] = DeclType(DYN if checked.errors else checked.result_type)
        self._scopes[index] = scope = (names, objects, problems)
        return scope

    def variable_problem(self, name: str) -> str | None:
        """Why the apiserver would refuse the variable ``name`` (API validation), or None."""
        problem = self._scope(-1)[2].get(name)
        return f"refused: {problem}" if problem else None

    def problem(self, source: str, expected: CelType | None) -> str | None:
        """Why the apiserver would refuse ``source`` or warn of it, or None."""
        parsed = parse(source)
        names, objects, _ = self._scope(-1)
        checked = check(parsed, names, objects, validate_literals=True)
        if checked.errors:
            return f"refused: {_first_line(format_errors(source, checked.errors))}"
        by_kind: dict[tuple[str, str], list[int]] = {}
        for i, target in enumerate(self.targets):
            by_kind.setdefault((target.api_version, target.kind), []).append(i)
        for (api_version, kind), indexes in by_kind.items():
            first = None
            for i in indexes:
                names, objects, _ = self._scope(i)
                checked = check(parsed, names, objects, validate_literals=True)
                if checked.errors:
                    first = first or _first_line(format_errors(source, checked.errors))
                elif expected is not None and checked.result_type not in (expected, DYN):
                    first = first or f"must evaluate to {expected}, not {checked.result_type}"
                else:
                    break
            else:
                return f"an expression warning for apiVersion={api_version}, kind={kind}: {first}"
        return None


def _first_line(errors: str) -> str:
    return errors.splitlines()[0].removeprefix("ERROR: <input>:")


# ---------------------------------------------------------------------------------------
# A policy


@dataclass
class _Rule:
    name: str             # validations[0]
    index: int            # its place in its section
    sources: list[str]    # the expressions it evaluates
    reasons: list[str]
    variables: set[str]   # every variable it reads, transitively


def _params_reason(policy: AdmissionPolicy) -> str | None:
    ref = policy.spec.paramRef
    if ref is None:
        return None
    if ref.dataKey is not None:
        return (f"reads params: key {ref.dataKey} of {ref.kind} {ref.name} parsed as YAML (dataKey), "
                "where a binding passes the whole object")
    if ref.namespace is None:
        return (f"reads params: {ref.kind} {ref.name} in any namespace, where a binding names one "
                "(or the request's)")
    return None


def export_policy(policy: AdmissionPolicy, resources: Mapping[tuple[str, str], KindResource],
                  overrides: ActionOverrides, result: Export, schemas: KindSchemas | None = None,
                  type_check: bool = True) -> None:
    spec = policy.spec
    typed = TypeCheck(policy, schemas if schemas is not None else shipped_schemas())
    name = policy.metadata.name
    params_reason = _params_reason(policy)

    # variables, in order: what each needs, its own and that of the variables it reads
    var_needs: dict[str, Needs] = {}
    var_deps: dict[str, set[str]] = {}
    for variable in spec.variables:
        found = reads(variable.expression)
        deps = set(var_needs) if "*" in found.variables else set(found.variables) & set(var_needs)
        closure, needs = set(deps), _needs(found)
        for d in deps:
            closure |= var_deps[d]
            needs.add(var_needs[d])
        var_deps[variable.name], var_needs[variable.name] = closure, needs

    def rule(label: str, sources: list[str]) -> _Rule:
        needs, variables = Needs(), set()
        for source in sources:
            found = reads(source)
            needs.add(_needs(found))
            deps = set(var_needs) if "*" in found.variables else set(found.variables) & set(var_needs)
            for d in deps:
                variables |= {d} | var_deps[d]
                needs.add(var_needs[d])
        return _Rule(label, int(label.rpartition("[")[2][:-1]), sources, needs.reasons(params_reason), variables)

    # what keeps the whole policy: its kinds, its match conditions
    whole: list[str] = []
    rules, problem = _resource_rules(spec.matchConstraints.resourceRules, resources)
    if problem:
        whole.append(problem)
    for i, condition in enumerate(spec.matchConditions):
        found = reads(condition.expression)
        reasons = _needs(found).reasons(params_reason)
        beyond = sorted(found.roots - _MATCH_CONDITION_ROOTS)
        if beyond:
            reasons.append(f"reads {', '.join(beyond)}, which a VAP's matchConditions do not see")
        if type_check and not reasons:
            problem = typed.problem(condition.expression, None)
            if problem and problem.startswith("refused"):
                reasons.append(f"does not type-check as the apiserver checks a VAP: {problem}")
        whole += [f"matchConditions[{i}] {r}" for r in reasons]

    validations = [rule(f"validations[{i}]", [v.expression] + ([v.messageExpression] if v.messageExpression else []))
                   for i, v in enumerate(spec.validations)]
    annotations = [rule(f"auditAnnotations[{i}]", [a.valueExpression]) for i, a in enumerate(spec.auditAnnotations)]
    warnings = [rule(f"warnings[{i}]", [w.expression] + ([w.messageExpression] if w.messageExpression else []))
                for i, w in enumerate(spec.warnings)]
    mutations = [rule(f"mutations[{i}]", [m.expression]) for i, m in enumerate(spec.mutations)]

    def type_problems(r: _Rule, checks: list[tuple[str, CelType | None]]) -> None:
        for name in [v.name for v in spec.variables if v.name in r.variables]:
            problem = typed.variable_problem(name)
            if problem:
                r.reasons.append(f"variables.{name} does not type-check as the apiserver checks a VAP: {problem}")
        for source, expected in checks:
            problem = typed.problem(source, expected)
            if problem:
                r.reasons.append(f"does not type-check as the apiserver checks a VAP: {problem}")

    for r, rule_spec in list(zip(validations, spec.validations)) + list(zip(warnings, spec.warnings)):
        if not r.reasons and type_check:
            type_problems(r, [(rule_spec.expression, BOOL)] +
                          ([(rule_spec.messageExpression, STRING)] if rule_spec.messageExpression else []))
    for r, a in zip(annotations, spec.auditAnnotations):
        if not r.reasons and type_check:
            type_problems(r, [(a.valueExpression, None)])

    for r, v in zip(validations, spec.validations):
        if v.reason not in VAP_REASONS:
            r.reasons.append(f"reason {v.reason}: a VAP gives only {', '.join(sorted(VAP_REASONS))}")
    if spec.validationStage == "Mutating":
        for r in validations + warnings + annotations:
            r.reasons.append("validationStage Mutating: judged before the schema, where a VAP runs after it")

    regions = action_regions(spec.validationActions, overrides.bindings.get(name, ()))
    scoped = [label for terms, _, label in regions if terms is not None]
    cluster_kinds = _cluster_scoped(policy, resources) if scoped else []
    region_terms = sum(len(t) for t, _, _ in regions if t is not None)
    if cluster_kinds:
        for r in validations + annotations:
            r.reasons.append(f"--policy-actions {', '.join(scoped)} selects namespaces, and a binding's "
                             f"namespaceSelector does not skip cluster-scoped {', '.join(cluster_kinds)}")
    elif region_terms > MAX_BINDINGS:
        for r in validations + annotations:
            r.reasons.append(f"--policy-actions splits into {region_terms} namespace regions (more than "
                             f"{MAX_BINDINGS} bindings)")

    map_rules, _ = _resource_rules(spec.matchConstraints.resourceRules, resources, MUTATING_OPERATIONS)
    replaced = atomic_maps(policy, bundled_crds()) if spec.mutations else None
    patches: dict[str, str] = {}
    for r, m in zip(mutations, spec.mutations):
        if not map_rules and not problem:
            r.reasons.append("the policy matches no CREATE or UPDATE, the only operations a MAP mutates")
        if r.reasons:
            continue
        try:
            patches[r.name] = _patch_rewrite(m.expression, m.patchType, replaced)
        except NotLiteral as exc:
            r.reasons.append(f"{m.patchType} {exc}")

    for r in validations + warnings + annotations + mutations:
        reasons = whole + r.reasons
        if reasons:
            result.kept.append(Kept(name, r.name, "; ".join(reasons)))
    if whole:
        return

    def out(group: list[_Rule]) -> list[_Rule]:
        return [r for r in group if not r.reasons]

    def variables_for(group: list[_Rule]) -> list[dict[str, str]]:
        used = set().union(*(r.variables for r in group)) if group else set()
        return [{"name": v.name, "expression": v.expression} for v in spec.variables if v.name in used]

    def uses_params(group: list[_Rule]) -> bool:
        sources = [s for r in group for s in r.sources]
        sources += [v["expression"] for v in variables_for(group)]
        sources += [c.expression for c in spec.matchConditions]
        return any("params" in reads(s).roots for s in sources)

    def common(group: list[_Rule]) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if uses_params(group) and spec.paramRef is not None:
            body["paramKind"] = {"apiVersion": spec.paramRef.apiVersion, "kind": spec.paramRef.kind}
        body["matchConstraints"] = _match_constraints(policy, rules)
        if spec.matchConditions:
            body["matchConditions"] = [{"name": c.name, "expression": c.expression} for c in spec.matchConditions]
        variables = variables_for(group)
        if variables:
            body["variables"] = variables
        body["failurePolicy"] = spec.failurePolicy
        return body

    def param_ref(body: Mapping[str, Any]) -> dict[str, Any]:
        if "paramKind" not in body:
            return {}
        ref = spec.paramRef
        # infergate reads params as null when the object is absent and judges on; a binding
        # either denies or skips the policy: skipping never denies what infergate admits
        return {"paramRef": {"name": ref.name, "namespace": ref.namespace, "parameterNotFoundAction": "Allow"}}

    def meta(object_name: str) -> dict[str, Any]:
        return {"name": object_name, "labels": dict(MANAGED_BY)}

    # the VAP of the validations (and audit annotations)
    denying, annotating = out(validations), out(annotations)
    if denying or annotating:
        vap_name = f"{PREFIX}{name}"
        body = common(denying + annotating)
        if denying:
            body["validations"] = [_validation(spec.validations[r.index]) for r in denying]
        if annotating:
            body["auditAnnotations"] = [{"key": spec.auditAnnotations[r.index].key,
                                         "valueExpression": spec.auditAnnotations[r.index].valueExpression}
                                        for r in annotating]
        result.objects.append({"apiVersion": API_VERSION, "kind": "ValidatingAdmissionPolicy",
                               "metadata": meta(vap_name), "spec": body})
        result.rules[vap_name] = (name, tuple(r.name for r in denying + annotating))
        for binding_name, actions, selector in _bindings(vap_name, regions):
            binding: dict[str, Any] = {"policyName": vap_name, **param_ref(body), "validationActions": actions}
            if selector is not None:
                binding["matchResources"] = {"namespaceSelector": selector}
            result.objects.append({"apiVersion": API_VERSION, "kind": "ValidatingAdmissionPolicyBinding",
                                   "metadata": meta(binding_name), "spec": binding})

    # the VAP of the warnings: a warning is a validation bound with [Warn]
    warning = out(warnings)
    if warning:
        vap_name = f"{PREFIX}{name}{WARN_SUFFIX}"
        body = common(warning)
        body["validations"] = [_validation(spec.warnings[r.index]) for r in warning]
        result.objects.append({"apiVersion": API_VERSION, "kind": "ValidatingAdmissionPolicy",
                               "metadata": meta(vap_name), "spec": body})
        result.rules[vap_name] = (name, tuple(r.name for r in warning))
        result.objects.append({"apiVersion": API_VERSION, "kind": "ValidatingAdmissionPolicyBinding",
                               "metadata": meta(vap_name),
                               "spec": {"policyName": vap_name, **param_ref(body), "validationActions": ["Warn"]}})

    # the MAP of the mutations
    mutating = out(mutations)
    if mutating:  # (map_rules is not empty: else every mutation stayed)
        map_name = f"{PREFIX}{name}"
        body = common(mutating)
        body["matchConstraints"] = _match_constraints(policy, map_rules)
        body["mutations"] = []
        for r in mutating:
            m = spec.mutations[r.index]
            key = "jsonPatch" if m.patchType == "JSONPatch" else "applyConfiguration"
            body["mutations"].append({"patchType": m.patchType, key: {"expression": patches[r.name]}})
        body["reinvocationPolicy"] = REINVOCATION
        result.mutating_rules[map_name] = (name, tuple(r.name for r in mutating))
        result.objects.append({"apiVersion": API_VERSION, "kind": "MutatingAdmissionPolicy",
                               "metadata": meta(map_name), "spec": body})
        result.objects.append({"apiVersion": API_VERSION, "kind": "MutatingAdmissionPolicyBinding",
                               "metadata": meta(map_name), "spec": {"policyName": map_name, **param_ref(body)}})


def _validation(rule: Any) -> dict[str, Any]:
    """A VAP validation: no ``fieldPath`` (a VAP's Validation has none: the apiserver refuses
    the field; the webhook's prefix of the message by the field is lost, the message kept)."""
    out: dict[str, Any] = {"expression": rule.expression}
    if rule.message:
        out["message"] = rule.message
    if rule.messageExpression:
        out["messageExpression"] = rule.messageExpression
    reason = getattr(rule, "reason", None)
    if reason is not None and reason != "Invalid":
        out["reason"] = reason
    return out


def _bindings(vap_name: str, regions: list[tuple[list[list[Requirement]] | None, list[str], str]]
              ) -> list[tuple[str, list[str], dict[str, Any] | None]]:
    """``(binding name, actions, namespaceSelector)``: the policy's own actions (or an override
    for every namespace) bind as ``<vap>``; namespace-scoped overrides as ``<vap>-override-<i>[-<j>]``."""
    out: list[tuple[str, list[str], dict[str, Any] | None]] = []
    for terms, actions, label in regions:
        if terms is None:
            out.append((vap_name, actions, None))
            continue
        terms = [t for t in terms if not _contradictory(t)]
        base = vap_name if not label else f"{vap_name}-{label.replace('[', '-').rstrip(']')}"
        for j, term in enumerate(terms):
            binding = base if len(terms) == 1 else f"{base}-{j}"
            out.append((binding, actions, {"matchExpressions": [_requirement(r) for r in term]}))
    return out


def export(policies: Iterable[AdmissionPolicy], resources: Mapping[tuple[str, str], KindResource],
           overrides: ActionOverrides | None = None, schemas: KindSchemas | None = None,
           type_check: bool = True) -> Export:
    """The VAPs, MAPs and bindings of ``policies``, and the rules that stay with the webhook.
    ``schemas``: the kinds' schemas the apiserver type-checks against (default: the bundled
    CRDs'); ``type_check=False`` exports rules the apiserver's type check would warn of (what the
    recorder asks the apiserver about, to show the check keeps exactly those)."""
    result = Export()
    for policy in policies:
        export_policy(policy, resources, overrides or ActionOverrides(), result, schemas, type_check)
    return result
