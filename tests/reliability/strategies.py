"""What the fuzz tests draw: any JSON value as an apiserver could send it and worse, and the
valid example manifests with places replaced by such values."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from webhook import shipped_data

# Scalars as the apiserver could send them and worse: integers far beyond int64, floats at
# the edges, every unicode plane (lone surrogates too: not valid JSON text once encoded).
scalars = (
    st.none() | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=30,
)


def valid_examples() -> list[dict[str, Any]]:
    folder = Path(shipped_data.example_manifests_dir()) / "valid"
    return [doc for path in sorted(folder.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]


SEEDS = valid_examples()


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into ``value`` (keys and indexes), containers included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, prefix + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += paths(item, prefix + (i,))
    return found


def put(doc: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


@st.composite
def mutated(draw, under: tuple = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    """(seed, the seed with 1-4 places replaced by anything; only below ``under`` if given)."""
    # a seed with something there to mutate (an InferencePoolImport has neither spec nor status)
    seed = draw(st.sampled_from([s for s in SEEDS if not under or any(s.get(key) for key in under)]))
    obj = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 4))):
        targets = [p for p in paths(obj) if p and (not under or p[0] in under)]
        path = draw(st.sampled_from(targets))
        if draw(st.booleans()):  # a new key beside an existing one
            parent = path[:-1]
            holder = obj
            for key in parent:
                holder = holder[key]
            if isinstance(holder, dict):
                path = parent + (draw(st.text(max_size=10)),)
        put(obj, path, draw(json_values))
    return seed, obj
