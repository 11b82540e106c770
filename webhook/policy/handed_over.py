"""``serve --native-policies``: the webhook's policies less the rules the apiserver enforces
itself (``webhook.policy.native_handover``).

:class:`HandedOverPolicies` wraps the policy directory. In the background (never in a review)
it generates the ValidatingAdmissionPolicies and MutatingAdmissionPolicies of the set in force,
as the controller does, and asks the cluster view which of them the apiserver enforces, marked
and stored as generated; the policies with such rules are compiled again with those validations
and warnings holding always and those mutations patching nothing. ``current()``
answers that set while it was made from the directory's set in force, else the directory's own
set: a reload or a mark lost means every rule is evaluated again until the next refresh has
looked.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from webhook.policy.loader import PolicyLoadError, compile_policy
from webhook.policy.native_export import KindResource, export
from webhook.policy.native_handover import enforced_rules, without_rules
from webhook.policy.provider import PolicySet

if TYPE_CHECKING:
    from webhook.cel import Evaluator

log = logging.getLogger(__name__)


class HandedOverPolicies:
    """``base``: a ``PolicyDirectory`` (or anything with ``current()``); ``stored()``: the
    cluster's VAPs, MAPs and bindings labelled managed-by infergate, ``(kind, name) -> object``;
    ``resources``: the served kinds' resources (``native_export.kind_resources``)."""

    def __init__(self, base: Any, stored: Callable[[], Mapping[tuple[str, str], Mapping[str, Any]]],
                 evaluator: Evaluator, resources: Mapping[tuple[str, str], KindResource], *,
                 interval: float = 1.0, logger: logging.Logger = log) -> None:
        self.base, self.stored, self.evaluator, self.resources = base, stored, evaluator, resources
        self.log = logger
        self.interval = interval
        self.handed_over: dict[str, frozenset[str]] = {}  # policy -> rules left to the apiserver
        self._derived: tuple[PolicySet, PolicySet] | None = None  # (the base set, the set in force)
        self._export: tuple[PolicySet, Any] | None = None
        self._compiled: dict[tuple[int, str, frozenset[str]], Any] = {}
        self._woken = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __getattr__(self, name: str) -> Any:  # actions, error, on_load, poll: the directory's
        return getattr(self.base, name)

    def current(self) -> PolicySet:
        base = self.base.current()
        derived = self._derived
        if derived is not None and derived[0] is base:
            return derived[1]
        return base

    def changed(self) -> None:
        """The cluster's VAPs, MAPs or bindings changed: refresh now (any thread)."""
        self._woken.set()

    def refresh(self) -> bool:
        """Look again; True when the set in force changed."""
        base = self.base.current()
        if self._export is None or self._export[0] is not base:
            definitions = [p.definition for p in base.policies if getattr(p, "definition", None) is not None]
            self._export = (base, export(definitions, self.resources, base.actions))
        handed = enforced_rules(self._export[1], self.stored())
        if self._derived is not None and self._derived[0] is base and handed == self.handed_over:
            return False
        policies = []
        for policy in base.policies:
            rules = handed.get(policy.name)
            if not rules:
                policies.append(policy)
                continue
            key = (id(policy), policy.name, rules)
            compiled = self._compiled.get(key)
            if compiled is None:
                try:
                    compiled = compile_policy(without_rules(policy.definition, rules), policy.file, self.evaluator)
                except PolicyLoadError as exc:  # (cannot happen: fewer expressions than loaded) keep it whole
                    self.log.error("policy %s: its rules stay with the webhook: %s", policy.name, exc)
                    compiled = policy
                self._compiled[key] = compiled
            policies.append(compiled)
        live = {(id(p), p.name) for p in base.policies}
        self._compiled = {k: v for k, v in self._compiled.items() if k[:2] in live}
        in_force = PolicySet(tuple(policies), base.source, base.generation, base.actions, base.native)
        previous, self.handed_over = self.handed_over, handed
        self._derived = (base, in_force)
        if handed != previous:
            self.log.info("rules left to the apiserver's admission policies: %s",
                     ", ".join(f"{p}: {', '.join(sorted(r))}" for p, r in sorted(handed.items())) or "none")
        return True

    # -- the thread ----------------------------------------------------------------------------

    def start(self) -> None:
        start = getattr(self.base, "start", None)
        if start is not None:
            start()
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="native-handover", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._woken.set()
        stop = getattr(self.base, "stop", None)
        if stop is not None:
            stop()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self._woken.wait(self.interval)
            self._woken.clear()
            if self._stop.is_set():
                return
            try:
                self.refresh()
            except Exception:  # noqa: BLE001 - the refresh must outlive any surprise; every rule stays meanwhile
                self.log.exception("native policies: refresh failed")
