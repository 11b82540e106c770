"""The loop closed offline: the shipped policies' generated ValidatingAdmissionPolicies, judged by
infergate's own VAP evaluator, answer the example manifests as the AdmissionPolicies do; their
generated MutatingAdmissionPolicies, run by its own MAP evaluator, mutate them as the
AdmissionPolicies' exported mutations do.

Both sides go through the public commands only:

- ``infergate native-policies -o yaml`` writes the objects (stderr names the rules kept back);
  the ValidatingAdmissionPolicies and their bindings are written to a folder (for the verdicts),
  and all of them, MutatingAdmissionPolicies too, to another (for the admitted objects);
- ``infergate validate --state examples/state --explain -o json`` judges the examples with the
  shipped AdmissionPolicies: ``explain`` names every rule that failed (``validations[i]`` /
  ``warnings[i]`` with verdict ``false``);
- ``infergate validate --policies FOLDER --state examples/state -o json`` judges them with the
  generated VAPs (and the Python policy, which no ``--policies`` folder replaces: it is kept back
  whole, ``inferenceservice-max-parameter-count: *``, and denies through the webhook, not a VAP).

For every rule the generator exported the verdict is the same, and a denial's or warning's
message after the apiserver's prefix is the rule's message as the AdmissionPolicy gives it
(without the ``fieldPath`` the webhook sets beside it: a VAP's Validation has none).

No difference had to be accounted for: the examples' verdicts do not depend on the shipped
mutations (``kubeai-model-defaults``, ``inferenceservice-defaults``); were one to, the assertion
below names the document and the rules. For the admitted objects, a mutation kept back (it reads
lookups) is what the generated MAPs cannot give: its patch, as ``--explain`` shows the
AdmissionPolicy computed it, is applied to the MAPs' object before comparing.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
from collections import Counter
from functools import cache

import jsonpatch
import pytest
import yaml

from webhook.cli import main
from tests.support.paths import EXAMPLES, MANIFESTS

FOLDERS = ("valid", "denied-by-webhook", "warned-by-webhook")
# the examples are the seed era's KubeAI v0.12.0 Models (tests/examples/test_examples.py)
COMMON = ["--kubeai-crd", "v0.12.0", "--state", str(EXAMPLES / "state")]
DENIED = re.compile(r"^[^ ]+ \"[^\"]*\" is forbidden: ValidatingAdmissionPolicy '(?P<policy>[^']+)' with binding "
                    r"'(?P<binding>[^']+)' denied request: (?P<message>.*)$", re.S)
WARNED = re.compile(r"^Validation failed for ValidatingAdmissionPolicy '(?P<policy>[^']+)' with binding "
                    r"'(?P<binding>[^']+)': (?P<message>.*)$", re.S)
KEPT = re.compile(r"^(?P<policy>[^:]+): (?P<rule>[^:]+): stays with the webhook: (?P<reason>.+)$")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@cache
def generated() -> tuple[list[dict], frozenset[tuple[str, str]]]:
    """The generated objects, and the (policy, rule) pairs kept back (rule ``*``: all of it)."""
    code, out, err = run("native-policies", "-o", "yaml")
    assert code == 0, err
    kept = set()
    for line in err.splitlines():
        found = KEPT.match(line)
        assert found, f"every stderr line names a kept rule: {line!r}"
        kept.add((found["policy"], found["rule"]))
    return [d for d in yaml.safe_load_all(out) if d], frozenset(kept)


def exported(policy: str, rule: str) -> bool:
    kept = generated()[1]
    return (policy, rule) not in kept and (policy, "*") not in kept


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> list[tuple[dict, dict]]:
    """(the AdmissionPolicies' answer, the generated VAPs' answer) per example document."""
    folder = tmp_path_factory.mktemp("generated-vaps")
    vaps = [o for o in generated()[0]
            if o["kind"] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")]
    assert {o["kind"] for o in generated()[0]} - {o["kind"] for o in vaps} == {
        "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
    (folder / "generated.yaml").write_text(yaml.safe_dump_all(vaps, sort_keys=False))
    paths = [str(MANIFESTS / f) for f in FOLDERS]
    _, shipped, err = run("validate", *COMMON, "--explain", "-o", "json", "-f", *paths)
    _, native, err_native = run("validate", *COMMON, "--policies", str(folder), "-o", "json", "-f", *paths)
    shipped, native = json.loads(shipped), json.loads(native)
    assert "not checked" not in err_native, err_native
    assert [a["source"] for a in shipped] == [a["source"] for a in native]
    assert len(shipped) == sum(len(list((MANIFESTS / f).glob("*.yaml"))) for f in FOLDERS)
    return list(zip(shipped, native))


def failed(answer: dict, section: str) -> list[tuple[str, str]]:
    """The (policy, rule) of ``section`` that failed for the AdmissionPolicies, exported ones only."""
    return [(e["policy"], e["rule"]) for e in answer.get("explain") or []
            if re.fullmatch(rf"{section}\[\d+\]", e["rule"]) and e["verdict"] == "false"
            and exported(e["policy"], e["rule"])]


def label(pair: tuple[dict, dict]) -> str:
    return f"{pair[0]['source']['file']}#{pair[0]['source']['index']}"


def test_the_generated_vaps_answer_as_the_admission_policies(answers):
    checked = Counter()
    for shipped, native in answers:
        where = label((shipped, native))
        denials = failed(shipped, "validations")
        denial = DENIED.match(native["status"]["message"]) if not native["allowed"] else None
        if shipped["allowed"]:
            # nothing the AdmissionPolicies admit is denied by the generated VAPs (nor at all)
            assert native["allowed"], (where, native["status"])
        if denials:
            # denied by a generated VAP of a policy whose exported rule failed, in the rule's words
            assert denial is not None, (where, denials, native["status"])
            policy = denial["policy"].removeprefix("infergate-")
            assert denial["binding"] == denial["policy"] and policy in {p for p, _ in denials}, (where, denial.groupdict())
            messages = [c["message"] for c in shipped["status"]["details"]["causes"] if "field" in c]
            assert denial["message"] in messages, (where, denial["message"], messages)
            checked["denied"] += 1
        else:
            # no exported rule failed: no generated VAP denies (a kept rule, e.g. the Python
            # policy's, may still deny through the webhook, as it does in the cluster)
            assert denial is None, (where, native["status"])
            if not shipped["allowed"]:
                checked["denied by kept rules only"] += 1
        # warnings: one per failed exported warnings[i], from infergate-<policy>-warn, in the words
        # the AdmissionPolicy warns with
        native_warnings = [m for w in native["warnings"] if (m := WARNED.match(w))]
        assert Counter(f"infergate-{p}-warn" for p, _ in failed(shipped, "warnings")) == \
            Counter(m["policy"] for m in native_warnings), (where, shipped["warnings"], native["warnings"])
        for found in native_warnings:
            assert found["binding"] == found["policy"] and found["message"] in shipped["warnings"], (where, found.groupdict())
            checked["warned"] += 1
    # the examples exercise each side: exported denials and warnings, and denials kept back
    assert checked["denied"] >= 3 and checked["warned"] >= 3 and checked["denied by kept rules only"] >= 1, checked



@pytest.fixture(scope="module")
def mutated(tmp_path_factory) -> list[tuple[dict, dict]]:
    """(the AdmissionPolicies' answer with ``--explain``, the answer of every generated object,
    MutatingAdmissionPolicies included) per example document."""
    folder = tmp_path_factory.mktemp("generated-all")
    (folder / "generated.yaml").write_text(yaml.safe_dump_all(generated()[0], sort_keys=False))
    paths = [str(MANIFESTS / f) for f in FOLDERS]
    _, shipped, _ = run("validate", *COMMON, "--explain", "-o", "json", "-f", *paths)
    _, native, err = run("validate", *COMMON, "--policies", str(folder), "-o", "json", "-f", *paths)
    assert "not checked" not in err, err  # every MAP ran
    return list(zip(json.loads(shipped), json.loads(native)))


def test_the_generated_maps_mutate_as_the_admission_policies(mutated):
    changed = 0
    for shipped, native in mutated:
        where = label((shipped, native))
        if not (shipped["allowed"] and native["allowed"]):
            continue  # the verdicts are the test above's
        expected = native["object"]
        for entry in shipped.get("explain") or []:
            if not re.fullmatch(r"mutations\[\d+\]", entry["rule"]) or exported(entry["policy"], entry["rule"]):
                continue
            # a mutation kept with the webhook: what it patched, applied to the MAPs' object
            verdict = ast.literal_eval(entry["verdict"])
            assert isinstance(verdict, list), (where, entry)  # a JSON patch (an apply configuration: not here)
            expected = jsonpatch.apply_patch(expected, verdict)
        assert expected == shipped["object"], (where, shipped.get("patch"))
        changed += bool(shipped.get("patch"))
    assert changed >= 3, changed  # the examples exercise the mutations
