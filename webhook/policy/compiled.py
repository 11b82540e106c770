"""A loaded policy, compiled: matching and evaluation against one request."""

from __future__ import annotations

import copy
import itertools
import operator
import re
from typing import Any, Callable, Mapping

import jsonpatch
import orjson

from webhook import documents
from webhook.cel import CelError, get_engine
from webhook.cel.runtime_bound import remember_stable
from webhook.policy.arguments import UNREAD, ReviewLookup, list_selected, review_lookups
from webhook.policy.batch import batch_source, compile_batch, judged_source, list_source, request_fields_read
from webhook.policy.scope import NOTHING, POLICY_VARIABLES, REQUEST_VARIABLES, UNPREPARED, Prepared, ReviewScope
from webhook.policy.model import AdmissionPolicy, LabelSelector, Lookup
from webhook.policy.verdict import Denial, Trace, Verdict
from webhook.state import ClusterState, from_label_selector
from webhook.state.selectors import Selector, SelectorError

# Every expression is compiled with the same names; unused ones cost nothing.
CEL_VARIABLES = ("object", "oldObject", "request", "namespaceObject", "params", "lookups", "variables")
_serials = itertools.count()
_RULED_LIMIT = 1024


class PolicyInput:
    """The request as policies see it (built once per request by the chain; a mutated object
    is a new input: ``with_object``). Read-only by convention: policies only read it.

    A plain class with slots: built on every review, where a frozen dataclass's field by field
    ``object.__setattr__`` would cost more than the rest of its construction."""

    __slots__ = ("request", "object", "old_object", "namespace_object", "state", "rule_key", "scope")

    def __init__(self, request: Mapping[str, Any], object: dict[str, Any] | None, old_object: dict[str, Any] | None,
                 namespace_object: dict[str, Any] | None, state: ClusterState) -> None:
        self.request = request  # the AdmissionRequest minus object/oldObject
        self.object = object
        self.old_object = old_object
        self.namespace_object = namespace_object
        self.state = state
        # what policies' rules match: (group, kind, operation, subresource)
        kind = request.get("kind") or {}
        self.rule_key = kind.get("group", ""), kind.get("kind", ""), request.get("operation"), \
            request.get("subResource") or ""
        # this input's values shared by its policies' batches
        self.scope = ReviewScope({"object": object, "oldObject": old_object, "request": request,
                                  "namespaceObject": namespace_object})

    def with_object(self, obj: dict[str, Any] | None) -> "PolicyInput":
        """The same request carrying ``obj`` (after a mutation)."""
        return PolicyInput(self.request, obj, self.old_object, self.namespace_object, self.state)

    @property
    def group(self) -> str:
        return self.rule_key[0]

    @property
    def kind(self) -> str:
        return self.rule_key[1]


class Expression:
    """A compiled CEL expression with the place it came from."""

    def __init__(self, program: Any, source: str, where: str) -> None:
        self.program, self.source, self.where = program, source, where
        self._refs = _references(source)
        self._needs = _needs(source)

    def evaluate(self, activation: Mapping[str, Any], accept: Callable[[Any], bool] | None = None) -> Any:
        """``accept``: see ``Program.evaluate`` (the answer a fast path may give alone)."""
        # Only what the expression names crosses into CEL: converting every lookup and
        # variable for every expression would cost more than evaluating it.
        data: dict[str, Any] = {}
        for root, names in self._needs.items():
            value = activation.get(root)
            if names is not None and isinstance(value, Mapping):
                value = {n: value[n] for n in names if n in value}
            data[root] = value
        # the engine's default cost limit: the apiserver's per-call one
        return self.program.evaluate(data) if accept is None else self.program.evaluate(data, accept=accept)

    def seen(self, activation: Mapping[str, Any]) -> dict[str, Any]:
        """The values of the paths the expression names (for --explain)."""
        return {ref: _resolve(activation, ref) for ref in self._refs}


# a variable and its field path (".x" or optional ".?x"), without a trailing method call (".exists(")
_REF = re.compile(r"\b(object|oldObject|params|namespaceObject|request|lookups|variables)"
                  r"((?:\.\??[A-Za-z_][A-Za-z0-9_]*(?![A-Za-z0-9_]|\s*\())*)")
_MISSING = "<absent>"


def _references(source: str) -> list[str]:
    """The paths an expression reads, most specific first seen; ancestors of others dropped."""
    found = list(dict.fromkeys(m.group(0).replace(".?", ".") for m in _REF.finditer(source)))
    return [r for r in found if not any(other.startswith(r + ".") for other in found)]


_ROOT = re.compile(r"\b(object|oldObject|params|namespaceObject|request|lookups|variables)\b(\.\??([A-Za-z_][A-Za-z0-9_]*))?")


