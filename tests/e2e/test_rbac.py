"""Least privilege, shown rule by rule: for every rule of every Role and ClusterRole the
chart binds to the webhook and to the controller (default values), ``infergate serve`` or
``infergate controller`` run here under copies of those roles less that one rule, and the
apiserver refuses it something it needs (HTTP 403 on the rule's resource, in its log); under
the whole roles (the ``full-roles`` case) it does its work and is refused nothing.

What each missing rule costs:

- a rule the webhook's watch cache reads (policies' lookups, the served CRDs): its watch is
  refused, /readyz never passes;
- its certificate Secret: without create it cannot make it, without get/update (by name) it
  cannot replace one whose certificate names another Service; its webhook configurations (by
  name): it cannot inject its CA. Each time it cannot set up TLS and exits;
- a rule the controller reads (to reconcile, or to audit: the kinds it judges, what the
  policies look up, its own reports): its cluster view never syncs, it never leads;
- a status rule: the status write of an object of that kind is refused;
- events: the Event of a status change is refused;
- its Lease (get/update by name, create): it never leads.

The run's own controller stands by while the controller's cases run (the test holds its
Lease): the status writes under test must be this process's, not its.
"""

from __future__ import annotations

import base64
import itertools
import re
from datetime import datetime, timezone

import pytest

from webhook import certs
from webhook import kinds
from webhook.controller import report_writes
from webhook.controller.runner import audited_kinds
from webhook.inputs.watches import webhook_watches

from . import chart, cluster, identities, processes, scenarios
from .api import wait_for
from .conftest import controller_lease, lease_holder
from .test_faults import pool

pytestmark = pytest.mark.e2e

COMPONENTS = ("webhook", "controller")  # the webhook's cases first: the controller's make the run's own stand by
FULL = "full-roles"
NUMBERS = itertools.count()

# resource (plural) -> kind, as the processes' logs and the apiserver's refusals name them
KIND_OF = {**{k.plural: k.kind for k in webhook_watches()}, **{k.plural: k.kind for k in kinds.WATCHED},
           **{k.plural: k.kind for k in audited_kinds()},
           **{k.plural: k.kind for api in report_writes.REPORT_APIS for k in api.kinds},
           "leases": "Lease", "secrets": "Secret", "events": "Event",
           "mutatingwebhookconfigurations": "MutatingWebhookConfiguration",
           "validatingwebhookconfigurations": "ValidatingWebhookConfiguration"}


def rule_cases() -> list:
    cases = []
    for component in COMPONENTS:
        cases.append(pytest.param(component, None, None, id=f"{component}-{FULL}"))
        for role in identities.roles_of("", component):
            for i, rule in enumerate(role["rules"]):
                label = f"{component}-{role['kind']}:{role['metadata']['name']}-{identities.rule_label(rule)}"
                cases.append(pytest.param(component, (role["metadata"]["name"], i), rule, id=label))
    return cases


def refused(log: str, rule: dict) -> list[str]:
    """The lines of ``log`` where the apiserver refused (403) something of ``rule``."""
    names = set()
    for resource in rule["resources"]:
        plural = resource.partition("/")[0]
        names |= {resource, plural, KIND_OF.get(plural, plural)}
    return [line for line in log.splitlines()
            if re.search(r"\b403\b", line) and any(re.search(rf"\b{n}\b", line) for n in names)]


PAUSER = "e2e-rbac-holds-the-lease"


@pytest.fixture(scope="module")
def session_controller_standing_by(cluster_run):
    """The run's controller made a standby: the test takes its Lease (an hour long) and
    waits for it to say it lost the leadership; then gives the Lease back and waits for it to
    lead again. Its status writes cannot race those of the process under test."""
    run, namespace, name = cluster_run, cluster_run.system_namespace, controller_lease()
    holder = wait_for("the run's controller holding its Lease", lambda: lease_holder(run, name), timeout=60)
    said_before = _session_controller_log(run, holder).count(LOST)
    _set_lease_holder(run, name, PAUSER, 3600)
    wait_for(f"{holder} losing the leadership",
             lambda: _session_controller_log(run, holder).count(LOST) > said_before, timeout=60)
    try:
        yield
    finally:
        _set_lease_holder(run, name, "", 1)
        wait_for("the run's controller leading again",
                 lambda: lease_holder(run, name) not in (None, "", PAUSER), timeout=90)


LOST = "lost leadership of lease"


def _session_controller_log(run, holder: str) -> str:
    """The log of the run's controller named ``holder`` in the Lease: a Pod (chart mode),
    or the local process."""
    if run.mode == "chart":
        return run.kube.text(f"/api/v1/namespaces/{run.release.namespace}/pods/{holder}/log")
    (process,) = [p for p in run.processes if p.name == holder]
    return process.log.read_text(errors="replace")


def _set_lease_holder(run, name: str, holder: str, seconds: int) -> None:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def replaced():
        lease = run.kube.get("coordination.k8s.io/v1", "Lease", name, run.system_namespace)
        spec = {**lease["spec"], "holderIdentity": holder, "leaseDurationSeconds": seconds,
                "acquireTime": now, "renewTime": now}
        return run.kube.replace({**lease, "spec": spec}).ok  # a renewal in between: read it again
    wait_for(f"the Lease {name} given to {holder or 'nobody'}", replaced, timeout=30)


