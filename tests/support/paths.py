"""Where the tests find their data: everything lives inside the repository.

``tests/conformance/`` holds the answers recorded from a real kube-apiserver v1.36 (``cases/``)
and the CRDs and CEL vectors those cases name (``reference/``), so a clone with nothing beside
it runs the whole suite.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE = REPO / "tests" / "conformance"
CASES = CONFORMANCE / "cases"
REFERENCE = CONFORMANCE / "reference"
CEL_VECTORS = REFERENCE / "cel" / "k8s_cel_library_vectors.yaml"
