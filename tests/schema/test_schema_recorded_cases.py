"""Every recorded apiserver case in ../shared/cases, run through ``infergate test``'s machinery.

One pytest case per recorded case: verdict and code, error multiset, Status message (unless the
apiserver's own order varied), warnings and the stored object must match the real kube-apiserver.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.offline.cases import load_suite
from tests.support.paths import CASES

CASES_DIR = CASES
OBJECT_SUITES = ("kubeai-model.yaml", "gateway-inference.yaml", "kitchensink.yaml")

_SUITES = {name: load_suite(CASES_DIR / name) for name in OBJECT_SUITES if (CASES_DIR / name).is_file()}


def _params():
    for name, suite in _SUITES.items():
        for case in suite.cases:
            yield pytest.param(case, id=f"{Path(name).stem}::{case.name}")


def test_recorded_suites_are_present():
    assert sorted(_SUITES) == sorted(OBJECT_SUITES), f"recorded suites missing under {CASES_DIR}"
    assert sum(len(s.cases) for s in _SUITES.values()) >= 339


@pytest.mark.parametrize("case", list(_params()))
def test_recorded_case(case):
    result = case.execute()
    assert result.passed, "\n".join(result.problems)
