"""The live half of ``bench/audit_scan.py``: the controller's background audit against a real
apiserver, 5,000 KubeAI Models.

    python bench/audit_scan.py --kubeconfig KUBECONFIG [--objects 5000]

On a scratch cluster (it installs the KubeAI Model and OpenReports CRDs where absent, and
removes what it created): N Models in a namespace of their own, one in four failing a shipped
policy. ``BackgroundAudit`` (``infergate controller``'s audit, over its real watch cache and
write path) then scans them twice:

* **cold**: every object audited and its Report created (N writes);
* **converged**: a full resync over the stored Reports, which must write nothing (counted by
  the controller and by the apiserver's own ``apiserver_request_total``).

Both against the **offline** figure of one run: the same N objects audited in memory, no I/O.
"""

from __future__ import annotations

import concurrent.futures
import re
import sys
import time
import uuid
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from webhook import shipped_data  # noqa: E402
from webhook.audit import Auditor, build_report  # noqa: E402
from webhook.cel import Evaluator  # noqa: E402
from webhook.controller.background_audit import AuditSettings, BackgroundAudit  # noqa: E402
from webhook.kinds import Kind  # noqa: E402
from webhook.controller.kubeapi import ApiError, KubeApi, NotFound  # noqa: E402
from webhook.controller.runner import audited_kinds, controller_watches  # noqa: E402
from webhook.state.memory import MemoryState  # noqa: E402
from webhook.policy import PolicyDirectory  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False)
NAMESPACE = Kind("v1", "Namespace", "namespaces", False)
MODEL = Kind("kubeai.org/v1", "Model", "models", True)
CRD_FILES = [*sorted((REPO / "chart" / "files" / "crds" / "upstream").glob("kubeai.org_models_*.yaml")),
             *sorted((REPO / "chart" / "files" / "crds" / "reports").glob("openreports.io_*.yaml"))]


def model(i: int, namespace: str) -> dict:
    bad = i % 4 == 0  # an ollama:// URL on vLLM: kubeai-model-engine fails it
    return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": f"m-{i:05d}", "namespace": namespace},
            "spec": {"features": ["TextGeneration"], "url": "ollama://gemma2:2b" if bad else "hf://org/model",
                     "engine": "VLLM", "resourceProfile": "cpu:1"}}


def report_writes(api: KubeApi) -> float:
    """Writes of OpenReports reports the apiserver has counted since it started."""
    text = api.api_client.call_api(*api.api_client.param_serialize(
        method="GET", resource_path="/metrics", auth_settings=["BearerToken"]), _request_timeout=30)
    text.read()
    total = 0.0
    for line in text.data.decode().splitlines():
        if line.startswith("apiserver_request_total{") and 'group="openreports.io"' in line:
            verb = re.search(r'verb="([A-Z]+)"', line)
            if verb and verb.group(1) not in ("GET", "LIST", "WATCH"):
                total += float(line.rsplit(" ", 1)[1])
    return total


def wait(what: str, probe, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.5)


def install_crds(api: KubeApi) -> list[str]:
    created = []
    for path in CRD_FILES:
        crd = yaml.safe_load(path.read_text())
        name = crd["metadata"]["name"]
        try:
            api.get(CRD, name)
            continue
        except NotFound:
            pass
        api.create(CRD, crd)
        created.append(name)

        def established(name=name) -> bool:
            conditions = (api.get(CRD, name).get("status") or {}).get("conditions") or ()
            return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
        wait(f"CRD {name}", established, 60)
    return created


def live(kubeconfig: str, objects: int) -> int:
    """The scan; 0 when the converged resync wrote nothing and the cold one every report."""
    from kubernetes import config as kube_config

    from webhook.state import KubeState

    client = kube_config.new_client_from_config(config_file=kubeconfig)
    api = KubeApi(client, timeout=30)
    evaluator = Evaluator()
    created = install_crds(api)
    namespace = f"bench-audit-{uuid.uuid4().hex[:6]}"
    api.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    state = None
    try:
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            stored = list(pool.map(lambda i: api.create(MODEL, model(i, namespace), namespace), range(objects)))
        print(f"{objects} Models created in {time.perf_counter() - started:.1f} s", file=sys.stderr)

        # offline: the same objects, audited in memory
        policies = PolicyDirectory(shipped_data.policies_dir(), evaluator)
        offline = Auditor(None, policies, MemoryState())
        cpu, wall = time.process_time(), time.perf_counter()
        for obj in stored:
            offline.audit({**obj, "apiVersion": "kubeai.org/v1", "kind": "Model"})
        offline_cpu, offline_wall = time.process_time() - cpu, time.perf_counter() - wall

        state = KubeState(client, controller_watches((), True))
        state.start()
        wait("the watch cache", lambda: state.ready, 120)
        audit = BackgroundAudit(state, api, policies, auditor_for=lambda s: Auditor(None, s, state).audit,
                                build_report=build_report, kinds=audited_kinds(), settings=AuditSettings(interval=0))
        rows = []
        for phase in ("cold", "converged"):
            before = report_writes(api)
            writes = audit.writes
            cpu, wall = time.process_time(), time.perf_counter()
            audited = audit.step() if phase == "cold" else audit.scan()
            rows.append((phase, audited, time.perf_counter() - wall, time.process_time() - cpu,
                         audit.writes - writes, report_writes(api) - before))
            if phase == "cold":  # the cache holds every report before the resync compares with it
                wait("the reports in the watch cache",
                     lambda: len(state.list("openreports.io/v1alpha1", "Report", namespace)) >= objects)
        print(f"| phase | objects | wall | CPU | objects/s (wall) | CPU ÷ offline | writes (controller / apiserver) |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        print(f"| offline (in memory) | {objects} | {offline_wall:.2f} s | {offline_cpu:.2f} s | "
              f"{objects / offline_wall:,.0f} | 1.00× | — |")
        for phase, audited, wall_s, cpu_s, writes, counted in rows:
            print(f"| {phase} | {audited} | {wall_s:.2f} s | {cpu_s:.2f} s | {audited / wall_s:,.0f} | "
                  f"{cpu_s / offline_cpu:.2f}× | {writes} / {counted:.0f} |")
        converged = rows[-1]
        return 0 if converged[4] == 0 and converged[5] == 0 and rows[0][4] == objects else 1
    finally:
        if state is not None:
            state.stop()
        try:
            api.delete(NAMESPACE, namespace)
        except ApiError as exc:
            print(f"namespace {namespace} not deleted: {exc}", file=sys.stderr)
        wait(f"namespace {namespace} gone", lambda: _gone(api, NAMESPACE, namespace), 600)
        for name in created:
            api.delete(CRD, name)


def _gone(api: KubeApi, kind: Kind, name: str) -> bool:
    try:
        api.get(kind, name)
    except NotFound:
        return True
    return False
