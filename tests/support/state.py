"""Both cluster-state backends as one fixture: the same objects from files, or from a watch
cache fed by a fake apiserver, so policies' lookups and params are exercised through both."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from kubernetes.client import ApiClient, Configuration

from tests.support.apiserver import FakeApiServer
from webhook import shipped_data
from webhook.apiversion import group_of
from webhook.state import FileState
from webhook.inputs.watches import lookup_watches
from webhook.state.kube import Backoff, KubeState


def example_objects() -> list[dict]:
    objects = []
    for file in sorted(Path(shipped_data.examples_dir()).glob("*.yaml")):
        objects += [o for o in yaml.safe_load_all(file.read_text()) if o]
    return objects


@pytest.fixture(params=["files", "kube"])
async def make_state(request, aiohttp_server):
    states = []

    async def make(objects):
        if request.param == "files":
            return FileState(None, objects=copy.deepcopy(objects))
        api = FakeApiServer()
        resources_ = {(group_of(k.api_version), k.kind): api.serve(k) for k in lookup_watches()}
        for obj in objects:
            res = resources_.get((group_of(obj["apiVersion"]), obj["kind"]))
            if res is not None:
                api.add(res, obj)
        server = await aiohttp_server(api.app())
        state = KubeState(ApiClient(Configuration(host=str(server.make_url("")).rstrip("/"))),
                          lookup_watches(), backoff=Backoff(0.01, 0.05))
        state.start()
        states.append(state)
        assert await state.wait_ready(15)
        return state

    yield make
    for state in states:
        state.stop(2.0)


@pytest.fixture
async def example(make_state):
    return await make_state(example_objects())
