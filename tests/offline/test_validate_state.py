"""`infergate validate` and the cluster it judges against (issue #25, "no invented cluster offline"):
without --state the documents given are the state, and what they do not show is unknown (no
denial, no "(yet)" warning, one note naming it); --state DIR holds the kinds it shows whole and
skips what is no Kubernetes object; namespace-less state objects live in -n; a live cluster
(--kubeconfig) knows every kind, and an unreachable one is one line and exit 2."""

from __future__ import annotations

import contextlib
import io
import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.support.apiserver import FakeApiServer
from tests.support.paths import EXAMPLES, MANIFESTS
from webhook.cli import main

DEMO = ("--state", str(EXAMPLES / "state"))

POOL = """\
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata:
  name: qwen3-pool
spec:
  selector:
    matchLabels: {app: vllm-qwen3}
  targetPorts:
  - number: 8000
  endpointPickerRef:
    name: qwen3-epp
    port: {number: 9002}
"""

OBJECTIVE = """\
apiVersion: llm-d.ai/v1alpha2
kind: InferenceObjective
metadata:
  name: batch
spec:
  priority: -10
  poolRef:
    name: {pool}
"""

MODEL = """\
apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: llama
spec:
  features: [TextGeneration]
  url: hf://meta-llama/Llama-3.1-8B-Instruct
  engine: VLLM
  resourceProfile: {profile}
  minReplicas: 0
  maxReplicas: 3
"""

KUBEAI_CONFIG = """\
resourceProfiles:
  nvidia-gpu-l4:
    imageName: nvidia-gpu
    limits: {nvidia.com/gpu: "1"}
cacheProfiles: {}
"""

KUSTOMIZATION = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [pool.yaml]
"""


def validate(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", "-j", "1", *argv])
    return code, out.getvalue(), err.getvalue()


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def warnings_of(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("Warning: ")]


def note_of(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("note: ")]


# -- the inputs are the state ---------------------------------------------------------------------

def test_inputs_find_each_other_without_any_state(tmp_path):
    repo = write(tmp_path / "repo", {"pool.yaml": POOL, "objective.yaml": OBJECTIVE.format(pool="qwen3-pool")})
    code, out, err = validate(str(repo))
    assert code == 0, out + err
    assert "inferenceobjective.llm-d.ai/batch valid" in out
    assert not [w for w in warnings_of(err) if "not found" in w], err


def test_an_absent_pool_is_unknown_not_missing_and_counted_in_the_note(tmp_path):
    repo = write(tmp_path / "repo", {"objective.yaml": OBJECTIVE.format(pool="elsewhere")})
    code, out, err = validate(str(repo))
    assert code == 0, out + err
    assert warnings_of(err) == []
    [note] = note_of(err)
    assert note.startswith("note: not checked: ")
    assert "no InferencePool of inference.networking.k8s.io in the input (1 lookup)" in note
    assert note.endswith("pass --state DIR or --kubeconfig FILE")


def test_the_same_absent_pool_warns_when_the_state_holds_pools(tmp_path):
    state = write(tmp_path / "state", {"pool.yaml": POOL})
    repo = write(tmp_path / "repo", {"objective.yaml": OBJECTIVE.format(pool="elsewhere")})
    code, out, err = validate(str(repo), "--state", str(state))
    assert code == 0
    assert any('InferencePool "elsewhere" not found in namespace "default"' in w for w in warnings_of(err)), err
    assert note_of(err) == []


REWRITE = """\
apiVersion: llm-d.ai/v1alpha2
kind: InferenceModelRewrite
metadata:
  name: {name}
spec:
  poolRef: {{name: qwen3-pool}}
  rules:
  - matches: [{{model: {{value: qwen3}}}}]
    targets: [{{modelRewrite: qwen3-8b}}]
