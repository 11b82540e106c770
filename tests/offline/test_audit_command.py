"""``infergate audit`` on real dumps (the upstream KubeAI catalogue as a cluster stores it) and
on a live apiserver: outputs, exit codes, the impact preview."""

from __future__ import annotations

import hashlib
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from webhook.cli import main
from webhook.schema import CRDRegistry
from tests.support.cel import EVALUATOR
from tests.support.paths import KUBEAI_V0_12_CRD, POLICIES, REPO, THIRD_PARTY_CRDS, UPSTREAM_CRDS

CATALOGUE = REPO / "tests" / "upstream" / "kubeai-v0.22.1" / "manifests" / "models"


def cluster_models() -> list[dict]:
    """The 48 catalogue Models as ``kubectl get models -A -o yaml`` shows them: spread over two
    namespaces, with uid, resourceVersion, timestamps and status."""
    items = []
    for i, file in enumerate(sorted(CATALOGUE.glob("*.yaml"))):
        model = yaml.safe_load(file.read_text())
        uid = hashlib.sha256(file.name.encode()).hexdigest()
        model["metadata"].update(namespace=("team-a", "team-b")[i % 2], resourceVersion=str(1000 + i), generation=1,
                                 uid=f"{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}",
                                 creationTimestamp="2026-03-01T10:00:00Z")
        model["status"] = {"replicas": {"all": 0, "ready": 0}}
        items.append(model)
    return items


def write_list(path: Path, items: list[dict]) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                    "items": items}, sort_keys=False))
    return path


