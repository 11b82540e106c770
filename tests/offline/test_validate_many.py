"""``infergate validate`` on many documents: worker processes give the same answers in the same
order as one process, errors still name the first bad document, and the progress bar shows
only on a terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from webhook import shipped_data
from webhook.cli import main
from webhook.offline import parallel
from webhook.offline.parallel import map_ordered
from webhook.offline.progress import Progress
from tests.support.paths import KUBEAI_V0_12_CRD, MANIFESTS

VALID = sorted((MANIFESTS / "valid").glob("*.yaml"))
DENIED = sorted((MANIFESTS / "denied-by-webhook").glob("*.yaml"))
INVALID = sorted((MANIFESTS / "invalid").glob("*.yaml"))


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_PER_PROCESS", 5)


def _write_many(directory: Path, count: int) -> None:
    sources = VALID + DENIED
    for i in range(count):
        obj = yaml.safe_load(sources[i % len(sources)].read_text())
        obj["metadata"]["name"] = f"{obj['metadata']['name']}-{i}"
        (directory / f"m{i:03d}.yaml").write_text(yaml.safe_dump(obj))


def test_map_ordered_keeps_order_across_processes(small_batches):
    seen = []
    data = [i * i for i in range(100)]
    assert map_ordered(lambda i: (i, data[i]), 100, jobs=3, progress=seen.append) == [(i, i * i) for i in range(100)]
    assert sum(seen) == 100 and len(seen) < 100  # progress moves by chunks


def test_workers_answer_as_one_process(tmp_path, capsys, small_batches):
    _write_many(tmp_path, 40)
    assert main(["validate", "-f", str(tmp_path), "-o", "json", "-j", "1"]) == 1  # some are denied
    serial = json.loads(capsys.readouterr().out)
    assert main(["validate", "-f", str(tmp_path), "-o", "json", "-j", "3"]) == 1
    assert json.loads(capsys.readouterr().out) == serial
    assert len(serial) == 40 and {a["allowed"] for a in serial} == {True, False}
    assert [a["source"]["file"] for a in serial] == [str(tmp_path / f"m{i:03d}.yaml") for i in range(40)]


def test_bad_documents_are_reported_in_their_place_from_workers(tmp_path, capsys, small_batches):
    _write_many(tmp_path, 30)
    (tmp_path / "m010.yaml").write_text("- not\n- a mapping\n")
    (tmp_path / "m020.yaml").write_text("apiVersion: example.com/v1\nkind: Unknown\nmetadata: {name: x}\n")
    demo = ["--state", str(shipped_data.examples_dir())]  # the cluster the example manifests are written for
    assert main(["validate", str(tmp_path), *demo, "-j", "3"]) == 1  # skipped, and some denied
    lines = capsys.readouterr().out.splitlines()
    assert f"{tmp_path / 'm010.yaml'}:1: skipped not a Kubernetes object (a list, not a mapping)" in lines
    assert f"{tmp_path / 'm020.yaml'}:1: skipped Unknown/x (example.com/v1): no schema for this kind" in lines
    assert len(lines) == 31 and lines[-1].endswith(" invalid, 2 skipped, 0 errors, in 30 files")
    assert main(["validate", str(tmp_path), *demo, "-j", "3", "--strict"]) == 2
    out = capsys.readouterr()
    errors = [line for line in out.err.splitlines() if not line.startswith(("Warning: ", "note: "))]
    assert errors == [
        f"infergate: error: {tmp_path / 'm010.yaml'}:1: not a Kubernetes object (a list, not a mapping)",
        f"infergate: error: {tmp_path / 'm020.yaml'}:1: Unknown/x (example.com/v1): no schema for this kind"]
    assert out.out.splitlines()[-1].endswith(" invalid, 0 skipped, 2 errors, in 30 files")


def test_progress_bar_only_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert not Progress(10_000, "validating", stream=io.StringIO()).enabled  # a pipe or a CI log
    assert not Progress(10, "validating", stream=Terminal()).enabled  # too short to need one
    stream = Terminal()
    bar = Progress(10_000, "validating", stream=stream)
    assert bar.enabled
    bar.advance(2_500)
    assert "validating  2500/10000 [#######" in stream.getvalue() and " 25%" in stream.getvalue()
    bar.advance(7_500)
    bar.close()
    assert stream.getvalue().endswith("\r\x1b[K")
    assert "10000/10000 [" + "#" * 30 + "] 100%" in stream.getvalue()


def test_json_output_is_pythons_text_even_beyond_64_bit_integers(tmp_path, capsys):
    from webhook.offline.validate import json_text

    answer = [{"allowed": True, "object": {"name": "ünïcode", "n": 1.5, "big": 2 ** 70, "empty": {}, "list": []}}]
    assert json_text(answer) == json.dumps(answer, indent=2, ensure_ascii=False) + "\n"
    answer[0]["object"]["big"] = 7
    assert json_text(answer) == json.dumps(answer, indent=2, ensure_ascii=False) + "\n"


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _mixed_directory(directory: Path) -> None:
    """Valid, invalid and denied manifests one per file, a CRD serving a new kind and an object of
    it, and a large file of many documents (parsed in the parent, judged across the workers)."""
    sources = VALID + INVALID + DENIED
    for i in range(60):
        (directory / f"m{i:03d}.yaml").write_text(sources[i % len(sources)].read_text())
    crd = yaml.safe_load(KUBEAI_V0_12_CRD.read_text())
    crd["metadata"]["name"] = "models.example.com"
    crd["spec"]["group"] = "example.com"
    (directory / "m030-crd.yaml").write_text(yaml.safe_dump(crd))
    model = yaml.safe_load((MANIFESTS / "valid" / "kubeai-model-vllm.yaml").read_text())
    (directory / "m031-own-kind.json").write_text(json.dumps({**model, "apiVersion": "example.com/v1"}))
    many = [yaml.safe_load(sources[i % len(sources)].read_text()) for i in range(80)]
    (directory / "m045-many.yaml").write_text(yaml.safe_dump_all(many) + "# " + "padding " * 10_000 + "\n")


def test_workers_print_byte_for_byte_what_one_process_prints(tmp_path, capsys, monkeypatch, small_batches):
    _mixed_directory(tmp_path)
    for output in ("text", "json", "yaml"):
        argv = ["validate", "-f", str(tmp_path), "-o", output]
        serial = _run(argv + ["-j", "1"], capsys)
        assert serial[0] == 1 and serial[1]  # some are invalid, all are judged
        assert _run(argv + ["-j", "2"], capsys) == serial
        if output == "text":  # the CRD among the manifests serves its kind to every worker
            own_kind = tmp_path / "m031-own-kind.json"
            assert f"{own_kind}:1: model.example.com/llama-3-1-8b-instruct-l4 valid" in serial[1].splitlines()
            crd = tmp_path / "m030-crd.yaml"
            assert f"{crd}:1: customresourcedefinition.apiextensions.k8s.io/models.example.com valid" in serial[1]
            assert len(serial[1].splitlines()) > 140

    # stdin is parsed by the parent; its documents are judged across the workers all the same
    many = (tmp_path / "m045-many.yaml").read_text()
    monkeypatch.setattr("sys.stdin", io.StringIO(many))
    serial = _run(["validate", "-f", "-", "-j", "1"], capsys)
    monkeypatch.setattr("sys.stdin", io.StringIO(many))
    assert _run(["validate", "-f", "-", "-j", "2"], capsys) == serial and len(serial[1].splitlines()) >= 80

    # a document that is no object, an unknown kind (--strict), a file that does not parse, aliases
    # nested past the limit: each reported in its place, every other document still judged
    (tmp_path / "m020.yaml").write_text("apiVersion: example.com/v1\nkind: Unknown\nmetadata: {name: x}\n")
    (tmp_path / "m050.yaml").write_text("- not\n- a mapping\n")
    (tmp_path / "m055.yaml").write_text("a: &a [*a]\n")
    (tmp_path / "m058.yaml").write_text("kind: [unclosed\n")
    serial = _run(["validate", str(tmp_path), "--strict", "-j", "1"], capsys)
    errors = [line for line in serial[2].splitlines() if line.startswith("infergate: error: ")]
    assert serial[0] == 2 and [e.split(": ")[2] for e in errors] == [
        f"{tmp_path / 'm020.yaml'}:1", f"{tmp_path / 'm050.yaml'}:1", f"{tmp_path / 'm055.yaml'}:1",
        f"{tmp_path / 'm058.yaml'}:2"]
    assert "document nested more than 1024 levels deep (or containing itself through a YAML alias)" in errors[2]
    assert "invalid YAML: " in errors[3]
    assert serial[1].splitlines()[-1].endswith(" 0 skipped, 4 errors, in 63 files")
    assert _run(["validate", str(tmp_path), "--strict", "-j", "2"], capsys) == serial

