"""A lint of GitHub Actions workflow files, for ``.github/workflows/``.

actionlint does not install on the machines the tests run on (tests/repository/data/SOURCES.md
says why), so this is the fallback: the workflow JSON schema editors use (SchemaStore's,
vendored), then the checks of actionlint's that the schema cannot make and our workflows need:
every action pinned to a version, ``needs`` naming jobs that exist, ``steps.<id>.outputs.<name>``
naming an earlier step of the same job (and, for a ``run`` step, an output it writes), and each
``run`` script valid bash. Workflows are read as YAML 1.2, as GitHub reads them: ``on`` is a key,
not the boolean YAML 1.1 makes of it.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
from functools import cache

import jsonschema
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from tests.support.paths import REPO

SCHEMA = REPO / "tests" / "repository" / "data" / "github-workflow.json"
# owner/repo[/path]@ref, a local action (./path) or a container (docker://image)
_USES = re.compile(r"^(?:[\w.-]+/[\w.-]+(?:/[\w./-]+)?@(?P<ref>\S+)|\./\S+|docker://\S+)$")
# a ref that names at least a major version (v4, v4.1.2) or a commit
_PINNED = re.compile(r"^(?:v\d+(?:\.\d+)*|[0-9a-f]{40})$")
_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_STEP_OUTPUT = re.compile(r"\bsteps\.([\w-]+)\.outputs\.([\w-]+)")
# NAME=value lines a run script writes to $GITHUB_OUTPUT (echo "NAME=..." or printf 'NAME=...')
_OUTPUT_WRITE = re.compile(r"""^\s*(?:echo|printf)\s+["']?([A-Za-z_][\w-]*)=""", re.M)


def load(text: str) -> object:
    """The workflow as GitHub reads it (YAML 1.2)."""
    return YAML(typ="safe", pure=True).load(io.StringIO(text))


@cache
def _validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))


def _where(path) -> str:
    return ".".join(str(part) for part in path) or "(top)"


def _schema_problems(workflow: object) -> list[str]:
    errors = sorted(_validator().iter_errors(workflow), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{_where(e.absolute_path)}: {e.message}" for e in map(_closest, errors)]


def _closest(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For a oneOf/anyOf failure, the error of the alternative that came closest: the one that
    got deepest into the instance and failed on more than its type (a job that is not a
    reusable-workflow call fails that alternative on the key ``uses``, which says nothing)."""
    while error.context:
        error = max(error.context, key=lambda e: (not _wrong_type(e), len(e.absolute_path)))
    return error


def _wrong_type(error: jsonschema.ValidationError) -> bool:
    """The alternative wanted another type of value: a type error, or a list of strings (an
    enum, a pattern) offered a mapping or a list."""
    return error.validator == "type" or (
        error.validator in ("enum", "const", "pattern") and isinstance(error.instance, (dict, list)))


def _strings(value: object):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _bash_syntax(script: str) -> str | None:
    """bash's own syntax error for ``script`` (expressions stand in as a word), or None."""
    text = _EXPRESSION.sub("EXPRESSION", script)
    checked = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    if checked.returncode == 0:
        return None
    return checked.stderr.strip().replace("\n", " ") or f"bash -n exited {checked.returncode}"


def _job_problems(job_id: str, job: dict, job_ids: set[str]) -> list[str]:
    problems = []
    needs = job.get("needs", [])
    for needed in [needs] if isinstance(needs, str) else needs:
        if needed not in job_ids:
            problems.append(f"jobs.{job_id}.needs: no job {needed!r}")
    outputs_of: dict[str, set[str] | None] = {}  # step id -> what it writes (None: not known, an action's)
    for index, step in enumerate(job.get("steps", [])):
        where = f"jobs.{job_id}.steps.{index}"
        uses = step.get("uses")
        if uses is not None:
            match = _USES.match(uses)
            if not match:
                problems.append(f"{where}.uses: {uses!r} is not owner/repo@ref, ./path or docker://image")
            elif match["ref"] is not None and not _PINNED.match(match["ref"]):
                problems.append(f"{where}.uses: {uses!r} is not pinned to a version (@vN) or a commit")
        for text in _strings(step):
            for expression in _EXPRESSION.findall(text):
                for step_id, output in _STEP_OUTPUT.findall(expression):
                    if step_id not in outputs_of:
                        problems.append(f"{where}: steps.{step_id} is no earlier step of job {job_id}")
                    elif outputs_of[step_id] is not None and output not in outputs_of[step_id]:
                        problems.append(f"{where}: step {step_id} writes no output {output!r}"
                                        f" (it writes {sorted(outputs_of[step_id])})")
        if "run" in step:
            error = _bash_syntax(step["run"])
            if error:
                problems.append(f"{where}.run: {error}")
        if "id" in step:
            # what an action or a script that writes no NAME= line outputs is not known here
            outputs_of[step["id"]] = set(_OUTPUT_WRITE.findall(step.get("run", ""))) or None
    return problems


def lint(text: str) -> list[str]:
    """What is wrong with the workflow ``text``: one line each; empty when nothing is."""
    try:
        workflow = load(text)
    except YAMLError as error:
        return [f"not YAML: {error}".replace("\n", " ")]
    problems = _schema_problems(workflow)
    if problems:  # the checks below read the structure the schema promises
        return problems
    jobs = workflow["jobs"]
    for job_id, job in jobs.items():
        problems += _job_problems(job_id, job, set(jobs))
    return problems
