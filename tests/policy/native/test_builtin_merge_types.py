"""The built-in kinds' merge types (``webhook/policy/native/builtin_merge_types.json.gz``): where
they come from, which kinds they hold, read only when a MutatingAdmissionPolicy's
ApplyConfiguration meets a built-in object; and the type check the apiserver does not do for
MutatingAdmissionPolicies. The merges themselves are checked against recorded answers
(``cases/mutating-builtin-merge.yaml``, ``test_recorded.py``)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from webhook.apiversion import api_version_of
from webhook.cli import main
from webhook.kinds import DECLARATIONS
from webhook.offline.builtin_kinds import is_builtin_group
from webhook.policy.native.builtin_merge_types import builtin_merge_types

REPO = Path(__file__).resolve().parents[3]


def validate(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", "-j", "1", *argv])
    return code, out.getvalue(), err.getvalue()


def test_the_table_says_where_it_comes_from() -> None:
    source = builtin_merge_types().source
    assert source["apiserver"].startswith("kube-apiserver v1.36.")
    assert "/openapi/v3/api/v1" in source["paths"] and "/openapi/v3/apis/apps/v1" in source["paths"]
    assert source["by"] == "scripts/builtin_merge_types.py" and (REPO / source["by"]).is_file()


def test_every_built_in_kind_of_the_registry_is_held() -> None:
    """Each kind ``webhook/kinds.py`` declares in a built-in group (the served ones are CRDs)."""
    table = builtin_merge_types()
    wanted = {(api_version_of(d.group, d.versions[0]), d.kind) for d in DECLARATIONS
              if d.versions and not d.served and is_builtin_group(api_version_of(d.group, d.versions[0]))}
    assert wanted and {k for k in wanted if table.root(*k) is None} == set()
    assert table.root("kubeai.org/v1", "Model") is None


def test_the_merge_types_follow_the_apiservers_openapi() -> None:
    """What the recorded cases rely on, read from the table: containers a list-map by name,
    Service ports by port and protocol (protocol's default TCP), a Deployment's selector atomic."""
    table = builtin_merge_types()
    pod_spec = table.root("v1", "Pod").atom().map.fields["spec"].atom().map
    containers = pod_spec.fields["containers"].atom().list
    assert (containers.atomic, containers.keys) == (False, ("name",))
    ports = table.root("v1", "Service").atom().map.fields["spec"].atom().map.fields["ports"].atom().list
    assert ports.keys == ("port", "protocol") and ports.element.atom().map.defaults["protocol"] == "TCP"
    selector = table.root("apps/v1", "Deployment").atom().map.fields["spec"].atom().map.fields["selector"]
    assert selector.atom().map.atomic is True


def test_the_table_is_not_read_at_start() -> None:
    """Neither ``serve`` (every module of ``webhook.server``, the admission chain) nor the offline
    commands import it; only an ApplyConfiguration that needs it does."""
    probe = ("import sys, importlib, pkgutil, webhook.server as server\n"
             "for module in pkgutil.iter_modules(server.__path__):\n"
             "    importlib.import_module('webhook.server.' + module.name)\n"
             "import webhook.admission.chain, webhook.policy.native.mutating, webhook.offline.validate, webhook.cli\n"
             "print('webhook.policy.native.builtin_merge_types' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"


MAP = textwrap.dedent("""\
    apiVersion: admissionregistration.k8s.io/v1
    kind: MutatingAdmissionPolicy
    metadata: {name: scale}
    spec:
      matchConstraints:
        resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
      reinvocationPolicy: Never
      mutations:
      - patchType: ApplyConfiguration
        applyConfiguration:
          expression: 'Object{spec: Object.spec{replicas: %s}}'
    ---
    apiVersion: admissionregistration.k8s.io/v1
    kind: MutatingAdmissionPolicyBinding
    metadata: {name: scale}
    spec: {policyName: scale}
    """)

DEPLOYMENT = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: default}
    spec:
      replicas: 1
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec: {containers: [{name: app, image: app:1}]}
    """)


def test_no_type_check_of_a_mutating_policy_at_load(tmp_path: Path) -> None:
    """kube-apiserver v1.36 type-checks no MutatingAdmissionPolicy against its kinds (no
    ``status``, no warning on create: docs/native-policies.md): a field the Deployment lacks
    loads without a word and fails only when it runs, in the apiserver's words."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "map.yaml").write_text(MAP % "object.spec.nothere")
    (tmp_path / "deployment.yaml").write_text(DEPLOYMENT)
    code, out, err = validate("-o", "json", "--policies", str(tmp_path / "policies"), str(tmp_path / "deployment.yaml"))
    assert code == 1, err
    assert "Warning" not in err and "map.yaml" not in err
    [result] = json.loads(out)
    assert result["status"]["message"] == (
        "policy 'scale' with binding 'scale' denied request: expression 'Object{spec: Object.spec{replicas: "
        "object.spec.nothere}}' resulted in error: no such key: nothere")


def test_a_built_in_objects_apply_configuration_is_merged(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "map.yaml").write_text(MAP % "3")
    (tmp_path / "deployment.yaml").write_text(DEPLOYMENT)
    code, out, err = validate("-o", "json", "--policies", str(tmp_path / "policies"), str(tmp_path / "deployment.yaml"))
    assert code == 0, err
    [result] = json.loads(out)
    assert result["object"]["spec"]["replicas"] == 3
    assert result["object"]["spec"]["template"]["spec"]["containers"] == [{"name": "app", "image": "app:1"}]
    assert "not checked" not in err


def test_the_table_travels_in_the_wheel(tmp_path: Path) -> None:
    import zipfile

    from tests.support.wheel import build_wheel

    names = zipfile.ZipFile(build_wheel(tmp_path)).namelist()
    assert "webhook/policy/native/builtin_merge_types.json.gz" in names


def test_an_apply_configuration_keeps_the_objects_group_version_and_kind(tmp_path: Path) -> None:
    """The apiserver sets the request object's group, version and kind on the patch whatever the
    expression gives (``patchObject.SetGroupVersionKind`` in the mutating plugin's ``smd.go``)."""
    (tmp_path / "policies").mkdir()
    policy = MAP.replace("Object{spec:", 'Object{apiVersion: "apps/v9", kind: "Other", spec:') % "3"
    (tmp_path / "policies" / "map.yaml").write_text(policy)
    (tmp_path / "deployment.yaml").write_text(DEPLOYMENT)
    code, out, err = validate("-o", "json", "--policies", str(tmp_path / "policies"), str(tmp_path / "deployment.yaml"))
    assert code == 0, err
    [result] = json.loads(out)
    assert (result["object"]["apiVersion"], result["object"]["kind"]) == ("apps/v1", "Deployment")
    assert result["object"]["spec"]["replicas"] == 3
