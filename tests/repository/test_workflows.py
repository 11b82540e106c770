"""The GitHub Actions workflows in ``.github/workflows/``: they lint clean, and the lint finds
what is broken in copies of them; CI runs the README's test command, ``helm lint`` and the
chart's tests; the release publishes exactly the image the chart's defaults pull (its "Names
and version" step is run here as GitHub runs it), and the documents name that image."""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlparse

import helm_python as helm
import pytest
import yaml
from packaging.specifiers import SpecifierSet

import webhook
from tests.repository import workflows
from tests.support.paths import CHART, REPO

WORKFLOWS = REPO / ".github" / "workflows"
CI = WORKFLOWS / "ci.yaml"
RELEASE = WORKFLOWS / "release.yaml"
README = REPO / "README.md"
INSTALL = REPO / "docs" / "install.md"
HELM = REPO / "docs" / "helm.md"

CHART_META = yaml.safe_load((CHART / "Chart.yaml").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
# the GitHub owner the chart's defaults are for: its home, https://github.com/<owner>/<repo>
OWNER = urlparse(CHART_META["home"]).path.split("/")[1]


def load(path: Path) -> dict:
    return workflows.load(path.read_text())


def step(job: dict, *, uses: str | None = None, id: str | None = None, run: str | None = None) -> dict:
    """The one step of ``job`` that uses the action ``uses`` (any version), has ``id``, or
    whose run script starts with ``run``."""
    found = [s for s in job["steps"]
             if (uses and s.get("uses", "").partition("@")[0] == uses) or (id and s.get("id") == id)
             or (run and s.get("run", "").lstrip().startswith(run))]
    assert len(found) == 1, (uses, id, run, found)
    return found[0]


# --- the lint -----------------------------------------------------------------------------


def test_both_workflows_are_there():
    assert {p.name for p in WORKFLOWS.iterdir()} >= {"ci.yaml", "release.yaml"}


@pytest.mark.parametrize("path", sorted(WORKFLOWS.glob("*.y*ml")), ids=lambda p: p.name)
def test_each_workflow_lints_clean(path):
    assert workflows.lint(path.read_text()) == []


# (workflow, text in it, what replaces it in the broken copy, a problem the lint must name)
BROKEN = {
    "not YAML": (CI, "jobs:\n", "jobs:\n\tx: 1\n", "not YAML"),
    "an unknown event": (CI, "  pull_request:\n", "  pull_requests:\n", "'pull_requests' was unexpected"),
    "no runs-on": (CI, "    runs-on: ubuntu-latest\n    timeout-minutes: 20\n", "    timeout-minutes: 20\n",
                   "jobs.chart: 'runs-on' is a required property"),
    "steps misspelt": (CI, "    steps:\n", "    step:\n", "('step' was unexpected)"),
    "a permission that does not exist": (CI, "contents: read", "contents: reed", "permissions.contents: 'reed'"),
    "a number where a string goes": (CI, 'python-version: "3.11"', "python-version: [3.11]",
                                      "python-version: [3.11] is not of type 'string'"),
    "an action without a version": (CI, "actions/checkout@v4", "actions/checkout", "'actions/checkout' is not"),
    "an action on a branch": (CI, "azure/setup-helm@v4", "azure/setup-helm@main", "is not pinned"),
    "needs of no job": (CI, "  chart:\n", "  chart:\n    needs: [tests]\n", "jobs.chart.needs: no job 'tests'"),
    "the output of no step": (RELEASE, "steps.release.outputs.image", "steps.relase.outputs.image",
                              "steps.relase is no earlier step of job publish"),
    "an output the step does not write": (RELEASE, "steps.release.outputs.charts", "steps.release.outputs.chart",
                                          "step release writes no output 'chart'"),
    "a run script bash cannot parse": (RELEASE, "              exit 1\n            fi\n", "              exit 1\n",
                                       "syntax error near unexpected token `done'"),
}


@pytest.mark.parametrize("case", BROKEN.values(), ids=BROKEN.keys())
def test_the_lint_finds_what_is_broken_in_a_copy(case, tmp_path):
    workflow, text, replacement, problem = case
    original = workflow.read_text()
    assert original.count(text) >= 1, f"{workflow.name} no longer holds {text!r}: update the case"
    broken = tmp_path / workflow.name
    broken.write_text(original.replace(text, replacement, 1))
    problems = workflows.lint(broken.read_text())
    assert any(problem in p for p in problems), problems


# --- CI -----------------------------------------------------------------------------------


def readme_test_command() -> str:
    """The command in the README's block after "Run the tests"."""
    after = README.read_text().partition("Run the tests")[2]
    (command,) = re.search(r"```sh\n(.*?)```", after, re.S)[1].strip().splitlines()
    return command


def test_ci_runs_the_readme_test_command_on_pushes_and_pull_requests():
    ci = load(CI)
    command = readme_test_command()
    assert f"exec {command}" in (REPO / ".ci" / "run").read_text().splitlines()  # the command .ci/run runs
    assert {"push", "pull_request"} <= set(ci["on"])
    assert ci["on"]["push"] is None and ci["on"]["pull_request"] is None  # every branch, every pull request
    test = ci["jobs"]["test"]
    assert test["steps"][0]["uses"].startswith("actions/checkout@")
    assert step(test, run=command)["run"].strip() == command
    python = step(test, uses="actions/setup-python")["with"]["python-version"]
    assert python in SpecifierSet(PROJECT["requires-python"])


def test_ci_lints_the_chart_with_helm_and_runs_the_charts_tests():
    chart = load(CI)["jobs"]["chart"]
    order = [s.get("uses", "").partition("@")[0] or s["run"].strip() for s in chart["steps"]]
    assert order.index("azure/setup-helm") < order.index("helm lint --strict ./chart")
    # linted by Helm 3 and Helm 4, the versions the chart supports
    assert step(chart, uses="azure/setup-helm")["with"] == {"version": "${{ matrix.helm }}"}
    assert sorted(v.split(".")[0] for v in chart["strategy"]["matrix"]["helm"]) == ["v3", "v4"]
    command = f"{readme_test_command()} tests/chart"
    assert command in order
    assert sorted(p.name for p in (REPO / "tests" / "chart").glob("test_*.py"))  # there are tests to run


# --- the release --------------------------------------------------------------------------


def run_names_step(tmp_path: Path, *, owner: str, tag: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """The release's "Names and version" step, run as GitHub runs a ``run`` step on Linux
    (``bash -e {0}``, in the checkout), with the environment its ``env`` asks for: the outcome
    and the outputs it wrote."""
    names = step(load(RELEASE)["jobs"]["publish"], id="release")
    assert names["env"] == {"OWNER": "${{ github.repository_owner }}", "TAG": "${{ github.ref_name }}"}
    script, outputs = tmp_path / "step.sh", tmp_path / "github_output"
    script.write_text(names["run"])
    outputs.write_text("")
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])  # a python3 with tomllib
    done = subprocess.run(["bash", "-e", str(script)], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={"PATH": path, "OWNER": owner, "TAG": tag, "GITHUB_OUTPUT": str(outputs)})
    return done, dict(line.split("=", 1) for line in outputs.read_text().splitlines())


