"""In a cluster: certificates kept in a Secret, caBundle injected into the webhook
configurations, through the real ``kubernetes`` client against a small fake API server
that speaks the API's wire format (resourceVersion conflicts, JSON patch with ``test``)."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import itertools
import json
import logging
import time

import jsonpatch
import pytest
from cryptography import x509
from aiohttp import web
from kubernetes import client as kube

from webhook import certs
from webhook.webhook_config import build_webhook_configurations

SANS = certs.serving_sans("infergate/infergate")
POLICY = certs.RotationPolicy(ca_validity=dt.timedelta(days=30), serving_validity=dt.timedelta(days=9))


class FakeApiServer:
    """Secrets and webhook configurations, as kube-apiserver stores and versions them."""

    def __init__(self) -> None:
        self.before_create = None  # a test's hook: another writer gets there first
        self.before_patch = None  # the same, for a patch
        self.objects: dict[str, dict] = {}
        self.versions = itertools.count(100)
        self.requests: list[tuple[str, str, str]] = []
        self.writers: set[str] = set()  # the User-Agent of every write: the apiserver's field manager
        self.watchers: dict[str, list[asyncio.Queue]] = {}  # plural -> open watches
        self.refuse_watches = False  # RBAC without list/watch (a chart older than the server)

    def app(self) -> web.Application:
        app = web.Application()
        secrets = "/api/v1/namespaces/{ns}/secrets"
        hooks = "/apis/admissionregistration.k8s.io/v1/{plural}"
        app.router.add_get(secrets + "/{name}", self.get)
        app.router.add_post(secrets, self.create)
        app.router.add_put(secrets + "/{name}", self.replace)
        app.router.add_get(hooks + "/{name}", self.get)
        app.router.add_get(hooks, self.watch)
        app.on_shutdown.append(self.end_watches)
        app.router.add_patch(hooks + "/{name}", self.patch)
        return app

    def key(self, request: web.Request, name: str | None = None) -> str:
        kind = request.match_info.get("plural") or f"secrets/{request.match_info['ns']}"
        return f"{kind}/{name or request.match_info['name']}"

    def put(self, key: str, obj: dict) -> dict:
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(next(self.versions))
        event = "MODIFIED" if key in self.objects else "ADDED"
        self.objects[key] = obj
        self.notify(key, event, obj)
        return obj

    def delete(self, key: str) -> None:
        self.notify(key, "DELETED", self.objects.pop(key))

    def notify(self, key: str, event: str, obj: dict) -> None:
        plural, _, _ = key.partition("/")
        for queue in self.watchers.get(plural, []):
            queue.put_nowait((event, copy.deepcopy(obj)))

    async def end_watches(self, app: web.Application) -> None:
        for queue in itertools.chain.from_iterable(self.watchers.values()):
            queue.put_nowait(None)

    async def watch(self, request: web.Request) -> web.StreamResponse:
        """A watch by name (``fieldSelector=metadata.name=...``), as the apiserver streams
        it: the object as it is first (ADDED), then every change, until ``timeoutSeconds``."""
        self.requests.append(("WATCH", request.path, request.query.get("fieldSelector", "")))
        plural = request.match_info["plural"]
        field, _, name = request.query.get("fieldSelector", "").partition("=")
        if request.query.get("watch") != "true" or field != "metadata.name":
            return self.status(400, "BadRequest", "only watches by name are served here")
        if self.refuse_watches:
            return self.status(403, "Forbidden", f"cannot watch resource {plural!r}")
        queue: asyncio.Queue = asyncio.Queue()
        if f"{plural}/{name}" in self.objects:
            queue.put_nowait(("ADDED", copy.deepcopy(self.objects[f"{plural}/{name}"])))
        self.watchers.setdefault(plural, []).append(queue)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        deadline = asyncio.get_running_loop().time() + float(request.query.get("timeoutSeconds", "1800"))
        try:
            while (left := deadline - asyncio.get_running_loop().time()) > 0:
                try:
                    item = await asyncio.wait_for(queue.get(), left)
                except TimeoutError:
                    break
                if item is None:  # the server shuts down
                    break
                event, obj = item
                if obj["metadata"]["name"] == name:
                    await response.write(json.dumps({"type": event, "object": obj}).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.watchers[plural].remove(queue)
        return response

    @staticmethod
    def status(code: int, reason: str, message: str) -> web.Response:
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                                  "reason": reason, "message": message}, status=code)

    async def get(self, request: web.Request) -> web.Response:
        self.requests.append(("GET", request.path, request.content_type))
        obj = self.objects.get(self.key(request))
        return web.json_response(obj) if obj else self.status(404, "NotFound", "not found")

    async def create(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(("POST", request.path, request.content_type))
        self.writers.add(request.headers.get("User-Agent", ""))
        key = self.key(request, body["metadata"]["name"])
        if self.before_create is not None:
            self.before_create(self)
            self.before_create = None
        if key in self.objects:
            return self.status(409, "AlreadyExists", "already exists")
        return web.json_response(self.put(key, body), status=201)

    async def replace(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(("PUT", request.path, request.content_type))
        self.writers.add(request.headers.get("User-Agent", ""))
        key = self.key(request)
        current = self.objects.get(key)
        if current is None:
            return self.status(404, "NotFound", "not found")
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            return self.status(409, "Conflict", "the object has been modified; please apply your changes to the latest version")
        return web.json_response(self.put(key, body))

    async def patch(self, request: web.Request) -> web.Response:
        self.requests.append(("PATCH", request.path, request.content_type))
        self.writers.add(request.headers.get("User-Agent", ""))
        if request.content_type != "application/json-patch+json":
            return self.status(415, "UnsupportedMediaType", request.content_type)
        key = self.key(request)
        if self.before_patch is not None:
            self.before_patch(self)
            self.before_patch = None
        current = self.objects.get(key)
        if current is None:
            return self.status(404, "NotFound", "not found")
        try:
            patched = jsonpatch.apply_patch(current, await request.json())
        except jsonpatch.JsonPatchTestFailed:  # what kube-apiserver v1.36 answers to a failed test op
            return self.status(422, "Invalid", "the server rejected our request due to an error in our request")
        except jsonpatch.JsonPatchException as exc:
            return self.status(422, "Invalid", str(exc))
        return web.json_response(self.put(key, patched))


@pytest.fixture
async def api(aiohttp_server):
    fake = FakeApiServer()
    server = await aiohttp_server(fake.app())
    configuration = kube.Configuration(host=str(server.make_url("")).rstrip("/"))
    api_client = kube.ApiClient(configuration)
    yield fake, api_client
    api_client.close()


def install_configurations(fake: FakeApiServer) -> None:
    mutating, validating = build_webhook_configurations(service="infergate/infergate")
    fake.put("mutatingwebhookconfigurations/infergate", mutating)
    fake.put("validatingwebhookconfigurations/infergate", validating)


async def test_secret_store_creates_then_replaces_with_optimistic_concurrency(api):
    fake, api_client = api
    store = certs.SecretStore(api_client, "infergate", "infergate-certs")
    assert await asyncio.to_thread(store.load) is None
    first = certs.plan(None, now=certs.utcnow(), sans=SANS, policy=POLICY).bundle
    await asyncio.to_thread(store.save, first)
    secret = fake.objects["secrets/infergate/infergate-certs"]
    assert secret["type"] == "kubernetes.io/tls"
    assert base64.b64decode(secret["data"]["tls.crt"]) == first.to_files()["tls.crt"]

    loaded = await asyncio.to_thread(store.load)
    assert loaded.to_files() == first.to_files()
    renewed = certs.plan(loaded, now=certs.utcnow(), sans=("localhost",), policy=POLICY).bundle
    await asyncio.to_thread(store.save, renewed)
    assert [m for m, _, _ in fake.requests] == ["GET", "POST", "GET", "PUT"]

    # another replica wrote meanwhile: ours is refused, nothing is overwritten
    other = certs.SecretStore(api_client, "infergate", "infergate-certs")
    await asyncio.to_thread(other.load)
    await asyncio.to_thread(store.load)
    await asyncio.to_thread(other.save, first)
    with pytest.raises(certs.CertConflict, match="written by someone else"):
        await asyncio.to_thread(store.save, renewed)
    assert base64.b64decode(fake.objects["secrets/infergate/infergate-certs"]["data"]["tls.crt"]) == first.to_files()["tls.crt"]


async def test_ca_bundle_injected_into_every_webhook_and_only_when_changed(api):
    fake, api_client = api
    bundle = certs.plan(None, now=certs.utcnow(), sans=SANS, policy=POLICY).bundle
    assert await asyncio.to_thread(certs.inject_ca_bundle, api_client, "infergate", bundle.ca_pem()) == []  # none installed
    install_configurations(fake)
    changed = await asyncio.to_thread(certs.inject_ca_bundle, api_client, "infergate", bundle.ca_pem())
    assert changed == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        (hook,) = fake.objects[f"{plural}/infergate"]["webhooks"]
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == bundle.ca_pem()
        assert hook["clientConfig"]["service"]["name"] == "infergate"  # the rest untouched
    assert {ct for m, _, ct in fake.requests if m == "PATCH"} == {"application/json-patch+json"}
    patches = sum(m == "PATCH" for m, _, _ in fake.requests)
    assert await asyncio.to_thread(certs.inject_ca_bundle, api_client, "infergate", bundle.ca_pem()) == []
    assert sum(m == "PATCH" for m, _, _ in fake.requests) == patches


async def test_keeper_in_secret_mode_rotates_and_injects_the_grown_bundle(api):
    """Two replicas share the Secret: the first creates it, the second adopts it; when
    the CA nears expiry the bundle injected holds both CAs."""
    fake, api_client = api
    install_configurations(fake)
    clock = [certs.utcnow()]

    def keeper() -> certs.CertKeeper:
        return certs.CertKeeper(
            certs.SecretStore(api_client, "infergate", "infergate-certs"), sans=SANS, manage=True,
            policy=certs.RotationPolicy(ca_validity=dt.timedelta(days=30), serving_validity=dt.timedelta(days=30)),
            on_bundle=lambda b: certs.inject_ca_bundle(api_client, "infergate", b.ca_pem()), clock=lambda: clock[0],
        )

    first, second = keeper(), keeper()
    await asyncio.to_thread(first.start)
    await asyncio.to_thread(second.start)
    assert first.bundle.to_files() == second.bundle.to_files()

    def injected() -> list:
        hook = fake.objects["validatingwebhookconfigurations/infergate"]["webhooks"][0]
        return x509.load_pem_x509_certificates(base64.b64decode(hook["clientConfig"]["caBundle"]))

    assert injected() == list(first.bundle.trusted)
    clock[0] += dt.timedelta(days=21)  # CA: less than a third of 30 days left
    assert await asyncio.to_thread(first.refresh) == ("appended a new CA to the bundle",)
    assert len(injected()) == 2 and injected()[0] == second.bundle.signer
    assert await asyncio.to_thread(second.refresh) == ()  # adopts, nothing left to do
    assert second.bundle.to_files() == first.bundle.to_files()


async def test_serve_in_secret_mode_keeps_certs_in_the_secret_and_injects_the_bundle(aiohttp_server, tmp_path, monkeypatch):
    """`infergate serve --cert-mode secret` against the fake API (through a kubeconfig)."""
    import aiohttp

    from webhook.server import serve
    from webhook.server.settings import Settings

    from .conftest import ScriptedAdmitter, review

    fake = FakeApiServer()
    api = await aiohttp_server(fake.app())
    install_configurations(fake)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml_kubeconfig(str(api.make_url("")).rstrip("/")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)

    ports: list[int] = []
    stop = asyncio.Event()
    settings = Settings(host="127.0.0.1", port=0, cert_mode="secret", cert_secret="infergate/infergate-certs",
                        service="infergate/infergate", cert_dir=tmp_path / "unused", kubeconfig=kubeconfig)
    task = asyncio.create_task(serve(settings, load=lambda s: (ScriptedAdmitter(), {}), on_listening=ports.append,
                                     stop_event=stop, handle_signals=False))
    try:
        while not ports:
            assert not task.done(), task.result()
            await asyncio.sleep(0.01)
        secret = fake.objects["secrets/infergate/infergate-certs"]
        ca_pem = base64.b64decode(secret["data"]["ca.crt"])
        hook = fake.objects["mutatingwebhookconfigurations/infergate"]["webhooks"][0]
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca_pem
        assert not (tmp_path / "unused").exists()  # nothing written to disk
        # the apiserver, trusting the injected bundle, reaches the webhook by its Service name
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=certs.client_context(ca_pem))) as s:
            resolver_free = f"https://localhost:{ports[0]}/validate"
            async with s.post(resolver_free, json=review({"apiVersion": "kubeai.org/v1", "kind": "Model",
                                                          "metadata": {"name": "m", "namespace": "a"}})) as r:
                assert r.status == 200 and (await r.json())["response"]["allowed"]
        served = certs.CertBundle.from_files({k: base64.b64decode(v) for k, v in secret["data"].items()})
        assert "infergate.infergate.svc" in certs.subject_alt_names(served.cert)
        # the Secret and the caBundle patches name the webhook, not the client library's default
        assert fake.writers == {"infergate-webhook"}
    finally:
        stop.set()
        assert await task == 0


def yaml_kubeconfig(server: str) -> str:
    return f"""apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {{server: "{server}"}}
