"""One reading of an apiVersion (``webhook.apiversion``), and no other: no module of ``webhook``
splits an apiVersion on its own."""

from __future__ import annotations

import ast

import pytest

from tests.support.paths import REPO
from webhook.apiversion import api_version_of, group_of, split, version_of


@pytest.mark.parametrize(("api_version", "group", "version"), [
    ("apps/v1", "apps", "v1"),
    ("v1", "", "v1"),
    ("inference.networking.x-k8s.io/v1alpha2", "inference.networking.x-k8s.io", "v1alpha2"),
    ("", "", ""),
    (None, "", ""),  # a malformed document: reported on, never a traceback
    (1, "", ""),
])
def test_group_and_version(api_version, group, version):
    assert split(api_version) == (group, version)
    assert (group_of(api_version), version_of(api_version)) == (group, version)


@pytest.mark.parametrize("api_version", ["apps/v1", "v1", "llm-d.ai/v1alpha2"])
def test_the_parts_make_the_api_version_again(api_version):
    assert api_version_of(*split(api_version)) == api_version


# The splits on "/" that are not of an apiVersion, by module: a CIDR, a device's qualified name, a
# JSON pointer ($ref, a JSON patch's path), a label key's prefix, a cgroup path, and the one reading
# of an apiVersion itself.
OTHER_SPLITS = {
    "webhook/apiversion.py": 3,
    "webhook/cel/library/cidr.py": 1,
    "webhook/controller/planner/devices.py": 1,
    "webhook/offline/builtin_kinds.py": 1,
    "webhook/policy/native/patching.py": 1,
    "webhook/server/processes.py": 1,
    "webhook/validation/names.py": 1,
}


def _slash_splits(tree: ast.AST) -> int:
    return sum(1 for node in ast.walk(tree)
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr in ("rpartition", "split", "rsplit")
               and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "/")


def test_no_module_splits_an_api_version_on_its_own():
    found = {}
    for path in sorted((REPO / "webhook").rglob("*.py")):
        if "celpy" in path.parts:  # vendored
            continue
        count = _slash_splits(ast.parse(path.read_text(), str(path)))
        if count:
            found[str(path.relative_to(REPO))] = count
    assert found == OTHER_SPLITS