def test_one_version_everywhere():
    assert CHART_META["version"] == CHART_META["appVersion"] == PROJECT["version"] == webhook.__version__


def test_the_release_publishes_the_image_the_chart_pulls_by_default(tmp_path):
    done, out = run_names_step(tmp_path, owner=OWNER, tag=f"v{CHART_META['appVersion']}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert out == {"image": VALUES["image"]["repository"], "version": CHART_META["appVersion"],
                   "charts": f"oci://ghcr.io/{OWNER}/charts"}
    build = step(load(RELEASE)["jobs"]["publish"], uses="docker/build-push-action")["with"]
    assert build["tags"] == "${{ steps.release.outputs.image }}:${{ steps.release.outputs.version }}"
    assert build["push"] is True
    assert set(build["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    # what the chart's default values run: that image at that tag
    with helm.Chart.load(CHART) as chart:
        rendered = chart.render({}, name="infergate", namespace="infergate-system")
    images = {container["image"]
              for path, text in rendered.items() if path.endswith(".yaml") and "/templates/tests/" not in path
              for obj in yaml.safe_load_all(text) if obj and obj["kind"] == "Deployment"
              for container in obj["spec"]["template"]["spec"]["containers"]}
    assert images == {f"{out['image']}:{out['version']}"}


def test_an_owner_in_capitals_still_names_a_valid_image(tmp_path):
    done, out = run_names_step(tmp_path, owner=OWNER.capitalize() + "-Org", tag=f"v{CHART_META['appVersion']}")
    assert done.returncode == 0, done.stderr
    assert out["image"] == f"ghcr.io/{OWNER}-org/infergate" and out["charts"] == f"oci://ghcr.io/{OWNER}-org/charts"


def test_a_tag_that_is_not_the_charts_version_stops_the_release(tmp_path):
    done, out = run_names_step(tmp_path, owner=OWNER, tag="v9.9.9")
    assert done.returncode == 1
    assert done.stdout.strip() == (f"::error::tag v9.9.9 is version 9.9.9, but chart/Chart.yaml version is"
                                   f" {CHART_META['version']}: bump them together")
    assert out == {}


def test_the_release_runs_on_version_tags_with_the_least_permissions():
    release = load(RELEASE)
    assert release["on"] == {"push": {"tags": ["v*"]}}
    assert fnmatch.fnmatch(f"v{CHART_META['appVersion']}", "v*")
    assert release["permissions"] == {"contents": "read", "packages": "write"}
    publish = release["jobs"]["publish"]
    for action in ("docker/setup-qemu-action", "docker/setup-buildx-action"):
        step(publish, uses=action)
    login = step(publish, uses="docker/login-action")["with"]
    assert login == {"registry": "ghcr.io", "username": "${{ github.actor }}", "password": "${{ secrets.GITHUB_TOKEN }}"}


def test_the_release_pushes_the_packaged_chart_as_an_oci_artifact(tmp_path):
    push = step(load(RELEASE)["jobs"]["publish"], run="set -euo pipefail\nhelm package")
    assert push["env"]["VERSION"] == "${{ steps.release.outputs.version }}"
    assert push["env"]["CHARTS"] == "${{ steps.release.outputs.charts }}"
    lines = push["run"].strip().splitlines()
    assert "helm package ./chart --destination dist" in lines
    (pushed,) = re.findall(r'^helm push "dist/(.+)" "\$CHARTS"$', push["run"], re.M)
    # Helm names the archive <name>-<version>.tgz: the file the step pushes
    archive = Path(helm.package(CHART, destination=tmp_path))
    assert archive.name == pushed.replace("$VERSION", CHART_META["version"])
    with helm.Chart.load_archive(archive.read_bytes()) as packaged:
        assert (packaged.name, packaged.version) == ("infergate", CHART_META["version"])


# --- the documents ------------------------------------------------------------------------

PUBLISHED_IMAGE = re.compile(r"ghcr\.io/([\w.-]+)/infergate(?::([\w.-]*\w))?")  # a tag ends before a full stop


@pytest.mark.parametrize("document", [README, INSTALL, HELM, REPO / "Dockerfile", CHART / "README.md"],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_the_documents_name_the_image_the_release_publishes(document):
    named = PUBLISHED_IMAGE.findall(document.read_text())
    assert all(owner == OWNER and tag in ("", CHART_META["appVersion"]) for owner, tag in named), named


def test_the_install_guide_says_which_image_the_chart_pulls_and_the_chart_reference_links_it():
    guide = INSTALL.read_text()
    assert f"{VALUES['image']['repository']}:{CHART_META['appVersion']}" in guide
    for command in ("docker build", "kind load docker-image", "ctr -n k8s.io images import",
                    "--set image.repository=", "--set image.tag=", "image.pullPolicy"):
        assert command in guide, command
    reference = HELM.read_text()
    assert "(install.md" in reference and ".github/workflows/release.yaml" in reference
    assert "(docs/install.md)" in README.read_text() and "(docs/helm.md)" in README.read_text()
