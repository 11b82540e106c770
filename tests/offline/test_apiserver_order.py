"""The apiserver's order of errors in `infergate validate` (issue #33, 5): a field of the wrong
type gets the CRD schema's words, as kube-apiserver answers (recorded:
tests/conformance/cases/parity-decoding.yaml), with or without the webhook's policies, never a
policy's CEL error; a manifest with a duplicate key is read as kubectl reads it (the last value
wins, nothing said: recorded in data/duplicate-keys/)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml

from webhook.cli import main

DATA = Path(__file__).parent / "data" / "duplicate-keys"
RECORDED = Path(__file__).parents[1] / "conformance" / "cases" / "parity-decoding.yaml"

SPEC_AN_ARRAY = """\
apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: h5-s1
  namespace: h5-parity
spec: [1, 2]
"""

WRONG_TYPES = """\
apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: h5-s2
  namespace: h5-parity
spec:
  features: TextGeneration
  url: 5
  engine: VLLM
  minReplicas: zero
"""


def validate(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", "-j", "1", *argv])
    return code, out.getvalue(), err.getvalue()


def recorded(name: str) -> dict:
    return next(c for c in yaml.safe_load(RECORDED.read_text())["cases"] if c["name"] == name)


@pytest.mark.parametrize("text, case", [(SPEC_AN_ARRAY, "spec-an-array"), (WRONG_TYPES, "fields-of-wrong-types")])
@pytest.mark.parametrize("crd_only", [False, True])
def test_a_field_of_the_wrong_type_gets_the_schemas_words(tmp_path, text, case, crd_only):
    manifest = tmp_path / "model.yaml"
    manifest.write_text(text)
    code, out, err = validate(str(manifest), "-o", "json", *(["--crd-only"] if crd_only else []))
    assert code == 1, out + err
    [result] = json.loads(out)
    status = result["status"]
    expect = recorded(case)["expect"]
    assert status["code"] == expect["code"] == 422 and status["reason"] == "Invalid"
    causes = sorted(f"{c['field']}: {c['message']}" for c in status["details"]["causes"])
    assert causes == sorted(expect["errors"])  # the apiserver's causes: no policy speaks first


def test_a_duplicate_key_in_yaml_or_json_is_read_as_kubectl_sends_it():
    for manifest in ("model.yaml", "model.json"):
        sent = json.loads((DATA / f"kubectl-create-body-of-{manifest}.json").read_text())
        code, out, err = validate(str(DATA / manifest), "-o", "json", "--crd-only")
        assert code == 0, out + err
        [result] = json.loads(out)
        assert result["warnings"] == []  # kubectl says nothing of it, nor does the apiserver
        stored = result["object"]
        # what kubectl sent is what is judged: the last value, and nothing else of the spec changed
        assert stored["spec"]["engine"] == sent["spec"]["engine"] == "OLlama"
        assert {k: stored["spec"][k] for k in sent["spec"]} == sent["spec"]
