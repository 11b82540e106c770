"""With ``--kube-state`` the CRDs the cluster serves are the schema: the webhook's own wiring
(``webhook.inputs.cluster``: the watch cache and its CRDs, as ``--kube-state`` builds them)
against a fake apiserver over real HTTP (list and watch of CustomResourceDefinitions by name),
reviews over real HTTPS to the real server. Each answer is what the apiserver answers the same
write: its denial (code, reason, message, one cause per field error) as recorded from a real
kube-apiserver (``tests/conformance/cases``), or, for a CRD no recording holds, as the apiserver
emulation the recordings check (``CRDRegistry``) answers it; an admitted write, allowed with
nothing else to say."""

from __future__ import annotations

import asyncio
import copy

import pytest
import yaml
from kubernetes.client import ApiClient, Configuration

from tests.support.apiserver import FakeApiServer, eventually
from tests.support.paths import CASES
from webhook.admission.chain import AdmissionChain
from webhook.policy import PolicySet
from webhook.schema import CRDRegistry
from webhook.shipped_data import data_dir
from webhook.schema.watched import CRD_API_VERSION, CRD_KIND, CRD_PLURAL
from webhook.inputs.watches import webhook_crd_names, webhook_watches
from webhook.inputs.cluster import cluster_crds, watch_cache
from webhook.state.kube import WatchedKind

from .conftest import review, start_server
from tests.support.cel import EVALUATOR

CRDS = WatchedKind(CRD_API_VERSION, CRD_KIND, CRD_PLURAL)
POOL_CRD = yaml.safe_load(
    (data_dir("upstream_crds") / "inference.networking.k8s.io_inferencepools_v1-gie-v1.6.0.yaml").read_text())
RECORDED = {case["name"]: case for case in yaml.safe_load((CASES / "gie-inferencepool-v1.yaml").read_text())["cases"]}
NO_TARGET_PORTS = RECORDED["missing-targetports"]  # denied by the apiserver: spec.targetPorts: Required value
VALID = RECORDED["valid-full-defaults-applied"]


@pytest.fixture
async def cluster(aiohttp_server, tmp_path):
    """(fake apiserver, its CRD collection, the webhook's CRDs in force, post a review to /validate)."""
    api = FakeApiServer()
    crds = api.serve(CRDS)
    server = await aiohttp_server(api.app())
    configuration = Configuration(host=str(server.make_url("")).rstrip("/"))
    configuration.connection_pool_maxsize = 64  # a connection per watch, as the server configures it
    client = ApiClient(configuration)
    state = watch_cache(client)
    registry = cluster_crds(state, EVALUATOR)
    await asyncio.to_thread(state.start)
    (tmp_path / "policies").mkdir()
    webhook = await start_server(tmp_path, AdmissionChain(registry, PolicySet.load(tmp_path / "policies",
                                                                                    builtin=False, evaluator=EVALUATOR), state))

    async def validate(obj: dict) -> dict:
        status, body = await webhook.post("/validate", review(obj))
        assert status == 200
        return body["response"]

    assert await state.wait_ready(15)
    yield api, crds, registry, validate
    for session in webhook.sessions:
        await session.close()
    await webhook.runner.cleanup()
    await asyncio.to_thread(state.stop, 2.0)
    client.close()


def served(registry) -> set[tuple[str, str]]:
    return set(registry.current().kinds())


def denial(answer: dict) -> tuple:
    """A /validate answer's denial as the apiserver's answer to the write reads: (code, reason,
    message, each field error as ``field: message``)."""
    status = answer["status"]
    causes = sorted(f"{cause.get('field', '<nil>')}: {cause['message']}" for cause in status["details"]["causes"])
    return answer["allowed"], status["code"], status["reason"], status["message"], causes


def recorded_denial(case: dict) -> tuple:
    expect = case["expect"]
    return False, expect["code"], "Invalid", expect["message"], sorted(expect["errors"])


def emulated_denial(crd: dict, obj: dict) -> tuple:
    """The apiserver's answer to creating ``obj`` under ``crd``, as the emulation gives it."""
    outcome = CRDRegistry([crd], evaluator=EVALUATOR).handle("CREATE", copy.deepcopy(obj))
    status = outcome.status
    return (outcome.allowed, status["code"], status["reason"], status["message"],
            sorted(str(error) for error in outcome.errors))


def admitted(answer: dict) -> bool:
    """Allowed with nothing else to say (no warning, no status, no patch)."""
    return set(answer) == {"uid", "allowed"} and answer["allowed"] is True


