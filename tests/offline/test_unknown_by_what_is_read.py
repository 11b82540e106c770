"""Unknown means exactly what is unknown (issue #33, 1): a rule is left out only when its answer
for *this* object needs what the state does not know. A route to a GA pool is judged wherever
the GA pools are known, whatever is known of the legacy ones; an objective's poolRef reads the
pools of its own group; `audit` of a dump takes the kinds it does not hold as unknown, as
`validate` does. The note names the unknown kind with its API group."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from webhook.cli import main

GA_POOL = """\
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata:
  name: qwen3-pool
  namespace: ml-team
spec:
  selector:
    matchLabels: {app: vllm-qwen3}
  targetPorts:
  - number: 8000
  endpointPickerRef:
    name: qwen3-epp
    port: {number: 9002}
"""

LEGACY_POOL = """\
apiVersion: inference.networking.x-k8s.io/v1alpha2
kind: InferencePool
metadata:
  name: llama-pool
  namespace: ml-team
spec:
  selector: {app: vllm-llama}
  targetPortNumber: 8000
  extensionRef:
    name: llama-epp
"""

ROUTE = """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: chat
  namespace: ml-team
spec:
  parentRefs:
  - name: inference-gateway
  rules:
  - backendRefs:
    - group: {group}
      kind: InferencePool
      name: {pool}
"""

MIXED_ROUTE = """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: mixed
  namespace: ml-team
spec:
  parentRefs:
  - name: inference-gateway
  rules:
  - backendRefs:
    - group: inference.networking.k8s.io
      kind: InferencePool
      name: gone-pool
  - backendRefs:
    - group: inference.networking.x-k8s.io
      kind: InferencePool
      name: somewhere
"""

OBJECTIVE = """\
apiVersion: llm-d.ai/v1alpha2
kind: InferenceObjective
metadata:
  name: batch
  namespace: ml-team
spec:
  priority: -10
  poolRef:
    group: {group}
    name: {pool}
"""

GA = "inference.networking.k8s.io"
LEGACY = "inference.networking.x-k8s.io"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def lines(err: str, prefix: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(prefix)]


def ga_state(tmp_path: Path) -> Path:
    """A state that shows every GA pool of the namespace and no legacy pool at all."""
    write(tmp_path / "state" / "pools.yaml", GA_POOL)
    return tmp_path / "state"


# -- a route's backendRefs: the pools of the group each names ------------------------------------

def test_a_route_to_a_missing_ga_pool_warns_although_no_legacy_pool_is_known(tmp_path):
    route = write(tmp_path / "route.yaml", ROUTE.format(group=GA, pool="gone-pool"))
    code, out, err = cli("validate", "-j", "1", str(route), "--state", str(ga_state(tmp_path)))
    assert code == 0, out + err
    assert lines(err, "Warning: ") == [
        f'Warning: {route}:1: spec.rules[0].backendRefs[0].name: InferencePool "gone-pool" not found in '
        'namespace "ml-team" (yet)']
    assert lines(err, "note: ") == []  # nothing this route needs is unknown


def test_a_route_to_a_present_ga_pool_says_nothing_and_notes_nothing(tmp_path):
    route = write(tmp_path / "route.yaml", ROUTE.format(group=GA, pool="qwen3-pool"))
    code, out, err = cli("validate", "-j", "1", str(route), "--state", str(ga_state(tmp_path)))
    assert code == 0, out + err
    assert lines(err, "Warning: ") == [] and lines(err, "note: ") == []


def test_a_route_to_a_legacy_pool_is_unknown_there_and_the_note_names_the_group(tmp_path):
    route = write(tmp_path / "route.yaml", ROUTE.format(group=LEGACY, pool="llama-pool"))
    code, out, err = cli("validate", "-j", "1", str(route), "--state", str(ga_state(tmp_path)))
    assert code == 0, out + err
    assert lines(err, "Warning: ") == []
    assert lines(err, "note: ") == [
        f"note: not checked: no InferencePool of {LEGACY} in the state (1 lookup); "
        "pass --state DIR or --kubeconfig FILE"]


def test_one_legacy_pool_in_the_state_makes_the_legacy_group_known(tmp_path):
    state = ga_state(tmp_path)
    write(state / "legacy.yaml", LEGACY_POOL)
    route = write(tmp_path / "route.yaml", ROUTE.format(group=LEGACY, pool="other-pool"))
    code, out, err = cli("validate", "-j", "1", str(route), "--state", str(state))
    assert code == 0, out + err
    assert lines(err, "Warning: ") == [
        f'Warning: {route}:1: spec.rules[0].backendRefs[0].name: InferencePool "other-pool" of group {LEGACY} '
        'not found in namespace "ml-team" (yet)']
    assert lines(err, "note: ") == []


def test_a_route_to_both_groups_warns_of_the_known_one_and_notes_the_other(tmp_path):
    route = write(tmp_path / "route.yaml", MIXED_ROUTE)
    code, out, err = cli("validate", "-j", "1", str(route), "--state", str(ga_state(tmp_path)))
    assert code == 0, out + err
    assert lines(err, "Warning: ") == [
        f'Warning: {route}:1: spec.rules[0].backendRefs[0].name: InferencePool "gone-pool" not found in '
        'namespace "ml-team" (yet)']
    assert lines(err, "note: ") == [
        f"note: not checked: no InferencePool of {LEGACY} in the state (1 lookup); "
        "pass --state DIR or --kubeconfig FILE"]


# -- an objective's poolRef: the pools of its group -----------------------------------------------

def test_an_objective_reads_the_pools_of_its_pool_refs_group(tmp_path):
    state = ga_state(tmp_path)
    missing_ga = write(tmp_path / "ga.yaml", OBJECTIVE.format(group=GA, pool="gone-pool"))
    code, out, err = cli("validate", "-j", "1", str(missing_ga), "--state", str(state))
    assert code == 0, out + err
    assert lines(err, "Warning: ") == [
        f'Warning: {missing_ga}:1: spec.poolRef.name: InferencePool "gone-pool" not found in namespace '
        '"ml-team" (yet)']
    assert lines(err, "note: ") == []
    legacy = write(tmp_path / "legacy.yaml", OBJECTIVE.format(group=LEGACY, pool="gone-pool"))
    code, out, err = cli("validate", "-j", "1", str(legacy), "--state", str(state))
    assert code == 0, out + err
    assert lines(err, "Warning: ") == []
    assert lines(err, "note: ") == [
        f"note: not checked: no InferencePool of {LEGACY} in the state (1 lookup); "
        "pass --state DIR or --kubeconfig FILE"]


# -- the inputs as the state: a repository is a part of a cluster --------------------------------

def test_without_state_only_the_group_the_route_names_is_in_the_note(tmp_path):
    route = write(tmp_path / "repo" / "route.yaml", ROUTE.format(group=GA, pool="gone-pool"))
    code, out, err = cli("validate", "-j", "1", str(route))
    assert code == 0, out + err
    assert lines(err, "Warning: ") == []  # the repository may not show every pool of the cluster
    [note] = lines(err, "note: ")
    assert note == (f"note: not checked: no InferencePool of {GA} in the input (1 lookup); "
                    "pass --state DIR or --kubeconfig FILE")


# -- audit of a dump ------------------------------------------------------------------------------

DUMP = """\
apiVersion: v1
kind: List
items:
- apiVersion: inference.networking.k8s.io/v1
  kind: InferencePool
  metadata: {name: qwen3-pool, namespace: ml-team}
  spec:
    selector:
      matchLabels: {app: vllm-qwen3}
    targetPorts: [{number: 8000}]
    endpointPickerRef: {name: qwen3-epp, port: {number: 9002}}
