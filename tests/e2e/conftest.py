"""The e2e run's set-up: the cluster prepared from the project's own artefacts,
torn down by finalizers that run whatever the tests did.

Order (each a session-scoped fixture, finalized in reverse): a run id → the bundled CRDs
(Established) → ``examples/state`` → the webhook (``infergate serve`` here and the
configurations ``infergate webhook-config`` prints, or the Helm chart with
``INFERGATE_E2E_MODE=chart``) → ``infergate controller`` → the tests. The last finalizer
is the sweep of everything labelled with the run id; it fails the run if anything stays, or if
a cluster-wide object (``cluster.CLUSTER_WIDE_KINDS``) is there that was not, or is gone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import hermetic

from . import chart, cluster, identities, processes, scenarios, selection, webhooks
from .api import Kube, Reply, wait_for


@dataclass
class Run:
    """The e2e run's handle on the cluster: the API, what it owns, the helpers tests use."""

    kube: Kube
    owned: cluster.Owned
    kubeconfig: str
    mode: str
    log_dir: Path
    system_namespace: str = ""  # where the run's Leases (and the chart) live
    state_dir: Path | None = None  # the example state exactly as loaded: the offline answers' --state
    webhook_url: str | None = None
    cert_dir: Path | None = None
    release: chart.Release | None = None  # chart mode: the run's Helm release
    webhook_process: processes.Process | None = None
    # component (webhook, controller) -> the kubeconfig of the chart's ServiceAccount for it
    identities: dict[str, str] = field(default_factory=dict)
    configurations: list[dict[str, Any]] = field(default_factory=list)
    processes: list[processes.Process] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.owned.run_id

    def submit(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> Reply:
        """Create ``obj`` (labelled for the run) through the whole write path."""
        reply = self.kube.create(cluster.labelled(obj, self.run_id), dry_run=dry_run)
        if reply.ok and not dry_run:
            meta = reply.body["metadata"]
            self.owned.created.append((obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]))
        return reply

    def get(self, obj: Mapping[str, Any]) -> dict | None:
        meta = obj["metadata"]
        return self.kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))

    def status_of(self, obj: Mapping[str, Any], ready: Callable[[dict], bool], what: str, timeout: float = 60) -> dict:
        """The stored object once ``ready(status)`` holds (the controller has written)."""
        def probe():
            stored = self.get(obj)
            return stored if stored and ready(stored.get("status") or {}) else None
        return wait_for(what, probe, timeout=timeout)

    def settled(self, obj: Mapping[str, Any], *, quiet: float = 3.0, timeout: float = 60) -> dict:
        """The stored object once the controller has written its status and left it alone for
        ``quiet`` seconds: what a test that checks "nothing was written" must start from, since
        the controller's own status writes move the resourceVersion too."""
        stored = self.status_of(obj, lambda s: bool(s.get("conditions")), f"the status of {obj['metadata']['name']}",
                                timeout=timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(quiet)  # a negative over time: no write for ``quiet`` seconds is "settled"
            again = self.get(obj)
            if again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]:
                return again
            stored = again
        raise AssertionError(f"the controller kept writing {obj['kind']} {obj['metadata']['name']}")


def _kubeconfig() -> str:
    return os.environ["KUBECONFIG"].split(os.pathsep)[0]


def _given_files(kubeconfigs: list[str]) -> list[str]:
    """The kubeconfig files and the certificate and key files they name: the cluster the
    user pointed the run at (tests may read these, outside the repository as they are)."""
    hermetic.allow(*kubeconfigs)  # before reading them here
    found = list(kubeconfigs)
    for path in kubeconfigs:
        try:
            config = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        entries = [c.get("cluster") or {} for c in config.get("clusters") or ()] + \
                  [u.get("user") or {} for u in config.get("users") or ()]
        for entry in entries:
            for key in ("certificate-authority", "client-certificate", "client-key"):
                if entry.get(key):
                    found.append(str(Path(path).resolve().parent / entry[key]))
    return found


if selection.why_not_selected() is None:
    hermetic.allow(*_given_files([p for p in os.environ["KUBECONFIG"].split(os.pathsep) if p]))


