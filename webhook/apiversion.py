"""An object's ``apiVersion`` split into its group and version, in one place.

``apps/v1`` is group ``apps``, version ``v1``; a core kind's ``v1`` is group ``""``. Anything
that is not a string (a malformed document) has group and version ``""``, so a caller reporting
on it never raises.
"""

from __future__ import annotations

__all__ = ["api_version_of", "group_of", "split", "version_of"]


def split(api_version: object) -> tuple[str, str]:
    """``(group, version)`` of ``api_version``."""
    if not isinstance(api_version, str):
        return "", ""
    group, _, version = api_version.rpartition("/")
    return group, version


def group_of(api_version: object) -> str:
    """The group of ``api_version`` (``""`` for the core group)."""
    return api_version.rpartition("/")[0] if isinstance(api_version, str) else ""


def version_of(api_version: object) -> str:
    """The version of ``api_version``."""
    return api_version.rpartition("/")[2] if isinstance(api_version, str) else ""


def api_version_of(group: str, version: str) -> str:
    """The ``apiVersion`` of ``group`` and ``version`` (the core group's is the version alone)."""
    return f"{group}/{version}" if group else version
