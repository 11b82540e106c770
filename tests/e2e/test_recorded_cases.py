"""The recorded apiserver cases, sent to the cluster at hand: every CREATE of the suites over the
synthetic conformance CRDs (a group of their own, so nothing the run installs collides with
them), sent as recorded with ``dryRun``, gets the recorded answer. Offline, the same cases run
through ``infergate test`` (tests/schema/test_schema_recorded_cases.py): so the two agree with
each other and with this apiserver."""

from __future__ import annotations

import pytest
import yaml

from webhook.offline.recorded_suites import Answer, answer_problems, load_suite
from tests.support.paths import CASES

from . import cluster
from tests.support.cel import EVALUATOR

pytestmark = pytest.mark.e2e

SUITES = ("kitchensink.yaml", "runtime-cost.yaml")


def _creates():
    for name in SUITES:
        suite = load_suite(CASES / name, EVALUATOR)
        for case in suite.cases:
            if case.data.get("operation", "CREATE") == "CREATE" and not case.data.get("subresource"):
                yield name, case


def _causes(body: dict) -> list[str]:
    return [f"{c['field']}: {c['message']}" if c.get("field") else c["message"]
            for c in (body.get("details") or {}).get("causes") or ()]


@pytest.fixture(scope="module")
def conformance_crds(run):
    """The suites' CRDs, created for the run (the final sweep deletes them)."""
    paths = sorted({path for name in SUITES for path in yaml.safe_load((CASES / name).read_text())["crds"]})
    crds = cluster.load_documents(*((CASES / path).resolve() for path in paths))
    return cluster.apply_crds(run.kube, crds, run.owned)


def test_recorded_creates_get_the_recorded_answers(run, conformance_crds):
    creates = list(_creates())
    assert len(creates) >= 200
    failures = []
    for name, case in creates:
        method, path = case.data["about"]["request"].split(" ", 1)  # as recorded (a kind sent to another's path)
        reply = run.kube.request(method, path, case.data["object"], params=[("dryRun", "All")])
        answer = Answer(reply.ok, reply.status, _causes(reply.body), None if reply.ok else reply.message,
                        reply.warnings, reply.body if reply.ok else None)
        problems = answer_problems(case.data, answer)
        if problems:
            failures.append(f"{name}: {case.name}\n    " + "\n    ".join(problems))
    assert not failures, f"{len(failures)} of {len(creates)} differ:\n" + "\n".join(failures)
