"""One nesting limit at every edge where documents enter (``webhook.document_limits``).

The C++ CEL runtime overflows its stack on values nested a few thousand levels deep (a
segfault). JSON edges (the server, the watch cache) decode with orjson, which refuses
documents nested past ``MAX_DEPTH``; YAML edges (``infergate validate``, the state
directory) check what they decoded, since YAML aliases build values deeper and larger
than the text: an alias chain, an alias inside its own anchor, aliases of aliases.
"""

from __future__ import annotations

import subprocess
import sys
import time

import orjson
import pytest

from webhook.document_limits import MAX_DEPTH, MAX_VALUES, tree_problem
from webhook.state import FileState, StateLoadError
from tests.support.paths import REPO
from tests.support.cel import EVALUATOR

HEAD = "apiVersion: kubeai.org/v1\nkind: Model\nmetadata:\n  name: crafted\n"
SPEC = "  url: hf://org/model\n  features: [TextGeneration]\n  engine: VLLM\n  resourceProfile: cpu:1\n"


def alias_chain(levels: int) -> str:
    """``spec.args`` nested ``levels`` deep through aliases, each line one level deep."""
    anchors = "".join(f"    l{i}: &l{i} [*l{i - 1}]\n" for i in range(1, levels))
    return f"{HEAD}spec:\n  chain:\n    l0: &l0 [x]\n{anchors}  args: *l{levels - 1}\n{SPEC}"


CRAFTED = {
    "alias chain 1,100 deep": (alias_chain(1100), f"nested more than {MAX_DEPTH} levels deep"),
    "alias inside its own anchor": (f"{HEAD}spec:\n  args: &self [*self]\n{SPEC}", "containing itself"),
    "billion laughs": (
        HEAD + "spec:\n  l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 9)) + SPEC,
        "values once YAML aliases are expanded",
    ),
}


def test_json_edges_share_the_limit():
    """The server and the watch cache decode with orjson: it refuses exactly past MAX_DEPTH."""
    assert orjson.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(orjson.JSONDecodeError, match="depth"):
        orjson.loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def test_tree_problem_counts_like_orjson():
    value: object = "x"
    for _ in range(MAX_DEPTH):
        value = [value]
    assert tree_problem(value) is None
    assert "nested more than" in tree_problem([value])
    assert tree_problem([[0] * 10] * (MAX_VALUES // 10)) is not None


@pytest.mark.parametrize("name", CRAFTED)
def test_validate_refuses_a_crafted_file_naming_it(tmp_path, name):
    text, expected = CRAFTED[name]
    path = tmp_path / "crafted.yaml"
    path.write_text(text)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "webhook", "validate", "-f", str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])  # an input error, not a crash
    assert done.stderr.startswith(f"infergate: error: {path}:1: document ") and expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert time.perf_counter() - started < 60


def test_validate_still_reads_aliases_within_the_limit(tmp_path):
    path = tmp_path / "aliases.yaml"
    path.write_text(f"{HEAD}spec:\n  args: &a [x]\n  url: hf://org/model\n  features: [TextGeneration]\n"
                    "  engine: VLLM\n  resourceProfile: cpu:1\n  env: {A: x}\n---\n"
                    + alias_chain(50).replace("name: crafted", "name: chain"))
    # Warn: the chain's anchors sit under spec.chain, a field the Model does not have (Strict, the
    # default, would refuse the document at decoding, before the nesting is judged)
    done = subprocess.run([sys.executable, "-m", "webhook", "validate", "-f", str(path), "-o", "json",
                           "--field-validation", "Warn"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    first, second = orjson.loads(done.stdout)
    assert second["warnings"][0] == 'unknown field "spec.chain"'
    assert first["allowed"] and first["object"]["spec"]["args"] == ["x"]
    # 50 levels through aliases: judged like any other nesting (args must be strings)
    assert second["status"]["details"]["causes"][0]["field"] == "spec.args[0]"


def _state(path):
    return FileState(path.parent)


def _policies(path):
    from webhook.policy import load_file

    return load_file(path, EVALUATOR)


def _crds(path):
    from webhook.schema import CRDRegistry

    return CRDRegistry.load([path], check=True, evaluator=EVALUATOR)


# every edge that reads YAML from files, each through ``webhook.documents``: the same limit;
# policy params and policy test suites reach CEL too, and ``--crd`` does not bypass it
EDGES = {"state directory": _state, "policy file": _policies, "CRD file": _crds}


@pytest.mark.parametrize("edge", EDGES)
@pytest.mark.parametrize("name", CRAFTED)
def test_every_file_edge_refuses_a_crafted_file_naming_it(tmp_path, edge, name):
    from webhook.policy import PolicyLoadError
    from webhook.schema import CRDLoadError

    text, expected = CRAFTED[name]
    path = tmp_path / "crafted.yaml"
    path.write_text(text)
    with pytest.raises((StateLoadError, PolicyLoadError, CRDLoadError), match=f"crafted.yaml:1: document .*{expected}"):
        EDGES[edge](path)


def test_recorded_case_files_refuse_a_crafted_file(tmp_path):
    from webhook.offline.recorded_suites import SuiteError, load_suite

    path = tmp_path / "crafted.yaml"
    path.write_text(CRAFTED["alias inside its own anchor"][0])
    with pytest.raises(SuiteError, match="containing itself"):
        load_suite(path, EVALUATOR)


def test_policy_params_from_a_crafted_config_map_are_an_unknown_config(tmp_path):
    """``paramRef.dataKey`` parses a ConfigMap's text from the cluster: through the one reader, so a
    value aliases make too deep never reaches CEL; the policy sees ``params == null``."""
    from tests.support.policy import chain, request
    from webhook.policy import PolicySet

    (tmp_path / "p.yaml").write_text(
        "apiVersion: policy.infergate.io/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: p}\nspec:\n"
        "  matchConstraints: {resourceRules: [{apiGroups: [kubeai.org], kinds: [Model]}]}\n"
        "  paramRef: {apiVersion: v1, kind: ConfigMap, name: limits, namespace: ops, dataKey: limits.yaml}\n"
        "  validations:\n  - expression: params == null\n    message: the params were read\n")
    crafted = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "namespace": "ops"},
               "data": {"limits.yaml": CRAFTED["alias chain 1,100 deep"][0]}}
    model = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "team"}}
    answer = chain(FileState(None, objects=[crafted]), PolicySet.load(tmp_path, builtin=False, evaluator=EVALUATOR), schema=False).admit(
        request(model), mutating=False)
    assert answer.allowed, answer.status
