"""``infergate controller --native-policies``: the generated ValidatingAdmissionPolicies and
MutatingAdmissionPolicies kept in the cluster, proven enforced, marked for the webhook
(``webhook.policy.native_handover``).

One round (``step``, blocking; on the leader only), from the policies in force:

1. every generated VAP, MAP and binding not stored as generated is applied (server-side apply,
   field manager ``infergate``, forced), owned by the release's ClusterRole (``--native-policies-owner``)
   so that the garbage collector deletes them with it; a VAP or MAP written again loses its
   mark in the same apply;
2. when a VAP is not marked with its current hash: the probe VAP and binding carrying the
   token of the whole set are applied last, and a ConfigMap labelled with the token is created
   with ``dryRun=All`` until the apiserver denies it with the probe's message (within
   ``probe_timeout``); then each VAP is marked ``infergate.io/enforced: <hash>``. The same for
   the MAPs with the mutation probe (a MAP and binding annotating a ConfigMap labelled with the
   token: the dry-run create must return it annotated), each plugin proven on its own;
3. what it no longer generates: a binding is deleted (the webhook checks every binding of a
   policy it trusts); a VAP or MAP is first unmarked, and deleted ``grace`` seconds later, once
   the webhook has seen the mark go (it evaluates the rules again first).

The rounds run every ``interval`` seconds and at once when the policies reload: a deleted or
edited object is written again within one interval.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from webhook import kinds, logs
from webhook.controller.kubeapi import ApiError, KubeApi, NotFound
from webhook.policy.native_export import Export, KindResource, export
from webhook.policy.native_handover import (BINDING, BINDING_OF, ENFORCED_ANNOTATION, MANAGED_BY_SELECTOR, MAP,
                                            MAP_BINDING, PROBE_NAME, VAP, content_hash, generated, in_cluster,
                                            marks, probe_denied, probe_mutated, probe_mutation_objects,
                                            probe_mutation_request, probe_objects, probe_request,
                                            stored_as_generated, stored_key)

log = logs.get("controller")

FIELD_MANAGER = "infergate"
KIND_OF = {VAP: kinds.VALIDATING_ADMISSION_POLICY, BINDING: kinds.VALIDATING_ADMISSION_POLICY_BINDING,
           MAP: kinds.MUTATING_ADMISSION_POLICY, MAP_BINDING: kinds.MUTATING_ADMISSION_POLICY_BINDING}


def _mark(obj: dict[str, Any] | None) -> str | None:
    return (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(ENFORCED_ANNOTATION)


def _owned_by(obj: dict[str, Any] | None, owner: dict[str, Any] | None) -> bool:
    if owner is None:
        return True
    uid = (owner.get("metadata") or {}).get("uid")
    return any(ref.get("uid") == uid for ref in ((obj or {}).get("metadata") or {}).get("ownerReferences") or ())


class NativePolicies:
    """``policies``: the policy set provider (``current()``; ``poll()`` called when ``poll``);
    ``resources``: the served kinds' resources; ``owner``: the ClusterRole's name (None: no
    ownerReference); ``namespace``: where the probe's ConfigMap is created (dry run)."""

    def __init__(self, api: KubeApi, policies: Any, resources: dict[tuple[str, str], KindResource], *,
                 owner: str | None, namespace: str, leading: Callable[[], bool] = lambda: True,
                 poll: bool = False, interval: float = 10.0, grace: float = 10.0, probe_timeout: float = 30.0,
                 probe_interval: float = 0.5, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.api, self.policies, self.resources = api, policies, resources
        self.owner_name, self.namespace, self.leading, self.poll = owner, namespace, leading, poll
        self.interval, self.grace = interval, grace
        self.probe_timeout, self.probe_interval = probe_timeout, probe_interval
        self.clock, self.sleep = clock, sleep
        self._export: tuple[Any, Export] | None = None
        self._unmarked: dict[tuple[str, str], float] = {}  # VAPs, MAPs no longer generated: when their mark went
        self.writes = 0
        self.probes = 0  # dry-run creates sent
        self.enforced: dict[tuple[str, str], str] = {}  # (kind, name) -> the mark it carries, as of the last round
        self._served: tuple[str, ...] | None = None  # of VAP, MAP and bindings: the kinds the apiserver serves

    def _generated(self) -> Export:
        current = self.policies.current()
        if self._export is None or self._export[0] is not current:
            definitions = [p.definition for p in current.policies if getattr(p, "definition", None) is not None]
            self._export = (current, export(definitions, self.resources, current.actions))
        return self._export[1]

    def _apply(self, obj: dict[str, Any]) -> None:
        self.api.apply(KIND_OF[obj["kind"]], obj, FIELD_MANAGER)
        self.writes += 1

    def step(self) -> None:
        """One round (see the module doc); ``ApiError`` when the apiserver refuses or is away."""
        if self.poll:
            self.policies.poll()
        if not self.leading():
            self._unmarked.clear()
            return
        result = self._generated()
        served = self.served()
        objects = [o for o in generated(result) if o["kind"] in served]
        owner = self.api.get(kinds.CLUSTER_ROLE, self.owner_name) if self.owner_name else None
        if owner is not None:
            owner.setdefault("apiVersion", kinds.CLUSTER_ROLE.api_version)
            owner.setdefault("kind", kinds.CLUSTER_ROLE.kind)
        stored = {stored_key(o): o for kind in served for o in self.api.list(KIND_OF[kind], MANAGED_BY_SELECTOR)}
        expected = {key: mark for key, mark in marks(result).items() if key[0] in served}

        # 1. what is not stored as generated (a VAP or MAP with a stale mark: unmarked first)
        for obj in in_cluster(objects, owner):
            key = stored_key(obj)
            was = stored.get(key)
            stale = obj["kind"] in BINDING_OF and _mark(was) not in (None, expected.get(key))
            if stale or not stored_as_generated(was, obj) or not _owned_by(was, owner):
                self._apply(obj)
                stored[key] = obj  # (unmarked now)

        # 2. the probes, then the marks: each plugin (VAP, MAP) proven by its own probe
        unmarked = [key for key in expected if _mark(stored.get(key)) != expected[key]]
        token = content_hash(objects)
        by_key = {stored_key(o): o for o in objects}
        for kind, probe_set, probe in ((VAP, probe_objects, self.probe), (MAP, probe_mutation_objects, self.probe_mutation)):
            waiting = [key for key in unmarked if key[0] == kind]
            if not waiting:
                continue
            for obj in in_cluster(probe_set(token), owner):
                if not stored_as_generated(stored.get(stored_key(obj)), obj) or not _owned_by(stored.get(stored_key(obj)), owner):
                    self._apply(obj)
            if not probe(token):
                log.warning("native policies: the apiserver did not %s the probe within %.0f s; the webhook "
                            "keeps evaluating every rule, trying again in %.0f s",
                            "deny" if kind == VAP else "mutate", self.probe_timeout, self.interval)
                return
            for key in waiting:
                self._apply(in_cluster([by_key[key]], owner, expected[key])[0])
            log.info("native policies: enforced by the apiserver, marked: %s",
                     ", ".join(f"{k} {n}" for k, n in sorted(waiting)))
        self.enforced = dict(expected)

        # 3. what is no longer generated
        wanted = set(by_key) | {(k, PROBE_NAME) for k in served}
        now = self.clock()
        for key, obj in sorted(stored.items()):
            if key in wanted:
                continue
            kind, name = key
            if kind not in BINDING_OF:
                self._delete(kind, name)
            elif _mark(obj) is not None:
                self.api.merge_patch(KIND_OF[kind], name,
                                     {"metadata": {"annotations": {ENFORCED_ANNOTATION: None}}}, FIELD_MANAGER)
                self.writes += 1
                self._unmarked[key] = now
            elif now - self._unmarked.setdefault(key, now) >= self.grace:
                self._delete(kind, name)
                self._unmarked.pop(key, None)
        self._unmarked = {k: t for k, t in self._unmarked.items() if k in stored}

    def served(self) -> tuple[str, ...]:
        """The kinds of ``KIND_OF`` the apiserver serves, asked once: an apiserver without
        MutatingAdmissionPolicies (before v1.36, or with the API turned off) gets the VAPs alone,
        and the webhook keeps every mutation."""
        if self._served is None:
            resources = self.api.served_resources(kinds.VALIDATING_ADMISSION_POLICY.api_version)
            self._served = tuple(kind for kind, k in KIND_OF.items() if k.plural in resources)
            missing = [kind for kind in KIND_OF if kind not in self._served]
            if missing:
                log.warning("native policies: the apiserver does not serve %s: what they would hold stays with "
                            "the webhook", ", ".join(missing))
        return self._served

    def _delete(self, kind: str, name: str) -> None:
        try:
            self.api.delete(KIND_OF[kind], name)
        except NotFound:
            return
        self.writes += 1
        log.info("native policies: %s %s deleted (no longer generated)", kind, name)

    def probe(self, token: str) -> bool:
        """Whether the apiserver denies the probe's dry-run ConfigMap with the probe's message,
        within ``probe_timeout``."""
        deadline = self.clock() + self.probe_timeout
        while True:
            self.probes += 1
            try:
                self.api.dry_run_create(kinds.CONFIG_MAP, probe_request(token, self.namespace), self.namespace)
            except ApiError as exc:
                if probe_denied(exc.message, token):
                    return True
                if exc.status not in (400, 403, 422):  # away, or not allowed: no answer to wait for
                    raise
            if self.clock() >= deadline:
                return False
            self.sleep(self.probe_interval)

    def probe_mutation(self, token: str) -> bool:
        """Whether the apiserver returns the mutation probe's dry-run ConfigMap annotated by the
        probe MAP, within ``probe_timeout`` (recorded: 0.8 to 1.2 s after the MAP's write)."""
        deadline = self.clock() + self.probe_timeout
        while True:
            self.probes += 1
            try:
                answer = self.api.dry_run_create(kinds.CONFIG_MAP, probe_mutation_request(token, self.namespace),
                                                 self.namespace)
            except ApiError as exc:
                if exc.status not in (400, 403, 422):  # away, or not allowed: no answer to wait for
                    raise
            else:
                if probe_mutated(answer, token):
                    return True
            if self.clock() >= deadline:
                return False
            self.sleep(self.probe_interval)

    async def run(self, stop: asyncio.Event) -> None:
        """A round every ``interval`` until ``stop``; a failed round is logged and tried again."""
        while not stop.is_set():
            try:
                await asyncio.to_thread(self.step)
            except ApiError as exc:
                log.warning("native policies: round failed (%s); trying again in %.0f s", exc, self.interval)
            except Exception:  # noqa: BLE001 - the loop must outlive any surprise
                log.exception("native policies: round failed")
            try:
                await asyncio.wait_for(stop.wait(), timeout=self.interval)
            except asyncio.TimeoutError:
                pass
