"""The corpus test of issue #25 (item 7): `infergate validate` over the upstream manifests in
tests/upstream/*/ (byte for byte, provenance in SOURCES), with defaults: no --state, bundled
CRDs, shipped policies. What it must answer is README.md's "What the corpus test expects";
FINDINGS.md records each cause. One property per test function.

The run is `python -m webhook validate <project dirs>` in a subprocess, once as `-o json` and
once with the default text output, from tests/upstream/ so that every source file is named
relative to it, as expected-denials.yaml and upstream-defects.yaml name them. Only the project
directories are inputs: the two expectation files are not manifests (FINDINGS F5).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import yaml

from tests.support.paths import REPO

CORPUS = REPO / "tests" / "upstream"
PROJECTS = sorted(p.name + "/" for p in CORPUS.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))

# S3 and S4 of FINDINGS.md: kinds infergate neither serves nor knows, where a skip is right
NOT_SERVED = {
    ("networking.gke.io/v1", "GCPBackendPolicy"),
    ("networking.gke.io/v1", "HealthCheckPolicy"),
    ("networking.istio.io/v1", "DestinationRule"),
    ("gateway.kgateway.dev/v1alpha1", "GatewayParameters"),
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
}
# warnings that judge an object the input does not contain: a pool, Service, Pod, namespace or
# KubeAI profile that the embedded example state has or lacks (FINDINGS W1-W4, D2)
ABOUT_ABSENT_OBJECTS = re.compile(r"not found|\(yet\)|no Pod matches|not in the KubeAI system config")
SUCCESSORS = {"InferencePool": "InferencePool inference.networking.k8s.io/v1",
              "InferenceModel": "llm-d.ai/v1alpha2 InferenceObjective"}


def _validate(*options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", "validate", *PROJECTS, *options], cwd=CORPUS,
                          capture_output=True, text=True, timeout=600, check=False)


@cache
def _json_run() -> tuple[int, list[dict], str]:
    done = _validate("-o", "json")
    assert done.returncode in (0, 1), done.stderr  # 2 would be a usage or input error
    return done.returncode, json.loads(done.stdout), done.stderr


@cache
def _text_run() -> subprocess.CompletedProcess:
    return _validate()


def _results() -> list[dict]:
    return _json_run()[1]


def _key(result: dict) -> tuple[str, int]:
    return result["source"]["file"], result["source"]["index"]


def _document(result: dict) -> dict:
    """The document as written (``object`` is the answer's, absent from a denial)."""
    source = result["source"]
    docs = list(yaml.safe_load_all((CORPUS / source["file"]).read_text()))
    return docs[source["index"]]


def _listed() -> dict[tuple[str, int], dict]:
    """Every listed denial, by (file, index): the conformance negatives upstream itself marks
    invalid, and the upstream defects a real kube-apiserver refuses."""
    expected = yaml.safe_load((CORPUS / "expected-denials.yaml").read_text())
    defects = yaml.safe_load((CORPUS / "upstream-defects.yaml").read_text())
    listed = {}
    for entry in [*(expected["documents"] or []), *(defects["defects"] or [])]:
        key = (entry["file"], entry["index"])
        assert key not in listed, f"listed twice: {key}"
        listed[key] = entry
    return listed


def _denial_text(result: dict) -> str:
    status = result.get("status") or {}
    causes = (status.get("details") or {}).get("causes") or []
    return " ".join([status.get("message", ""), *(c.get("message", "") for c in causes)])


def test_the_corpus_is_the_collected_projects():
    assert PROJECTS == ["gie-v0.5.1/", "gie-v1.0.2/", "gie-v1.5.0/", "gie-v1.6.0/", "kubeai-v0.22.1/",
                        "llm-d-main-7edda66/", "llm-d-router-v0.10.0/"]
    assert len({r["source"]["file"] for r in _results()}) == 220
    assert not [r for r in _results() if r["result"] == "error"]


def test_every_listed_denial_names_its_reason():
    """Each entry says why: a conformance negative its upstream test, a defect what refuses it,
    with which message, and where upstream's rule is."""
    for key, entry in _listed().items():
        assert entry.get("reason") or (entry.get("refusedBy") and entry.get("message") and entry.get("source")), key


def test_denials_are_exactly_the_listed_ones():
    """No denial but those in expected-denials.yaml and upstream-defects.yaml, and each of them
    denied: a fix upstream (a defect gone) or here (a false denial gone) shows up as a change."""
    denied = {_key(r): r for r in _results() if r["result"] == "invalid"}
    listed = _listed()
    unexpected = {f"{f}[{i}]: {_denial_text(denied[(f, i)])[:200]}" for f, i in set(denied) - set(listed)}
    missing = {f"{f}[{i}]" for f, i in set(listed) - set(denied)}
    assert not unexpected and not missing, f"denied, not listed: {sorted(unexpected)}; listed, not denied: {sorted(missing)}"


def test_listed_denials_are_refused_with_the_listed_message():
    denied = {_key(r): r for r in _results() if r["result"] == "invalid"}
    for key, entry in _listed().items():
        if key in denied and entry.get("message"):
            assert entry["message"] in _denial_text(denied[key]), key


def test_no_policy_denies_an_upstream_document():
    """0 false denials by the policies: every listed denial is the apiserver's own (CRD schema,
    CEL rules, field validation), none is the webhook's."""
    by_policy = [f"{f}[{i}]" for f, i in (_key(r) for r in _results() if r["result"] == "invalid"
                                          and "admission webhook" in _denial_text(r))]
    assert by_policy == []


def test_no_warning_about_objects_the_input_does_not_contain():
    """Without --state the input is all there is: a pool, Service, Pod or KubeAI profile it does
    not contain is unknown, not missing (FINDINGS W1-W4; D2 is the same cause as a denial)."""
    about_absent = Counter()
    for result in _results():
        for warning in result.get("warnings") or ():
            if ABOUT_ABSENT_OBJECTS.search(warning):
                about_absent[f"{result['source']['file']}[{result['source']['index']}]: {warning[:120]}"] += 1
    assert not about_absent, f"{len(about_absent)} documents, e.g. {sorted(about_absent)[:5]}"


def test_gateway_gatewayclass_and_gie_v1alpha2_documents_are_validated_not_skipped():
    judged = Counter()
    for result in _results():
        doc = _document(result)
        api_version, kind = doc.get("apiVersion"), doc.get("kind")
        if (api_version, kind) in {("gateway.networking.k8s.io/v1", "Gateway"),
                                   ("gateway.networking.k8s.io/v1", "GatewayClass"),
                                   ("inference.networking.x-k8s.io/v1alpha2", "InferencePool"),
                                   ("inference.networking.x-k8s.io/v1alpha2", "InferenceModel")}:
            assert result["result"] in ("valid", "invalid"), (_key(result), result.get("reason"))
            judged[kind] += 1
    # FINDINGS S1 and S2: 28 Gateways and GatewayClasses, 4 pools and 21 models
    assert judged["Gateway"] + judged["GatewayClass"] == 28
    assert (judged["InferencePool"], judged["InferenceModel"]) == (4, 21)


def test_only_kinds_infergate_does_not_know_are_skipped():
    """S3 and S4: other projects' kinds and kustomize files; no near miss of a known kind."""
    skipped = [r for r in _results() if r["result"] == "skipped"]
    kinds = {(_document(r).get("apiVersion"), _document(r).get("kind")) for r in skipped}
    assert kinds <= NOT_SERVED, kinds - NOT_SERVED
    assert len(skipped) == 10
    assert not [r["reason"] for r in skipped if "did you mean" in r["reason"]]


def test_removed_gie_versions_warn_naming_their_successor():
    """removed-api-versions on every v1alpha2 InferencePool and InferenceModel, admitted."""
    for result in _results():
        doc = _document(result)
        if doc.get("apiVersion") == "inference.networking.x-k8s.io/v1alpha2" and doc["kind"] in SUCCESSORS:
            assert result["result"] == "valid", _key(result)
            assert any("removed upstream" in w and SUCCESSORS[doc["kind"]] in w for w in result["warnings"]), \
                (_key(result), result["warnings"])


def test_the_text_output_says_the_same():
    """The default output: one line per document, the same counts, the same exit status."""
    code, results, stderr = _json_run()
    done = _text_run()
    counts = Counter(r["result"] for r in results)
    summary = (f"{counts['valid']} valid, {counts['invalid']} invalid, {counts['skipped']} skipped, "
               f"0 errors, in 220 files")
    assert done.returncode == code
    assert done.stdout.splitlines()[-1] == summary and stderr.splitlines()[-1] == summary
    assert len(done.stdout.splitlines()) == len(results) + 1
