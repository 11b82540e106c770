"""Rules the cluster view cannot decide: the one place where a policy's rule is left unchecked.

A lookup whose answer is unknown (it found nothing, and the view does not hold its kind whole:
``webhook.state.knowledge.unknown_answer``), or params whose object the view does not hold
(and whose kind it does not hold whole), make a rule undecidable when its outcome for this
review needs them: such a rule neither denies nor warns, whatever it evaluated to. A rule names
what its expression names, what the variables it names read (transitively) and what the
policy's matchConditions read (whether the policy applies at all); of the unknown answers it
names, it needs those without which it does not evaluate (``leave_unchecked``). Rules that read
only the object and the request are judged as always. The verdict records what was not checked
(``Verdict.unchecked``) for the summary note of ``infergate validate`` and ``infergate audit``.

Against a live cluster (or any view that holds every kind whole) nothing is ever unknown and
verdicts are exactly what they were.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from webhook.apiversion import group_of
from webhook.cel import CelError
from webhook.policy.expression import UNBOUND
from webhook.state.files import KUBEAI_CONFIG
from webhook.state.knowledge import Knowledge, unknown_answer

if TYPE_CHECKING:
    from webhook.policy.exact import ExactPath
    from webhook.policy.expression import Expression
    from webhook.policy.verdict import Verdict

PARAMS = "params"  # the name of the params among what a rule reads (lookups have their own names)
_EVERY_LOOKUP = "*"


def kinds_read(policies: Iterable[Any]) -> frozenset[tuple[str, str]]:
    """(apiVersion, kind) of everything ``policies`` read from the cluster view: their lookups,
    their params, what a policy written in Python declares (``looks_up``), and Namespaces (the
    request's ``namespaceObject``, the namespace selectors)."""
    found: set[tuple[str, str]] = {("v1", "Namespace")}
    for policy in policies:
        exact = getattr(policy, "exact", None)
        if exact is not None:
            found.update(((lk.get or lk.list).apiVersion, (lk.get or lk.list).kind) for lk, _ in exact.lookups)
            if exact.param_ref is not None:
                found.add((exact.param_ref.apiVersion, exact.param_ref.kind))
        found.update(getattr(policy, "looks_up", ()))
    return frozenset(found)


def rule_reads(exact: ExactPath) -> dict[str, frozenset[str]]:
    """Per rule (``validations[i]``, ``warnings[i]``): the lookups (by name, ``*``: all) and
    ``params`` it depends on."""
    variables = variable_reads(exact)
    gate: frozenset[str] = frozenset().union(*(_reads(e.needs, variables) for _, e in exact.match_conditions))
    out: dict[str, frozenset[str]] = {}
    for section, rules in (("validations", exact.validations), ("warnings", exact.warnings)):
        for i, (_, expr, _message) in enumerate(rules):
            out[f"{section}[{i}]"] = gate | _reads(expr.needs, variables)
    return out


def _reads(needs: Mapping[str, Any], variables: Mapping[str, frozenset[str]]) -> frozenset[str]:
    found: set[str] = set()
    if PARAMS in needs:
        found.add(PARAMS)
    if "lookups" in needs:
        found |= needs["lookups"] if needs["lookups"] is not None else {_EVERY_LOOKUP}
    if "variables" in needs:
        named = needs["variables"] if needs["variables"] is not None else variables.keys()
        for name in named:
            found |= variables.get(name, frozenset())
    return frozenset(found)


def unknown_facts(exact: ExactPath, lookups: Mapping[str, Any] | None, params: Any, knowledge: Knowledge,
                  activation: Mapping[str, Any], *, gets: frozenset[str] = frozenset({"*"})
                  ) -> dict[str, tuple[str, str]]:
    """The lookups (by name) and params whose answers are unknown, each with what the note says
    of it: (what, unit), e.g. ``("InferencePool", "lookups")``, ``("KubeAI config", "objects")``.
    A ``get`` that named nothing looked nothing up: its ``null`` is no unknown (``activation``:
    the review's values, for its name's expression; ``gets``: the ``get`` lookups to look at, by
    name, ``*`` all: the caller names those that failed rules read)."""
    unknown: dict[str, tuple[str, str]] = {}
    for lookup, exprs in exact.lookups:
        source = lookup.get or lookup.list
        if lookups is None or lookup.name not in lookups:
            continue
        if lookup.get is not None and lookup.name not in gets and _EVERY_LOOKUP not in gets:
            continue
        found = lookups[lookup.name]
        if not unknown_answer(found, group_of(source.apiVersion), source.kind, knowledge):
            continue
        if lookup.get is not None and not _named(exprs.get("name"), {**activation, "lookups": lookups}):
            continue
        unknown[lookup.name] = (_unknown_kind(source.apiVersion, source.kind, knowledge), "lookups")
    ref = exact.param_ref
    if ref is not None and unknown_answer(params, group_of(ref.apiVersion), ref.kind, knowledge):
        unknown[PARAMS] = (f"no {params_label(ref.kind, ref.name)} in the {_where(knowledge)}", "objects")
    return unknown


def _where(knowledge: Knowledge) -> str:
    return "state" if knowledge.source == "state" else "input"


def _unknown_kind(api_version: str, kind: str, knowledge: Knowledge) -> str:
    """What the note says of an unknown lookup's kind: that the view shows none of it, or (a
    part of a cluster that shows some) that the cluster may hold more than it shows."""
    label, where = kind_label(api_version, kind), _where(knowledge)
    if (group_of(api_version), kind) in knowledge.shown:
        return f"{label} beyond those in the {where}"
    return f"no {label} in the {where}"


def _named(name_expr: Any, activation: Mapping[str, Any]) -> bool:
    """Whether a ``get`` lookup's name is a name (else it looked nothing up); an error: it may be."""
    if name_expr is None:
        return False
    try:
        name = name_expr.evaluate(activation)
    except Exception:  # noqa: BLE001 - whatever it was, the answer cannot be taken as known
        return True
    return isinstance(name, str) and bool(name)


def kind_label(api_version: str, kind: str) -> str:
    """A kind as the note names it: with its API group, which tells the legacy pools from the GA ones
    (``InferencePool of inference.networking.x-k8s.io``); a core kind by its name alone."""
    group = group_of(api_version)
    return f"{kind} of {group}" if group else kind


def params_label(kind: str, name: str) -> str:
    return "KubeAI config" if (kind, name) == ("ConfigMap", KUBEAI_CONFIG["name"]) else f"{kind} {name}"


def leave_unchecked(verdict: Verdict, exact: ExactPath, reads: Mapping[str, frozenset[str]],
                    unknown: Mapping[str, tuple[str, str]], activation: Mapping[str, Any],
                    lookups: Mapping[str, Any] | None) -> None:
    """Leave out of ``verdict`` the rules whose outcome for this review needs an unknown answer:
    drop their denials and warnings, and record what was not checked (once per unknown answer
    such a rule needed, whether it held or failed: it was not checked either way).

    A rule that names an unknown answer may not need it for this object: a route's backendRef to
    a GA pool reads only the GA pools, although the rule names the legacy ones too. So each such
    rule is evaluated again with those answers unbound (their use an error, as cel-go's
    unknowns: ``||``, ``&&``, ``exists`` and ``all`` still decide when the other side does); a
    rule that answers all the same does not depend on them."""
    if not unknown:
        return
    missed: dict[str, tuple[str, str]] = {}
    undecided: set[str] = set()
    without: dict[frozenset[str], _Without] = {}
    shared: dict[str, tuple[bool, Any]] = {}  # the variables that read none of the unknown answers

    def decides(rule: str, names: frozenset[str]) -> bool:
        if names not in without:
            without[names] = _Without(exact, activation, lookups or {}, names, shared)
        return without[names].decides(rule)

    for rule, read in reads.items():
        names = read & unknown.keys()
        if _EVERY_LOOKUP in read:
            names |= {name for name in unknown if name != PARAMS}
        names = frozenset(names)
        if not names or decides(rule, names):
            continue
        # what it needs, each on its own; none alone (``a != null || b != null``): all of them
        needed = [name for name in names if len(names) > 1 and not decides(rule, frozenset({name}))] or names
        undecided.add(rule)
        for name in needed:
            missed[name] = unknown[name]
    if not undecided:
        return
    if verdict.denials:
        verdict.denials = [d for d in verdict.denials if d.rule not in undecided]
    if verdict.warnings:
        kept = [w for w in verdict.warnings if verdict.warning_rules.get(w) not in undecided]
        if len(kept) != len(verdict.warnings):
            verdict.warnings = kept
            verdict.warning_rules = {w: r for w, r in verdict.warning_rules.items() if w in kept}
    verdict.unchecked = tuple(missed.values())


def unchecked_text(unchecked: Mapping[tuple[str, str], int]) -> str:
    """What rules were left out for, over a run, in words a user can act on: ``unchecked``, how
    many times each (what, unit) was ("no InferencePool of inference.networking.x-k8s.io in the
    state", ``unknown_facts``)."""
    ranked = sorted(unchecked.items(), key=lambda kv: (-kv[1], kv[0]))
    return "not checked: " + ", ".join(f"{what} ({n} {unit if n != 1 else unit.removesuffix('s')})"
                                       for (what, unit), n in ranked)


class _Without:
    """A review's values with some answers unbound (lookups by name, ``params``), and the
    policy's variables computed from them on demand: a variable whose evaluation fails is left
    unbound too, so that only a rule that uses it fails (the apiserver's variables are lazy).
    A variable that reads none of the unbound answers has its value whatever they are: it is
    computed once per review (``shared``) for every set of unbound answers."""

    def __init__(self, exact: ExactPath, activation: Mapping[str, Any], lookups: Mapping[str, Any],
                 unbound: frozenset[str], shared: dict[str, tuple[bool, Any]]) -> None:
        self.exact = exact
        self.unbound = unbound
        self.values: dict[str, Any] = {**activation, "variables": {},
                                       "lookups": {k: v for k, v in lookups.items() if k not in unbound}}
        if PARAMS in unbound:
            self.values["params"] = UNBOUND
        self._variables = {name: (i, expr) for i, (name, expr) in enumerate(exact.variables)}
        self._reads = variable_reads(exact)
        self._shared = shared
        self._tried: set[str] = set()
        self._gate: bool | None = None

    def decides(self, rule: str) -> bool:
        """Whether ``rule`` (``validations[i]``, ``warnings[i]``) and the matchConditions
        evaluate without the unbound answers."""
        if self._gate is None:  # the conditions that read none of them held, as they did
            self._gate = all(self._evaluate(e)[0] for _, e in self.exact.match_conditions
                             if self._touches(_reads(e.needs, {})))
        if not self._gate:
            return False
        section, _, index = rule.partition("[")
        entries = self.exact.validations if section == "validations" else self.exact.warnings
        return self._evaluate(entries[int(index.rstrip("]"))][1])[0]

    def _touches(self, read: frozenset[str]) -> bool:
        return bool(read & self.unbound) or (_EVERY_LOOKUP in read and bool(self.unbound - {PARAMS}))

    def _evaluate(self, expr: Expression, before: int | None = None) -> tuple[bool, Any]:
        """(whether it evaluates, its value)."""
        self._prepare(expr.needs, before)
        try:  # any value will do: the native route may give it
            return True, expr.evaluate(self.values, _any_value)
        except CelError:
            return False, None

    def _prepare(self, needs: Mapping[str, Any], before: int | None) -> None:
        """The variables ``needs`` names computed (all of them, or all before ``before``, for the whole map)."""
        if "variables" not in needs:
            return
        names = needs["variables"]
        if names is None:
            names = [name for name, (i, _) in self._variables.items() if before is None or i < before]
        for name in names:
            if name in self._tried or name not in self._variables:
                continue
            self._tried.add(name)
            clean = not self._touches(self._reads.get(name, frozenset()))
            if clean and name in self._shared:
                evaluated, value = self._shared[name]
            else:
                i, expr = self._variables[name]
                evaluated, value = self._evaluate(expr, i)
                if clean:
                    self._shared[name] = (evaluated, value)
            if evaluated:
                self.values["variables"][name] = value


def _any_value(value: Any) -> bool:
    return True


_VARIABLE_READS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def variable_reads(exact: ExactPath) -> dict[str, frozenset[str]]:
    """Per variable: the lookups (by name, ``*``: all) and ``params`` it reads, transitively."""
    found = _VARIABLE_READS.get(exact)
    if found is None:
        found = {}
        for name, expr in exact.variables:  # in order: a variable reads only earlier ones
            found[name] = _reads(expr.needs, found)
        _VARIABLE_READS[exact] = found
    return found
