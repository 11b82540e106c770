"""The example cluster state and the example manifests: well-formed, valid for Kubernetes, consistent."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.support.paths import EXAMPLES, MANIFESTS
from tests.support.cel import EVALUATOR


STATE = EXAMPLES / "state"
REPO_CHART_TESTS = EXAMPLES.parent / "chart" / "templates" / "tests"
KUBERNETES_VERSION = "1.36.0"
OWN_GROUPS = ("kubeai.org/", "inference.networking.x-k8s.io/", "ai.deckhouse.io/")
OTHER_CRD_GROUPS = ("cert-manager.io/",)  # no Kubernetes JSON schema for these
# today's upstream kinds: checked against their bundled CRDs by the schema engine (the apiserver's answer)
UPSTREAM_GROUPS = ("gateway.networking.k8s.io/", "inference.networking.k8s.io/", "llm-d.ai/")
CLUSTER_SCOPED = {"ClusterIssuer", "Namespace", "InferenceServiceClass", "ClusterModel", "DeviceClass", "ResourceSlice",
                  "PriorityClass", "StorageClass"}


def documents(directory: Path) -> list[tuple[str, dict]]:
    found = []
    for path in sorted(directory.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert isinstance(doc, dict), f"{path}: every document is an object"
            found.append((str(path.relative_to(EXAMPLES)), doc))
    return found


STATE_OBJECTS = documents(STATE)
MANIFEST_OBJECTS = documents(MANIFESTS)


def objects(kind: str) -> list[dict]:
    return [obj for _, obj in STATE_OBJECTS if obj["kind"] == kind]


def names(kind: str) -> set[str]:
    return {obj["metadata"]["name"] for obj in objects(kind)}


def label(source: str, obj: dict) -> str:
    return f"{source}:{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


@pytest.mark.parametrize(("source", "obj"), STATE_OBJECTS + MANIFEST_OBJECTS,
                         ids=[label(s, o) for s, o in STATE_OBJECTS + MANIFEST_OBJECTS])
def test_object_identity_and_scope(source, obj):
    assert obj["apiVersion"] and obj["kind"] and obj["metadata"]["name"]
    assert ("namespace" in obj["metadata"]) == (obj["kind"] not in CLUSTER_SCOPED), "namespace iff namespaced"


BUILTIN = [(s, o) for s, o in STATE_OBJECTS
           if not o["apiVersion"].startswith(OWN_GROUPS + OTHER_CRD_GROUPS + UPSTREAM_GROUPS)]
UPSTREAM = [(s, o) for s, o in STATE_OBJECTS + MANIFEST_OBJECTS
            if o["apiVersion"].startswith(UPSTREAM_GROUPS) and not s.startswith("manifests/invalid/")]


@pytest.mark.parametrize(("source", "obj"), UPSTREAM, ids=[label(s, o) for s, o in UPSTREAM])
def test_upstream_kinds_are_admitted_by_their_upstream_crds(source, obj):
    from webhook.schema import CRDRegistry

    outcome = CRDRegistry.shipped(evaluator=EVALUATOR).handle("CREATE", obj, namespace=obj["metadata"]["namespace"])
    assert outcome.allowed and outcome.warnings == [], outcome.status


@pytest.mark.parametrize(("source", "obj"), BUILTIN, ids=[label(s, o) for s, o in BUILTIN])
def test_builtin_objects_match_the_kubernetes_schemas(source, obj):
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:  # the full message dumps the schema
        pytest.fail(f"{label(source, obj)}: {exc.message} at {list(exc.path)}")


def test_no_duplicate_objects():
    keys = [(o["apiVersion"], o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for _, o in STATE_OBJECTS]
    assert len(keys) == len(set(keys))


def test_namespaced_state_lives_in_existing_namespaces():
    existing = names("Namespace")
    used = {o["metadata"]["namespace"] for _, o in STATE_OBJECTS + MANIFEST_OBJECTS if "namespace" in o["metadata"]}
    assert used <= existing


def test_exactly_one_default_class():
    defaults = [c["metadata"]["name"] for c in objects("InferenceServiceClass")
                if (c["metadata"].get("annotations") or {}).get("ai.deckhouse.io/is-default-class") == "true"]
    assert defaults == ["general"]


def test_classes_name_objects_that_exist():
    for cls in objects("InferenceServiceClass"):
        spec = cls["spec"]
        assert set(spec.get("acceleratorPolicy", {}).get("allowedDeviceClasses", [])) <= names("DeviceClass")
        assert set(spec.get("scalingPolicy", {}).get("allowedPriorityClassNames", [])) <= names("PriorityClass")
        if "modelStorageClassName" in spec:
            assert spec["modelStorageClassName"] in names("StorageClass")
        https = spec["exposurePolicy"].get("https", {})
        if "certManager" in https:
            assert https["certManager"]["clusterIssuerName"] in names("ClusterIssuer")
        if "customCertificate" in https:
            assert https["customCertificate"]["secretName"] in {s["metadata"]["name"] for s in objects("Secret")
                                                                 if s["metadata"]["namespace"] == "d8-system"}


def test_the_state_covers_what_the_issue_asks_for():
    classes = {c["metadata"]["name"]: c["spec"] for c in objects("InferenceServiceClass")}
    assert any("modelPolicy" in s and "acceleratorPolicy" in s and "admissionPolicy" in s for s in classes.values())
    assert any(s["exposurePolicy"]["type"] == "ClusterLocal" for s in classes.values())
    assert objects("Model") and objects("ClusterModel")
    assert all("resolved" in m["status"] for m in objects("ClusterModel"))
    assert [g for g in objects("PriorityClass") if g.get("globalDefault")]
    default_sc = [s for s in objects("StorageClass")
                  if s["metadata"].get("annotations", {}).get("storageclass.kubernetes.io/is-default-class") == "true"]
    assert len(default_sc) == 1


def kubeai_system_config() -> dict:
    (config_map,) = [c for c in objects("ConfigMap") if c["metadata"]["name"] == "kubeai-config"]
    assert config_map["metadata"]["namespace"] == "kubeai"
    return yaml.safe_load(config_map["data"]["system.yaml"])


def test_kubeai_config_is_in_kubeais_format():
    config = kubeai_system_config()
    for name, profile in config["resourceProfiles"].items():
        assert set(profile) <= {"imageName", "requests", "limits", "nodeSelector", "tolerations", "affinity",
                                "runtimeClassName", "schedulerName"}, name
    for name, profile in config["cacheProfiles"].items():
        assert set(profile) == {"sharedFilesystem"}, name


def test_valid_kubeai_models_use_known_profiles():
    config = kubeai_system_config()
    for source, model in MANIFEST_OBJECTS:
        if source.startswith("manifests/valid/") and model["kind"] == "Model":
            profile, count = model["spec"]["resourceProfile"].split(":")
            assert profile in config["resourceProfiles"] and int(count) >= 1
            assert model["spec"].get("cacheProfile", next(iter(config["cacheProfiles"]))) in config["cacheProfiles"]


def test_inference_models_reference_existing_pools():
    pools = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in objects("InferencePool")}
    for source, obj in STATE_OBJECTS + MANIFEST_OBJECTS:
        if obj["kind"] == "InferenceModel":
            assert (obj["metadata"]["namespace"], obj["spec"]["poolRef"]["name"]) in pools, source


# What deviceclasses.yaml documents for each class: (placement, sharing, product).
DEVICE_CLASSES = {
    "nvidia-h100-physical": ("WholeDevice", "Dedicated", "NVIDIA H100 80GB HBM3"),
    "nvidia-a30-mig-2g12": ("Partition", "Dedicated", "NVIDIA A30"),
    "nvidia-a30-mig-2g12-mps": ("Partition", "Shared", "NVIDIA A30"),
    "nvidia-l4-timeslicing": ("WholeDevice", "Shared", "NVIDIA L4"),
}


def test_device_classes_offer_what_they_document():
    """Each DeviceClass's selectors, evaluated over the ResourceSlices by the planner, pick devices
    of the documented placement and sharing mode, without a selector error."""
    from webhook.controller.planner.devices import DeviceProfiles, devices_from_slices, offer_of

    profiles = DeviceProfiles(devices_from_slices(objects("ResourceSlice")))
    assert set(DEVICE_CLASSES) == names("DeviceClass")
    for device_class in objects("DeviceClass"):
        offer = offer_of(device_class, profiles, EVALUATOR)
        assert offer.devices and not offer.problems, (offer.name, offer.problems)
        assert (offer.placement_mode, offer.sharing_mode, offer.product_name) == DEVICE_CLASSES[offer.name]


def expected_denial(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# denied: "), f"{path.name}: first line says why it is denied"
    return first.removeprefix("# denied: ")


@pytest.mark.parametrize("path", sorted((MANIFESTS / "invalid").glob("*.yaml")) +
                         sorted((MANIFESTS / "denied-by-webhook").glob("*.yaml")), ids=lambda p: p.name)
def test_denied_examples_say_why(path):
    assert expected_denial(path)


def test_examples_readme_lists_every_manifest():
    readme = (EXAMPLES / "README.md").read_text()
    for path in MANIFESTS.rglob("*.yaml"):
        assert f"`{path.relative_to(MANIFESTS)}`" in readme, path


def test_the_package_serves_the_state_not_the_manifests():
    from webhook.shipped_data import example_manifests_dir, examples_dir

    assert examples_dir().resolve() == STATE.resolve()
    assert example_manifests_dir().resolve() == MANIFESTS.resolve()


def reconciled(paths: list[Path]) -> dict[tuple[str, str], dict]:
    """What `infergate reconcile` (the controller, offline, on examples/state) writes for ``paths``."""
    import contextlib
    import io
    import json

    from webhook.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["reconcile", *map(str, paths), "-o", "json", "--now", "2026-11-29T12:00:00Z"]) == 0
    return {(o["kind"], o["metadata"]["name"]): o["status"] for o in json.loads(out.getvalue())["items"]}


def test_valid_orders_are_planned_as_documented():
    """The example state is coherent: every valid InferenceService resolves its class and model and
    gets a placement (the worked example of docs/design.md for hf-embedding: the MPS class, Shared, 25..50 %)."""
    orders = sorted((MANIFESTS / "valid").glob("inferenceservice-*.yaml"))
    statuses = reconciled(orders + [MANIFESTS / "valid" / "inferenceserviceclass.yaml"])
    for path in orders:
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        conditions = {c["type"]: c for c in statuses[("InferenceService", name)]["conditions"]}
        for kind in ("ClassResolved", "ModelResolved", "Planned"):
            assert conditions[kind]["status"] == "True", (name, conditions[kind])
    resolved = statuses[("InferenceService", "hf-embedding")]["resolved"]
    assert (resolved["deviceClass"], resolved["placementMode"], resolved["sharingMode"]) == \
        ("nvidia-a30-mig-2g12-mps", "Partition", "Shared")
    assert 25 <= resolved["sharePercent"] <= 50
    assert statuses[("InferenceServiceClass", "small-chat-external")]["phase"] == "Ready"


def test_every_state_class_validates():
    statuses = reconciled([])
    classes = {name for (kind, name) in statuses if kind == "InferenceServiceClass"}
    assert classes == names("InferenceServiceClass")
    for name in classes:
        assert statuses[("InferenceServiceClass", name)]["phase"] == "Ready", statuses[("InferenceServiceClass", name)]


def validate(args: list[str]) -> tuple[int, list[dict]]:
    """`infergate validate ... -o json`: (exit code, one entry per document)."""
    import contextlib
    import io
    import json

    from webhook.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        # the examples are the seed era's KubeAI v0.12.0 Models
        code = main(["validate", "--kubeai-crd", "v0.12.0", *args, "-o", "json"])
    return code, json.loads(out.getvalue())


_VERDICTS: dict[str, tuple[int, dict[str, dict]]] = {}


def crd_verdicts(folder: str) -> tuple[int, dict[str, dict]]:
    """One `infergate validate --crd-only` over a folder: (exit code, metadata.name -> entry)."""
    if folder not in _VERDICTS:
        code, results = validate(["--crd-only", "-f", str(MANIFESTS / folder)])
        names = [yaml.safe_load(p.read_text())["metadata"]["name"] for p in sorted((MANIFESTS / folder).glob("*.yaml"))]
        by_name = {}
        for result in results:
            name = (result["object"] or {}).get("metadata", {}).get("name") or result["status"]["details"]["name"]
            by_name[name] = result
        assert sorted(by_name) == sorted(names)
        _VERDICTS[folder] = code, by_name
    return _VERDICTS[folder]


def test_valid_manifests_are_admitted_by_the_crds():
    code, results = crd_verdicts("valid")
    assert code == 0 and all(r["allowed"] and r["warnings"] == [] for r in results.values())


@pytest.mark.parametrize("path", sorted((MANIFESTS / "invalid").glob("*.yaml")), ids=lambda p: p.name)
def test_invalid_manifests_are_denied_by_the_crds_as_their_first_line_says(path):
    field, _, message = expected_denial(path).partition(": ")
    code, results = crd_verdicts("invalid")
    result = results[yaml.safe_load(path.read_text())["metadata"]["name"]]
    assert code == 1 and not result["allowed"]
    causes = result["status"]["details"]["causes"]
    assert any(c["field"] == field and message in c["message"] for c in causes), causes


@pytest.mark.parametrize("folder", ["denied-by-webhook", "warned-by-webhook"])
def test_webhook_denied_and_warned_manifests_pass_the_crds(folder):
    code, results = crd_verdicts(folder)
    assert code == 0 and all(r["allowed"] and r["warnings"] == [] for r in results.values()), results


def test_the_first_policy_in_the_docs_is_the_example_file():
    page = (EXAMPLES.parent / "docs" / "policies.md").read_text()
    section = page[page.index("## Your first policy"):page.index("## Test your policies")]
    shown = yaml.safe_load(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    example = yaml.safe_load((EXAMPLES / "policies" / "production-min-replicas.yaml").read_text())
    del example["spec"]["description"]
    assert shown == example



_WEBHOOK_VERDICTS: dict[str, tuple[int, dict[str, dict]]] = {}


def verdicts(folder: str) -> tuple[int, dict[str, dict]]:
    """One `infergate validate` (schema, the shipped policies, the example state) over a folder."""
    if folder not in _WEBHOOK_VERDICTS:
        code, results = validate(["--state", str(EXAMPLES / "state"), "-f", str(MANIFESTS / folder)])
        by_name = {}
        for result in results:
            name = (result["object"] or {}).get("metadata", {}).get("name") or result["status"]["details"]["name"]
            by_name[name] = result
        _WEBHOOK_VERDICTS[folder] = code, by_name
    return _WEBHOOK_VERDICTS[folder]


@pytest.mark.parametrize("path", sorted((MANIFESTS / "denied-by-webhook").glob("*.yaml")), ids=lambda p: p.name)
def test_webhook_denies_what_its_first_line_says(path):
    code, results = verdicts("denied-by-webhook")
    result = results[yaml.safe_load(path.read_text())["metadata"]["name"]]
    assert code == 1 and not result["allowed"]
    message = result["status"]["message"]
    assert message.startswith('admission webhook "validate.infergate.io" denied the request: ')
    assert expected_denial(path) in message


def expected_warning(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# warns: "), f"{path.name}: first line says what it is warned of"
    return first.removeprefix("# warns: ")


@pytest.mark.parametrize("path", sorted((MANIFESTS / "warned-by-webhook").glob("*.yaml")), ids=lambda p: p.name)
def test_webhook_admits_with_the_warning_its_first_line_says(path):
    code, results = verdicts("warned-by-webhook")
    result = results[yaml.safe_load(path.read_text())["metadata"]["name"]]
    assert code == 0 and result["allowed"], result["status"]
    assert any(expected_warning(path) in w for w in result["warnings"]), result["warnings"]


def test_webhook_admits_the_valid_examples():
    code, results = verdicts("valid")
    assert code == 0 and len(results) == len(list((MANIFESTS / "valid").glob("*.yaml")))
    assert all(r["allowed"] for r in results.values()), results


def test_what_helm_test_expects_holds_offline(tmp_path):
    """The chart's `helm test` sends two KubeAI Models with dryRun; the same two, offline, through
    `infergate validate`: the first comes back with minReplicas 0, the second is denied by the
    validating webhook in the words the test looks for."""
    def model(name: str, engine: str) -> dict:
        return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": name, "namespace": "default"},
                "spec": {"features": ["TextGeneration"], "url": "ollama://gemma2:2b", "engine": engine}}

    manifest = tmp_path / "helm-test.yaml"
    manifest.write_text(yaml.safe_dump_all([model("infergate-test-defaults", "OLlama"), model("infergate-test-denied", "VLLM")]))
    code, (defaulted, denied) = validate(["-f", str(manifest)])
    assert code == 1
    assert defaulted["allowed"] and defaulted["object"]["spec"]["minReplicas"] == 0
    script = (REPO_CHART_TESTS / "dry-run.yaml").read_text()
    expected = 'admission webhook "validate.infergate.io" denied the request'
    assert expected in script and not denied["allowed"] and denied["status"]["message"].startswith(expected)


def test_the_first_policy_in_the_docs_denies_scale_to_zero_in_production(tmp_path):
    import shutil

    from webhook.shipped_data import policies_dir

    for source in [*policies_dir().glob("*.yaml"), EXAMPLES / "policies" / "production-min-replicas.yaml"]:
        shutil.copy(source, tmp_path)
    demo = ["--state", str(EXAMPLES / "state")]  # its namespaces' labels: ml-team is production
    code, (result,) = validate([*demo, "--policies", str(tmp_path), "-f", str(MANIFESTS / "valid" / "kubeai-model-vllm.yaml")])
    assert code == 1 and not result["allowed"]
    assert result["status"]["details"]["causes"][0]["field"] == "spec.minReplicas"
    code, results = validate([*demo, "--policies", str(tmp_path), "-f", str(MANIFESTS / "valid" / "kubeai-model-ollama.yaml")])
    assert code == 0  # sandbox is not a production namespace


def suite_files() -> list[Path]:
    """Every PolicySuite under examples/ (AdmissionPolicy and ValidatingAdmissionPolicy suites alike)."""
    found = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        docs = list(yaml.safe_load_all(path.read_text()))
        if any(isinstance(d, dict) and d.get("kind") == "PolicySuite" for d in docs):
            found.append(path)
    return found


def test_the_examples_hold_a_suite_of_each_kind_of_policy():
    names = {p.relative_to(EXAMPLES).as_posix() for p in suite_files()}
    assert {"policies/tests/production-min-replicas.yaml", "native-policies/tests/kubeai-model-limits.yaml"} <= names


@pytest.mark.parametrize("path", suite_files(), ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_every_example_suite_passes(path):
    """`infergate test` over each suite in examples/: every case passes, none is empty."""
    import contextlib
    import io
    import json

    from webhook.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["test", str(path), "-o", "json"])
    report = json.loads(out.getvalue())
    cases = [case for suite in report["suites"] for case in suite["cases"]]
    assert code == 0 and cases and all(c["passed"] for c in cases), [(c["name"], c["problems"]) for c in cases]
