"""``infergate validate`` on a kustomize repository as a team writes one (``kustomize-repo/``: a
base that leaves ``spec.url`` to its overlays, a Component, overlays patching by ``patches``,
``patchesJson6902`` and ``patchesStrategicMerge``, a ``Kustomization`` without apiVersion/kind).

By default the files are judged as written: kustomization files and patches are skipped, never
judged as objects, and a base's problem says its overlays may complete it. ``--kustomize``
renders the overlays with ``kustomize build`` or ``kubectl kustomize`` (whichever is on PATH) and
judges what they render, attributed to the kustomization. The rendering tests need one of the two:
``INFERGATE_TEST_KUBECTL`` names a kubectl, else PATH is searched; in CI (``CI`` set) a missing
binary fails the test, it is never skipped there."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from webhook.cli import main

REPOSITORY = Path(__file__).parent / "kustomize-repo"
BASE_NOTE = "(in a kustomize base; overlays may complete it)"


@pytest.fixture
def repo(tmp_path) -> Path:
    return Path(shutil.copytree(REPOSITORY, tmp_path / "repo"))


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["validate", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_patches_and_kustomization_files_are_skipped_and_a_base_says_overlays_may_complete_it(repo, capsys):
    code, out, _ = _run(capsys, repo)
    assert code == 1  # the base's Model has no url: judged as written
    assert out.splitlines() == [
        f"{repo}/base/kustomization.yaml:2: skipped kustomize file, not applied",  # no apiVersion/kind in it
        f'{repo}/base/model.yaml:1: The Model "chat" is invalid {BASE_NOTE}: ',
        "* spec.url: Required value",
        "* <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; "
        "correct the existing errors to complete validation",
        f"{repo}/base/pool.yaml:1: inferencepool.inference.networking.k8s.io/chat-pool valid",
        f"{repo}/components/gpu/gpu.yaml:2: skipped kustomize patch (not applied alone)",  # a Component's patch
        f"{repo}/components/gpu/kustomization.yaml:1: skipped kustomize file, not applied",
        f"{repo}/overlays/dev/Kustomization:1: skipped kustomize file, not applied",  # the name without suffix
        f"{repo}/overlays/dev/model-url.yaml:1: skipped kustomize patch (not applied alone)",  # patchesStrategicMerge
        f"{repo}/overlays/prod/kustomization.yaml:1: skipped kustomize file, not applied",
        f"{repo}/overlays/prod/model.yaml:1: skipped kustomize patch (not applied alone)",  # patches: path
        f"{repo}/overlays/prod/replicas.yaml:1: skipped kustomize patch (not applied alone)",  # patchesJson6902
        "1 valid, 1 invalid, 8 skipped, 0 errors, in 10 files",
    ]


def test_a_patch_or_kustomization_named_alone_is_still_known_as_one(repo, capsys):
    code, out, _ = _run(capsys, repo / "overlays" / "prod" / "model.yaml")  # the overlay's Model patch
    assert code == 0 and out.splitlines() == [
        f"{repo}/overlays/prod/model.yaml:1: skipped kustomize patch (not applied alone)",
        "0 valid, 0 invalid, 1 skipped, 0 errors, in 1 file"]
    code, out, _ = _run(capsys, repo / "base" / "kustomization.yaml", "-o", "json")
    (result,) = json.loads(out)
    assert code == 0 and result["result"] == "skipped" and result["reason"] == "kustomize file, not applied"


def test_the_base_note_is_in_every_ci_format(repo, capsys, monkeypatch):
    monkeypatch.chdir(repo)
    code, out, _ = _run(capsys, ".", "-o", "sarif")
    results = json.loads(out)["runs"][0]["results"]
    assert code == 1 and [(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
                          for r in results] == [("kube-apiserver/FieldValueRequired", "base/model.yaml")]
    code, out, _ = _run(capsys, ".", "-o", "junit")
    (failure,) = ET.fromstring(out).iter("failure")
    assert BASE_NOTE in failure.get("message")
    skipped = [s.get("message") for s in ET.fromstring(out).iter("skipped")]
    assert skipped.count("kustomize patch (not applied alone)") == 4
    code, out, _ = _run(capsys, ".", "-o", "github")
    (error,) = [line for line in out.splitlines() if line.startswith("::error ")]
    assert error.startswith("::error file=base/model.yaml,line=1,title=Model/chat::") and BASE_NOTE in error


def test_kustomize_without_kustomize_or_kubectl_exits_2_with_one_line(repo, capsys, monkeypatch, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, out, err = _run(capsys, repo, "--kustomize")
    assert (code, out) == (2, "")
    assert err == ("infergate: error: validate: --kustomize: neither kustomize nor kubectl is on PATH (kubectl has "
                   "kustomize built in: install either, or leave out --kustomize)\n")


@pytest.fixture
def renderer_on_path(monkeypatch) -> str:
    """A kustomize or kubectl to render with: ``INFERGATE_TEST_KUBECTL`` first, else PATH's."""
    named = os.environ.get("INFERGATE_TEST_KUBECTL")
    if named:
        assert Path(named).is_file(), f"INFERGATE_TEST_KUBECTL={named}: no such file"
        monkeypatch.setenv("PATH", f"{Path(named).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    found = shutil.which("kustomize") or shutil.which("kubectl")
    if found is None:
        message = "--kustomize needs kustomize or kubectl on PATH (or INFERGATE_TEST_KUBECTL)"
        if os.environ.get("CI"):
            pytest.fail(message + ": CI must render, not skip")
        pytest.skip(message)
    return found


def test_kustomize_renders_each_overlay_and_judges_it_in_place_of_its_files(repo, capsys, renderer_on_path):
    code, out, err = _run(capsys, repo, "--kustomize")
    assert code == 0, out + err
    assert out.splitlines() == [  # the base and its patches are judged through the overlays, not alone
        f"{repo}/overlays/dev/Kustomization: inferencepool.inference.networking.k8s.io/chat-pool valid",
        f"{repo}/overlays/dev/Kustomization: model.kubeai.org/chat valid",
        f"{repo}/overlays/prod/kustomization.yaml: inferencepool.inference.networking.k8s.io/chat-pool valid",
        f"{repo}/overlays/prod/kustomization.yaml: model.kubeai.org/chat valid",
        "4 valid, 0 invalid, 0 skipped, 0 errors, in 2 files",
    ]
    code, out, _ = _run(capsys, repo, "--kustomize", "-o", "json")
    models = [r for r in json.loads(out) if r["object"]["kind"] == "Model"]
    assert [(m["source"]["file"], m["object"]["metadata"]["namespace"], m["object"]["spec"]["url"],
             m["object"]["spec"]["resourceProfile"], m["object"]["spec"]["minReplicas"]) for m in models] == [
        (f"{repo}/overlays/dev/Kustomization", "ml-dev", "hf://Qwen/Qwen2.5-0.5B-Instruct", "cpu:1", 0),
        (f"{repo}/overlays/prod/kustomization.yaml", "ml-prod", "hf://Qwen/Qwen2.5-7B-Instruct",
         "nvidia-gpu-l4:1", 1),  # the Component's patch, the JSON patch
    ]


def test_kustomize_attributes_a_refusal_to_the_overlay_in_ci_output(repo, capsys, renderer_on_path, monkeypatch):
    (repo / "overlays" / "prod" / "model.yaml").write_text(textwrap.dedent("""\
        apiVersion: kubeai.org/v1
        kind: Model
        metadata:
          name: chat
        spec:
          url: hf://Qwen/Qwen2.5-7B-Instruct
          engine: vLLM
        """))
    monkeypatch.chdir(repo)
    code, out, _ = _run(capsys, ".", "--kustomize", "-o", "github")
    (error,) = [line for line in out.splitlines() if line.startswith("::error ")]
    assert code == 1
    assert error.startswith("::error file=overlays/prod/kustomization.yaml,title=Model/chat::")
    assert 'spec.engine: Unsupported value: "vLLM"' in error
    assert [line for line in out.splitlines() if line.startswith("overlays/dev/")] == [
        "overlays/dev/Kustomization: inferencepool.inference.networking.k8s.io/chat-pool valid",
        "overlays/dev/Kustomization: model.kubeai.org/chat valid"]  # the other overlay is not touched


def test_kustomize_build_failure_is_an_error_at_the_kustomization(repo, capsys, renderer_on_path):
    (repo / "overlays" / "prod" / "kustomization.yaml").write_text("resources:\n- ../../nowhere\n")
    code, out, err = _run(capsys, repo, "--kustomize")
    assert code == 2
    (line,) = [line for line in err.splitlines() if line.startswith("infergate: error: ")]
    assert line.startswith(f"infergate: error: {repo}/overlays/prod/kustomization.yaml: ")
    assert "overlays/prod failed: " in line and "nowhere" in line
    assert f"{repo}/overlays/dev/Kustomization: model.kubeai.org/chat valid" in out.splitlines()


def test_patches_are_no_objects_of_the_state(repo, capsys):
    """A patch is a partial object: never a Model or pool the policies could find in --state."""
    code, out, err = _run(capsys, repo / "base" / "pool.yaml", "--state", repo)
    assert code == 0
    # base/, components/gpu/ and overlays/prod/'s kustomization.yaml, and the four patches
    assert "--state: 7 documents skipped, not Kubernetes objects (kustomization.yaml, kustomize patches, " \
           "Helm values)" in err


def test_strict_errs_on_kustomization_files_not_on_patches(repo, capsys):
    code, out, err = _run(capsys, repo, "--strict")
    errors = sorted(line for line in err.splitlines() if line.startswith("infergate: error: "))
    assert code == 2 and errors == [
        f"infergate: error: {repo}/base/kustomization.yaml:2: kustomize file, not applied",
        f"infergate: error: {repo}/components/gpu/kustomization.yaml:1: kustomize file, not applied",
        f"infergate: error: {repo}/overlays/dev/Kustomization:1: kustomize file, not applied",
        f"infergate: error: {repo}/overlays/prod/kustomization.yaml:1: kustomize file, not applied",
    ]
    assert out.splitlines()[-1] == "1 valid, 1 invalid, 4 skipped, 4 errors, in 10 files"  # the four patches
