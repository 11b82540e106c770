"""What ``infergate serve`` runs, wired together: the admission chain built from its inputs
(CRDs, policies, cluster state; reloaded or watched), the certificates, the aiohttp app on
its TLS socket, the chain's heap frozen out of the cyclic GC once loaded, and shutdown.

Each input of the chain loads on its own and fails under the name of the readiness check
that reports it (``crds``, ``policies``, ``cluster-state``): a new input is one more
``attempt`` in :func:`load_admitter` and, if it can fall behind (a watch), one more
prerequisite.
"""

from __future__ import annotations

import asyncio
import datetime
import errno
import gc
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from webhook import certs, logs, shipped_data
from webhook.admission.chain import AdmissionChain
from webhook.cel.engine import cel_expr
from webhook.inputs.crds import CRDSource, crd_registry
from webhook.inputs.policies import PolicySource, load_policy_directory
from webhook.policy.actions import ActionsError
from webhook.server.metrics import Metrics
from webhook.server.admitter import CHAIN_CHECK, Admitter, AdmitterSlot, Advisory, ReadinessCheck
from webhook.server.balance import attach
from webhook.server.connections import Connections, bound_port, listen
from webhook.server.processes import ProcessGroup, Siblings, bind_port
from webhook.server.processes import run as run_processes
from webhook.server.http import STATE, ServerConfig, create_app
from webhook.server.settings import Settings
from webhook.state import FileState

if TYPE_CHECKING:
    from webhook.cel import Evaluator
    from webhook.inputs.kube import KubeClientConfig

log = logs.get("server")

AdmitterLoader = Callable[[Settings], "tuple[Admitter, dict[str, ReadinessCheck]]"]


# ---------------------------------------------------------------------------------------
# The admission chain and its inputs


class InputsFailed(Exception):
    """Inputs of the chain that did not load, by the readiness check that reports each."""

    def __init__(self, failed: dict[str, str]):
        super().__init__("; ".join(f"{name}: {why}" for name, why in failed.items()))
        self.failed = failed

WEBHOOK_FIELD_MANAGER = "infergate-webhook"
WEBHOOK_CLIENT_POOL = 64  # connections: more than the watch cache's watches


def crd_source(settings: Settings) -> CRDSource:
    """``--crds-dir``, else the bundled CRDs (KubeAI's Model at ``--kubeai-crd``)."""
    if settings.crds_dir:
        return CRDSource(paths=(settings.crds_dir,))
    return CRDSource(kubeai_crd=settings.kubeai_crd)


def policy_source(settings: Settings) -> PolicySource:
    return PolicySource(settings.policies_dir, tuple(settings.policy_actions))


def _policies(settings: Settings, evaluator: Evaluator, registry: Any = None):
    """The policies, reloaded when their files change (a mounted ConfigMap) once started;
    the last good set stays in force when a change does not load. Their expressions are
    type-checked against the CRDs served (``registry``; with ``--kube-state``, whose CRDs are
    the cluster's and change, the bundled ones)."""
    policies = load_policy_directory(policy_source(settings), evaluator, registry)
    if policies.actions:
        log.info("validation actions overridden", extra={"fields": {"policy_actions": policies.actions.describe()}})
    return policies


def policy_actions_problem(settings: Settings) -> str | None:
    """What is wrong with ``--policy-actions`` (a bad action or selector, a name no policy of
    ``--policies-dir`` has), one line: checked at start, with the policies' names read
    without compiling them."""
    if not settings.policy_actions:
        return None
    try:
        policy_source(settings).overrides()
    except ActionsError as exc:
        return str(exc)
    return None


def _cluster_state(settings: Settings, policies: Any = None):
    """A watch cache of the cluster with ``--kube-state`` (of what ``policies``, a
    ``PolicyDirectory``, read; ready once every kind is listed, watching once started; a
    reload's watch list in force before its policies are), else a directory of manifests."""
    if settings.kube_state:
        from webhook.inputs.cluster import watch_cache
        from webhook.inputs.watches import webhook_watches

        native = settings.native_policies
        state = watch_cache(kube_client(settings), webhook_watches(policies.current() if policies is not None else None,
                                                                   native=native))
        if policies is not None:
            policies.on_load.append(lambda fresh: state.set_kinds(webhook_watches(fresh, native=native)))
        return state
    return FileState(settings.state_dir or shipped_data.examples_dir())