@pytest.mark.parametrize(("component", "dropped", "rule"), rule_cases())
def test_each_rule_of_the_charts_roles_is_needed(component, dropped, rule, cluster_run, tmp_path, request):
    run, kube, namespace = cluster_run, cluster_run.kube, cluster_run.system_namespace
    name = f"e2e-rbac-{component[:4]}-{next(NUMBERS)}"
    # the process under test keeps its own Secret, Lease and configurations, not the release's
    chart_names = identities.names(namespace)
    renamed = {f"{chart_names['webhook']}-tls": f"{name}-tls", chart_names["webhook"]: name,
               chart_names["controller"]: name}
    kubeconfig = identities.with_roles_less(kube, run.owned, namespace, component, name, dropped, renamed,
                                            run.kubeconfig, tmp_path)
    made: list[tuple[str, str, str | None, str]] = []
    try:
        if component == "webhook":
            if rule is not None and rule["resources"] == ["secrets"] and rule.get("resourceNames"):
                _stale_certificate_secret(run, f"{name}-tls")  # to be read and replaced at start
            process = _serve(run, name, kubeconfig, made)
        else:
            request.getfixturevalue("session_controller_standing_by")
            process = processes.start_controller(name, kubeconfig, run.log_dir, lease_namespace=namespace,
                                                 lease_name=name)
            # objects whose status nobody has written: this process must write it (or be refused)
            for obj in (pool(f"{name}-pool"), scenarios.variant("valid/inferenceserviceclass.yaml", f"{name}-class",
                                                                lambda o: None)):
                stored = run.submit(obj).expect_ok()
                made.append((obj["apiVersion"], obj["kind"], stored["metadata"].get("namespace"), obj["metadata"]["name"]))
        try:
            if rule is None:
                _does_its_work(run, component, name, process, made)
                log = process.log.read_text(errors="replace")
                assert [line for line in log.splitlines() if re.search(r"\b403\b", line)] == []
            else:
                lines = wait_for(f"a 403 on {identities.rule_label(rule)} in {name}'s log",
                                 lambda: refused(process.log.read_text(errors="replace"), rule), timeout=90)
                print(f"MEASURED without {identities.rule_label(rule)}: {lines[0][:300]}")
        finally:
            process.stop()
    finally:
        for api_version, kind, obj_namespace, obj_name in made:
            kube.delete(api_version, kind, obj_name, obj_namespace)
        kube.delete("v1", "Secret", f"{name}-tls", namespace)
        kube.delete("coordination.k8s.io/v1", "Lease", name, namespace)
        identities.remove(kube, namespace, name, component)


def _stale_certificate_secret(run, name: str) -> None:
    """The certificate Secret as an earlier ``--service`` left it: its serving certificate names
    another Service, so the webhook replaces it when it starts (what ``update`` is for)."""
    bundle = certs.plan(None, now=certs.utcnow(), sans=certs.serving_sans("elsewhere/old-name"),
                        policy=certs.RotationPolicy()).bundle
    cluster.create_owned(run.kube, {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": run.system_namespace},
        "data": {key: base64.b64encode(value).decode() for key, value in bundle.to_files().items()}}, run.owned)


def _serve(run, name: str, kubeconfig: str, made: list) -> processes.Process:
    """``infergate serve`` as the chart runs it (secret mode, --kube-state), on a free local
    port, injecting its CA into configurations of its own (with no webhook: they judge nothing)."""
    for kind in chart.WEBHOOK_KINDS:
        cluster.create_owned(run.kube, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                                        "metadata": {"name": name}, "webhooks": []}, run.owned)
        made.append(("admissionregistration.k8s.io/v1", kind, None, name))
    port = processes.free_port()
    return processes.start(name, ["serve", "--host", "127.0.0.1", "--port", str(port), "--cert-mode", "secret",
                                  "--cert-secret", f"{run.system_namespace}/{name}-tls", "--webhook-name", name,
                                  "--service", f"{run.system_namespace}/{name}", "--kube-state",
                                  "--kubeconfig", kubeconfig, "--log-level", "debug"], run.log_dir)


def _does_its_work(run, component: str, name: str, process: processes.Process, made: list) -> None:
    """Under the whole roles: the webhook becomes ready (its Secret made, its watches synced);
    the controller leads and writes the status of the objects made for it."""
    if component == "webhook":
        def ready():
            secret = run.kube.get("v1", "Secret", f"{name}-tls", run.system_namespace)
            return secret is not None and "readyz check passed" in _readyz(process)
        wait_for(f"{name} ready", ready, timeout=90)
        return
    wait_for(f"{name} holding its Lease", lambda: lease_holder(run, name) == name, timeout=90)
    for api_version, kind, namespace, obj_name in made:
        wait_for(f"the status of {kind} {obj_name} written by {name}",
                 lambda: (run.kube.get(api_version, kind, obj_name, namespace) or {}).get("status"), timeout=60)


def _readyz(process: processes.Process) -> str:
    """/readyz of the local server, read through the port in its command line (no client
    certificate; its CA is not needed to read the answer)."""
    import ssl
    import urllib.error
    import urllib.request

    port = process.popen.args[process.popen.args.index("--port") + 1]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # an answer, not an identity
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=5) as response:
            return response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.read().decode()
    except OSError:
        return ""