"""


def test_a_rule_reading_the_group_the_state_shows_is_checked_though_another_group_is_unknown(tmp_path):
    # the state holds llm-d.ai rewrites and none of the legacy group: the overlap among llm-d.ai
    # rewrites is a fact (inferencemodelrewrite-overlap reads one group per rule)
    state = write(tmp_path / "state", {"canary.yaml": REWRITE.format(name="canary")})
    repo = write(tmp_path / "repo", {"rewrite.yaml": REWRITE.format(name="main")})
    code, out, err = validate(str(repo), "--state", str(state))
    assert code == 0, out + err
    assert any('model "qwen3" is also rewritten by "canary"' in w for w in warnings_of(err)), err


def test_an_absent_resource_profile_is_not_denied_without_the_kubeai_config(tmp_path):
    repo = write(tmp_path / "repo", {"model.yaml": MODEL.format(profile="no-such-profile:1")})
    code, out, err = validate(str(repo))
    assert code == 0, out + err
    assert "model.kubeai.org/llama valid" in out
    [note] = note_of(err)
    assert "no KubeAI config in the input (1 object)" in note


def test_a_malformed_resource_profile_is_still_denied_without_the_config(tmp_path):
    # the rule that reads only the object is judged as always
    repo = write(tmp_path / "repo", {"model.yaml": MODEL.format(profile="nvidia-gpu-l4")})
    code, out, _ = validate(str(repo))
    assert code == 1 and "resourceProfile" in out


def test_the_kubeai_config_among_the_inputs_is_checked(tmp_path):
    repo = write(tmp_path / "repo", {"model.yaml": MODEL.format(profile="no-such-profile:1"),
                                     "kubeai-config.yaml": KUBEAI_CONFIG})
    code, out, err = validate(str(repo / "model.yaml"), "--state", str(repo / "kubeai-config.yaml"))
    assert code == 1 and "no-such-profile" in out, out + err
    code, out, err = validate(str(repo))  # among the inputs: the inputs are the state
    assert code == 1 and "no-such-profile" in out, out + err
    good = write(tmp_path / "good", {"model.yaml": MODEL.format(profile="nvidia-gpu-l4:1"),
                                     "kubeai-config.yaml": KUBEAI_CONFIG})
    code, out, err = validate(str(good / "model.yaml"), "--state", str(good / "kubeai-config.yaml"))
    assert code == 0, out + err


def test_the_demo_state_only_when_named():
    # the example manifests, judged with and without the demo cluster (examples/state)
    code, out, err = validate(str(MANIFESTS / "valid"), *DEMO, "-o", "json")
    with_demo = json.loads(out)
    code_alone, out_alone, err_alone = validate(str(MANIFESTS / "valid"), "-o", "json")
    alone = json.loads(out_alone)
    # the demo's InferenceServiceClass is annotated default: the order gets its class only there
    def classes(results):
        return {r["object"]["metadata"]["name"]: r["object"]["spec"].get("inferenceServiceClassName")
                for r in results if r.get("object") and r["object"]["kind"] == "InferenceService"}
    assert classes(with_demo)["qwen3-chat"] and not classes(alone)["qwen3-chat"]
    assert code == 0 and code_alone == 0
    [note] = note_of(err_alone)
    assert "InferenceServiceClass" in note and "InferencePool" in note
    # the demo holds classes and pools (whole): only what it does not show at all is unchecked
    assert not [n for n in note_of(err) if "InferenceServiceClass" in n or "InferencePool" in n]


# -- --state DIR ---------------------------------------------------------------------------------

def test_state_dir_skips_kustomization_and_helm_values_and_counts_them(tmp_path):
    state = write(tmp_path / "state", {"pool.yaml": POOL, "kustomization.yaml": KUSTOMIZATION,
                                       "values.yaml": "replicaCount: 2\nimage: {tag: v1}\n"})
    repo = write(tmp_path / "repo", {"objective.yaml": OBJECTIVE.format(pool="qwen3-pool")})
    code, out, err = validate(str(repo), "--state", str(state))
    assert code == 0, out + err
    assert not [w for w in warnings_of(err) if "not found" in w], err
    [note] = note_of(err)
    assert "--state: 2 documents skipped, not Kubernetes objects" in note


def test_a_kustomization_among_the_inputs_is_skipped_as_such(tmp_path):
    repo = write(tmp_path / "repo", {"kustomization.yaml": KUSTOMIZATION})
    code, out, _ = validate(str(repo))
    assert code == 0
    assert "skipped kustomize file, not applied" in out
    assert "no schema" not in out


def test_namespace_less_state_objects_are_found_in_default_and_under_n(tmp_path):
    state = write(tmp_path / "state", {"pool.yaml": POOL})
    objective = write(tmp_path / "repo", {"objective.yaml": OBJECTIVE.format(pool="qwen3-pool")}) / "objective.yaml"
    for namespace in (), ("-n", "ml-team"):
        code, out, err = validate(str(objective), "--state", str(state), *namespace)
        assert code == 0, out + err
        assert not [w for w in warnings_of(err) if "not found" in w], (namespace, err)
    # a pool placed in another namespace is not the objective's
    other = write(tmp_path / "other", {"pool.yaml": POOL.replace("  name: qwen3-pool\n",
                                                                  "  name: qwen3-pool\n  namespace: team-b\n")})
    code, out, err = validate(str(objective), "--state", str(other))
    assert any('not found in namespace "default"' in w for w in warnings_of(err)), err


def test_upstream_finding_f1_the_pool_without_a_namespace_is_found():
    upstream = Path(__file__).resolve().parents[1] / "upstream" / "gie-v1.0.2" / "config" / "manifests"
    code, out, err = validate(str(upstream / "inferenceobjective.yaml"), "--state",
                              str(upstream / "inferencepool-resources.yaml"))
    assert 'InferencePool "vllm-llama3-8b-instruct" not found' not in err
    assert code == 0, out + err


# -- outputs stay valid --------------------------------------------------------------------------

def test_the_note_keeps_the_machine_formats_valid(tmp_path):
    repo = write(tmp_path / "repo", {"objective.yaml": OBJECTIVE.format(pool="elsewhere")})
    code, out, err = validate(str(repo), "-o", "json")
    assert json.loads(out)[0]["allowed"] and len(note_of(err)) == 1
    code, out, err = validate(str(repo), "-o", "sarif")
    assert json.loads(out)["version"] == "2.1.0" and len(note_of(err)) == 1
    code, out, err = validate(str(repo), "-o", "junit")
    ET.fromstring(out)
    assert len(note_of(err)) == 1
    code, out, err = validate(str(repo), "-o", "github")
    [notice] = [line for line in out.splitlines() if line.startswith("::notice")]
    assert notice.startswith("::notice title=infergate validate::not checked: no ")


# -- a live cluster ------------------------------------------------------------------------------

def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(textwrap.dedent(f"""\
        apiVersion: v1
        kind: Config
        clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
        users: [{{name: u, user: {{token: t}}}}]
        contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
        current-context: x
        """))
    return path


def test_an_unreachable_cluster_is_one_line_and_exit_2(tmp_path):
    repo = write(tmp_path / "repo", {"objective.yaml": OBJECTIVE.format(pool="qwen3-pool")})
    config = kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")  # (discard: nothing listens)
    code, out, err = validate(str(repo), "--kubeconfig", str(config), "--timeout", "1")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"infergate: error: --kubeconfig {config}: "), err


def test_a_missing_kubeconfig_and_state_with_a_cluster_are_usage_errors(tmp_path):
    repo = write(tmp_path / "repo", {"objective.yaml": OBJECTIVE.format(pool="qwen3-pool")})
    code, _, err = validate(str(repo), "--kubeconfig", str(tmp_path / "none"))
    assert code == 2 and "no such file" in err
    code, _, err = validate(str(repo), "--kubeconfig", str(tmp_path / "none"), *DEMO)
    assert code == 2 and "not both" in err


def test_the_live_cluster_is_the_state_and_knows_every_kind(tmp_path):
    pool = {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": "qwen3-pool", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "targetPorts": [{"number": 8000}],
                     "endpointPickerRef": {"name": "epp", "port": {"number": 9002}}}}
    fake = FakeApiServer([pool], builtins=True)
    repo = write(tmp_path / "repo", {"found.yaml": OBJECTIVE.format(pool="qwen3-pool"),
                                     "absent.yaml": OBJECTIVE.format(pool="elsewhere").replace("name: batch",
                                                                                                "name: other")})
    with fake.running() as url:
        code, out, err = validate(str(repo), "--kubeconfig", str(kubeconfig(tmp_path / "kubeconfig", url)))
    assert code == 0, out + err
    warned = [w for w in warnings_of(err) if "not found" in w]
    assert len(warned) == 1 and "absent.yaml" in warned[0] and '"elsewhere"' in warned[0], err
    assert note_of(err) == []
    assert ("GET", "/apis/inference.networking.k8s.io/v1/inferencepools") in fake.requests
    assert not [r for r in fake.requests if r[0] != "GET"]  # read-only


def test_inputs_find_objects_in_lists_and_json(tmp_path):
    # the parent reads the inputs that may hold a looked-up kind: a List's items and JSON too
    import yaml

    pool = yaml.safe_load(POOL)
    listed = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [pool]})
    for name, text in (("list.yaml", listed), ("pool.json", json.dumps(pool))):
        repo = write(tmp_path / name, {name: text, "objective.yaml": OBJECTIVE.format(pool="qwen3-pool")})
        code, out, err = validate(str(repo))
        assert code == 0, out + err
        assert not [n for n in note_of(err) if "InferencePool" in n], (name, err)
    lonely = write(tmp_path / "lonely", {"objective.yaml": OBJECTIVE.format(pool="qwen3-pool")})
    assert "no InferencePool of inference.networking.k8s.io in the input (" in note_of(validate(str(lonely))[2])[0]
