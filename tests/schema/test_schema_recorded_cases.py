"""Every recorded apiserver case in tests/conformance/cases, run through ``infergate test``'s machinery.

One pytest case per recorded case: verdict and code, error multiset, Status message (unless the
apiserver's own order varied), warnings and the stored object must match the real kube-apiserver.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.offline.recorded_suites import load_suite
from tests.support.paths import CASES
from tests.support.cel import EVALUATOR

CASES_DIR = CASES
# every object suite recorded there (crd-admission.yaml holds probes: test_crd_admission.py)
OBJECT_SUITES = tuple(sorted(p.name for p in CASES_DIR.glob("*.yaml") if p.name != "crd-admission.yaml"))
SEED_ERA_SUITES = ("kubeai-model.yaml", "gateway-inference.yaml", "kitchensink.yaml")
CURRENT_API_SUITES = ("gie-inferencemodelrewrite-v1alpha2.yaml", "gie-inferenceobjective-v1alpha2.yaml",
                      "gie-inferencepool-v1.yaml", "gie-inferencepoolimport-v1alpha1.yaml", "kubeai-model-v0.23.yaml")

_SUITES = {name: load_suite(CASES_DIR / name, EVALUATOR) for name in OBJECT_SUITES}


def _params():
    for name, suite in _SUITES.items():
        for case in suite.cases:
            yield pytest.param(case, id=f"{Path(name).stem}::{case.name}")


def test_recorded_suites_are_present():
    assert set(SEED_ERA_SUITES + CURRENT_API_SUITES) <= set(_SUITES), f"recorded suites missing under {CASES_DIR}"
    assert sum(len(_SUITES[n].cases) for n in SEED_ERA_SUITES) >= 339
    assert sum(len(_SUITES[n].cases) for n in CURRENT_API_SUITES) >= 245


@pytest.mark.parametrize("case", list(_params()))
def test_recorded_case(case):
    result = case.execute()
    assert result.passed, "\n".join(result.problems)


def test_infergate_test_passes_every_recorded_suite(capsys):
    """`infergate test tests/conformance/cases`: every suite, the CRD-admission probes included."""
    from webhook.cli import main

    assert main(["test", str(CASES_DIR), "-q"]) == 0
    passed, failed = capsys.readouterr().out.strip().splitlines()[-1].split(", ")
    assert failed == "0 failed" and int(passed.split()[0]) >= 339 + 245
