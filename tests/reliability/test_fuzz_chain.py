"""Fuzzing the whole webhook: the valid examples mutated anywhere into anything, through
the real server and the real chain, on both endpoints. Every answer is a judgement (never
the failure mode: no internal error, no timeout), and a patch always applies."""

from __future__ import annotations

import base64
import copy
import json
import logging
from collections.abc import Iterator

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.server import load_admitter
from webhook.server.settings import Settings

from .conftest import ServerThread, assert_well_formed, review
from .strategies import mutated
from tests.support.cel import EVALUATOR

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> Iterator:
    chain, _ = load_admitter(Settings(), EVALUATOR)
    with ServerThread(tmp_path_factory.mktemp("chain-fuzz") / "certs", chain) as server:
        c = server.client()
        yield c
        c.close()


# What an apiserver can send: it decodes apiVersion, kind and metadata strictly before any
# webhook sees the object; spec and status arrive as written (type errors included).
@FUZZ
@given(case=mutated(under=("spec", "status")), operation=st.sampled_from(["CREATE", "UPDATE"]),
       path=st.sampled_from(["/mutate", "/validate"]))
def test_mutated_examples_are_judged(client, case, operation, path):
    seed, obj = case
    sent = review(obj, operation=operation, old=seed if operation == "UPDATE" else None, uid="fuzz")
    body = assert_well_formed(client.post(f"{path}?timeout=5s", json.dumps(sent).encode()), uid="fuzz")
    if "response" not in body:
        return  # a 400: the review itself did not decode (say, a kind that is not a string)
    response = body["response"]
    assert "failure" not in response.get("auditAnnotations", {}), response
    if "patch" in response:
        patch = jsonpatch.JsonPatch(json.loads(base64.b64decode(response["patch"])))
        patch.apply(copy.deepcopy(obj))  # raises if it does not apply to what was sent


@pytest.mark.parametrize("metadata", [True, {"name": True}, {"labels": ["x"]}])
def test_undecodable_metadata_gets_a_clear_answer(client, metadata, caplog):
    """Only a client other than the apiserver can send this, but any client reaching the port can."""
    obj = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": metadata, "spec": {}}
    with caplog.at_level(logging.DEBUG):
        answer = client.post("/validate", review(obj, uid="meta"))
    body = assert_well_formed(answer, uid="meta")
    # the apiserver would not have decoded it either: a 400 that names the field
    assert answer.status == 400 and "metadata" in body["message"], body
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], caplog.text