- apiVersion: gateway.networking.k8s.io/v1
  kind: HTTPRoute
  metadata: {name: chat, namespace: ml-team}
  spec:
    parentRefs: [{name: inference-gateway}]
    rules:
    - backendRefs: [{group: inference.networking.k8s.io, kind: InferencePool, name: gone-pool}]
"""

SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: unrelated, namespace: ml-team}
spec:
  selector: {app: unrelated}
  ports: [{port: 80}]
"""


def test_audit_of_a_dump_takes_the_kinds_it_does_not_hold_as_unknown(tmp_path):
    dump = write(tmp_path / "dump.yaml", DUMP)
    code, out, err = cli("audit", str(dump))
    assert code == 0, out + err
    # the dump holds pools (whole): the route's missing pool is a fact
    assert 'InferencePool "gone-pool" not found in namespace "ml-team"' in out
    # it holds no Service and no Pod: the picker and the endpoints are unknown, not missing
    assert "Service" not in out and "no Pod matches" not in out
    assert lines(err, "note: ") == [
        "note: not checked: no Pod in the input (1 lookup), no Service in the input (1 lookup); "
        "pass them with --state PATH, or audit the cluster (--kubeconfig FILE)"]
    assert out.endswith("2 objects audited: 0 denied, 1 warned, 0 audited; results: 4 pass, 0 fail, 1 warn, 0 error\n")


def test_audit_with_a_state_that_shows_services_warns_of_the_missing_picker(tmp_path):
    dump = write(tmp_path / "dump.yaml", DUMP)
    state = write(tmp_path / "state" / "services.yaml", SERVICE)
    code, out, err = cli("audit", str(dump), "--state", str(state))
    assert code == 0, out + err
    assert 'Service "qwen3-epp" not found (yet)' in out
    assert lines(err, "note: ") == [
        "note: not checked: no Pod in the state (1 lookup); "
        "pass them with --state PATH, or audit the cluster (--kubeconfig FILE)"]


def test_audit_of_no_objects_exits_2_as_validate_does(tmp_path):
    empty = write(tmp_path / "empty.yaml", "# nothing yet\n")
    for command in ("audit", "validate"):
        code, out, err = cli(command, str(empty))
        assert code == 2, (command, out, err)
        assert err.startswith(f"infergate: error: {command}: no ") and "--allow-empty" in err, err
    assert cli("audit", str(empty))[1] == ""
    code, out, err = cli("audit", str(empty), "--allow-empty")
    assert code == 0 and out == "0 objects audited: 0 denied, 0 warned, 0 audited; results: 0 pass, 0 fail, 0 warn, " \
        "0 error\n", out + err