def _needs(source: str) -> dict[str, set[str] | None]:
    """The variables an expression reads; for ``lookups``/``variables`` the names it selects
    (``None``: the whole map, e.g. when indexed some other way)."""
    needs: dict[str, set[str] | None] = {}
    for m in _ROOT.finditer(source):
        root, name = m.group(1), m.group(3)
        if root not in ("lookups", "variables"):
            needs[root] = None
        elif name is None:
            needs[root] = None
        elif root not in needs:
            needs[root] = {name}
        elif needs[root] is not None:
            needs[root].add(name)
    return needs


def _resolve(activation: Mapping[str, Any], ref: str) -> Any:
    value: Any = activation
    for part in ref.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def merge_apply(target: Any, patch: Any) -> Any:
    """Apply-configuration merge: maps merge key by key, anything else replaces."""
    if not isinstance(target, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target)
    for key, value in patch.items():
        merged[key] = merge_apply(target.get(key), value) if key in target else copy.deepcopy(value)
    return merged


class CompiledPolicy:
    """An :class:`AdmissionPolicy` with every expression compiled (see ``loader``)."""

    def __init__(self, spec: AdmissionPolicy, compile_: Callable[[str, tuple[Any, ...]], Expression],
                 file: str, engine: Any = None) -> None:
        self.name = spec.metadata.name
        self.file = file
        self.definition = spec
        s = spec.spec
        self.fail_closed = s.failurePolicy == "Fail"
        self.validates_when_mutating = s.validationStage == "Mutating"
        self.rules = s.matchConstraints.resourceRules
        self.namespace_selector = _selector(s.matchConstraints.namespaceSelector)
        self.object_selector = _selector(s.matchConstraints.objectSelector)
        self._selects = not (self.namespace_selector.empty and self.object_selector.empty)
        self.param_ref = s.paramRef
        self.lookups = [(lk, self._compile_lookup(lk, i, compile_)) for i, lk in enumerate(s.lookups)]
        self.match_conditions = [(m.name, compile_(m.expression, ("spec", "matchConditions", i, "expression")))
                                 for i, m in enumerate(s.matchConditions)]
        self.variables = [(v.name, compile_(v.expression, ("spec", "variables", i, "expression")))
                          for i, v in enumerate(s.variables)]
        self.mutations = [(m.patchType, compile_(m.expression, ("spec", "mutations", i, "expression")))
                          for i, m in enumerate(s.mutations)]
        self.validations = [(v, compile_(v.expression, ("spec", "validations", i, "expression")),
                             compile_(v.messageExpression, ("spec", "validations", i, "messageExpression"))
                             if v.messageExpression else None) for i, v in enumerate(s.validations)]
        self.warnings = [(w, compile_(w.expression, ("spec", "warnings", i, "expression")),
                          compile_(w.messageExpression, ("spec", "warnings", i, "messageExpression"))
                          if w.messageExpression else None) for i, w in enumerate(s.warnings)]
        self.audit_annotations = [(a.key, compile_(a.valueExpression, ("spec", "auditAnnotations", i, "valueExpression")))
                                  for i, a in enumerate(s.auditAnnotations)]
        judges = bool(self.validations or self.warnings or self.audit_annotations)
        self.validating_stage = judges and not self.validates_when_mutating  # has work in the validating webhook
        self.mutating_stage = bool(self.mutations) or self.validates_when_mutating  # ... in the mutating webhook
        self._params_cache: tuple[Any, Any] | None = None
        self._engine = engine
        self._binds: bool | None = None  # whether the engine shares bindings (``_shares``)
        # built on first use: one program per stage (key: mutating), for the lookups' arguments
        # ("lookups") and the rest of the mutations after a change (("mutations", start)), see
        # ``batch``; the lookups' Python readers ("readers"), what the batches read ("reads",
        # "lookups read")
        self._batches: dict[Any, Any] = {}
        # the names of this policy's params, lookups and variables in a review's shared bindings
        serial = next(_serials)
        self._serial = serial
        self.names = {name: f"__{name}_{serial}" for name in POLICY_VARIABLES}
        self._state_lookups = tuple(lk.name for lk, exprs in self.lookups if _reads_only_state(exprs.values()))
        self._state_variables = self._variables_of_state()
        self._state_values: tuple[tuple[Any, ...], dict[str, Any]] | None = None  # (inputs, values)
        # the lookups read per review (their arguments read the request), by index
        self._review_lookups = tuple(i for i, (lk, _) in enumerate(self.lookups) if lk.name not in self._state_lookups)
        self._state_kept: tuple[Any, int, tuple[Any, dict[str, Any], dict[str, Any]]] | None = None  # ``_of_state``
        self._params_kept: tuple[Any, int, Any] | None = None  # (state, generation, params): ``_params``
        self._stages = {True: self.mutating_stage, False: self.validating_stage}
        self._computed_variables = [name for name, _ in self.variables if name not in self._state_variables]
        self._judged = len(self.validations) + len(self.warnings)  # a validating batch's answers: these, ...
        self._answers = self._judged + len(self.audit_annotations)  # ... then the audit annotations'
        self._ruled: dict[tuple[Any, ...], bool] = {}  # (group, kind, operation, subresource) -> the rules match
        self._answers_by_key: dict[bytes, list[Any]] = {}  # ``_answer_key`` -> the validating batch's answer
        self._request_fields: tuple[str, ...] = ()  # all the validating batch reads, when only request fields

    @staticmethod
    def _compile_lookup(lookup: Lookup, i: int, compile_) -> dict[str, Expression]:
        source = lookup.get or lookup.list
        section = "get" if lookup.get else "list"
        fields = ("name", "namespace") if lookup.get else ("namespace", "labelSelector", "selector")
        return {f: compile_(getattr(source, f), ("spec", "lookups", i, section, f))
                for f in fields if getattr(source, f) is not None}

    def _variables_of_state(self) -> tuple[str, ...]:
        """The variables that read cluster state (lookups whose arguments read no request
        value, params) and nothing of the request: the same value for every request until
        the state changes, so computed once per state, not per review (``_state_variables``)."""
        state_lookups = set(self._state_lookups)
        found: list[str] = []
        for name, expr in self.variables:
            needs = expr._needs
            if any(root in needs for root in REQUEST_VARIABLES) or not ({"lookups", "params"} & needs.keys()):
                continue
            if "lookups" in needs and (needs["lookups"] is None or not needs["lookups"] <= state_lookups):
                continue
            if "variables" in needs and (needs["variables"] is None or not needs["variables"] <= set(found)):
                continue
            found.append(name)
        return tuple(found)

    # -- matching ---------------------------------------------------------------------
    def matches(self, inp: PolicyInput) -> bool:
        key = inp.rule_key
        ruled = self._ruled.get(key)
        if ruled is None:
            if len(self._ruled) >= _RULED_LIMIT:  # requests name any kind they like: keep it bounded
                self._ruled.clear()
            ruled = self._ruled[key] = self._rules_match(*key)
        if not ruled or not self._selects:
            return ruled
        subject = inp.object if inp.object is not None else inp.old_object
        if not self.object_selector.empty and not self.object_selector.matches(_labels(subject)):
            return False
        if not self.namespace_selector.empty:
            if inp.kind == "Namespace" and inp.group == "":
                return self.namespace_selector.matches(_labels(subject))
            namespace = inp.request.get("namespace")
            if namespace:  # cluster-scoped objects are not filtered by namespace
                labels = _labels(inp.namespace_object) or {"kubernetes.io/metadata.name": namespace}
                return self.namespace_selector.matches(labels)
        return True

    def may_apply(self, rule_key: tuple[str, str, Any, str], mutating: bool) -> bool:
        """Whether the policy has work in the stage and its rules match requests with this key
        (what :meth:`matches` checks first, before the selectors)."""
        return self._stages[mutating] and self._rules_match(*rule_key)

    def _rules_match(self, group: str, kind: str, operation: Any, sub: str) -> bool:
        return any(("*" in rule.apiGroups or group in rule.apiGroups)
                   and ("*" in rule.kinds or kind in rule.kinds)
                   and ("*" in rule.operations or operation in rule.operations)
                   and (not sub or sub in rule.subresources or "*" in rule.subresources) for rule in self.rules)

    # -- evaluation ---------------------------------------------------------------------
    def evaluate(self, inp: PolicyInput, *, mutating: bool, explain: bool = False) -> Verdict | None:
        """None when the policy does not apply (rules, selectors, matchConditions)."""
        if not self._applies(inp, mutating):
            return None
        verdict = Verdict(self.name, object=inp.object)
        trace = verdict.traces.append if explain else None
        try:
            if not explain:
                decided = self._run_batch(inp, verdict, mutating)
                if decided is not None:
                    return verdict if decided else None
            activation: dict[str, Any] = {
                "object": inp.object,
                "oldObject": inp.old_object,
                "request": inp.request,
                "namespaceObject": inp.namespace_object,
                "params": self._params(inp.state),
                "lookups": {},
                "variables": {},
            }
            for lookup, exprs in self.lookups:  # in order: a lookup may use the ones before it
                activation["lookups"][lookup.name] = self._lookup(lookup, exprs, activation, inp.state, trace)
            for name, expr in self.match_conditions:
                value = self._eval(expr, activation, f"matchConditions.{name}", trace, _is_bool)
                if value is not True:
                    return None
            for name, expr in self.variables:
                activation["variables"][name] = self._eval(expr, activation, f"variables.{name}", trace)
            if mutating:
                self._mutate(activation, verdict, trace)
            if mutating == self.validates_when_mutating:
                self._validate(activation, verdict, trace)
        except _RuleError as exc:
            if self.fail_closed:
                verdict.denials.append(Denial(self.name, exc.message, "InternalError"))
            else:
                verdict.warnings.append(f"policy {self.name} not applied: {exc.message}")
        return verdict

    def _applies(self, inp: PolicyInput, mutating: bool) -> bool:
        return self._stages[mutating] and self.matches(inp)

    # -- the fast path: the stage's expressions as one program (``batch``) ----------------------
    def prepare(self, inp: PolicyInput, *, mutating: bool) -> None:
        """Before a stage's policies run: this policy's lookups and state variables into the
        review's scope (``ReviewScope``), so that one binding serves every policy's batch."""
        if self._applies(inp, mutating) and self._batch(mutating) is not None:
            self._prepared(inp)

    def _shares(self) -> bool:
        """Whether the engine binds values for many programs (else each batch gets its data)."""
        if self._binds is None:
            if self._engine is None:
                self._engine = get_engine()
            self._binds = hasattr(self._engine, "bind")
        return self._binds

    def _rename(self) -> dict[str, str] | None:
        return self.names if self._shares() else None

    def _batch(self, mutating: bool) -> Expression | None:
        if mutating not in self._batches:
            self._batches[mutating] = self._build_batch(mutating)
        return self._batches[mutating]

    def _build_batch(self, mutating: bool) -> Expression | None:
        if mutating and self.validates_when_mutating:
            return None  # validations of the mutated object: one program could not see it
        if mutating:
            body = [expr.source for _, expr in self.mutations]
        else:
            body = [judged_source(expr.source, message.source if message is not None else None)
                    for _, expr, message in self.validations + self.warnings]
            body += [expr.source for _, expr in self.audit_annotations]
        if len(self.match_conditions) + len(self.variables) + len(body) < 2 and not (self.lookups or self.param_ref):
            return None  # one expression reading only the request: nothing to gain
        source = batch_source([expr.source for _, expr in self.match_conditions],
                              [(name, expr.source) for name, expr in self.variables], body,
                              return_variables=mutating and len(self.mutations) > 1, given=self._state_variables)
        batch = self._compile_batch(source, "mutations" if mutating else "validations", self._rename())
        if not mutating and batch is not None:
            self._request_fields = tuple(sorted(request_fields_read(source) or ()))
        return batch

    def _compile_batch(self, source: str | None, what: str, rename: dict[str, str] | None = None) -> Expression | None:
        program = compile_batch(self._engine or get_engine(), source, CEL_VARIABLES, rename)
        return Expression(program, source, f"{self.file}: {self.name} ({what})") if program is not None else None

    def _rest_of_mutations(self, start: int) -> Expression | None:
        """The mutations from ``start`` on as one program (after an earlier one changed the object)."""
        key = ("mutations", start)
        if key not in self._batches:
            rest = self.mutations[start:]
            self._batches[key] = self._compile_batch(list_source(e.source for _, e in rest), "mutations") \
                if len(rest) > 1 else None
        return self._batches[key]

    def _prepared(self, inp: PolicyInput) -> Prepared | None:
        """This policy's values for ``inp`` (its scope keeps them), or None when the
        per-expression path must run (a lookup's argument failed: it reports the error)."""
        scope = inp.scope
        prepared = scope.prepared.get(self._serial, UNPREPARED)
        if prepared is UNPREPARED:
            prepared = scope.prepared[self._serial] = self._prepare(inp)
            if prepared is not None and self._shares():
                scope.add(prepared.bound(self.names))
        return prepared

    def _prepare(self, inp: PolicyInput) -> Prepared | None:
        if self._reads_request_only():
            return NOTHING  # its batches read only the request
        of_state = self._of_state(inp.state)
        if of_state is None:
            return None
        params, lookups, variables = of_state
        if self._review_lookups:
            lookups = self._lookups_of_review(inp, params, lookups)
            if lookups is None:
                return None
        return Prepared(params, lookups, variables, self._lookups_read())

    def _reads_request_only(self) -> bool:
        """Whether the batches read nothing but the request (no params, lookups, variables
        computed before them): such a policy has nothing to prepare."""
        if "request only" not in self._batches:
            self._batches["request only"] = not self.lookups and self.param_ref is None and self._shares() \
                and self._reads().isdisjoint(self.names.values())
        return self._batches["request only"]

    def _of_state(self, state: ClusterState) -> tuple[Any, dict[str, Any], dict[str, Any]] | None:
        """What reads only cluster state: the params, the results of the lookups whose
        arguments read no request value (``_state_lookups``) and the state variables' values;
        kept while the state's objects stay the same (``ClusterState.generation``, bumped by
        every write), so a review neither lists nor sorts them again. None when a lookup's
        argument fails (the per-expression path reports it)."""
        generation = getattr(state, "generation", None)
        kept = self._state_kept
        if kept is not None and generation is not None and kept[0] is state and kept[1] == generation:
            return kept[2]
        params = self._params(state)
        found: dict[str, Any] = {}
        if self._state_lookups:
            activation = {"params": params, "lookups": found, "variables": {}}
            try:
                for lookup, exprs in self.lookups:
                    if lookup.name in self._state_lookups:
                        found[lookup.name] = self._lookup(lookup, exprs, activation, state, None)
            except _RuleError:
                return None
        variables = self._state_values_for(found, params)
        if variables is None:
            return None
        part = (params, found, variables)
        if generation is not None:
            self._state_kept = (state, generation, part)
        return part

    def _lookups_of_review(self, inp: PolicyInput, params: Any, of_state: dict[str, Any]) -> dict[str, Any] | None:
        """Every lookup's result, in order: those of cluster state alone as kept, the others
        read for this review."""
        read = self._review_reader()
        if read is not None:  # the usual shapes, read in Python: no activation for CEL
            found = read({"object": inp.object, "oldObject": inp.old_object, "request": inp.request,
                          "namespaceObject": inp.namespace_object, "params": params}, inp.state, of_state)
            if found is not UNREAD:
                return found
        lookups_so_far: dict[str, Any] = {}
        activation = {**inp.scope.values, "params": params, "lookups": lookups_so_far, "variables": {}}
        arguments = self._lookup_arguments(activation)
        try:
            for i, (lookup, exprs) in enumerate(self.lookups):
                if lookup.name in of_state:
                    lookups_so_far[lookup.name] = of_state[lookup.name]
                else:
                    lookups_so_far[lookup.name] = self._lookup(lookup, exprs, activation, inp.state, None,
                                                               arguments[i] if arguments else None)
        except _RuleError:
            return None
        return lookups_so_far

    def _reads(self) -> frozenset[str]:
        """The names the stages' batches read in a review's bindings."""
        if "reads" not in self._batches:
            batches = [self._batch(stage) for stage in (True, False) if self._stages[stage]]
            self._batches["reads"] = frozenset().union(*(b.program.reads for b in batches if b is not None))
        return self._batches["reads"]

    def _lookups_read(self) -> frozenset[str] | None:
        """The lookups the stages' batches read (None: all); only those are bound."""
        if "lookups read" not in self._batches:
            read: set[str] | None = set()
            for stage in (True, False):
                batch = self._batch(stage) if self._stages[stage] else None
                if batch is None or "lookups" not in batch._needs:
                    continue
                if batch._needs["lookups"] is None:
                    read = None
                    break
                read |= batch._needs["lookups"]
            self._batches["lookups read"] = frozenset(read) if read is not None else None
        return self._batches["lookups read"]

    def _state_values_for(self, lookups: dict[str, Any], params: Any) -> dict[str, Any] | None:
        """The state variables' values (``_variables_of_state``), computed again only when the
        objects they read change (stored objects are never mutated: compared by identity)."""
        if not self._state_variables:
            return {}
        inputs = (params, *(lookups[name] for name in self._state_lookups))
        cached = self._state_values
        if cached is not None and len(cached[0]) == len(inputs) and all(map(_same, cached[0], inputs)):
            return cached[1]
        activation = {"params": params, "lookups": lookups, "variables": {}}
        exprs = dict(self.variables)
        try:
            for name in self._state_variables:
                activation["variables"][name] = exprs[name].evaluate(activation)
        except CelError:
            return None
        self._state_values = (inputs, activation["variables"])
        remember_stable(activation["variables"])  # the same values until those objects change
        return activation["variables"]

    def _lookup_arguments(self, activation: Mapping[str, Any]) -> list[dict[str, Any] | None] | None:
        """The names and selectors of the lookups that read the review (``_review_lookups``;
        None in the places of the others) from one engine call, when none reads another
        lookup; None: evaluate them one by one (also on any error, for its exact text). (The
        usual shapes never get here: ``_review_reader`` reads them in Python.)"""
        if "lookups" not in self._batches:
            exprs = [e for i in self._review_lookups for e in self.lookups[i][1].values()]
            program = None
            if exprs and not any("lookups" in e._needs or "variables" in e._needs for e in exprs):
                program = self._compile_batch(list_source(e.source for e in exprs), "lookups")
            self._batches["lookups"] = program
        batch = self._batches["lookups"]
        if batch is None:
            return None
        try:  # on its own data: the review's values are bound once the lookups are known
            values = batch.evaluate(activation)
        except CelError:
            return None
        if not isinstance(values, list):
            return None
        out: list[dict[str, Any] | None] = [None] * len(self.lookups)
        it = iter(values)
        for i in self._review_lookups:
            out[i] = {f: next(it, None) for f in self.lookups[i][1]}
        return out if len(values) == sum(len(self.lookups[i][1]) for i in self._review_lookups) else None

    def _review_reader(self) -> Callable[..., Any] | None:
        """The lookups that read the review as one generated function (``arguments.review_lookups``)."""
        if "review reader" not in self._batches:
            lookups = []
            for i in self._review_lookups:
                lookup, exprs = self.lookups[i]
                source = lookup.get or lookup.list
                lookups.append(ReviewLookup(lookup.name, lookup.get is not None, source.apiVersion, source.kind,
                                            {f: e.source for f, e in exprs.items()}))
            self._batches["review reader"] = review_lookups(lookups, [lk.name for lk, _ in self.lookups],
                                                            remember_stable)
        return self._batches["review reader"]

    def _run_batch(self, inp: PolicyInput, verdict: Verdict, mutating: bool) -> bool | None:
        """The stage in one engine call: True when it decided the stage, False when a
        matchCondition is not true, None when the per-expression path must run (no batch, an
        error, an answer of another shape: that path writes the exact error or message)."""
        batch = self._batch(mutating)
        if batch is None:
            return None
        prepared = self._prepared(inp)
        if prepared is None:
            return None
        accept = _is_list if mutating else self._passes  # patches are used as they are
        key = self._answer_key(inp.request) if not mutating and self._request_fields else None
        results = self._answers_by_key.get(key) if key is not None else None
        if results is None:
            try:
                if self._shares():
                    bindings = inp.scope.bindings(self._engine or get_engine(), batch.program.reads)
                    results = batch.program.evaluate(bindings, accept=accept)
                else:
                    results = batch.evaluate({**inp.scope.values, **prepared.bound(None)}, accept)
            except CelError:
                return None
            if key is not None and type(results) is list:
                if len(self._answers_by_key) >= _ANSWERS_KEPT:
                    self._answers_by_key.clear()
                self._answers_by_key[key] = results
        if not isinstance(results, list):
            return None
        if not results:
            return False
        if mutating:
            activation = {"object": inp.object, "oldObject": inp.old_object, "request": inp.request,
                          "namespaceObject": inp.namespace_object, "params": prepared.params,
                          "lookups": prepared.lookups, "variables": dict(prepared.variables)}
            return self._apply_batched_mutations(results, activation, verdict)
        if self._passes(results):  # every rule true: the common answer (and the only native one taken)
            if self.audit_annotations:
                self._annotate(results, verdict)
            return True
        return self._judged_by_batch(results, verdict)

    def _answer_key(self, request: Mapping[str, Any]) -> bytes | None:
        """For a validating batch that reads only fields of ``request`` (``_request_fields``:
        a warning about an API version, a check of the user), those fields' values: the same
        values give the same answer, kept (``_answers_by_key``) instead of evaluated again."""
        try:
            return orjson.dumps([request.get(name) for name in self._request_fields], option=orjson.OPT_SORT_KEYS)
        except TypeError:  # (the request view holds JSON values only)
            return None

    def _judged_by_batch(self, results: list[Any], verdict: Verdict) -> bool | None:
        """The validating stage from cel-expr's answer when a rule is not true: its values (a
        failed rule's messageExpression too, see ``judged_source``) are the ones the
        per-expression path computes, so the denials and warnings are written here as there.
        None (that path runs) for an answer of any other shape: a rule neither true nor
        false, an audit annotation that is not text."""
        if len(results) != self._answers:
            return None
        denials: list[Denial] = []
        warnings: list[str] = []
        validations = len(self.validations)
        for i, value in enumerate(results[:self._judged]):
            if value is True:
                continue
            rule, expr, message_expr = self.validations[i] if i < validations else self.warnings[i - validations]
            if message_expr is None:
                if value is not False:
                    return None
                message = rule.message or _failed_expression(expr)
            elif type(value) is list and len(value) == 1:  # the messageExpression's value
                message = _message_text(rule, value[0], _failed_expression(expr))
            else:
                return None
            if i < validations:
                denials.append(_denial(self.name, rule, message))
            else:
                warnings.append(message)
        if any(value is not None and type(value) is not str for value in results[self._judged:]):
            return None
        verdict.denials += denials
        verdict.warnings += warnings
        self._annotate(results, verdict)
        return True

    def _annotate(self, results: list[Any], verdict: Verdict) -> None:
        """The audit annotations of a validating batch's answer (text or null, as checked)."""
        for (key, _), value in zip(self.audit_annotations, results[self._judged:]):
            if value is not None:
                verdict.audit_annotations[f"{self.name}/{key}"] = value

    def _passes(self, results: Any) -> bool:
        """The validating batch's common answers: a matchCondition not true (``[]``), or every
        validation and warning true and every audit annotation a string or null
        (``Program.evaluate``'s ``accept``)."""
        if type(results) is not list:
            return False
        if not results:
            return True
        if len(results) != self._answers:
            return False
        judged = self._judged
        for value in results[:judged]:
            if value is not True:
                return False
        for value in results[judged:]:
            if value is not None and type(value) is not str:
                return False
        return True

    def _apply_batched_mutations(self, values: list[Any], activation: dict[str, Any], verdict: Verdict) -> bool | None:
        patches, variables = values, []
        computed = self._computed_variables
        if len(self.mutations) > 1:  # the batch also returned the variables, for the later mutations
            if len(values) != 2 or not isinstance(values[0], list) or len(values[0]) != len(computed):
                return None
            variables, patches = values
        if not isinstance(patches, list) or len(patches) != len(self.mutations):
            return None
        activation["variables"].update(zip(computed, variables))
        self._apply_mutations(patches, 0, activation, verdict)
        return True

    def _apply_mutations(self, patches: Any, start: int, activation: dict[str, Any], verdict: Verdict) -> None:
        """Apply the patches of mutations ``start``...; once one changes the object, the later
        ones are evaluated again on the result (a batch of them, or one by one on any error)."""
        while True:
            if not isinstance(patches, list) or len(patches) != len(self.mutations) - start:
                self._mutate(activation, verdict, None, start=start)
                return
            for i, ((patch_type, _), patch) in enumerate(zip(self.mutations[start:], patches), start):
                activation["object"] = self._apply(patch_type, patch, activation["object"], f"mutations[{i}]")
                changed = bool(patch) if patch_type == "JSONPatch" else patch is not None and patch != {}
                if changed and i + 1 < len(self.mutations):
                    start = i + 1
                    break
            else:
                verdict.object = activation["object"]
                return
            rest = self._rest_of_mutations(start)
            try:
                patches = rest.evaluate(activation, _is_list) if rest is not None else None
            except CelError:
                patches = None

    def _eval(self, expr: Expression, activation: Mapping[str, Any], rule: str, trace,
              accept: Callable[[Any], bool] | None = None) -> Any:
        """``accept``: the answers a fast path may give alone (see ``Program.evaluate``)."""
        try:
            value = expr.evaluate(activation, accept)
        except CelError as exc:
            if trace:
                trace(Trace(self.name, rule, expr.source, expr.seen(activation), f"error: {exc}"))
            raise _RuleError(f"policy {self.name}: {rule}: expression {' '.join(expr.source.split())!r} "
                             f"resulted in error: {exc}") from exc
        if trace:
            trace(Trace(self.name, rule, expr.source, expr.seen(activation), _verdict_text(value)))
        return value

    def _lookup(self, lookup: Lookup, exprs: dict[str, Expression], activation, state: ClusterState, trace,
                values: dict[str, Any] | None = None) -> Any:
        if values is None:
            values = {f: self._eval(e, activation, f"lookups.{lookup.name}.{f}", trace) for f, e in exprs.items()}
        return self._fetch(lookup, values, state)

    def _fetch(self, lookup: Lookup, values: Mapping[str, Any], state: ClusterState) -> Any:
        """What a lookup with these arguments finds."""
        if lookup.get is not None:
            name = values.get("name")
            if not isinstance(name, str) or not name:
                return None
            namespace = values.get("namespace")
            found = state.get(lookup.get.apiVersion, lookup.get.kind, name, namespace or None)
            if found is not None:
                remember_stable(found)
            return found
        source = lookup.list
        if source.selector is not None:
            try:
                found = list_selected(state, source.apiVersion, source.kind, values.get("namespace") or None,
                                      values.get("selector"))
            except SelectorError as exc:
                raise _RuleError(f"policy {self.name}: lookups.{lookup.name}.selector: {exc}") from None
        else:
            found = state.list(source.apiVersion, source.kind, values.get("namespace") or None,
                               values.get("labelSelector") or None)
        for obj in found:
            remember_stable(obj)  # stored objects are never mutated: sized once for the cost bound
        return found

    def _params(self, state: ClusterState) -> Any:
        """The params object (or its ``dataKey`` parsed), kept while the state's objects stay
        the same (as ``_of_state``)."""
        if self.param_ref is None:
            return None
        generation = getattr(state, "generation", None)
        kept = self._params_kept
        if generation is not None and kept is not None and kept[0] is state and kept[1] == generation:
            return kept[2]
        params = self._read_params(state)
        if generation is not None:
            self._params_kept = (state, generation, params)
        return params

    def _read_params(self, state: ClusterState) -> Any:
        ref = self.param_ref
        if ref.namespace:
            source = state.get(ref.apiVersion, ref.kind, ref.name, ref.namespace)
        else:
            source = next((o for o in state.list(ref.apiVersion, ref.kind)
                           if (o.get("metadata") or {}).get("name") == ref.name), None)
        if source is None or not ref.dataKey:
            if source is not None:
                remember_stable(source)
            return source
        cached = self._params_cache
        if cached is not None and cached[0] is source:  # stored objects are never mutated in place
            return cached[1]
        text = (source.get("data") or {}).get(ref.dataKey)
        # through the one reader: the nesting limit holds for params too; an unreadable config
        # is an unknown config
        found = documents.parse(text, ref.dataKey, unwrap_lists=False) if isinstance(text, str) else None
        parsed = found.documents[0].content if found is not None and found.error is None and found.documents else None
        self._params_cache = (source, parsed)
        if isinstance(parsed, dict):
            remember_stable(parsed)  # kept per source and never mutated: sized once for the cost bound
        return parsed

    def _message(self, rule: Any, expr: Expression | None, activation, default: str, trace, where: str) -> str:
        if expr is None:
            return rule.message or default
        try:
            value = expr.evaluate(activation)
        except CelError:
            value = None  # as the apiserver: a failing messageExpression falls back to message
        if trace and _is_message(value):
            trace(Trace(self.name, where, expr.source, expr.seen(activation), repr(value)))
        return _message_text(rule, value, default)

    def _validate(self, activation, verdict: Verdict, trace) -> None:
        for i, (rule, expr, message_expr) in enumerate(self.validations):
            where = f"validations[{i}]"
            if self._eval(expr, activation, where, trace, _is_true) is True:
                continue
            message = self._message(rule, message_expr, activation, _failed_expression(expr), trace,
                                    f"{where}.messageExpression")
            verdict.denials.append(_denial(self.name, rule, message))
        for i, (rule, expr, message_expr) in enumerate(self.warnings):
            where = f"warnings[{i}]"
            if self._eval(expr, activation, where, trace, _is_true) is True:
                continue
            verdict.warnings.append(self._message(rule, message_expr, activation, _failed_expression(expr), trace,
                                                  f"{where}.messageExpression"))
        for key, expr in self.audit_annotations:
            value = self._eval(expr, activation, f"auditAnnotations.{key}", trace, _is_text)
            if value is not None:
                verdict.audit_annotations[f"{self.name}/{key}"] = _text(value)

    def _mutate(self, activation, verdict: Verdict, trace, start: int = 0) -> None:
        for i, (patch_type, expr) in enumerate(self.mutations[start:], start):
            where = f"mutations[{i}]"
            patch = self._eval(expr, activation, where, trace, _any)
            activation["object"] = self._apply(patch_type, patch, activation["object"], where)  # later mutations see it
        verdict.object = activation["object"]

    def _apply(self, patch_type: str, patch: Any, obj: Any, where: str) -> Any:
        try:
            if patch_type == "JSONPatch":  # on a copy: the input is the request's (or a policy's) object
                return jsonpatch.apply_patch(_copy_json(obj), list(patch), in_place=True) if patch else obj
            return merge_apply(obj, patch) if patch is not None else obj
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, ValueError) as exc:
            raise _RuleError(f"policy {self.name}: {where}: cannot apply {patch!r}: {exc}") from exc


