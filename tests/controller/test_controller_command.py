"""``infergate controller`` as a user runs it: a process with a kubeconfig, against an API
server over HTTP (list + watch through the state layer, discovery, /status writes, the
Lease), stopped with SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest
import yaml

from webhook import kinds
from webhook.controller.leader import LEASE

from tests.support.apiserver import FakeApiServer
from tests.controller.helpers import cluster_objects, order
from tests.support.paths import REPO

OPTIONAL = {kinds.CLUSTER_ISSUER, kinds.MODULE_CONFIG}  # not installed in this cluster


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: fake, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: tester, user: {token: not-a-secret}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: tester}}]\n"
        "current-context: fake\n"
    )
    return path


async def eventually(check, timeout=30.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def test_controller_process_writes_status_and_releases_its_lease(aiohttp_server, tmp_path):
    fake = FakeApiServer()
    for kind in kinds.WATCHED:
        if kind not in OPTIONAL:
            fake.served.setdefault(kind.api_version, {})[kind.plural] = (kind.kind, kind.namespaced)
    for obj in cluster_objects() + [order()]:
        fake.put(obj, kinds.BY_KEY[(obj["apiVersion"], obj["kind"])].plural)
    for path in sorted((REPO / "chart" / "files" / "crds" / "reports").glob("openreports.io_*.yaml")):
        fake.put(yaml.safe_load(path.read_text()), "customresourcedefinitions")  # the audit's reports: served
    server = await aiohttp_server(fake.app())
    config = kubeconfig(tmp_path / "kubeconfig", str(server.make_url("")).rstrip("/"))

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webhook", "controller", "--kubeconfig", str(config),
        "--lease-namespace", "infergate-system", "--identity", "replica-1", "--metrics-port", str(port),
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    try:
        def status():
            obj = fake.get(kinds.INFERENCE_SERVICE.api_version, "inferenceservices", "hf-embedding", "hardfest-demo")
            return (obj or {}).get("status")

        await eventually(lambda: status() is not None)
        assert status()["resolved"]["deviceClass"] == "nvidia-a30-mig-2g12-mps"
        lease = fake.get(LEASE.api_version, LEASE.plural, "infergate-controller", "infergate-system")
        assert lease["spec"]["holderIdentity"] == "replica-1"

        # a change arrives through the watch: the order is narrowed to a class it may not use
        narrowed = order("hf-embedding-h100")
        narrowed["status"] = status()
        fake.put(narrowed, "inferenceservices")
        await eventually(lambda: status()["phase"] == "Failed")
        # the background audit (on by default): a Report for the order, ClusterReports for the classes
        order_uid = fake.get(kinds.INFERENCE_SERVICE.api_version, "inferenceservices", "hf-embedding",
                             "hardfest-demo")["metadata"]["uid"]
        await eventually(lambda: fake.get("openreports.io/v1alpha1", "reports", f"infergate-{order_uid}",
                                          "hardfest-demo") is not None)
        report = fake.get("openreports.io/v1alpha1", "reports", f"infergate-{order_uid}", "hardfest-demo")
        assert report["scope"]["name"] == "hf-embedding" and report["source"] == "infergate"
        classes = [o for o in fake.all_objects() if o["kind"] == "ClusterReport"]
        assert {c["scope"]["kind"] for c in classes} == {"InferenceServiceClass"}
        def report_writes():
            return [path for path in fake.writes("") if "/openreports.io/" in path]

        writes, reports = len(fake.writes()), len(report_writes())
        assert reports == 1 + len(classes)  # each written once
        await asyncio.sleep(1.5)  # a negative over time: steady, nothing more is written (three of its polls)
        assert len(fake.writes()) == writes and len(report_writes()) == reports
        # the optional kinds were never listed or watched
        assert not any("clusterissuers" in path or "moduleconfigs" in path for _, path in fake.requests)

        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert response.status == 200
            async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
                exposition = await response.text()
        assert "infergate_controller_leader 1.0" in exposition
        assert 'infergate_controller_status_writes_total{kind="InferenceService"} 2.0' in exposition
        assert 'infergate_controller_status_writes_total{kind="InferenceServiceClass"} 1.0' in exposition
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 0, output.decode()
    lease = fake.get(LEASE.api_version, LEASE.plural, "infergate-controller", "infergate-system")
    assert lease["spec"]["holderIdentity"] == ""
    assert b"Traceback" not in output


@pytest.mark.parametrize(("flags", "says"), [
    (["--audit-interval", "soon"], "--audit-interval 'soon': expected a duration"),
    (["--audit-interval=-1h"], "--audit-interval '-1h': must be 0"),
    (["--audit-max-results", "0"], "--audit-max-results 0: must be 1 or more"),
    (["--policies", "/nonexistent/policies"], "--policies /nonexistent/policies: no such directory"),
    (["--policies", "{broken}"], "--policies {broken}: "),
    (["--policy-actions", "kubeai-model-engin=Warn"], "--policy-actions: no policy named 'kubeai-model-engin'"),
    (["--no-audit", "--audit-native-policies"], "--audit-native-policies needs the audit (--no-audit turns it off)"),
])
async def test_a_bad_audit_flag_fails_at_start_with_one_line(flags, says, tmp_path):
    broken = tmp_path / "policies"
    broken.mkdir()
    (broken / "bad.yaml").write_text("apiVersion: policy.infergate.io/v1alpha1\nkind: AdmissionPolicy\n"
                                     "metadata: {name: bad}\nspec: {matchConstraints: 7}\n")
    flags = [f.replace("{broken}", str(broken)) for f in flags]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webhook", "controller", "--kubeconfig", str(kubeconfig(tmp_path / "k", "http://127.0.0.1:9")),
        *flags, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    lines = stderr.decode().splitlines()
    assert process.returncode == 2 and stdout == b""
    assert len(lines) == 1 and lines[0].startswith("infergate: error: controller: " + says.replace("{broken}", str(broken))), lines
    if "{broken}" in says:
        assert "bad.yaml" in lines[0]  # the file (and line) at fault
