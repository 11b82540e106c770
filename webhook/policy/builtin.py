"""Policies written in Python, behind the same interface as the files' policies.

Only where CEL is the wrong tool: the class's ``maxParameterCount`` (``"32B"``,
``"1.5B"``, ``"500M"``) compared *exactly* with a parameter count. CEL has no decimal
type, and :mod:`webhook.facts` is the one parser the planner uses too, so admission and
the controller can never disagree on a limit.
"""

from __future__ import annotations

from typing import Any

from webhook.facts import FactError, parse_parameter_count
from webhook.policy.compiled import PolicyInput
from webhook.policy.verdict import Denial, Trace, Verdict

AI = "ai.deckhouse.io/v1alpha1"


def _get(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


class ParameterCountPolicy:
    """``modelPolicy.maxParameterCount`` on both model paths (decisions: InferenceService 5).

    ai-models path: the catalog fact ``status.resolved.parameterCount`` must not exceed
    the limit (checked when the catalog entry is known; the controller re-checks and
    fails closed on a missing fact). HuggingFace path: ``spec.model.parameterCount``
    when given; when not, a warning that the limit cannot be checked.
    """

    name = "inferenceservice-max-parameter-count"
    file = "builtin:webhook/policy/builtin.py"
    mutating_stage = False
    coverage_rules = ("catalog", "huggingface")  # its traces' rule names (``infergate test --coverage``)

    def evaluate(self, inp: PolicyInput, *, mutating: bool, explain: bool = False) -> Verdict | None:
        if mutating or inp.group != "ai.deckhouse.io" or inp.kind != "InferenceService" \
                or inp.request.get("operation") not in ("CREATE", "UPDATE") or inp.request.get("subResource"):
            return None
        obj = inp.object or {}
        class_name = _get(obj, "spec", "inferenceServiceClassName")
        cls = inp.state.get(AI, "InferenceServiceClass", class_name) if isinstance(class_name, str) else None
        limit_text = _get(cls, "spec", "modelPolicy", "maxParameterCount")
        if not isinstance(limit_text, str):
            return None
        verdict = Verdict(self.name)
        try:
            limit = parse_parameter_count(limit_text)
        except FactError:
            return None  # the class CRD's pattern rejects such a class; nothing to compare with
        src = _get(obj, "spec", "model", "src")
        if src == "ai-models":
            self._catalog(inp, obj, class_name, limit_text, limit, verdict, explain)
        elif src == "HuggingFace":
            self._huggingface(obj, class_name, limit_text, limit, verdict, explain)
        return verdict

    def _trace(self, verdict: Verdict, explain: bool, rule: str, values: dict, result: str) -> None:
        if explain:
            verdict.traces.append(Trace(self.name, rule, "parameterCount <= parse(maxParameterCount)  # Python", values, result))

    def _catalog(self, inp, obj, class_name, limit_text, limit, verdict, explain) -> None:
        ref = _get(obj, "spec", "model", "ref") or {}
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
                  f"{kind}/{name}.status.resolved.parameterCount": count}
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

    def _huggingface(self, obj, class_name, limit_text, limit, verdict, explain) -> None:
        given = _get(obj, "spec", "model", "parameterCount")
        values = {"class": class_name, "maxParameterCount": limit_text, "limit": limit,
                  "spec.model.parameterCount": given}
        if not isinstance(given, str):
            self._trace(verdict, explain, "huggingface", values, "unknown")
            verdict.warnings.append(
                f'spec.model.parameterCount is not set: maxParameterCount {limit_text} of class "{class_name}" '
                f"cannot be checked")
            return
        try:
            count = parse_parameter_count(given)
        except FactError:
            return  # the CRD pattern rejects it with its own message
        passed = count <= limit
        self._trace(verdict, explain, "huggingface", values, "true" if passed else "false")
        if not passed:
            verdict.denials.append(Denial(
                self.name,
                f'spec.model.parameterCount: Invalid value: "{given}": more than maxParameterCount '
                f'{limit_text} ({limit}) of class "{class_name}": at most {limit_text} is accepted',
                "ParameterCountExceeded", "spec.model.parameterCount"))


BUILTIN_POLICIES = (ParameterCountPolicy(),)