_ANSWERS_KEPT = 256  # per policy: the distinct request values (kinds, versions, users) seen recently


def _failed_expression(expr: Expression) -> str:
    """A failed rule's message when it has none of its own."""
    return f"failed expression: {expr.source.strip()}"


def _message_text(rule: Any, value: Any, default: str) -> str:
    """A failed rule's message from its messageExpression's value: the value when it is
    text that is not blank, else the rule's message (as the apiserver falls back)."""
    return value if _is_message(value) else rule.message or default


def _is_message(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _denial(policy: str, rule: Any, message: str) -> Denial:
    if rule.fieldPath and not message.startswith(rule.fieldPath):
        message = f"{rule.fieldPath}: {message}"
    return Denial(policy, message, rule.reason, rule.fieldPath)


def _is_true(value: Any) -> bool:
    return value is True


def _is_bool(value: Any) -> bool:
    return value is True or value is False


def _is_text(value: Any) -> bool:
    return value is None or type(value) is str


def _reads_only_state(exprs: Any) -> bool:
    """Whether expressions (a lookup's arguments) read no request value and no other lookup."""
    return not any(root in e._needs for e in exprs for root in (*REQUEST_VARIABLES, "lookups", "variables"))


def _same(a: Any, b: Any) -> bool:
    """The same stored objects (a lookup's result: an object, None, or a list of objects)."""
    if a is b:
        return True
    return type(a) is list and type(b) is list and len(a) == len(b) and all(map(operator.is_, a, b))


class _RuleError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (what ``copy.deepcopy`` makes, without its memo: JSON shares no references)."""
    kind = type(value)
    if kind is dict:
        return {key: _copy_json(item) for key, item in value.items()}
    if kind is list:
        return [_copy_json(item) for item in value]
    return value if kind in (str, int, float, bool, type(None)) else copy.deepcopy(value)


def _verdict_text(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _selector(selector: LabelSelector | None) -> Selector:
    return from_label_selector(selector.model_dump() if selector is not None else None)


def _is_list(value: Any) -> bool:
    return type(value) is list


def _any(value: Any) -> bool:
    return True