def load_admitter(settings: Settings, evaluator: Evaluator) -> tuple[Admitter, dict[str, ReadinessCheck]]:
    """The real admission chain over the configured (or shipped) CRDs, policies and state,
    their CEL evaluated with ``evaluator``, and its prerequisites (see :class:`AdmitterSlot`):
    the cluster state synced; started (see :func:`prepare_admitter`)."""
    admitter, checks, start = prepare_admitter(settings, evaluator)
    start()
    return admitter, checks


def prepare_admitter(
    settings: Settings, evaluator: Evaluator,
) -> tuple[Admitter, dict[str, ReadinessCheck], Callable[[], None]]:
    """:func:`load_admitter`'s chain and checks, loaded and compiled, with what starts its
    threads (policy reloads, watches), not yet called: ``serve --processes`` forks between.

    Every input is tried, in order, an input that needs an earlier one only when that one
    loaded; :class:`InputsFailed` names all that did not."""
    failed: dict[str, str] = {}

    def attempt(check: str, load: Callable[[Settings], Any]) -> Any:
        try:
            return load(settings)
        except Exception as exc:  # CRDLoadError, PolicyLoadError, StateLoadError, the cluster's config
            failed[check] = f"{type(exc).__name__}: {exc}"
            return None

    # with --kube-state the cluster's CRDs are the schema (watched with the rest of the state)
    registry = None if settings.kube_state else attempt("crds", lambda s: crd_registry(crd_source(s), evaluator))
    policies = attempt(CHAIN_CHECK, lambda s: _policies(s, evaluator, registry))
    state = attempt("cluster-state", lambda s: _cluster_state(s, policies))
    if settings.kube_state and state is not None:
        from webhook.inputs.cluster import cluster_crds

        registry = cluster_crds(state, evaluator)
    if failed:
        raise InputsFailed(failed)
    if settings.native_policies:
        policies = handed_over(policies, state, evaluator)

    def start() -> None:
        policies.start()
        state.start()

    return AdmissionChain(registry, policies, state), cluster_state_checks(state), start


def handed_over(policies: Any, state: Any, evaluator: Evaluator) -> Any:
    """``--native-policies``: ``policies`` less the rules the apiserver enforces, as the watch
    cache's VAPs, MAPs and bindings labelled managed-by infergate say, refreshed when they change."""
    from webhook.inputs.watches import HANDOVER_KINDS
    from webhook.policy.handed_over import HandedOverPolicies
    from webhook.policy.native_export import kind_resources
    from webhook.policy.native_handover import stored_key
    from webhook.schema.bundled import known_kinds

    def stored() -> dict:
        return {stored_key(o): o for kind in HANDOVER_KINDS for o in state.list(kind.api_version, kind.kind)}

    provider = HandedOverPolicies(policies, stored, evaluator, kind_resources(known_kinds()),
                                  logger=logs.get("server.native-policies"))
    for kind in HANDOVER_KINDS:
        state.on_change(kind.api_version, kind.kind, provider.changed)
    provider.refresh()
    return provider


def cluster_state_checks(state: Any) -> dict[str, ReadinessCheck]:
    """What readiness asks of the cluster view: its first sync (every watched kind listed, or
    known not to be served). A watch reconnecting is reported, never failing: the last synced
    picture is judged against meanwhile, as an informer serves it (RELIABILITY.md)."""
    checks = {"cluster-state": lambda: None if state.ready else "not synced",
              "cluster-watch": Advisory(lambda: state.interrupted)}
    if hasattr(state, "pending"):  # a watch cache: a reload's new lookups, unknown until synced
        checks["cluster-lookups"] = Advisory(lambda: state.pending)
    return checks


