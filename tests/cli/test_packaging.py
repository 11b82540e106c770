"""infergate as a tool: the wheel installs into a fresh virtual environment and its console
script runs from anywhere (what ``pipx install .`` and ``uvx --from . infergate`` do), with the
CRDs, policies and example state inside the wheel; and the repository works as a pre-commit hook."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tomllib
import venv
from pathlib import Path

import yaml

from tests.support.paths import REPO
from tests.support.wheel import build_wheel


def test_the_wheel_installs_in_a_fresh_venv_and_its_console_script_runs(tmp_path):
    wheel = build_wheel(tmp_path)
    env_dir = tmp_path / "tool-env"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    # the dependencies come from this environment's site-packages, added as a plain path: its own
    # .pth files (this checkout's editable install among them) are not processed, so the fresh
    # environment sees the wheel's infergate only
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    script = env_dir / "bin" / "infergate"
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    shown = subprocess.run([script, "--help"], capture_output=True, text=True, cwd=away, env=env, timeout=120)
    assert shown.returncode == 0 and "admission webhook and offline validator" in shown.stdout, shown.stderr
    where = subprocess.run([python, "-c", "import webhook; print(webhook.__file__)"], capture_output=True,
                           text=True, cwd=away, env=env, check=True).stdout.strip()
    assert where.startswith(site), where  # the wheel's copy, not this checkout
    manifest = REPO / "examples" / "manifests" / "valid" / "kubeai-model-vllm.yaml"
    validated = subprocess.run([script, "validate", str(manifest)], capture_output=True, text=True, cwd=away,
                               env=env, timeout=300)
    assert validated.returncode == 0, validated.stderr  # shipped CRDs, policies and state from the wheel
    assert validated.stdout.splitlines()[-1] == "1 valid, 0 invalid, 0 skipped, 0 errors, in 1 file"


def test_the_pre_commit_hooks_run_the_console_script(tmp_path):
    hooks = {hook["id"]: hook for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(hooks) == {"infergate-validate", "infergate-test"}
    for hook in hooks.values():
        assert hook["language"] == "python" and hook["entry"].split()[0] in scripts
    validate = hooks["infergate-validate"]
    assert validate["types_or"] == ["yaml", "json"] and validate.get("pass_filenames", True)
    # as pre-commit runs it: the entry, then the changed files (YAML that is no manifest among them)
    changed = [REPO / "examples" / "manifests" / "valid" / "kubeai-model-vllm.yaml", REPO / ".pre-commit-hooks.yaml",
               REPO / "policies" / "kubeai-model.yaml"]
    argv = [sys.executable, "-m", "webhook", *validate["entry"].split()[1:], *map(str, changed)]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^1 valid, 0 invalid, \d+ skipped, 0 errors, in 3 files$", done.stdout, re.M), done.stdout
    emptied = tmp_path / "emptied.yaml"  # a commit that comments a manifest out changes a file of no documents
    emptied.write_text("# apiVersion: v1\n")
    done = subprocess.run([*argv[:-len(changed)], str(emptied)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0 and done.stdout == "0 objects, in 1 file\n", done.stdout + done.stderr