def broken(items: list[dict]) -> dict[str, str]:
    """Two Models broken as an older webhook-less cluster would keep them: name -> the policy."""
    by_name = {m["metadata"]["name"]: m for m in items}
    by_name["bge-embed-text-cpu"]["spec"]["engine"] = "OLlama"  # an hf:// URL with OLlama
    by_name["faster-whisper-medium-en-cpu"]["spec"]["url"] = "ollama://whisper"  # ollama:// with FasterWhisper
    return {"bge-embed-text-cpu": "kubeai-model-engine", "faster-whisper-medium-en-cpu": "kubeai-model-engine"}


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["audit", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_clean_dump_passes_and_exits_0(tmp_path, capsys):
    code, out, err = run(capsys, write_list(tmp_path / "dump.yaml", cluster_models()))
    assert code == 0, err
    # no table rows, only the summary: every policy that applies to each Model passes
    assert out.startswith("48 objects audited: 0 denied, 0 warned, 0 audited; results: ")
    assert out.endswith(" pass, 0 fail, 0 warn, 0 error\n") and len(out.splitlines()) == 1


def test_json_names_each_failing_object_and_its_policy_and_exits_1(tmp_path, capsys):
    items = cluster_models()
    expected = broken(items)
    code, out, err = run(capsys, write_list(tmp_path / "dump.yaml", items), "-o", "json")
    assert code == 1
    results = json.loads(out)
    assert all(set(r) == {"resource", "policy", "rule", "result", "message"} for r in results)
    failing = {(r["resource"]["name"], r["policy"]) for r in results if r["result"] == "fail"}
    assert failing == set(expected.items())
    first = next(r for r in results if r["result"] == "fail")
    assert set(first["resource"]) == {"apiVersion", "kind", "namespace", "name"}
    assert first["rule"].startswith("validations[")
    assert "48 objects audited: 2 denied" in err


def test_a_dump_reads_the_same_as_a_list_multi_document_yaml_json_or_a_directory(tmp_path, capsys):
    items = cluster_models()
    broken(items)
    listed = run(capsys, write_list(tmp_path / "dump.yaml", items), "-o", "json")[1]
    (tmp_path / "multi.yaml").write_text(yaml.safe_dump_all(items))
    (tmp_path / "dir" / "nested").mkdir(parents=True)
    for i, item in enumerate(items):
        (tmp_path / "dir" / "nested" / f"{i:02d}.json").write_text(json.dumps(item))
    assert run(capsys, tmp_path / "multi.yaml", "-o", "json")[1] == listed
    assert run(capsys, tmp_path / "dir", "-o", "json")[1] == listed


def test_junit_has_one_case_per_object_and_a_failure_per_denied_one(tmp_path, capsys):
    items = cluster_models()
    expected = broken(items)
    code, out, _ = run(capsys, write_list(tmp_path / "dump.yaml", items), "-o", "junit")
    assert code == 1
    root = ET.fromstring(out)
    cases = root.findall(".//testcase")
    assert len(cases) == 48
    failed = {c.get("name").split("/")[-1] for c in cases if c.find("failure") is not None}
    assert failed == set(expected)
    line = int(next(c for c in cases if c.find("failure") is not None).get("line"))
    assert line > 1  # the object's own place in the List
    times = [float(c.get("time")) for c in cases]  # each object's audit, measured (in milliseconds: some are 0.000)
    # each attribute is rounded to the millisecond: the sum of 48 rounded times may differ from
    # the rounded total by half a millisecond per case
    assert sum(times) > 0 and float(root.get("time")) == pytest.approx(sum(times), abs=0.0005 * (len(cases) + 1))


def test_openreports_output_is_the_reports_the_apiserver_would_store(tmp_path, capsys):
    items = cluster_models()
    expected = broken(items)
    code, out, _ = run(capsys, write_list(tmp_path / "dump.yaml", items), "-o", "openreports")
    assert code == 1
    listed = yaml.safe_load(out)
    assert listed["kind"] == "List" and len(listed["items"]) == 48
    crds = CRDRegistry.load([THIRD_PARTY_CRDS / "reports"], evaluator=EVALUATOR)
    for report in listed["items"]:
        outcome = crds.handle("CREATE", report, namespace=report["metadata"]["namespace"])
        assert outcome.allowed, outcome.status
        assert report["metadata"]["name"] == f"infergate-{report['scope']['uid']}"
    failing = {r["scope"]["name"] for r in listed["items"] if r["summary"]["fail"]}
    assert failing == set(expected)


def test_an_object_stored_before_its_crd_tightened_fails_crd_schema(tmp_path, capsys):
    items = cluster_models()[:3]
    items[1]["spec"]["engine"] = "TGI"
    items[2]["spec"]["minReplicas"] = -1
    code, out, _ = run(capsys, write_list(tmp_path / "dump.yaml", items), "-o", "json")
    assert code == 1
    schema = {(r["resource"]["name"], r["rule"]) for r in json.loads(out)
              if r["policy"] == "crd-schema" and r["result"] == "fail"}
    assert schema == {(items[1]["metadata"]["name"], "spec.engine"), (items[2]["metadata"]["name"], "spec.minReplicas")}


def with_actions(tmp_path: Path, policy: str, actions: str) -> Path:
    """The shipped policies with ``policy`` given ``validationActions: actions``."""
    directory = tmp_path / f"policies-{actions.strip('[]').replace(', ', '-')}"
    shutil.copytree(POLICIES, directory, ignore=shutil.ignore_patterns("tests"))
    file = directory / "kubeai-model.yaml"
    text = file.read_text()
    marker = f"  name: {policy}\nspec:\n"
    assert marker in text
    file.write_text(text.replace(marker, f"{marker}  validationActions: {actions}\n"))
    return directory


def test_a_failure_under_warn_or_audit_is_reported_without_failing_the_run(tmp_path, capsys):
    items = cluster_models()
    broken(items)
    dump = write_list(tmp_path / "dump.yaml", items)
    code, out, _ = run(capsys, dump, "--policies", with_actions(tmp_path, "kubeai-model-engine", "[Warn]"))
    assert code == 0
    assert out.count("\nwarn ") == 2 and "2 warned" in out
    code, out, _ = run(capsys, dump, "--policies", with_actions(tmp_path, "kubeai-model-engine", "[Audit]"))
    assert code == 0
    assert out.count("\naudit ") == 2 and "0 denied, 0 warned, 2 audited" in out
    code, _, _ = run(capsys, dump, "--policy-actions", "kubeai-model-engine=Warn@team=x")  # selects no namespace
    assert code == 1


@pytest.mark.parametrize("argv, message", [
    ([], "audit: no input"),
    (["{missing}"], "no such file"),
    (["{broken}"], "invalid YAML"),
    (["{dump}", "--kubeconfig", "{dump}"], "not both"),
    (["{dump}", "--policies", "{missing}"], "--policies"),
    (["--kubeconfig", "{missing}"], "--kubeconfig"),
    (["{dump}", "--policy-actions", "nope=Warn"], "no policy named 'nope'"),
    (["{dump}", "--baseline-policies", "{policies}", "-o", "junit"], "impact preview"),
])
def test_usage_and_read_errors_exit_2_with_one_line(tmp_path, capsys, argv, message):
    paths = {"missing": tmp_path / "missing.yaml", "broken": tmp_path / "broken.yaml",
             "dump": write_list(tmp_path / "dump.yaml", cluster_models()[:2]), "policies": POLICIES}
    paths["broken"].write_text("items: [unclosed\n")
    code, out, err = run(capsys, *[a.format(**paths) for a in argv])
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err and err.startswith("infergate: error: ")


# -- the impact preview ------------------------------------------------------------------------
def without_vllm_text_generation(tmp_path: Path) -> Path:
    """A policy edit: the engine matrix no longer lets VLLM serve TextGeneration, and denies a
    feature the engine does not serve (the shipped rule only warns)."""
    directory = tmp_path / "new-policies"
    shutil.copytree(POLICIES, directory, ignore=shutil.ignore_patterns("tests"))
    file = directory / "kubeai-model.yaml"
    old = "{'TextGeneration': ['OLlama', 'VLLM']"
    assert old in file.read_text()
    policies = list(yaml.safe_load_all(file.read_text().replace(old, "{'TextGeneration': ['OLlama']")))
    (matrix,) = [p for p in policies if p["metadata"]["name"] == "kubeai-model-engine-matrix"]
    (unserved,) = [w for w in matrix["spec"]["warnings"] if w["expression"] == "size(variables.unserved) == 0"]
    matrix["spec"]["warnings"].remove(unserved)
    matrix["spec"]["validations"].append(unserved)
    file.write_text(yaml.safe_dump_all(policies, sort_keys=False))
    return directory


def changed_by_the_edit(items: list[dict]) -> set[tuple[str, str]]:
    """What the edit should deny, read from the objects themselves: (namespace, name)."""
    return {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in items
            if m["spec"].get("engine") == "VLLM" and "TextGeneration" in m["spec"].get("features", [])}


def preview_sections(out: str) -> dict[str, set[tuple[str, str]]]:
    sections: dict[str, set[tuple[str, str]]] = {}
    heading = ""
    for line in out.splitlines():
        if not line.startswith(" ") and ": " in line and " objects compared" not in line:
            heading = line
            sections[heading] = set()
        elif line.startswith("  ") and not line.startswith("    "):
            namespace, name = line.split()[1].split("/")
            sections[heading].add((namespace, name))
    return sections


def test_the_impact_preview_names_exactly_the_objects_a_policy_edit_denies(tmp_path, capsys):
    items = cluster_models()
    broken(items)  # already denied before the edit: never "newly" anything
    items_by = {m["metadata"]["name"]: m for m in items}
    expected = changed_by_the_edit(items) - {("team-a", "bge-embed-text-cpu")}
    assert ("team-b", "faster-whisper-medium-en-cpu") not in expected
    dump = write_list(tmp_path / "dump.yaml", items)
    new = without_vllm_text_generation(tmp_path)
    code, out, _ = run(capsys, dump, "--policies", new, "--baseline-policies", POLICIES)
    assert code == 1
    sections = preview_sections(out)
    by_namespace = {ns: {n for s, n in expected if s == ns} for ns in ("team-a", "team-b")}
    assert sections == {f"newly denied: {len(names)} Models in {ns}": {(ns, n) for n in names}
                        for ns, names in by_namespace.items() if names}
    assert out.splitlines()[-1] == f"48 objects compared: {len(expected)} newly denied"
    assert "engines that do: \"OLlama\"" in out  # each named with the new failure
    assert all(items_by[name]["spec"]["engine"] == "VLLM" for _, name in expected)
    # the other way round: the same objects, no longer denied; exit 0
    code, out, _ = run(capsys, dump, "--policies", POLICIES, "--baseline-policies", new, "-o", "json")
    assert code == 0
    changes = json.loads(out)
    assert {(c["change"], c["resource"]["namespace"], c["resource"]["name"]) for c in changes} == {
        ("no longer denied", ns, name) for ns, name in expected}


def test_an_edit_that_changes_no_verdict_lists_nothing(tmp_path, capsys):
    items = cluster_models()
    dump = write_list(tmp_path / "dump.yaml", items)
    code, out, _ = run(capsys, dump, "--policies", POLICIES, "--baseline-policies", POLICIES)
    assert (code, out) == (0, "48 objects compared: no verdict changes\n")
    # a Warn-only edit: warned changes are listed, denials unchanged, exit 0
    broken(items)
    dump = write_list(tmp_path / "dump.yaml", items)
    code, out, _ = run(capsys, dump, "--policies", with_actions(tmp_path, "kubeai-model-engine", "[Warn]"),
                       "--baseline-policies", POLICIES)
    assert code == 0
    sections = preview_sections(out)
    assert sections == {"no longer denied: 1 Model in team-a": {("team-a", "bge-embed-text-cpu")},
                        "no longer denied: 1 Model in team-b": {("team-b", "faster-whisper-medium-en-cpu")},
                        "newly warned: 1 Model in team-a": {("team-a", "bge-embed-text-cpu")},
                        "newly warned: 1 Model in team-b": {("team-b", "faster-whisper-medium-en-cpu")}}


# -- the live cluster --------------------------------------------------------------------------
KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {{server: "{server}"}}
users:
- name: auditor
  user: {{}}
contexts:
- name: fake
  context: {{cluster: fake, user: auditor}}
current-context: fake
"""


def test_the_live_cluster_is_read_with_its_own_crds_and_judged_without_a_write(tmp_path, capsys):
    from tests.support.apiserver import FakeApiServer

    items = cluster_models()
    expected = broken(items)
    api = FakeApiServer(builtins=True)
    # the cluster serves KubeAI v0.12.0's Model CRD, whose features enum has no Reranking: the
    # cluster's CRD judges (the bundled current one would pass bge-rerank-base-cpu)
    api.put(yaml.safe_load(KUBEAI_V0_12_CRD.read_text()), "customresourcedefinitions")
    for model in items:
        api.put(model, "models")
    api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}, "namespaces")
    with api.running() as url:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(KUBECONFIG.format(server=url))
        code, out, err = run(capsys, "--kubeconfig", kubeconfig, "-o", "json", "--timeout", "30")
    assert code == 1, err
    results = json.loads(out)
    assert {r["resource"]["name"] for r in results} == {m["metadata"]["name"] for m in items}
    assert {(r["resource"]["name"], r["policy"]) for r in results if r["result"] == "fail"} == \
        set(expected.items()) | {("bge-rerank-base-cpu", "crd-schema")}
    offline = run(capsys, write_list(tmp_path / "dump.yaml", items), "-o", "json")[1]
    assert ("bge-rerank-base-cpu", "crd-schema", "pass") in {
        (r["resource"]["name"], r["policy"], r["result"]) for r in json.loads(offline)}
    assert [path for method, path in api.requests if method != "GET"] == []  # read-only


def test_an_unreachable_cluster_is_one_line_and_exit_2(tmp_path, capsys):
    import socket

    with socket.socket() as probe:  # a port nobody listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(server=f"http://127.0.0.1:{port}"))
    code, out, err = run(capsys, "--kubeconfig", kubeconfig, "--timeout", "1")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith(f"infergate: error: --kubeconfig {kubeconfig}: the cluster was not "
                                                   "read within 1s: ")


def test_a_live_audit_watches_each_audited_kind_once_at_its_newest_version():
    from webhook.audit import Auditor
    from webhook.apiversion import group_of, version_of
    from webhook.inputs.watches import audited_watches, lookup_watches
    from webhook.policy import PolicySet
    from webhook.schema.bundled import version_priority as version_key
    from webhook.state import FileState

    registry = CRDRegistry.shipped(evaluator=EVALUATOR)
    kinds = Auditor(registry, PolicySet.load(POLICIES, evaluator=EVALUATOR), FileState(objects=[])).audited_kinds()
    watches, audited = audited_watches(kinds)
    keys = [(group_of(w.api_version), w.kind) for w in audited]
    assert len(keys) == len(set(keys)) == len({(group_of(api), kind) for api, kind, _, _ in kinds})
    # one watch per group and kind in the cache too (two would overwrite each other's objects)
    every = [(group_of(w.api_version), w.kind, w.field_selector) for w in watches]
    assert len(every) == len(set(every))
    for watch in audited:
        if watch in lookup_watches():
            continue  # the webhook's own watch of the kind
        versions = sorted((k.version for k in kinds if (k.group, k.kind) == (group_of(watch.api_version), watch.kind)),
                          key=version_key, reverse=True)
        assert [version_of(v) for v in watch.api_versions] == versions
    assert ("kubeai.org", "Model") in keys
    assert version_key("v1") > version_key("v1beta2") > version_key("v1beta1") > version_key("v1alpha2")


def test_crd_adds_to_the_bundled_crds_in_place_of_the_one_of_its_name(tmp_path, capsys):
    # a Model CRD that no longer serves engine OLlama, given with --crd: the Models are judged
    # against it, and the InferencePool still against the bundled CRD of its own name
    crd_file = next(UPSTREAM_CRDS.glob("kubeai.org_models_*.yaml"))
    crd = yaml.safe_load(crd_file.read_text())
    engine = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["engine"]
    engine["enum"] = [e for e in engine["enum"] if e != "OLlama"]
    tightened = tmp_path / "models-crd.yaml"
    tightened.write_text(yaml.safe_dump(crd, sort_keys=False))
    models = cluster_models()
    ollama = {m["metadata"]["name"] for m in models if m["spec"]["engine"] == "OLlama"}
    pool = {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": "pool", "namespace": "team-a", "uid": "0f0f0f0f-0000-4000-8000-000000000001",
                         "resourceVersion": "7"},
            "spec": {"selector": {"matchLabels": {"app": "vllm"}}, "targetPorts": [{"number": 0}],
                     "endpointPickerRef": {"name": "epp", "port": {"number": 9002}}}}
    code, out, err = run(capsys, write_list(tmp_path / "dump.yaml", [*models, pool]), "--crd", tightened, "-o", "json")
    assert code == 1, err
    failed = {(r["resource"]["name"], r["rule"]) for r in json.loads(out)
              if r["policy"] == "crd-schema" and r["result"] == "fail"}
    assert ollama and {name for name, rule in failed if rule == "spec.engine"} == ollama
    assert ("pool", "spec.targetPorts[0].number") in failed


def test_two_different_crds_of_one_name_are_a_usage_error_naming_both(tmp_path, capsys):
    crd_file = next(UPSTREAM_CRDS.glob("kubeai.org_models_*.yaml"))
    other = tmp_path / "other.yaml"
    other.write_text(KUBEAI_V0_12_CRD.read_text())
    code, _, err = run(capsys, write_list(tmp_path / "dump.yaml", cluster_models()[:1]),
                       "--crd", crd_file, "--crd", other)
    assert code == 2
    assert "two different CustomResourceDefinitions named 'models.kubeai.org'" in err
    assert str(crd_file) in err and str(other) in err
