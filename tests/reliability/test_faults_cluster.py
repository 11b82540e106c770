"""The cluster API under the webhook fails: unreachable at start, gone after the first
sync, slow, answering 500s, dropping watches, expiring resource versions (410). The
webhook answers from its last synced state, /readyz says whether it has one, and it
catches up by itself when the API is back.

The API is a fake kube-apiserver on loopback speaking the list/watch wire format
(``tests/support/apiserver.py``); the client is the real ``kubernetes`` one inside
``KubeState``; the chain and the server are the real ones.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from kubernetes.client import ApiClient, Configuration

from tests.support.apiserver import FakeApiServer
from webhook import shipped_data
from webhook.admission.chain import AdmissionChain
from webhook.policy import PolicySet
from webhook.schema import CRDRegistry
from webhook.server.wiring import cluster_state_checks
from webhook.apiversion import group_of
from webhook.inputs.watches import lookup_watches
from webhook.state.kube import Backoff, KubeState

WEBHOOK_KINDS = lookup_watches()

from .conftest import ServerThread, review, wait_until
from tests.support.cel import EVALUATOR

MANIFESTS = Path(shipped_data.example_manifests_dir())
# Denied only by what the cluster says: the class does not admit orders from this namespace.
ORDER = yaml.safe_load((MANIFESTS / "denied-by-webhook" / "inferenceservice-namespace-not-allowed.yaml").read_text())


class Api:
    """The fake apiserver in a thread of its own, stoppable and restartable on one port;
    it serves every watched kind but ``unserved`` (their CRDs not installed: 404)."""

    def __init__(self, unserved: tuple[str, ...] = ()) -> None:
        self.fake = FakeApiServer()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.delay = 0.0
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        self._runner: web.AppRunner | None = None
        for kind in WEBHOOK_KINDS:
            if group_of(kind.api_version) not in unserved:
                self.fake.serve(kind, typed_list=True)
        for path in sorted(Path(shipped_data.examples_dir()).glob("*.yaml")):
            for obj in yaml.safe_load_all(path.read_text()):
                if obj:
                    self.add(obj)

    def resource(self, kind: str):
        return next(r for r in self.fake.resources.values() if r.kind.kind == kind)

    def add(self, obj: dict) -> None:
        for res in self.fake.resources.values():
            if res.kind.kind == obj["kind"] and res.kind.api_version == obj["apiVersion"]:
                self.call(lambda: self.fake.add(res, obj))

    def modify(self, obj: dict) -> None:
        self.call(lambda: self.fake.modify(self.resource(obj["kind"]), obj))

    def call(self, fn) -> None:
        async def run():
            fn()
        asyncio.run_coroutine_threadsafe(run(), self._loop).result(5)

    def start(self) -> None:
        async def up():
            @web.middleware
            async def slow(request, handler):
                await asyncio.sleep(self.delay)
                return await handler(request)

            app = web.Application(middlewares=[slow])
            app.router.add_get("/{path:.*}", self.fake.handle)
            self._runner = web.AppRunner(app, shutdown_timeout=0.1)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True).start()
        asyncio.run_coroutine_threadsafe(up(), self._loop).result(10)

    def stop(self) -> None:
        async def down():
            for res in self.fake.resources.values():
                self.fake.end_streams(res)
            await self._runner.cleanup()
        asyncio.run_coroutine_threadsafe(down(), self._loop).result(10)

    def client(self) -> ApiClient:
        return ApiClient(Configuration(host=f"http://127.0.0.1:{self.port}"))


def serving(tmp_path, failure_mode: str = "deny", unserved: tuple[str, ...] = ()):
    api = Api(unserved)
    state = KubeState(api.client(), WEBHOOK_KINDS, backoff=Backoff(0.05, 0.2))
    chain = AdmissionChain(CRDRegistry.shipped(evaluator=EVALUATOR), PolicySet.load(shipped_data.policies_dir(), evaluator=EVALUATOR), state)
    # as load_admitter wires it: the chain judges only once the state is synced
    prerequisites = cluster_state_checks(state)
    with ServerThread(tmp_path / "certs", chain, prerequisites=prerequisites, failure_mode=failure_mode) as server:
        yield api, state, server
    state.stop(2.0)


@pytest.fixture
def cluster(tmp_path):
    yield from serving(tmp_path)


@pytest.fixture
def cluster_failing_open(tmp_path):
    yield from serving(tmp_path, failure_mode="allow")


# The groups whose CRDs a cluster of Deckhouse users often lacks: GIE's and llm-d's
NOT_INSTALLED = ("inference.networking.k8s.io", "inference.networking.x-k8s.io", "llm-d.ai")


@pytest.fixture
def cluster_without_gie(tmp_path):
    yield from serving(tmp_path, unserved=NOT_INSTALLED)


def judged(server: ServerThread) -> dict:
    response = server.client().post("/validate", review(ORDER, uid="order")).json()["response"]
    assert response["uid"] == "order"
    return response


def readyz(server: ServerThread) -> int:
    return server.client().get("/readyz").status


def test_unreachable_at_start_not_ready_then_synced_by_itself(cluster):
    api, state, server = cluster
    state.start()  # the API is not listening yet
    assert readyz(server) == 503
    # not judged against an empty cache: the failure mode (deny) answers, saying why
    response = judged(server)
    assert response["allowed"] is False and response["status"]["code"] == 500, response
    assert "cluster-state: not synced" in response["status"]["message"]
    assert response["auditAnnotations"] == {"failure": "not-ready"}
    api.start()
    wait_until(lambda: state.ready, timeout=15)
    assert readyz(server) == 200
    response = judged(server)  # now judged: the class refuses the namespace
    assert response["allowed"] is False and response["status"]["code"] != 500, response
    assert "failure" not in response.get("auditAnnotations", {})


def test_before_the_first_sync_a_failing_open_webhook_allows_with_a_warning(cluster_failing_open):
    api, state, server = cluster_failing_open
    state.start()
    response = judged(server)
    assert response["allowed"] is True and response["auditAnnotations"] == {"failure": "not-ready"}
    assert "did not judge" in response["warnings"][0]
    api.start()
    wait_until(lambda: state.ready, timeout=15)
    assert judged(server)["allowed"] is False  # judged once synced


def test_api_gone_after_sync_keeps_answering_from_the_cache(cluster):
    api, state, server = cluster
    api.start()
    state.start()
    wait_until(lambda: state.ready, timeout=15)
    first = judged(server)
    assert first["allowed"] is False
    api.stop()
    for _ in range(5):  # an outage: same answers, still ready
        assert judged(server) == first
        assert readyz(server) == 200
    # while it is down, the class changes; when it is back, the cache catches up by itself
    api.modify(open_class(api))
    api.start()
    wait_until(lambda: judged(server)["allowed"] is True, timeout=15)


def test_slow_api_500s_dropped_watches_and_410s_do_not_touch_answers(cluster):
    api, state, server = cluster
    api.start()
    state.start()
    wait_until(lambda: state.ready, timeout=15)
    first = judged(server)
    classes = api.resource("InferenceServiceClass")
    syncs = first_syncs(classes)
    api.delay = 1.0  # every API call now takes a second
    classes.fail_next_watch = 500
    api.call(lambda: api.fake.end_streams(classes))  # watch dropped; the retry gets a 500
    for _ in range(3):
        assert judged(server) == first
    # etcd compaction with a change no watch event carries: only the 410 and a relist see it
    changed = open_class(api)
    api.call(lambda: api.fake.compact(classes, silently_change=changed))
    api.delay = 0.0
    wait_until(lambda: first_syncs(classes) > syncs, timeout=15)  # relisted (streamed)
    wait_until(lambda: judged(server)["allowed"] is True, timeout=15)
    assert readyz(server) == 200


def first_syncs(collection) -> int:
    """How often the kind was synced anew: paged lists, and watches streaming its objects first."""
    return collection.lists + sum(1 for q in collection.watch_requests if q.get("sendInitialEvents") == "true")


def open_class(api: Api) -> dict:
    """The order's class, now admitting every namespace."""
    klass = dict(api.resource("InferenceServiceClass").objects[ORDER["spec"]["inferenceServiceClassName"]])
    klass["spec"] = dict(klass["spec"], admissionPolicy={"allowedNamespaces": ["*"]})
    return klass