@pytest.fixture(scope="session")
def run(tmp_path_factory) -> Iterator[Run]:
    """The run and its final sweep (the outermost finalizer: it runs last, always)."""
    from kubernetes import config as kube_config

    kubeconfig = _kubeconfig()
    kube = Kube(kube_config.new_client_from_config(config_file=kubeconfig))
    version = kube.request("GET", "/version")
    if not version.ok:
        pytest.fail(f"cannot reach the cluster in {kubeconfig}: {version.message or version.body}", pytrace=False)
    owned = cluster.Owned(cluster.new_run_id())
    log_dir = tmp_path_factory.mktemp("logs")
    the_run = Run(kube, owned, kubeconfig, selection.mode(), log_dir)
    found = cluster.cluster_wide_names(kube)
    try:
        yield the_run
    finally:
        for process in the_run.processes:
            process.stop()
        cluster.delete_events(kube, owned)
        problems = cluster.sweep(kube, owned.run_id)
        if selection.native_policies():
            problems += _native_policies_left(kube)
        # and what the label cannot find: anything cluster-wide created or deleted along the way
        problems += cluster.changed_since(found, cluster.cluster_wide_names(kube))
        if problems:
            pytest.fail(f"e2e run {owned.run_id} left the cluster changed:\n" + "\n".join(problems))


def _native_policies_left(kube: Kube, timeout: float = 120) -> list[str]:
    """A native run: the generated objects, owned by the release's ClusterRole (Helm's uninstall,
    or the sweep in local mode, deleted it), go with it through the garbage collector."""
    from . import native

    try:
        wait_for("the garbage collector deleting the generated VAPs and bindings", lambda: not native.stored(kube),
                 timeout=timeout, interval=1)
    except AssertionError:
        return [f"{kind} {name}: generated, not deleted with its owner" for kind, name in native.stored(kube)]
    return []


@pytest.fixture(scope="session")
def crds(run: Run) -> list[str]:
    """The bundled CRDs (``cluster.bundled_crds``; and minimal CRDs for the catalog and cert-manager
    when the cluster lacks them), each Established before anything uses it."""
    shipped = cluster.bundled_crds()
    return cluster.apply_crds(run.kube, shipped + cluster.support_crds(run.kube), run.owned)


