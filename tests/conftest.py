"""Suite-wide hooks. The e2e tests (tests/e2e, marker ``e2e``) run only against a real
cluster: without INFERGATE_E2E=1 and KUBECONFIG they are deselected, with the reason printed.
A test that reads outside the repository fails (``tests/support/hermetic.py``)."""

from __future__ import annotations

import pytest

from e2e.selection import MARKER, why_not_selected
from tests.support import hermetic

hermetic.install()  # at import, so reads while collecting are seen too

_DESELECTED = pytest.StashKey[str]()


def pytest_configure(config):
    config.pluginmanager.register(hermetic, "infergate-hermetic")
    config.addinivalue_line("markers", "decision(section, phrase): the docs/decisions.md rule an e2e scenario proves")
    config.addinivalue_line("markers", "before_crds: an e2e scenario that runs before the session installs its CRDs")
    config.addinivalue_line("markers", "before_webhook: an e2e scenario that runs before the session registers "
                                       "its webhook and starts its controller")


def pytest_collection_modifyitems(config, items):
    reason = why_not_selected()
    e2e = [item for item in items if item.get_closest_marker(MARKER)] if reason else []
    if e2e:
        config.hook.pytest_deselected(items=e2e)
        items[:] = [item for item in items if not item.get_closest_marker(MARKER)]
        config.stash[_DESELECTED] = f"{len(e2e)} e2e test(s) deselected: {reason}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _DESELECTED in config.stash:
        terminalreporter.write_line(config.stash[_DESELECTED])
