"""``infergate controller --native-policies``: the generated ValidatingAdmissionPolicies kept
in the cluster, proven enforced, marked for the webhook (``webhook.policy.native_handover``).

One round (``step``, blocking; on the leader only), from the policies in force:

1. every generated VAP and binding not stored as generated is applied (server-side apply,
   field manager ``infergate``, forced), owned by the release's ClusterRole (``--native-policies-owner``)
   so that the garbage collector deletes them with it; a VAP written again loses its mark in the
   same apply;
2. when a VAP is not marked with its current hash: the probe VAP and binding carrying the
   token of the whole set are applied last, and a ConfigMap labelled with the token is created
   with ``dryRun=All`` until the apiserver denies it with the probe's message (within
   ``probe_timeout``); then each VAP is marked ``infergate.io/enforced: <hash>``;
3. what it no longer generates: a binding is deleted (the webhook checks every binding of a
   VAP it trusts); a VAP is first unmarked, and deleted ``grace`` seconds later, once the
   webhook has seen the mark go (it evaluates the rules again first).

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
from webhook.policy.native_handover import (BINDING, ENFORCED_ANNOTATION, MANAGED_BY_SELECTOR, PROBE_NAME, VAP,
                                            content_hash, generated, in_cluster, marks, probe_denied,
                                            probe_objects, probe_request, stored_as_generated, stored_key)

log = logs.get("controller")

FIELD_MANAGER = "infergate"
KIND_OF = {VAP: kinds.VALIDATING_ADMISSION_POLICY, BINDING: kinds.VALIDATING_ADMISSION_POLICY_BINDING}


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
        self._unmarked: dict[str, float] = {}  # VAPs no longer generated: when their mark went
        self.writes = 0
        self.probes = 0  # dry-run creates sent
        self.enforced: dict[str, str] = {}  # VAP -> the mark it carries, as of the last round

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
        objects = generated(result)
        owner = self.api.get(kinds.CLUSTER_ROLE, self.owner_name) if self.owner_name else None
        if owner is not None:
            owner.setdefault("apiVersion", kinds.CLUSTER_ROLE.api_version)
            owner.setdefault("kind", kinds.CLUSTER_ROLE.kind)
        stored = {stored_key(o): o for kind in KIND_OF.values() for o in self.api.list(kind, MANAGED_BY_SELECTOR)}
        expected = marks(result)

        # 1. what is not stored as generated (a VAP with a stale mark: unmarked first)
        for obj in in_cluster(objects, owner):
            was = stored.get(stored_key(obj))
            stale = obj["kind"] == VAP and _mark(was) not in (None, expected.get(obj["metadata"]["name"]))
            if stale or not stored_as_generated(was, obj) or not _owned_by(was, owner):
                self._apply(obj)
                stored[stored_key(obj)] = obj  # (unmarked now)

        # 2. the probe, then the marks
        unmarked = [name for name in result.rules if _mark(stored.get((VAP, name))) != expected[name]]
        if unmarked:
            token = content_hash(objects)
            for obj in in_cluster(probe_objects(token), owner):
                if not stored_as_generated(stored.get(stored_key(obj)), obj) or not _owned_by(stored.get(stored_key(obj)), owner):
                    self._apply(obj)
            if not self.probe(token):
                log.warning("native policies: the apiserver did not deny the probe within %.0f s; the webhook "
                            "keeps evaluating every rule, trying again in %.0f s", self.probe_timeout, self.interval)
                return
            by_name = {o["metadata"]["name"]: o for o in objects if o["kind"] == VAP}
            for name in unmarked:
                self._apply(in_cluster([by_name[name]], owner, expected[name])[0])
            log.info("native policies: enforced by the apiserver, marked: %s", ", ".join(sorted(unmarked)))
        self.enforced = dict(expected)

        # 3. what is no longer generated
        wanted = {stored_key(o) for o in objects} | {(VAP, PROBE_NAME), (BINDING, PROBE_NAME)}
        now = self.clock()
        for key, obj in sorted(stored.items()):
            if key in wanted:
                continue
            kind, name = key
            if kind == BINDING:
                self._delete(kind, name)
            elif _mark(obj) is not None:
                self.api.merge_patch(kinds.VALIDATING_ADMISSION_POLICY, name,
                                     {"metadata": {"annotations": {ENFORCED_ANNOTATION: None}}}, FIELD_MANAGER)
                self.writes += 1
                self._unmarked[name] = now
            elif now - self._unmarked.setdefault(name, now) >= self.grace:
                self._delete(kind, name)
                self._unmarked.pop(name, None)
        self._unmarked = {n: t for n, t in self._unmarked.items() if (VAP, n) in stored}

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
