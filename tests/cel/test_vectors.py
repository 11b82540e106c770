"""Every Kubernetes CEL library vector this package owns, replayed on the default engine."""

import pytest

from tests.cel import vectors

VECTORS = vectors.load()


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_kubernetes_vector(vector):
    problem = vectors.judge("cel-expr", vector)
    assert problem is None, f"{vector['expression']}: {problem}"
