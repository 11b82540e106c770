"""``infergate validate`` refuses what kube-apiserver refuses for its size: a request body over
3 MiB (``MaxRequestBodyBytes``, any kind, 413) and a ConfigMap's or Secret's data over 1 MiB
(``ValidateConfigMap``/``ValidateSecret``, ``MaxSecretSize``, 422), the limit in the message."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import yaml

from webhook.cli import main
from webhook.offline.request_limits import body_size

MiB = 1024 * 1024
VALID_MODEL = Path(__file__).resolve().parents[2] / "examples/manifests/valid/kubeai-model-vllm.yaml"


def _json(capsys, *argv) -> tuple[int, list[dict]]:
    code = main(["validate", "-o", "json", *map(str, argv)])
    return code, json.loads(capsys.readouterr().out)


def _write(tmp_path: Path, *objects: dict) -> Path:
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


def config_map(name: str, **fields) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **fields}


def secret(name: str, **fields) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, **fields}


def test_config_map_and_secret_data_over_one_mib_are_invalid_with_the_limit(tmp_path, capsys):
    path = _write(tmp_path,
                  config_map("at-limit", data={"a": "x" * (MiB - 1), "b": "y"}),
                  config_map("over", data={"a": "x" * MiB}, binaryData={"b": base64.b64encode(b"z").decode()}),
                  secret("encoded-at-limit", data={"a": base64.b64encode(b"x" * MiB).decode()}),
                  secret("string-data-over", data={"a": base64.b64encode(b"x" * 10).decode()},
                         stringData={"b": "y" * MiB}),
                  secret("string-data-replaces", data={"a": base64.b64encode(b"x" * MiB).decode()},
                         stringData={"a": "short"}))
    code, results = _json(capsys, path)
    assert code == 1
    assert [r["result"] for r in results] == ["valid", "invalid", "valid", "invalid", "valid"]
    assert results[1]["status"]["message"] == 'ConfigMap "over" is invalid: []: Too long: may not be more than 1048576 bytes'
    assert results[1]["status"]["details"]["causes"] == [
        {"reason": "FieldValueTooLong", "message": "Too long: may not be more than 1048576 bytes", "field": "[]"}]
    assert results[3]["status"]["message"] == (
        'Secret "string-data-over" is invalid: data: Too long: may not be more than 1048576 bytes')


def test_a_body_over_three_mib_is_refused_whatever_the_kind(tmp_path, capsys):
    model = yaml.safe_load(VALID_MODEL.read_text())
    model["metadata"]["annotations"] = {"note": "n" * (3 * MiB)}
    huge = config_map("four-mib", data={f"k{i}": "v" * MiB for i in range(4)})
    unknown = {"apiVersion": "example.com/v1", "kind": "Nothing", "metadata": {"name": "n"}, "blob": "b" * (3 * MiB)}
    code, results = _json(capsys, _write(tmp_path, model, huge, unknown))
    assert code == 1 and [r["result"] for r in results] == ["invalid"] * 3
    for result in results:
        assert result["status"] == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                    "message": "Request entity too large: limit is 3145728",
                                    "reason": "RequestEntityTooLarge", "code": 413}
    code, out = main(["validate", str(tmp_path / "objects.yaml")]), capsys.readouterr().out
    assert out.splitlines()[0].endswith(
        "Error from server (RequestEntityTooLarge): Request entity too large: limit is 3145728")


def test_the_body_is_measured_as_go_writes_it():
    assert body_size({"a": "b"}) == len(b'{"a":"b"}')
    assert body_size({"a": "<&>"}) == len(b'{"a":"\\u003c\\u0026\\u003e"}')
    assert body_size({"a": "\u2028"}) == len(b'{"a":"\\u2028"}')
    assert body_size({"a": "é"}) == len('{"a":"é"}'.encode())
