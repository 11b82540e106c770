"""Policies written in Python, behind the same interface as the files' policies.

Only where CEL is the wrong tool: the class's ``maxParameterCount`` (``"32B"``,
``"1.5B"``, ``"500M"``) compared *exactly* with a parameter count. CEL has no decimal
type, and :mod:`webhook.quantity` is the one parser the controller's reconcilers use too, so
admission and the controller can never disagree on a limit.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from webhook.policy.actions import DENY_ONLY
from webhook.quantity import QuantityError, parse_parameter_count
from webhook.policy.scope import PolicyInput
from webhook.policy.verdict import Denial, Trace, Verdict

AI = "ai.deckhouse.io/v1alpha1"


@lru_cache(maxsize=256)
def _limit(text: str) -> int | None:
    """A class's ``maxParameterCount`` parsed (None: not a parameter count). The same few
    texts come with every review of a class's orders: parsed once each."""
    try:
        return parse_parameter_count(text)
    except QuantityError:
        return None


def _get(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


class ParameterCountPolicy:
    """``modelPolicy.maxParameterCount`` on both model paths (docs/decisions.md, InferenceService 5).

    ai-models path: the catalog fact ``status.resolved.parameterCount`` must not exceed
    the limit (checked when the catalog entry is known; the controller re-checks and
    fails closed on a missing fact). HuggingFace path: ``spec.model.parameterCount``
    when given; when not, a warning that the limit cannot be checked.
    """

    name = "inferenceservice-max-parameter-count"
    file = "builtin:webhook/policy/builtin.py"
    mutating_stage = False
    validation_actions = DENY_ONLY  # (an operator may override it, as a file's policy's)
    coverage_rules = ("catalog", "huggingface")  # its traces' rule names (``infergate test --coverage``)
    # the kinds it reads from the cluster view (``webhook.policy.unknown.kinds_read``); it says
    # nothing when one of them is absent, so an unknown one needs no rule left out
    looks_up = ((AI, "InferenceServiceClass"), (AI, "Model"), (AI, "ClusterModel"))

    def may_apply(self, rule_key: tuple[str, str, Any, str], mutating: bool) -> bool:
        """Whether requests with this rule key (``PolicyInput.rule_key``) may see it: writes of an
        InferenceService itself, in the validating webhook (``PolicySet.for_review``)."""
        group, kind, operation, subresource = rule_key
        return not mutating and group == "ai.deckhouse.io" and kind == "InferenceService" \
            and operation in ("CREATE", "UPDATE") and not subresource

    def evaluate(self, inp: PolicyInput, *, mutating: bool, explain: bool = False) -> Verdict | None:
        if not self.may_apply(inp.rule_key, mutating):
            return None
        spec = _get(inp.object, "spec")
        class_name = _get(spec, "inferenceServiceClassName")
        cls = inp.state.get(AI, "InferenceServiceClass", class_name) if isinstance(class_name, str) else None
        limit_text = _get(cls, "spec", "modelPolicy", "maxParameterCount")
        if not isinstance(limit_text, str):
            return None
        limit = _limit(limit_text)
        if limit is None:
            return None  # the class CRD's pattern rejects such a class; nothing to compare with
        verdict = Verdict(self.name)
        model = _get(spec, "model")
        src = _get(model, "src")
        if src == "ai-models":
            self._catalog(inp, model, class_name, limit_text, limit, verdict, explain)
        elif src == "HuggingFace":
            self._huggingface(model, class_name, limit_text, limit, verdict, explain)
        return verdict

    def _trace(self, verdict: Verdict, explain: bool, rule: str, values: dict, result: str) -> None:
        if explain:
            verdict.traces.append(Trace(self.name, rule, "parameterCount <= parse(maxParameterCount)  # Python", values, result))

    def _catalog(self, inp, model, class_name, limit_text, limit, verdict, explain) -> None:
        ref = _get(model, "ref") or {}
        kind, name = ref.get("kind"), ref.get("name")
        if kind == "ClusterModel":
            entry = inp.state.get(AI, "ClusterModel", name) if isinstance(name, str) else None
        elif kind == "Model":
            entry = inp.state.get(AI, "Model", name, ref.get("namespace") or inp.request.get("namespace")) \
                if isinstance(name, str) else None
        else:
            return
        if entry is None:
            return  # unknown catalog entry: the catalog policy speaks about it
        count = _get(entry, "status", "resolved", "parameterCount")
        values = {"class": class_name, "maxParameterCount": limit_text, "limit": limit,
                  f"{kind}/{name}.status.resolved.parameterCount": count} if explain else {}
        if not isinstance(count, int) or isinstance(count, bool):
            self._trace(verdict, explain, "catalog", values, "unknown")
            verdict.warnings.append(
                f'spec.model.ref: {kind} "{name}" publishes no parameterCount: '
                f"maxParameterCount {limit_text} cannot be checked yet")
            return
        passed = count <= limit
        self._trace(verdict, explain, "catalog", values, "true" if passed else "false")
        if not passed:
            verdict.denials.append(Denial(
                self.name,
                f'spec.model.ref: {kind} "{name}" has {count} parameters (catalog fact), more than '
                f'maxParameterCount {limit_text} ({limit}) of class "{class_name}": choose a model of at '
                f"most {limit_text} parameters or a class that allows more",
                "ParameterCountExceeded", "spec.model.ref"))

    def _huggingface(self, model, class_name, limit_text, limit, verdict, explain) -> None:
        given = _get(model, "parameterCount")
        values = {"class": class_name, "maxParameterCount": limit_text, "limit": limit,
                  "spec.model.parameterCount": given} if explain else {}
        if not isinstance(given, str):
            self._trace(verdict, explain, "huggingface", values, "unknown")
            verdict.warnings.append(
                f'spec.model.parameterCount is not set: maxParameterCount {limit_text} of class "{class_name}" '
                f"cannot be checked")
            return
        try:
            count = parse_parameter_count(given)
        except QuantityError:
            return  # the CRD pattern rejects it with its own message
        passed = count <= limit
        self._trace(verdict, explain, "huggingface", values, "true" if passed else "false")
        if not passed:
            verdict.denials.append(Denial(
                self.name,
                f'spec.model.parameterCount: Invalid value: "{given}": more than maxParameterCount '
                f'{limit_text} ({limit}) of class "{class_name}": at most {limit_text} is accepted',
                "ParameterCountExceeded", "spec.model.parameterCount", 1))  # (its rules: coverage_rules)


BUILTIN_POLICIES = (ParameterCountPolicy(),)
