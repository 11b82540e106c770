"""One policy loader (``webhook.inputs.policies``) for every command: ``validate``, ``audit``,
``serve``, ``controller`` and ``native-policies`` refuse the same bad ``--policy-actions`` with
the same line, a loaded set carries the actions once, and ``infergate test`` reads a suite's
files and directories through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cel import EVALUATOR
from webhook import shipped_data
from webhook.cli import main
from webhook.inputs.policies import PolicySource, load_policy_directory, load_policy_set
from webhook.policy.actions import ActionsError
from webhook.policy.loader import PolicyLoadError

SAYS = "--policy-actions: no policy named 'kubeai-model-engin' (did you mean 'kubeai-model-engine'?)"


def setup_files(tmp_path: Path) -> dict[str, list[str]]:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: fake, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: t, user: {token: not-a-secret}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: t}}]\ncurrent-context: fake\n")
    return {"validate": ["validate", str(manifest)], "audit": ["audit", str(manifest)],
            "serve": ["serve", "--cert-dir", str(tmp_path / "certs")],
            "controller": ["controller", "--kubeconfig", str(kubeconfig)], "native-policies": ["native-policies"]}


@pytest.mark.parametrize("command", ["validate", "audit", "serve", "controller", "native-policies"])
def test_every_command_refuses_a_bad_policy_action_with_the_same_line(command, tmp_path, capsys):
    code = main(setup_files(tmp_path)[command] + ["--policy-actions", "kubeai-model-engin=Warn"])
    captured = capsys.readouterr()
    assert code == 2
    (line,) = captured.err.splitlines()
    assert line.startswith("infergate: error: ") and line.endswith(SAYS)
    assert not (tmp_path / "certs").exists()  # refused before anything was made


def test_a_set_carries_the_actions_and_a_directory_keeps_them_over_reloads():
    source = PolicySource(actions=("kubeai-model-engine=Warn@tier=lab",))
    policies = load_policy_set(source, EVALUATOR)
    assert policies.actions.describe() == source.overrides().describe()
    assert "kubeai-model-engine" in policies.names
    directory = load_policy_directory(source, EVALUATOR)
    assert directory.current().actions.describe() == policies.actions.describe()
    assert not load_policy_set(PolicySource(), EVALUATOR).actions


def test_errors_are_the_actions_or_the_files(tmp_path):
    with pytest.raises(ActionsError):
        PolicySource(actions=("kubeai-model-engine=Sometimes",)).overrides()
    broken = tmp_path / "policies"
    broken.mkdir()
    (broken / "bad.yaml").write_text("apiVersion: policy.infergate.io/v1alpha1\nkind: AdmissionPolicy\n"
                                     "metadata: {name: bad}\nspec: {matchConstraints: 7}\n")
    with pytest.raises(PolicyLoadError) as raised:
        load_policy_set(PolicySource(broken, ("bad=Warn",)), EVALUATOR)
    assert "bad.yaml" in str(raised.value)


def test_a_suite_reads_files_and_directories_through_the_same_loader(tmp_path):
    # a suite's ``policies:`` (files and directories, the native ones among them) and its
    # ``actions:`` in their data form: one set, the actions checked against its names
    examples = shipped_data.examples_dir().parent  # examples/manifests
    files = (examples / "policies" / "production-min-replicas.yaml", examples / "native-policies")
    source = PolicySource(paths=files, builtin=False, action_mapping={"production-min-replicas": ["Warn"]})
    policies = load_policy_set(source, EVALUATOR, native=True)
    assert policies.names == ["production-min-replicas"]  # no built-in policy, no native one as ours
    assert [p.name for p in policies.native.policies] == ["kubeai-model-limits"]
    assert policies.actions.describe() == {"production-min-replicas": [{"actions": ["Warn"]}]}
    assert load_policy_set(source, EVALUATOR).native is None  # serve's set leaves them to the apiserver
    with pytest.raises(ActionsError, match=r"^actions: no policy named 'kubeai-model-engine'"):
        load_policy_set(PolicySource(paths=files, builtin=False, action_mapping={"kubeai-model-engine": ["Warn"]}),
                        EVALUATOR)
    with pytest.raises(PolicyLoadError, match="missing.yaml: no such file or directory"):
        load_policy_set(PolicySource(paths=(*files, tmp_path / "missing.yaml")), EVALUATOR)
    with pytest.raises(PolicyLoadError, match="missing.yaml: no such file or directory"):  # not "no policy named"
        load_policy_set(PolicySource(paths=(tmp_path / "missing.yaml",), action_mapping={"p": ["Warn"]}), EVALUATOR)
