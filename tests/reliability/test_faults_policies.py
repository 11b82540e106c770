"""A policy file broken while the webhook serves (half-written, not YAML, a CEL expression
that does not compile, emptied): the last good set stays in force, verdicts do not change,
the error is logged; a good file is picked up without a restart. Removing a file is how its
policies go."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import yaml

from webhook import shipped_data
from webhook.admission.chain import AdmissionChain
from webhook.policy import PolicyDirectory
from webhook.schema import CRDRegistry
from webhook.state import FileState

from .conftest import ServerThread, review, wait_until
from tests.support.cel import EVALUATOR

MANIFESTS = Path(shipped_data.example_manifests_dir())
# as the validating webhook gets it: decoded and defaulted by the apiserver
DENIED = CRDRegistry.shipped(evaluator=EVALUATOR).prepare(
    "CREATE", yaml.safe_load((MANIFESTS / "denied-by-webhook" / "kubeai-model-ollama-url-with-vllm.yaml").read_text()))[0]
POLICY_FILE = "kubeai-model.yaml"
RELOAD_S = 30.0  # a reload compiles the whole directory: seconds on a machine loaded by a full test run


@pytest.fixture
def serving(tmp_path):
    policies_dir = tmp_path / "policies"
    shutil.copytree(shipped_data.policies_dir(), policies_dir)
    policies = PolicyDirectory(policies_dir, EVALUATOR, interval=0.05)
    policies.start()
    chain = AdmissionChain(CRDRegistry.shipped(evaluator=EVALUATOR), policies, FileState(shipped_data.examples_dir()))
    with ServerThread(tmp_path / "certs", chain) as server:
        yield server, policies, policies_dir
    policies.stop()


def verdict(server: ServerThread) -> tuple[bool, str]:
    response = server.client().post("/validate", review(DENIED)).json()["response"]
    return response["allowed"], (response.get("status") or {}).get("message", "")


def _replaced(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


BROKEN = {
    # cut past the middle, inside a quoted string: a cut at a line's end could still be YAML
    "half-written": lambda text: text[: text.index('"', len(text) // 2) + 1],
    "not-yaml": lambda text: "spec: [unclosed\n  - {",
    "cel-does-not-compile": lambda text: text.replace("variables.url.startsWith('ollama://')",
                                                      "variables.url.startsWith('ollama://'", 1),
    # compiles, but the apiserver's type check of a ValidatingAdmissionPolicy would refuse it: a
    # validation that is no bool, a comparison the Model schema's types have no overload for
    "validation-not-bool": lambda text: _replaced(text, "- expression: \"!has(object.spec.owner)\"",
                                                  "- expression: object.spec.?owner.orValue('')"),
    "ill-typed-for-the-schema": lambda text: _replaced(text, "object.spec.?url.orValue('')", "object.spec.url >= 1"),
    # a truncate-then-write editor between its two steps, or a disk full mid-write
    "emptied": lambda text: "",
    "whitespace-only": lambda text: "\n  \n",
}


def _replace(path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")  # not a *.yaml: never read as a policy file
    partial.write_text(text)
    partial.replace(path)


@pytest.mark.parametrize("damage", list(BROKEN))
def test_a_broken_policy_file_keeps_the_last_good_set(serving, damage, caplog):
    server, policies, policies_dir = serving
    before = verdict(server)
    assert before[0] is False and "ollama://" in before[1]
    generation = policies.current().generation
    path = policies_dir / POLICY_FILE
    good = path.read_text()
    with caplog.at_level(logging.ERROR, logger="webhook.policy.provider"):
        # written whole (a reload between a truncate and a write would see an empty file:
        # the next test's subject)
        _replace(path, BROKEN[damage](good))
        wait_until(lambda: policies.error is not None, timeout=RELOAD_S)
    assert policies.current().generation == generation  # nothing swapped in
    if damage in ("validation-not-bool", "ill-typed-for-the-schema"):  # refused with file:line and the checker's words
        assert f"{path}:" in policies.error and ("must evaluate to bool, not string" in policies.error
                                                 or "found no matching overload for '_>=_' applied to '(string, int)'"
                                                 in policies.error), policies.error
    assert verdict(server) == before  # still enforced, same words
    assert any("last good set stays in force" in r.getMessage() for r in caplog.records)

    # the author fixes it, and relaxes the engine rule meanwhile: picked up live
    relaxed = yaml.safe_load_all(good)
    kept = [doc for doc in relaxed if doc["metadata"]["name"] != "kubeai-model-engine"]
    path.write_text(yaml.safe_dump_all(kept))
    wait_until(lambda: policies.current().generation > generation, timeout=RELOAD_S)
    assert policies.error is None
    assert verdict(server)[0] is True


def test_truncate_then_write_never_opens_a_window_without_the_policies(serving):
    """An editor that truncates, waits (here several reload intervals), then writes."""
    server, policies, policies_dir = serving
    path = policies_dir / POLICY_FILE
    good = path.read_text()
    before = verdict(server)
    path.write_text("")
    wait_until(lambda: policies.error is not None and "empty" in policies.error, timeout=RELOAD_S)
    assert verdict(server) == before
    path.write_text(good.replace("ollama://", "ollama:/" + "/", 1) + "\n")  # same rules, new bytes
    wait_until(lambda: policies.error is None, timeout=RELOAD_S)
    assert verdict(server) == before


def test_removing_a_file_removes_its_policies(serving):
    server, policies, policies_dir = serving
    generation = policies.current().generation
    assert verdict(server)[0] is False
    (policies_dir / POLICY_FILE).unlink()
    wait_until(lambda: policies.current().generation > generation, timeout=RELOAD_S)
    assert policies.error is None
    assert verdict(server)[0] is True
    assert not [p for p in policies.current().policies if p.file.endswith(POLICY_FILE)]
