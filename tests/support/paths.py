"""Where the tests find their data: everything lives inside the repository.

``tests/conformance/`` holds the answers recorded from a real kube-apiserver v1.36 (``cases/``)
and the CRDs and CEL vectors those cases name (``reference/``), so a clone with nothing beside
it runs the whole suite. The shipped artefacts the tests read (the chart, its CRDs, the
policies and their suites, the examples) are named here once, as the repository lays them out.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE = REPO / "tests" / "conformance"
CASES = CONFORMANCE / "cases"
REFERENCE = CONFORMANCE / "reference"
CEL_VECTORS = REFERENCE / "cel" / "k8s_cel_library_vectors.yaml"

CHART = REPO / "chart"
CHART_CRDS = CHART / "crds"  # infergate's own CRDs
THIRD_PARTY_CRDS = CHART / "files" / "crds"  # the third-party ones the webhook serves
UPSTREAM_CRDS = THIRD_PARTY_CRDS / "upstream"
LEGACY_CRDS = THIRD_PARTY_CRDS / "legacy"
KUBEAI_V0_12_CRD = LEGACY_CRDS / "kubeai.org_models_v1-kubeai-v0.12.0.yaml"  # the seed era's Model
POLICIES = REPO / "policies"
POLICY_SUITES = POLICIES / "tests"
EXAMPLES = REPO / "examples"
MANIFESTS = EXAMPLES / "manifests"