@pytest.fixture(scope="session")
def state(run: Run, crds, tmp_path_factory) -> list[dict]:
    """``examples/state`` in the cluster, plus the namespace the run keeps its Leases in."""
    documents = cluster.example_state()
    run.state_dir = tmp_path_factory.mktemp("state")
    (run.state_dir / "state.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))
    stored = [cluster.create_owned(run.kube, obj, run.owned) for obj in documents]
    run.system_namespace = f"infergate-e2e-{run.run_id}"
    cluster.create_owned(run.kube, {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": run.system_namespace}}, run.owned)
    for ns in {o["metadata"]["name"] for o in stored if o["kind"] == "Namespace"} | {run.system_namespace}:
        cluster.ensure_service_account(run.kube, ns, run.owned)  # Pods need it (no controller-manager?)
    return stored


@pytest.fixture(scope="session")
def chart_identities(run: Run, state, tmp_path_factory) -> dict[str, str]:
    """The chart's ServiceAccounts and RBAC in the run's namespace, and a token kubeconfig for
    each: the local webhook and controller run as the chart's Pods would."""
    if run.mode == "local":
        run.identities = identities.install(run.kube, run.owned, run.system_namespace, run.kubeconfig,
                                            tmp_path_factory.mktemp("identities"))
    return run.identities


@pytest.fixture(scope="session")
def webhook(run: Run, state, chart_identities, tmp_path_factory) -> Iterator[Run]:
    """The webhook judging every write of the served kinds."""
    if run.mode == "chart":
        run.release = chart.session_release(run)
        try:
            run.configurations = chart.install(run.kube, run.release)
            wait_for("the webhook answering through the apiserver", lambda: webhook_answers(run), timeout=60)
            yield run
        finally:  # Helm deletes the configurations first; the sweep then finds nothing of the release
            run.release.uninstall()
        return
    run.cert_dir = tmp_path_factory.mktemp("certs")
    ca_file = processes.generate_certs(run.cert_dir)
    # --kube-state: the webhook looks objects up in the cluster, as the chart's does
    native = ["--native-policies"] if selection.native_policies() else []
    process, port = processes.start_serve("serve", run.cert_dir, run.log_dir,
                                          extra=["--kube-state", "--kubeconfig", run.identities["webhook"], *native])
    run.processes.append(process)
    run.webhook_process = process
    run.webhook_url = f"https://127.0.0.1:{port}"
    run.configurations = webhooks.webhook_configurations(
        run.webhook_url, ca_file, run.run_id, name=f"infergate-e2e-{run.run_id}")
    try:
        for config in run.configurations:
            cluster.create_owned(run.kube, config, run.owned)
        wait_for("the webhook answering through the apiserver", lambda: webhook_answers(run), timeout=30)
        yield run
    finally:  # the configurations go before the server: nothing may point at a stopped webhook
        for config in run.configurations:
            run.kube.delete(config["apiVersion"], config["kind"], config["metadata"]["name"])
        process.stop()


def pytest_collection_modifyitems(items):
    """Scenarios marked ``before_crds`` run first: they need the cluster as it was before the
    run installed the CRDs (only the ``run`` fixture set up); then those marked
    ``before_webhook`` (the CRDs and the state there, no webhook registered, no controller)."""
    items.sort(key=lambda item: (item.get_closest_marker("before_crds") is None,
                                 item.get_closest_marker("before_webhook") is None))


def webhook_answers(run: Run) -> bool:
    """A dry-run create the webhook denies: once its denial comes back, it is registered."""
    (probe,) = cluster.load_documents(cluster.MANIFESTS_DIR / scenarios.webhook_probe())
    return "admission webhook" in run.submit(probe, dry_run=True).message


@pytest.fixture(scope="session")
def controller(run: Run, webhook) -> Iterator[Run]:
    """``infergate controller --kubeconfig`` (the chart's in chart mode), holding the Lease."""
    if run.mode != "local":
        yield run
        return
    native = ["--native-policies", "--native-policies-owner", identities.native_owner(run.system_namespace)] \
        if selection.native_policies() else []
    process = processes.start_controller("controller", run.identities["controller"], run.log_dir,
                                         lease_namespace=run.system_namespace, lease_name=controller_lease(),
                                         extra=native)
    run.processes.append(process)
    try:
        wait_for("the controller holding its Lease",
                 lambda: lease_holder(run, controller_lease()) == "controller" or not process.alive(), timeout=60)
        assert process.alive(), f"infergate controller exited:\n{process.tail()}"
        yield run
    finally:
        process.stop()  # releases the Lease; the Lease object itself is the run's to delete
        run.kube.delete("coordination.k8s.io/v1", "Lease", controller_lease(), run.system_namespace)


def controller_lease() -> str:
    """The chart's Lease name: its leader-election Role allows only that one."""
    return identities.names("")["controller"]


def lease_holder(run: Run, name: str) -> str | None:
    lease = run.kube.get("coordination.k8s.io/v1", "Lease", name, run.system_namespace)
    return ((lease or {}).get("spec") or {}).get("holderIdentity")


@pytest.fixture(scope="session")
def applied(controller: Run) -> dict[str, dict]:
    """Every admitted scenario object created for real (case id -> the stored object):
    what the defaults, status and update scenarios look at."""
    stored = {}
    for case in scenarios.all_cases():
        if case.allowed:
            reply = controller.submit(case.obj)
            assert reply.ok, f"{case.id}: HTTP {reply.status}: {reply.message}"
            stored[case.id] = reply.body
    return stored


@pytest.fixture(scope="session")
def native_handover(controller: Run) -> dict[str, str] | None:
    """A native run: every generated VAP marked enforced with its hash (the controller's probe
    passed) and the webhook leaving their rules to the apiserver (a write that breaks exported
    warnings gets each once, the apiserver's); else None."""
    if not selection.native_policies():
        return None
    from . import native, offline

    expected = native.expected_marks()
    wait_for("every generated ValidatingAdmissionPolicy marked enforced",
             lambda: native.marked(controller.kube) == expected, timeout=180, interval=1)
    (warned,) = cluster.load_documents(cluster.MANIFESTS_DIR / native.SWITCH_PROBE)
    warned["metadata"]["name"] = "e2e-native-switched"  # a dry run: the manifest's own name is created later
    (answer,) = offline.validate([warned], state=controller.state_dir)

    def switched():
        reply = controller.submit(warned, dry_run=True)
        return reply.ok and reply.warnings == answer["warnings"]
    wait_for("the webhook leaving the marked rules to the apiserver", switched, timeout=60)
    return expected


@pytest.fixture(scope="session")
def cluster_run(controller, native_handover) -> Run:
    """What a scenario gets: the whole set-up, webhook and controller running (in a native run,
    the generated policies in force and handed over)."""
    return controller


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing scenario shows the tail of every infergate process's log."""
    report = yield
    if report.failed and "cluster_run" in getattr(item, "fixturenames", ()):
        the_run = item.funcargs.get("cluster_run")
        for process in getattr(the_run, "processes", ()):
            report.sections.append((f"{process.name} log (tail)", process.tail()))
    return report
