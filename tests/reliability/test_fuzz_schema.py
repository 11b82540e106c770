"""Fuzzing the schema engine: ``CRDRegistry.handle`` on the shipped CRDs with the valid
example manifests, mutated anywhere into anything (arbitrary JSON, numbers beyond int64,
unicode, deep nesting, huge strings and lists).

Always an Outcome the apiserver could have given: a verdict, a code, a Status with a
message on denial, a stored object on success; never an exception, never slow.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.schema import CRDRegistry, Outcome

from .strategies import SEEDS, json_values, mutated
from tests.support.cel import EVALUATOR

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = 2.0  # seconds: far above any sane handling time, far below the apiserver's 10 s


REGISTRY = CRDRegistry.shipped(evaluator=EVALUATOR)


def test_the_seeds_are_accepted():
    # infergate's five kinds and today's upstream ones
    assert {s["kind"] for s in SEEDS} >= {"Model", "InferenceModel", "InferencePool", "InferenceServiceClass",
                                          "InferenceService", "InferenceObjective", "InferenceModelRewrite",
                                          "InferencePoolImport", "HTTPRoute"}
    for seed in SEEDS:
        assert REGISTRY.handle("CREATE", seed).allowed, seed["metadata"]["name"]


def check(outcome: Outcome) -> None:
    assert isinstance(outcome.allowed, bool)
    assert all(isinstance(w, str) for w in outcome.warnings)
    if outcome.allowed:
        assert outcome.code in (200, 201) and isinstance(outcome.object, dict)
        json.dumps(outcome.object)  # storable
    else:
        assert outcome.code in (400, 404, 422), outcome.code
        assert outcome.status["code"] == outcome.code and outcome.status["message"], outcome.status
        assert all(str(e) for e in outcome.errors)


def timed_handle(*args, **kw) -> Outcome:
    started = time.thread_time()  # CPU time: a runaway, not the neighbours on a shared machine
    outcome = REGISTRY.handle(*args, **kw)
    assert time.thread_time() - started < SLOW
    return outcome


@FUZZ
@given(case=mutated(), operation=st.sampled_from(["CREATE", "UPDATE"]), status=st.booleans())
def test_mutated_objects_always_get_an_apiserver_answer(case, operation, status):
    seed, obj = case
    old = seed if operation == "UPDATE" else None
    check(timed_handle(operation, obj, old, "status" if status and operation == "UPDATE" else None))


@FUZZ
@given(case=mutated(under=("spec",)))
def test_updates_from_a_mutated_old_object(case):
    """Ratcheting compares old and new: the old side is hostile too (within what storage
    can hold: an object stored under an older schema; its metadata is always metadata)."""
    seed, obj = case
    check(timed_handle("UPDATE", seed, obj))
    check(timed_handle("UPDATE", obj, obj))


@FUZZ
@given(value=json_values)
def test_arbitrary_documents(value):
    outcome = timed_handle("CREATE", value) if isinstance(value, dict) else None
    if outcome is not None:
        check(outcome)


# ---------------------------------------------------------------------------------------
# Extremes, by hand, on every seed.


def nested(depth: int) -> Any:
    value: Any = "x"
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize("depth", [100, 1000])
@pytest.mark.parametrize("where", [("spec", "unknownField"), ("spec", "args"), ("metadata", "annotations", "deep"),
                                   ("metadata", "labels")])
def test_deep_nesting(depth, where):
    """Up to 1021 levels reach the chain through the server (orjson's limit); the apiserver
    prunes unknown fields and reports type mismatches without looking inside."""
    for seed in SEEDS:
        if where[0] == "spec" and ("spec" not in seed or (where[1] == "args" and "args" not in seed["spec"])):
            continue
        obj = copy.deepcopy(seed)
        holder = obj
        for key in where[:-1]:
            holder = holder.setdefault(key, {})
        holder[where[-1]] = nested(depth)
        outcome = timed_handle("CREATE", obj)
        check(outcome)
        if where[-1] == "unknownField":
            assert outcome.allowed, outcome.status  # pruned
        else:
            assert not outcome.allowed


def test_huge_strings_lists_and_numbers():
    for seed in SEEDS:
        obj = copy.deepcopy(seed)
        obj["metadata"].setdefault("annotations", {})["big"] = "\u00e9" * (1024 * 1024)
        obj["metadata"]["labels"] = {f"k{i}": "v" for i in range(10_000)}
        obj.setdefault("spec", {})["huge"] = ["x" * 100] * 10_000  # (an InferencePoolImport has no spec)
        obj["spec"]["numbers"] = [2**63, 2**64, -(2**70), 10**400 // 10**380, 1e308, -0.0]
        check(timed_handle("CREATE", obj))