async def test_a_kind_is_judged_by_the_crd_the_cluster_serves_once_it_serves_one(cluster):
    api, crds, registry, validate = cluster
    assert admitted(await validate(NO_TARGET_PORTS["object"]))  # no CRD: the apiserver's to refuse
    api.add(crds, POOL_CRD)
    await eventually(lambda: ("inference.networking.k8s.io/v1", "InferencePool") in served(registry))
    assert denial(await validate(NO_TARGET_PORTS["object"])) == recorded_denial(NO_TARGET_PORTS)
    assert VALID["expect"]["allowed"] and admitted(await validate(VALID["object"]))


async def test_a_changed_crd_is_the_schema_of_the_next_review(cluster):
    api, crds, registry, validate = cluster
    api.add(crds, POOL_CRD)
    await eventually(lambda: served(registry))
    two_ports = copy.deepcopy(VALID["object"])
    two_ports["spec"]["targetPorts"] = [{"number": 8000}, {"number": 8001}]
    assert admitted(await validate(two_ports))
    before = registry.current()

    changed = copy.deepcopy(POOL_CRD)
    spec_schema = changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema.setdefault("x-kubernetes-validations", []).append(
        {"rule": "size(self.targetPorts) == 1", "message": "one port"})
    api.modify(crds, changed)
    await eventually(lambda: registry.current() is not before)
    answer = await validate(two_ports)
    # a failed rule as the apiserver words it (no value: compare the recorded kubeai-model cases)
    assert denial(answer) == emulated_denial(changed, two_ports) == (
        False, 422, "Invalid", 'InferencePool.inference.networking.k8s.io "ip-001" is invalid: spec: Invalid value: one port',
        ["spec: Invalid value: one port"])
    compiles = registry.compiles
    api.modify(crds, changed)  # a write that leaves the spec as it was (status, labels): nothing to compile
    await asyncio.sleep(0.2)  # a negative over time: no compile follows it
    assert registry.compiles == compiles


async def test_a_version_the_cluster_does_not_serve_is_left_to_the_apiserver(cluster):
    api, crds, registry, validate = cluster
    unserved = copy.deepcopy(POOL_CRD)
    (version,) = unserved["spec"]["versions"]
    version["served"] = False
    api.add(crds, unserved)
    await eventually(lambda: registry.compiles == 1)
    assert served(registry) == set()
    assert admitted(await validate(NO_TARGET_PORTS["object"]))

    api.delete(crds, unserved)
    api.add(crds, POOL_CRD)
    await eventually(lambda: served(registry))
    assert denial(await validate(NO_TARGET_PORTS["object"])) == recorded_denial(NO_TARGET_PORTS)
    api.delete(crds, POOL_CRD)
    await eventually(lambda: not served(registry))  # a CRD deleted: its kinds are nobody's here either
    assert admitted(await validate(NO_TARGET_PORTS["object"]))


async def test_every_served_version_is_judged(cluster):
    api, crds, registry, validate = cluster
    httproutes = yaml.safe_load(
        (data_dir("upstream_crds") / "gateway.networking.k8s.io_httproutes_v1-gateway-api-v1.6.1.yaml").read_text())
    api.add(crds, httproutes)
    await eventually(lambda: served(registry) == {("gateway.networking.k8s.io/v1", "HTTPRoute"),
                                                  ("gateway.networking.k8s.io/v1beta1", "HTTPRoute")})
    for version in ("v1", "v1beta1"):
        route = {"apiVersion": f"gateway.networking.k8s.io/{version}", "kind": "HTTPRoute",
                 "metadata": {"name": "r", "namespace": "default"},
                 "spec": {"hostnames": ["Not_A_Host"]}}
        answer = await validate(route)
        assert denial(answer) == emulated_denial(httproutes, route), version
        assert "spec.hostnames[0]: Invalid value: \"Not_A_Host\": spec.hostnames[0] in body should match" \
            in answer["status"]["message"], answer["status"]["message"]


def test_the_crds_watched_are_the_bundled_kinds_by_name():
    """One watch per bundled CRD, by a metadata.name field selector (RBAC grants them by name:
    tests/chart/test_chart.py), and no other CRD."""

    watched = [k for k in webhook_watches() if k.kind == CRD_KIND]
    assert sorted(k.field_selector for k in watched) == sorted(f"metadata.name={n}" for n in webhook_crd_names())
    assert {"models.kubeai.org", "inferencepools.inference.networking.k8s.io", "inferenceservices.ai.deckhouse.io",
            "inferenceobjectives.llm-d.ai", "httproutes.gateway.networking.k8s.io"} <= webhook_crd_names()
