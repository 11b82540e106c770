"""A policy's stage as its one program (``batch``): the values a review prepares for it, the
engine call, and what the answer decides.

Before a stage the chain asks every policy to prepare: its lookups (those that read the review
read by one generated Python function when their arguments have the usual shapes,
``arguments``), its params and its variables that read only cluster state, under names of its
own in the review's scope (``scope.ReviewScope``), which the batches share. What reads only
cluster state is kept while ``ClusterState.generation`` stays the same. A validating batch that
reads nothing but fields of ``request`` is a function of their values: its answer is kept per
their values. The batch decides the stage when its answer has the exact path's shape (cel-expr
computes the same values, a failed rule's messageExpression included); otherwise, or on an
error, the exact path (``exact``) runs and writes the exact errors and messages.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any, Callable, Mapping

import orjson

from webhook.cel import CelError, Evaluator
from webhook.policy.arguments import UNREAD, ReviewLookup, review_lookups
from webhook.policy.batch import batch_source, compile_batch, judged_source, list_source, request_fields_read
from webhook.policy.exact import ExactPath
from webhook.policy.expression import CEL_VARIABLES, Expression
from webhook.policy.messages import RuleError, audit_annotation_key, denial, failed_expression, message_text
from webhook.policy.scope import (
    NOTHING, POLICY_VARIABLES, REQUEST_VARIABLES, UNPREPARED, PolicyInput, Prepared)
from webhook.policy.verdict import Denial, Verdict
from webhook.state import ClusterState

_serials = itertools.count()
_ANSWERS_KEPT = 256  # per policy: the distinct request values (kinds, versions, users) seen recently


class BatchPath:
    """One policy's batches (one program per stage, built on first use) and their runs."""

    def __init__(self, exact: ExactPath, file: str, stages: Mapping[bool, bool], validates_when_mutating: bool,
                 evaluator: Evaluator) -> None:
        self.exact = exact
        self.name = exact.name
        self.file = file
        self._stages = stages
        self._validates_when_mutating = validates_when_mutating
        self._engine = evaluator.engine
        self._routes = evaluator.routes
        self._binds = hasattr(self._engine, "bind")  # whether the engine shares bindings between programs
        # built on first use: one program per stage (key: mutating), for the lookups' arguments
        # ("lookups") and the rest of the mutations after a change (("mutations", start)); the
        # lookups' Python readers ("review reader"), what the batches read ("reads",
        # "lookups read")
        self._batches: dict[Any, Any] = {}
        # the names of this policy's params, lookups and variables in a review's shared bindings
        self.serial = next(_serials)
        self.names = {name: f"__{name}_{self.serial}" for name in POLICY_VARIABLES}
        self.state_lookups = tuple(lk.name for lk, exprs in exact.lookups if _reads_only_state(exprs.values()))
        self.state_variables = self._variables_of_state()
        self.state_values: tuple[tuple[Any, ...], dict[str, Any]] | None = None  # (inputs, values)
        # the lookups read per review (their arguments read the request), by index
        self.review_lookups = tuple(i for i, (lk, _) in enumerate(exact.lookups) if lk.name not in self.state_lookups)
        self._state_kept: tuple[Any, int, tuple[Any, dict[str, Any], dict[str, Any]]] | None = None  # ``of_state``
        self._computed_variables = [name for name, _ in exact.variables if name not in self.state_variables]
        self._judged = len(exact.validations) + len(exact.warnings)  # a validating batch's answers: these, ...
        self._answers = self._judged + len(exact.audit_annotations)  # ... then the audit annotations'
        self._answers_by_key: dict[bytes, list[Any]] = {}  # ``_answer_key`` -> the validating batch's answer
        self._request_fields: tuple[str, ...] = ()  # all the validating batch reads, when only request fields

    def _variables_of_state(self) -> tuple[str, ...]:
        """The variables that read cluster state (lookups whose arguments read no request
        value, params) and nothing of the request: the same value for every request until
        the state changes, so computed once per state, not per review (``state_variables``)."""
        state_lookups = set(self.state_lookups)
        found: list[str] = []
        for name, expr in self.exact.variables:
            needs = expr.needs
            if any(root in needs for root in REQUEST_VARIABLES) or not ({"lookups", "params"} & needs.keys()):
                continue
            if "lookups" in needs and (needs["lookups"] is None or not needs["lookups"] <= state_lookups):
                continue
            if "variables" in needs and (needs["variables"] is None or not needs["variables"] <= set(found)):
                continue
            found.append(name)
        return tuple(found)

    def prepare(self, inp: PolicyInput, mutating: bool) -> None:
        """Before a stage's policies run: this policy's lookups and state variables into the
        review's scope (``ReviewScope``), so that one binding serves every policy's batch."""
        if self._batch(mutating) is not None:
            self._prepared(inp)

    def _rename(self) -> dict[str, str] | None:
        return self.names if self._binds else None

    def _batch(self, mutating: bool) -> Expression | None:
        if mutating not in self._batches:
            self._batches[mutating] = self._build_batch(mutating)
        return self._batches[mutating]

    def _build_batch(self, mutating: bool) -> Expression | None:
        exact = self.exact
        if mutating and self._validates_when_mutating:
            return None  # validations of the mutated object: one program could not see it
        if mutating:
            body = [expr.source for _, expr in exact.mutations]
        else:
            body = [judged_source(expr.source, message.source if message is not None else None)
                    for _, expr, message in exact.validations + exact.warnings]
            body += [expr.source for _, expr in exact.audit_annotations]
        if len(exact.match_conditions) + len(exact.variables) + len(body) < 2 and not (exact.lookups or
                                                                                       exact.param_ref):
            return None  # one expression reading only the request: nothing to gain
        source = batch_source([expr.source for _, expr in exact.match_conditions],
                              [(name, expr.source) for name, expr in exact.variables], body,
                              return_variables=mutating and len(exact.mutations) > 1, given=self.state_variables)
        batch = self._compile_batch(source, "mutations" if mutating else "validations", self._rename())
        if not mutating and batch is not None:
            self._request_fields = tuple(sorted(request_fields_read(source) or ()))
        return batch

    def _compile_batch(self, source: str | None, what: str, rename: dict[str, str] | None = None) -> Expression | None:
        program = compile_batch(self._engine, source, CEL_VARIABLES, rename)
        return Expression(program, source, f"{self.file}: {self.name} ({what})", self._routes) \
            if program is not None else None

    def _rest_of_mutations(self, start: int) -> Expression | None:
        """The mutations from ``start`` on as one program (after an earlier one changed the object)."""
        key = ("mutations", start)
        if key not in self._batches:
            rest = self.exact.mutations[start:]
            self._batches[key] = self._compile_batch(list_source(e.source for _, e in rest), "mutations") \
                if len(rest) > 1 else None
        return self._batches[key]

    def _prepared(self, inp: PolicyInput) -> Prepared | None:
        """This policy's values for ``inp`` (its scope keeps them), or None when the
        per-expression path must run (a lookup's argument failed: it reports the error)."""
        scope = inp.scope
        prepared = scope.prepared.get(self.serial, UNPREPARED)
        if prepared is UNPREPARED:
            prepared = scope.prepared[self.serial] = self._prepare(inp)
            if prepared is not None and self._binds:
                scope.add(prepared.bound(self.names))
        return prepared

    def _prepare(self, inp: PolicyInput) -> Prepared | None:
        if self._reads_request_only():
            return NOTHING  # its batches read only the request
        of_state = self.of_state(inp.state)
        if of_state is None:
            return None
        params, lookups, variables = of_state
        if self.review_lookups:
            lookups = self.lookups_of_review(inp, params, lookups)
            if lookups is None:
                return None
        return Prepared(params, lookups, variables, self._lookups_read())

    def _reads_request_only(self) -> bool:
        """Whether the batches read nothing but the request (no params, lookups, variables
        computed before them): such a policy has nothing to prepare."""
        if "request only" not in self._batches:
            self._batches["request only"] = not self.exact.lookups and self.exact.param_ref is None \
                and self._binds and self._reads().isdisjoint(self.names.values())
        return self._batches["request only"]

    def of_state(self, state: ClusterState) -> tuple[Any, dict[str, Any], dict[str, Any]] | None:
        """What reads only cluster state: the params, the results of the lookups whose
        arguments read no request value (``state_lookups``) and the state variables' values;
        kept while the state's objects stay the same (``ClusterState.generation``, bumped by
        every write), so a review neither lists nor sorts them again. None when a lookup's
        argument fails (the per-expression path reports it)."""
        generation = getattr(state, "generation", None)
        kept = self._state_kept
        if kept is not None and generation is not None and kept[0] is state and kept[1] == generation:
            return kept[2]
        params = self.exact.params(state)
        found: dict[str, Any] = {}
        if self.state_lookups:
            activation = {"params": params, "lookups": found, "variables": {}}
            try:
                for lookup, exprs in self.exact.lookups:
                    if lookup.name in self.state_lookups:
                        found[lookup.name] = self.exact.lookup(lookup, exprs, activation, state, None)
            except RuleError:
                return None
        variables = self._state_values_for(found, params)
        if variables is None:
            return None
        part = (params, found, variables)
        if generation is not None:
            self._state_kept = (state, generation, part)
        return part

    def lookups_of_review(self, inp: PolicyInput, params: Any, of_state: dict[str, Any]) -> dict[str, Any] | None:
        """Every lookup's result, in order: those of cluster state alone as kept, the others
        read for this review."""
        read = self.review_reader()
        if read is not None:  # the usual shapes, read in Python: no activation for CEL
            found = read({"object": inp.object, "oldObject": inp.old_object, "request": inp.request,
                          "namespaceObject": inp.namespace_object, "params": params}, inp.state, of_state)
            if found is not UNREAD:
                return found
        lookups_so_far: dict[str, Any] = {}
        activation = {**inp.scope.values, "params": params, "lookups": lookups_so_far, "variables": {}}
        arguments = self._lookup_arguments(activation)
        try:
            for i, (lookup, exprs) in enumerate(self.exact.lookups):
                if lookup.name in of_state:
                    lookups_so_far[lookup.name] = of_state[lookup.name]
                else:
                    lookups_so_far[lookup.name] = self.exact.lookup(lookup, exprs, activation, inp.state, None,
                                                                    arguments[i] if arguments else None)
        except RuleError:
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
                if batch is None or "lookups" not in batch.needs:
                    continue
                if batch.needs["lookups"] is None:
                    read = None
                    break
                read |= batch.needs["lookups"]
            self._batches["lookups read"] = frozenset(read) if read is not None else None
        return self._batches["lookups read"]

    def _state_values_for(self, lookups: dict[str, Any], params: Any) -> dict[str, Any] | None:
        """The state variables' values (``state_variables``), computed again only when the
        objects they read change (stored objects are never mutated: compared by identity)."""
        if not self.state_variables:
            return {}
        inputs = (params, *(lookups[name] for name in self.state_lookups))
        cached = self.state_values
        if cached is not None and len(cached[0]) == len(inputs) and all(map(_same, cached[0], inputs)):
            return cached[1]
        activation = {"params": params, "lookups": lookups, "variables": {}}
        exprs = dict(self.exact.variables)
        try:
            for name in self.state_variables:
                activation["variables"][name] = exprs[name].evaluate(activation)
        except CelError:
            return None
        self.state_values = (inputs, activation["variables"])
        self.exact.remember(activation["variables"])  # the same values until those objects change
        return activation["variables"]

    def _lookup_arguments(self, activation: Mapping[str, Any]) -> list[dict[str, Any] | None] | None:
        """The names and selectors of the lookups that read the review (``review_lookups``;
        None in the places of the others) from one engine call, when none reads another
        lookup; None: evaluate them one by one (also on any error, for its exact text). (The
        usual shapes never get here: ``review_reader`` reads them in Python.)"""
        lookups = self.exact.lookups
        if "lookups" not in self._batches:
            exprs = [e for i in self.review_lookups for e in lookups[i][1].values()]
            program = None
            if exprs and not any("lookups" in e.needs or "variables" in e.needs for e in exprs):
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
        out: list[dict[str, Any] | None] = [None] * len(lookups)
        it = iter(values)
        for i in self.review_lookups:
            out[i] = {f: next(it, None) for f in lookups[i][1]}
        return out if len(values) == sum(len(lookups[i][1]) for i in self.review_lookups) else None

    def review_reader(self) -> Callable[..., Any] | None:
        """The lookups that read the review as one generated function (``arguments.review_lookups``)."""
        if "review reader" not in self._batches:
            lookups = []
            for i in self.review_lookups:
                lookup, exprs = self.exact.lookups[i]
                source = lookup.get or lookup.list
                lookups.append(ReviewLookup(lookup.name, lookup.get is not None, source.apiVersion, source.kind,
                                            {f: e.source for f, e in exprs.items()}))
            self._batches["review reader"] = review_lookups(lookups, [lk.name for lk, _ in self.exact.lookups],
                                                            self.exact.remember)
        return self._batches["review reader"]

    def run(self, inp: PolicyInput, verdict: Verdict, mutating: bool) -> bool | None:
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
                if self._binds:
                    bindings = inp.scope.bindings(self._engine, batch.program.reads)
                    results = batch.program.evaluate(bindings, accept=accept, routes=self._routes)
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
            if self.exact.audit_annotations:
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
        exact = self.exact
        denials: list[Denial] = []
        warnings: list[str] = []
        validations = len(exact.validations)
        for i, value in enumerate(results[:self._judged]):
            if value is True:
                continue
            rule, expr, message_expr = exact.validations[i] if i < validations else exact.warnings[i - validations]
            if message_expr is None:
                if value is not False:
                    return None
                message = rule.message or failed_expression(expr.source)
            elif type(value) is list and len(value) == 1:  # the messageExpression's value
                message = message_text(rule, value[0], failed_expression(expr.source))
            else:
                return None
            if i < validations:
                denials.append(denial(self.name, rule, message, i))
            else:
                warnings.append(message)
                verdict.warning_rules.setdefault(message, f"warnings[{i - validations}]")
        if any(value is not None and type(value) is not str for value in results[self._judged:]):
            return None
        verdict.denials += denials
        verdict.warnings += warnings
        self._annotate(results, verdict)
        return True

    def _annotate(self, results: list[Any], verdict: Verdict) -> None:
        """The audit annotations of a validating batch's answer (text or null, as checked)."""
        for (key, _), value in zip(self.exact.audit_annotations, results[self._judged:]):
            if value is not None:
                verdict.audit_annotations[audit_annotation_key(self.name, key)] = value

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
        if len(self.exact.mutations) > 1:  # the batch also returned the variables, for the later mutations
            if len(values) != 2 or not isinstance(values[0], list) or len(values[0]) != len(computed):
                return None
            variables, patches = values
        if not isinstance(patches, list) or len(patches) != len(self.exact.mutations):
            return None
        activation["variables"].update(zip(computed, variables))
        self._apply_mutations(patches, 0, activation, verdict)
        return True

    def _apply_mutations(self, patches: Any, start: int, activation: dict[str, Any], verdict: Verdict) -> None:
        """Apply the patches of mutations ``start``...; once one changes the object, the later
        ones are evaluated again on the result (a batch of them, or one by one on any error)."""
        mutations = self.exact.mutations
        while True:
            if not isinstance(patches, list) or len(patches) != len(mutations) - start:
                self.exact.mutate(activation, verdict, None, start=start)
                return
            for i, ((patch_type, _), patch) in enumerate(zip(mutations[start:], patches), start):
                activation["object"] = self.exact.apply(patch_type, patch, activation["object"], f"mutations[{i}]")
                changed = bool(patch) if patch_type == "JSONPatch" else patch is not None and patch != {}
                if changed and i + 1 < len(mutations):
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


def _reads_only_state(exprs: Any) -> bool:
    """Whether expressions (a lookup's arguments) read no request value and no other lookup."""
    return not any(root in e.needs for e in exprs for root in (*REQUEST_VARIABLES, "lookups", "variables"))


def _same(a: Any, b: Any) -> bool:
    """The same stored objects (a lookup's result: an object, None, or a list of objects)."""
    if a is b:
        return True
    return type(a) is list and type(b) is list and len(a) == len(b) and all(map(operator.is_, a, b))


def _is_list(value: Any) -> bool:
    return type(value) is list
