"""The order of several MutatingAdmissionPolicies: what a real kube-apiserver v1.36 did
(``order/mutating-order.yaml``, recorded by ``record_order.py``) and what ``infergate validate``
does offline (name order; docs/native-policies-offline.md)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import yaml

from webhook.cli import main

RECORDED = yaml.safe_load((Path(__file__).resolve().parent / "order" / "mutating-order.yaml").read_text())


def test_the_apiserver_order_holds_between_refreshes_and_changes_across_them() -> None:
    """Within a round (one build of the policy list) every write gets the same answer; across
    rounds more than one policy applied last: the order is a Go map's, not a fixed one."""
    rounds = RECORDED["rounds"]
    assert rounds and all(len(set(writes)) == 1 for writes in rounds)
    assert len({writes[0] for writes in rounds}) > 1


def test_offline_applies_them_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "policies.yaml").write_text(yaml.safe_dump_all(RECORDED["policies"], sort_keys=False))
    (tmp_path / "object.yaml").write_text(yaml.safe_dump(RECORDED["object"], sort_keys=False))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", "-j", "1", "-o", "json", "--policies", str(tmp_path / "policies"),
                     str(tmp_path / "object.yaml")])
    assert code == 0, err.getvalue()
    [result] = json.loads(out.getvalue())
    applied = result["object"]["metadata"]["labels"][RECORDED["label"]]
    by_name = sorted((p for p in RECORDED["policies"] if p["kind"] == "MutatingAdmissionPolicy"),
                     key=lambda p: p["metadata"]["name"])
    expression = by_name[-1]["spec"]["mutations"][0]["applyConfiguration"]["expression"]  # the last applies last
    assert f'"{RECORDED["label"]}": "{applied}"' in expression
    assert applied in {writes[0] for writes in RECORDED["rounds"]}  # one of the apiserver's answers