users:
- name: nobody
  user: {{}}
contexts:
- name: fake
  context: {{cluster: fake, user: nobody}}
current-context: fake
"""


async def test_replicas_starting_together_agree_on_one_secret(api):
    """Both read 'no Secret'; the other replica's create lands first; ours gets 409,
    reads theirs and serves it instead of failing to start."""
    fake, api_client = api
    theirs = certs.plan(None, now=certs.utcnow(), sans=SANS, policy=POLICY).bundle

    def other_replica_creates(server: FakeApiServer) -> None:
        server.put("secrets/infergate/infergate-certs", {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "infergate-certs", "namespace": "infergate"},
            "data": {k: base64.b64encode(v).decode() for k, v in theirs.to_files().items()},
        })

    fake.before_create = other_replica_creates
    ours = certs.CertKeeper(certs.SecretStore(api_client, "infergate", "infergate-certs"), sans=SANS,
                            policy=POLICY, manage=True)
    await asyncio.to_thread(ours.start)
    assert ours.bundle.to_files() == theirs.to_files()
    assert [m for m, _, _ in fake.requests] == ["GET", "POST", "GET"]


async def test_replicas_injecting_together_both_start(api):
    """Both read the configurations without a caBundle; the other replica's patch lands
    first, so ours (guarded by the resourceVersion it read) is refused with 422: ours reads
    again, finds the bundle in place and starts, instead of exiting (a restarted Pod, seen on
    a real node with two replicas)."""
    fake, api_client = api
    install_configurations(fake)
    bundle = certs.plan(None, now=certs.utcnow(), sans=SANS, policy=POLICY).bundle
    encoded = base64.b64encode(bundle.ca_pem()).decode()

    def other_replica_injects(server: FakeApiServer) -> None:
        key = "mutatingwebhookconfigurations/infergate"
        obj = copy.deepcopy(server.objects[key])
        for hook in obj["webhooks"]:
            hook["clientConfig"]["caBundle"] = encoded
        server.put(key, obj)

    fake.before_patch = other_replica_injects
    changed = await asyncio.to_thread(certs.inject_ca_bundle, api_client, "infergate", bundle.ca_pem())
    assert changed == ["ValidatingWebhookConfiguration"]  # the mutating one was done by the other
    assert [m for m, p, _ in fake.requests if "mutating" in p] == ["GET", "PATCH", "GET"]
    assert ca_bundles(fake) == [bundle.ca_pem(), bundle.ca_pem()]


# ---------------------------------------------------------------------------------------
# caBundle drift: the configurations lose the bundle without any rotation.

HOOK_KEYS = ("mutatingwebhookconfigurations/infergate", "validatingwebhookconfigurations/infergate")


def recreate_without_ca_bundle(fake: FakeApiServer) -> None:
    """What a `helm upgrade` replacing them, or a GitOps re-apply, leaves: both
    configurations deleted and created again as rendered, without a caBundle."""
    for key in HOOK_KEYS:
        fake.delete(key)
    install_configurations(fake)


def ca_bundles(fake: FakeApiServer) -> list[bytes | None]:
    """The caBundle of every webhook of both configurations, decoded (None: absent)."""
    found = []
    for key in HOOK_KEYS:
        for hook in fake.objects.get(key, {}).get("webhooks", [{}]):
            encoded = hook.get("clientConfig", {}).get("caBundle")
            found.append(base64.b64decode(encoded) if encoded else None)
    return found


def writes(fake: FakeApiServer) -> int:
    return sum(method in ("PATCH", "PUT", "POST") for method, _, _ in fake.requests)


async def test_every_certificate_check_puts_back_a_lost_ca_bundle_and_writes_nothing_at_steady_state(api):
    from .conftest import wait_for

    fake, api_client = api
    install_configurations(fake)
    keeper = certs.CertKeeper(
        certs.SecretStore(api_client, "infergate", "infergate-certs"), sans=SANS, policy=POLICY, manage=True,
        on_bundle=lambda b: certs.inject_ca_bundle(api_client, "infergate", b.ca_pem()),
    )
    await asyncio.to_thread(keeper.start)
    ca_pem = keeper.bundle.ca_pem()
    assert ca_bundles(fake) == [ca_pem, ca_pem]
    interval = 0.5
    task = asyncio.create_task(keeper.run(check_interval=interval, watch_interval=0.05, logger=logging.getLogger("t")))
    try:
        before, reads = writes(fake), len(fake.requests)
        await asyncio.sleep(interval * 3.5)  # three checks with nothing to do
        assert len(fake.requests) >= reads + 3 * 3  # each read the Secret and both configurations...
        assert writes(fake) == before  # ...and wrote nothing

        recreate_without_ca_bundle(fake)
        assert ca_bundles(fake) == [None, None]
        await wait_for(lambda: ca_bundles(fake) == [ca_pem, ca_pem], timeout=interval + 1.0)
        assert writes(fake) == before + 2  # one patch per configuration, the Secret untouched
        patched = fake.objects[HOOK_KEYS[1]]["webhooks"][0]
        assert patched["clientConfig"]["service"]["name"] == "infergate" and patched["failurePolicy"] == "Fail"
    finally:
        task.cancel()


async def test_the_watch_puts_back_a_lost_ca_bundle_at_once_and_writes_nothing_at_steady_state(api):
    from .conftest import wait_for

    fake, api_client = api
    install_configurations(fake)
    ca_pem = certs.plan(None, now=certs.utcnow(), sans=SANS, policy=POLICY).bundle.ca_pem()
    watch = certs.WebhookConfigurationWatch(api_client, "infergate", lambda: ca_pem, logger=logging.getLogger("t"),
                                            timeout_seconds=1, retry_seconds=0.1)
    watch.start()
    try:
        await wait_for(lambda: ca_bundles(fake) == [ca_pem, ca_pem])  # the watch's first event: as installed
        assert {query for method, _, query in fake.requests if method == "WATCH"} == {"metadata.name=infergate"}
        before = writes(fake)
        labelled = copy.deepcopy(fake.objects[HOOK_KEYS[0]])
        labelled["metadata"]["labels"]["team"] = "ml"
        fake.put(HOOK_KEYS[0], labelled)  # a change that keeps the bundle: no reason to write
        # each kind's watch ends after 1 s and starts again with the object as it is: once each
        # kind's third watch has begun, its second one's events (the change) were all handled
        await wait_for(lambda: sum(method == "WATCH" for method, _, _ in fake.requests) >= 6, timeout=10.0)
        assert writes(fake) == before

        recreate_without_ca_bundle(fake)
        await wait_for(lambda: ca_bundles(fake) == [ca_pem, ca_pem], timeout=2.0)
        assert writes(fake) == before + 2
    finally:
        watch.stop()


async def test_serve_in_secret_mode_injects_into_configurations_created_after_it_started(aiohttp_server, tmp_path, monkeypatch):
    """`helm install` creates the webhook configurations after the Deployment: a pod can
    start first. The periodic check is an hour away here: the watch does it."""
    from webhook.server import serve
    from webhook.server.settings import Settings

    from .conftest import ScriptedAdmitter, wait_for

    fake = FakeApiServer()
    api = await aiohttp_server(fake.app())
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml_kubeconfig(str(api.make_url("")).rstrip("/")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    ports: list[int] = []
    stop = asyncio.Event()
    settings = Settings(host="127.0.0.1", port=0, cert_mode="secret", cert_secret="infergate/infergate-certs",
                        service="infergate/infergate", kubeconfig=kubeconfig, cert_check_interval=3600)
    task = asyncio.create_task(serve(settings, load=lambda s: (ScriptedAdmitter(), {}), on_listening=ports.append,
                                     stop_event=stop, handle_signals=False))
    try:
        await wait_for(lambda: ports or task.done())
        await wait_for(lambda: sum(method == "WATCH" for method, _, _ in fake.requests) >= 2)
        assert ca_bundles(fake) == [None, None]  # nothing installed yet
        install_configurations(fake)
        ca_pem = base64.b64decode(fake.objects["secrets/infergate/infergate-certs"]["data"]["ca.crt"])
        await wait_for(lambda: ca_bundles(fake) == [ca_pem, ca_pem], timeout=3.0)
    finally:
        stop.set()
        assert await task == 0


async def test_a_refused_watch_is_retried_with_growing_pauses(api, caplog):
    """RBAC without list/watch (a chart older than the server): a warning, then retries
    1, 2, 4, ... pauses apart, never a busy loop; the periodic check still does the job."""
    fake, api_client = api
    fake.refuse_watches = True
    watch = certs.WebhookConfigurationWatch(api_client, "infergate", lambda: b"", logger=logging.getLogger("infergate.t"),
                                            retry_seconds=0.1)
    from .conftest import wait_for

    with caplog.at_level(logging.WARNING, logger="infergate.t"):
        began = time.monotonic()
        watch.start()
        try:  # tries at 0, 0.1, 0.3, 0.7, 1.5 s: five per kind
            await wait_for(lambda: sum(method == "WATCH" for method, _, _ in fake.requests) >= 2 * 5, timeout=10.0)
        finally:
            watch.stop()
    took = time.monotonic() - began
    assert took >= 1.4, f"five tries per kind in {took:.2f} s: the pauses do not grow"  # no busy loop
    assert "403" in caplog.records[0].fields["error"] and caplog.records[-1].fields["retry_seconds"] >= 0.8
