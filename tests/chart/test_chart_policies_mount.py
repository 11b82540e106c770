"""The chart mounts the policies as a projected ConfigMap volume; the server must read exactly
the projected files, once each, and see an update (kubelet's atomic swap of ``..data``)."""

from __future__ import annotations

import os
from pathlib import Path

from webhook.policy.loader import policy_files
from webhook.policy.provider import directory_fingerprint


def project(volume: Path, generation: str, files: dict[str, str]) -> None:
    """Lay out ``files`` as kubelet's atomic writer does: real files in ``..<generation>``,
    ``..data`` pointing at it, and one top-level link per top-level entry."""
    real = volume / f"..{generation}"
    for relative, text in files.items():
        (real / relative).parent.mkdir(parents=True, exist_ok=True)
        (real / relative).write_text(text)
    tmp = volume / "..data_tmp"
    tmp.symlink_to(real.name)
    os.replace(tmp, volume / "..data")  # the atomic swap
    for top in {relative.split("/")[0] for relative in files}:
        link = volume / top
        if not link.is_symlink():
            link.symlink_to(f"..data/{top}")


def test_projected_policies_are_found_once_each_through_their_links(tmp_path):
    project(tmp_path, "2026_11_29_15_00_00.1", {
        "shipped/kubeai-model.yaml": "a: 1\n",
        "shipped/nested/gateway.yml": "b: 1\n",
        "user/team.yaml": "c: 1\n",
        "gitops.yaml": "d: 1\n",                 # an existing ConfigMap's key, at the top
        "shipped/admission-policy.schema.json": "{}",
    })
    assert [str(p.relative_to(tmp_path)) for p in policy_files(tmp_path)] == [
        "gitops.yaml", "shipped/kubeai-model.yaml", "shipped/nested/gateway.yml", "user/team.yaml"]


def test_an_atomic_update_changes_the_fingerprint(tmp_path):
    project(tmp_path, "1", {"user/team.yaml": "c: 1\n"})
    before = directory_fingerprint(tmp_path)
    project(tmp_path, "2", {"user/team.yaml": "c: 2 # changed\n"})
    after = directory_fingerprint(tmp_path)
    assert [entry[0] for entry in before] == [entry[0] for entry in after] == [str(tmp_path / "user/team.yaml")]
    assert before != after
