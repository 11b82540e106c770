"""Where the shipped data lives: CRDs, policies and the example cluster state.

A wheel carries them under ``webhook/_data`` (hatch force-include from ``chart/crds``,
``chart/files/crds``, ``policies`` and ``examples``); a source checkout or editable install
reads the same files straight from the repository. Either way there is one source of truth.
Which CRD files are bundled for which kinds: ``webhook/schema/bundled.py``.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_REPO_ROOT = _PACKAGE_DIR.parent

_LOCATIONS = {
    "crds": ("_data/crds", "chart/crds"),  # infergate's own CRDs: the chart always installs them
    # third-party CRDs: the current upstream ones (the chart installs them when asked) and the
    # earlier versions still served (never installed)
    "upstream_crds": ("_data/third-party-crds/upstream", "chart/files/crds/upstream"),
    "legacy_crds": ("_data/third-party-crds/legacy", "chart/files/crds/legacy"),
    "policies": ("_data/policies", "policies"),
    "examples": ("_data/examples", "examples"),
    # the embedded default cluster state; examples/manifests holds objects to try, not state
    "example_state": ("_data/examples/state", "examples/state"),
    "example_manifests": ("_data/examples/manifests", "examples/manifests"),
}


def data_dir(name: str) -> Path:
    """Return the directory holding the shipped ``name`` (a key of ``_LOCATIONS``)."""
    packaged, in_repo = _LOCATIONS[name]
    candidate = _PACKAGE_DIR / packaged
    if candidate.is_dir():
        return candidate
    return _REPO_ROOT / in_repo


def crds_dir() -> Path:
    """infergate's own CRDs (``chart/crds``)."""
    return data_dir("crds")


def policies_dir() -> Path:
    return data_dir("policies")


def examples_dir() -> Path:
    """The embedded default cluster state (``examples/state``): what ``FileState`` loads when
    no state is given. (``examples/manifests`` beside it holds objects to try: not state.)"""
    return data_dir("example_state")


def example_manifests_dir() -> Path:
    """Valid, invalid and webhook-denied example objects (``examples/manifests``)."""
    return data_dir("example_manifests")