def unusable_paths(settings: Settings) -> list[str]:
    """What is wrong with the paths :func:`load_admitter` reads, one line per flag
    (``--state-dir /x: no such directory``): checked at start, so that a typo is an error
    and an exit rather than a server denying every review."""
    given = [("--crds-dir", settings.crds_dir, False), ("--policies-dir", settings.policies_dir, True)]
    if not settings.kube_state:
        given.append(("--state-dir", settings.state_dir, True))
    problems = []
    for flag, path, directory in given:
        if path is None:
            continue
        if not path.exists():
            problems.append(f"{flag} {path}: no such {'directory' if directory else 'file or directory'}")
        elif directory and not path.is_dir():
            problems.append(f"{flag} {path}: not a directory")
        elif not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
            problems.append(f"{flag} {path}: permission denied")
    return problems


# ---------------------------------------------------------------------------------------
# Certificates and the cluster


def build_cert_keeper(settings: Settings, metrics_: Metrics):
    """The certificate keeper for the mode, and in secret mode the watch that keeps the
    caBundle in the webhook configurations (else None); neither started."""
    sans = certs.serving_sans(settings.service, settings.extra_sans)
    policy = certs.RotationPolicy(
        ca_validity=settings.ca_validity, serving_validity=settings.serving_validity,
        overlap=datetime.timedelta(seconds=settings.rotation_overlap_seconds),
    )
    client_ca = settings.client_ca_file.read_bytes() if settings.client_ca_file else None
    on_bundle = publisher = None
    if settings.cert_mode == "secret":
        api_client = kube_client(settings)
        namespace, name = certs.parse_namespaced(settings.cert_secret or f"{_own_namespace()}/infergate-certs")
        store: Any = certs.SecretStore(api_client, namespace, name)
        watch = None

        def inject_ca(bundle: certs.CertBundle) -> None:
            changed = certs.inject_ca_bundle(api_client, settings.webhook_name, bundle.ca_pem())
            if changed:
                log.info("caBundle injected", extra={"fields": {"configurations": changed}})

        on_bundle = inject_ca
    else:
        store = certs.DirectoryStore(settings.cert_dir, signing=settings.cert_mode != "files")
        watch = certs.FileWatcher(settings.cert_dir / f for f in certs.FILES)
    keeper = certs.CertKeeper(
        store, sans=sans, policy=policy, manage=settings.cert_mode != "files", client_ca=client_ca,
        watch=watch, on_bundle=on_bundle, on_change=metrics_.certificate_served,
    )
    if on_bundle is not None:
        publisher = certs.WebhookConfigurationWatch(
            api_client, settings.webhook_name, lambda: keeper.bundle.ca_pem() if keeper.bundle else None,
            logger=logs.get("certs"))
    return keeper, publisher


def kube_client_config(settings: Settings) -> KubeClientConfig:
    """The webhook's client: in a pod its service account, elsewhere ``--kubeconfig`` (else
    $KUBECONFIG); a pool for every watch of the cache (one per kind and per watched CRD); its own
    writes (caBundle, the certificate Secret) made as ``WEBHOOK_FIELD_MANAGER``."""
    from webhook.inputs.kube import KubeClientConfig

    return KubeClientConfig(kubeconfig=settings.kubeconfig, pool_size=WEBHOOK_CLIENT_POOL,
                            user_agent=WEBHOOK_FIELD_MANAGER)


def kube_client(settings: Settings):
    """The webhook's Kubernetes client. The kubernetes package (some 400 modules) is imported
    only here and by the watch cache: a webhook on files (the embedded default, --state-dir)
    never loads it."""
    from webhook.inputs.kube import api_client

    return api_client(kube_client_config(settings))


def _own_namespace() -> str:
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
            return f.read().strip()
    except OSError:
        return "infergate"


# ---------------------------------------------------------------------------------------
# The process


def try_it(settings: Settings) -> str:
    """Copy-paste commands for the embedded default: readiness, then a KubeAI Model the
    webhook denies (an ``ollama://`` URL with engine VLLM)."""
    host = "localhost" if settings.host in ("0.0.0.0", "::", "127.0.0.1", "") else settings.host
    base = f"https://{host}:{settings.port}"
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "try-1",
            "kind": {"group": "kubeai.org", "version": "v1", "kind": "Model"},
            "resource": {"group": "kubeai.org", "version": "v1", "resource": "models"},
            "namespace": "default", "name": "demo", "operation": "CREATE",
            "object": {
                "apiVersion": "kubeai.org/v1", "kind": "Model",
                "metadata": {"name": "demo", "namespace": "default"},
                # as the apiserver sends it: the CRD's defaults already applied
                "spec": {"features": ["TextGeneration"], "url": "ollama://qwen2:0.5b", "engine": "VLLM",
                         "resourceProfile": "cpu:1", "targetRequests": 100, "scaleDownDelaySeconds": 30},
            },
        },
    }
    ca = settings.cert_dir / "ca.crt"
    return (
        f"  curl --cacert {ca} {base}/readyz\n"
        f"  curl --cacert {ca} -H 'Content-Type: application/json' {base}/validate -d '{orjson.dumps(review).decode()}'"
    )