def readyz_body(server: ServerThread) -> tuple[int, str]:
    answer = server.client().get("/readyz")
    return answer.status, answer.body.decode()


@pytest.mark.parametrize("fixture", ["cluster", "cluster_without_gie"])
def test_an_apiserver_restart_never_fails_readiness_and_the_watches_come_back(fixture, request):
    """The outage this prevents: after a restart, kinds whose CRDs are absent answered only 404
    and stayed "interrupted" forever, so /readyz failed on every replica at once."""
    api, state, server = request.getfixturevalue(fixture)
    api.start()
    state.start()
    wait_until(lambda: state.ready, timeout=15)
    expected_unserved = {str(k) for k in WEBHOOK_KINDS if group_of(k.api_version) in NOT_INSTALLED} \
        if fixture == "cluster_without_gie" else set()
    assert set(state.unserved) == expected_unserved
    first = judged(server)
    api.stop()
    wait_until(lambda: state.interrupted is not None, timeout=15)
    status, body = readyz_body(server)
    assert status == 200 and "[+]cluster-watch ok (degraded: watch interrupted, reconnecting:" in body, body
    assert judged(server) == first  # judged from the last synced picture
    api.start()
    wait_until(lambda: state.interrupted is None, timeout=15)  # every kind answered again, 404s included
    status, body = readyz_body(server)
    assert status == 200 and "degraded" not in body, body
    assert set(state.unserved) == expected_unserved
    api.modify(open_class(api))  # the watches resumed: a change after the restart arrives
    wait_until(lambda: judged(server)["allowed"] is True, timeout=15)