GC_YOUNG_THRESHOLD = 10_000  # container objects allocated (net) between young collections (default 700)


def freeze_loaded_heap() -> None:
    """Keep the loaded chain (CRD schemas, compiled policies, the state: long-lived) out of
    the cyclic GC's full collections, which otherwise walk all of it every few thousand
    reviews (BENCHMARKS.md, `bench/server_gap.py`: the GC's share). Objects made later are
    collected as usual; only cycles among today's objects that become garbage later are
    never freed (a policy set dropped by a reload: a few dozen small objects, once).

    And collect the youngest generation less often: a review's objects die by reference
    counting, but the reviews in flight keep a few hundred alive, which the default
    threshold (700) walks again and again."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """One line for a socket that cannot be bound (in use, privileged, no such address)."""
    why = os.strerror(exc.errno).lower() if exc.errno else str(exc)
    hint = " (another process listens there; pick another with --port)" if exc.errno == errno.EADDRINUSE else ""
    return f"cannot listen on {host}:{port}: {why}{hint}"


async def serve(
    settings: Settings, *, load: AdmitterLoader,
    on_listening: Callable[[int], None] | None = None, stop_event: asyncio.Event | None = None,
    handle_signals: bool = True, group: ProcessGroup | None = None,
) -> int:
    """Run until SIGTERM/SIGINT (or ``stop_event``); returns the exit code. ``load`` builds the
    admission chain from the settings (``load_admitter`` with the command line's evaluator).
    ``group``: this server is one process of ``serve --processes`` (see processes)."""
    metrics_ = Metrics()
    try:
        keeper, publisher = build_cert_keeper(settings, metrics_)
        if group is not None and not group.writes_certificates:  # one writer: the others serve what it writes
            keeper.manage, keeper.on_bundle, publisher = False, None, None
        ssl_context = await asyncio.to_thread(keeper.start)
    except Exception as exc:  # CertError, OSError, the cluster's config or API errors
        log.error("cannot set up TLS", extra={"fields": {"error": str(exc)}})
        print(f"infergate: error: serve: cannot set up TLS: {exc}", file=sys.stderr)
        return 2

    slot = AdmitterSlot()
    readiness: dict[str, ReadinessCheck] = {"certificates": keeper.problem}
    config = ServerConfig(
        max_body_bytes=settings.max_body_bytes, default_timeout=settings.default_timeout,
        timeout_margin=settings.timeout_margin, failure_mode=settings.failure_mode, workers=settings.workers,
        client_certificates=settings.client_ca_file is not None, body_timeout=settings.body_timeout,
    )
    siblings = Siblings(group) if group is not None else None
    app = create_app(slot, config, metrics_=metrics_, readiness=readiness, siblings=siblings)
    runner = web.AppRunner(app, shutdown_timeout=settings.shutdown_timeout, access_log=None)
    await runner.setup()
    # idle kept-alive connections and a request's headers: two bounds (see connections)
    connections = Connections(runner.server, idle_timeout=settings.idle_timeout,
                              header_timeout=settings.header_timeout)
    try:
        if group is None:
            listener: Any = await listen(connections, settings.host, settings.port, ssl_context=ssl_context)
        else:  # our accept loop: connections steered by CPU and balanced (see balance)
            listener = attach(connections, settings.host, settings.port, ssl_context=ssl_context,
                              index=group.index, sharing=group.sharing)
        if group is not None:  # where its siblings ask it for its readiness and metrics
            await web.UnixSite(runner, str(group.socket(group.index))).start()
    except OSError as exc:
        await runner.cleanup()
        print(f"infergate: error: {cannot_listen(settings.host, settings.port, exc)}", file=sys.stderr)
        return 2

    stop = stop_event or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT) if handle_signals else ():
        loop.add_signal_handler(sig, stop.set)

    async def load_chain() -> None:
        began = time.perf_counter()
        try:
            admitter, prerequisites = await asyncio.to_thread(load, settings)
        except InputsFailed as exc:
            slot.fail(str(exc), exc.failed)
            log.error("cannot load the admission chain", extra={"fields": {"failed": exc.failed}})
            return
        except Exception as exc:
            slot.fail(f"{type(exc).__name__}: {exc}")
            log.exception("cannot load the admission chain")
            return
        slot.set(admitter, prerequisites)
        log.info("admission chain loaded", extra={"fields": {"seconds": round(time.perf_counter() - began, 3)}})
        await asyncio.to_thread(cel_expr.warm_up_fallback)  # ready meanwhile; frozen with the rest below
        freeze_loaded_heap()

    tasks = [
        asyncio.create_task(load_chain()),
        asyncio.create_task(keeper.run(check_interval=settings.cert_check_interval,
                                       watch_interval=settings.cert_watch_interval, logger=logs.get("certs"))),
    ]
    if publisher is not None:
        publisher.start()
    port = bound_port(listener)
    settings_shown = settings.model_copy(update={"port": port})
    log.info("listening", extra={"fields": {"url": f"https://{settings.host}:{port}", "sans": list(keeper.sans),
                                            "cert_mode": settings.cert_mode}})
    if group is None or group.index == 0:
        print(f"infergate serving https://{settings.host}:{port} (certificate for {', '.join(keeper.sans)}; "
              f"CA bundle in {settings.cert_dir / 'ca.crt'})\ntry it:\n{try_it(settings_shown)}", flush=True)
    if on_listening is not None:
        on_listening(port)
    await stop.wait()

    connections.drain()  # every answer from now on closes its connection
    if settings.shutdown_delay > 0:
        app[STATE].readiness["shutdown"] = lambda: "shutting down"
        log.info("draining: still answering, /readyz failing",
                 extra={"fields": {"delay_seconds": settings.shutdown_delay}})
        await asyncio.sleep(settings.shutdown_delay)
    log.info("shutting down: no new connections, finishing in-flight reviews",
             extra={"fields": {"grace_seconds": settings.shutdown_timeout}})
    for task in tasks:
        task.cancel()
    if publisher is not None:
        publisher.stop()
    listener.close()
    await runner.cleanup()
    log.info("stopped")
    return 0


def serve_processes(settings: Any, count: int, evaluator: Any) -> int:
    """``infergate serve`` as ``count`` processes: the chain loaded and compiled here, then
    :func:`run` forks the servers (each :func:`serve` on uvloop)."""
    from webhook.cel.engine.cel_expr import warm_up_fallback

    try:  # a port in use is one line, before seconds of compiling
        probe = bind_port(settings.host, settings.port)
    except OSError as exc:
        print(f"infergate: error: {cannot_listen(settings.host, settings.port, exc)}", file=sys.stderr)
        return 2
    try:
        admitter, checks, start = prepare_admitter(settings, evaluator)
    except Exception as exc:  # InputsFailed and the like: every process reports it, as one would
        failure = exc

        def load(_settings: Any) -> Any:
            raise failure
    else:
        def load(_settings: Any) -> Any:
            start()  # threads (policy reloads, watches) only after the fork
            return admitter, checks

        warm_up_fallback()
        freeze_loaded_heap()

    def child(group: ProcessGroup, port: int, listening: Callable[[], None]) -> int:
        import threading

        early = threading.Event()  # SIGTERM before the loop runs: stop as soon as it does
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: early.set())

        async def served() -> int:
            stop, loop = asyncio.Event(), asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            if early.is_set():
                stop.set()
            return await serve(settings.model_copy(update={"port": port}), load=load, group=group, stop_event=stop,
                               on_listening=lambda _port: listening())

        try:
            import uvloop
        except ImportError:  # Windows (where there is no fork either)
            return asyncio.run(served())
        return uvloop.run(served())

    return run_processes(count, probe=probe, child=child)
