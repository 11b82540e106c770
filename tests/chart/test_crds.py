"""The bundled CRDs: infergate's own in chart/crds (the ai.deckhouse.io schemas), the third-party
ones in chart/files/crds (upstream copies, byte for byte, with their provenance), one source of
truth for the chart, the wheel and ``webhook.schema.bundled``."""

from __future__ import annotations

import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from webhook.shipped_data import crds_dir, data_dir
from webhook.inputs.watches import webhook_crd_names
from webhook.schema import CRDRegistry, bundled
from tests.support.paths import CHART_CRDS, CONFORMANCE, REPO
from tests.support.paths import LEGACY_CRDS as LEGACY_DIR, THIRD_PARTY_CRDS as THIRD_PARTY, UPSTREAM_CRDS as UPSTREAM_DIR
from tests.support.wheel import build_wheel
from tests.support.cel import EVALUATOR


# the earlier versions: the copies the seed-era recorded suites were recorded with
LEGACY = {
    "kubeai.org_models_v1-kubeai-v0.12.0.yaml": "reference/kubeai/kubeai.org_models.yaml",
    "inference.networking.x-k8s.io_inferencemodels_v1alpha1.yaml":
        "reference/gateway-inference/inference.networking.x-k8s.io_inferencemodels.yaml",
}
# the earlier versions as GIE released them: the same bytes as tests/conformance/reference/upstream/
LEGACY_RELEASED = ["inference.networking.x-k8s.io_inferencepools_v1alpha1-gie-v0.1.0.yaml",
                   "inference.networking.x-k8s.io_inferencepools_v1alpha2-gie-v1.4.0.yaml",
                   "inference.networking.x-k8s.io_inferencemodels_v1alpha2-gie-v0.5.1.yaml"]
# the current upstream ones: the copies the current-API suites were recorded with (same names)
UPSTREAM = sorted(p.name for p in UPSTREAM_DIR.glob("*.yaml"))
SCHEMA_ONLY_DIR = UPSTREAM_DIR / "schema-only"
SCHEMA_ONLY = sorted(p.name for p in SCHEMA_ONLY_DIR.glob("*.yaml"))
DECKHOUSE = {
    "ai.deckhouse.io_inferenceserviceclasses.yaml": ("InferenceServiceClass", "Cluster", "isc"),
    "ai.deckhouse.io_inferenceservices.yaml": ("InferenceService", "Namespaced", "is"),
}
ALL_FILES = ([CHART_CRDS / n for n in DECKHOUSE] + [UPSTREAM_DIR / n for n in UPSTREAM]
             + [SCHEMA_ONLY_DIR / n for n in SCHEMA_ONLY] + [LEGACY_DIR / n for n in [*LEGACY, *LEGACY_RELEASED]])


def load_crd(path: Path) -> dict:
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert len(docs) == 1, f"{path.name}: one CRD per file"
    return docs[0]


def schema_of(crd: dict) -> dict:
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def walk(node: dict, path: str = ""):
    """Yield (path, schema node) for every node of an OpenAPI schema."""
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")


def test_the_chart_always_installs_only_infergates_own_crds():
    assert sorted(p.name for p in CHART_CRDS.iterdir()) == sorted(DECKHOUSE)


def test_the_current_upstream_crds_are_the_kinds_of_today():
    kinds = {(k.api_version, k.kind) for k in bundled.known_kinds() if k.source == "upstream"}
    assert kinds == {
        ("inference.networking.k8s.io/v1", "InferencePool"),
        ("inference.networking.x-k8s.io/v1alpha1", "InferencePoolImport"),
        ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"),
        ("inference.networking.x-k8s.io/v1alpha2", "InferenceModelRewrite"),
        ("llm-d.ai/v1alpha2", "InferenceObjective"),
        ("llm-d.ai/v1alpha2", "InferenceModelRewrite"),
        ("kubeai.org/v1", "Model"),
        ("gateway.networking.k8s.io/v1", "HTTPRoute"),
        ("gateway.networking.k8s.io/v1beta1", "HTTPRoute"),
    }
    schema_only = {(k.api_version, k.kind) for k in bundled.known_kinds() if k.source == "schema-only"}
    assert schema_only == {
        ("gateway.networking.k8s.io/v1", "Gateway"), ("gateway.networking.k8s.io/v1beta1", "Gateway"),
        ("gateway.networking.k8s.io/v1", "GatewayClass"), ("gateway.networking.k8s.io/v1beta1", "GatewayClass"),
        ("gateway.networking.k8s.io/v1", "GRPCRoute"),
        ("gateway.networking.k8s.io/v1", "ReferenceGrant"), ("gateway.networking.k8s.io/v1beta1", "ReferenceGrant"),
    }
    legacy = {(k.api_version, k.kind) for k in bundled.known_kinds() if k.source == "legacy"}
    assert legacy == {("inference.networking.x-k8s.io/v1alpha1", "InferenceModel"),
                      ("inference.networking.x-k8s.io/v1alpha1", "InferencePool"),
                      ("inference.networking.x-k8s.io/v1alpha2", "InferenceModel"),
                      ("inference.networking.x-k8s.io/v1alpha2", "InferencePool")}  # KubeAI's: only when chosen


def _policy_targets() -> set[tuple[str, str]]:
    """(group, kind) of every shipped policy's matchConstraints ("*" kept as it is)."""
    from webhook.shipped_data import policies_dir

    targets = set()
    for path in sorted(policies_dir().glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or doc.get("kind") != "AdmissionPolicy":
                continue
            for rule in doc["spec"]["matchConstraints"]["resourceRules"]:
                targets |= {(group, kind) for group in rule["apiGroups"] for kind in rule["kinds"]}
    return targets


def test_the_webhook_serves_the_known_kinds_but_the_schema_only_ones():
    served = {(k.api_version, k.kind) for k in bundled.webhook_kinds()}
    known = {(k.api_version, k.kind) for k in bundled.known_kinds()}
    schema_only = {(k.api_version, k.kind) for k in bundled.known_kinds() if k.source == "schema-only"}
    assert served == known - schema_only and schema_only
    assert not {name for name in webhook_crd_names() if name.startswith(("gateways.", "gatewayclasses.",
                                                                                 "grpcroutes.", "referencegrants."))}


def test_no_shipped_policy_targets_a_schema_only_kind():
    """A policy on a schema-only kind would never run in a cluster: the webhook's rules leave
    that kind out. Serving it instead puts infergate on every write of that kind."""
    targets = _policy_targets()
    for kind in bundled.known_kinds():
        targeted = any(group in (kind.group, "*") and name in (kind.kind, "*") for group, name in targets)
        if kind.source == "schema-only":
            assert not targeted, kind
    # the earlier GIE versions are served because removed-api-versions applies to them
    assert {("inference.networking.x-k8s.io", "InferencePool"), ("inference.networking.x-k8s.io", "InferenceModel")} <= targets


def test_one_crd_per_name_the_gie_versions_combined():
    names = [crd["metadata"]["name"] for _, _, crd in bundled.crds()]
    assert len(names) == len(set(names))
    by_name = {crd["metadata"]["name"]: (where, crd) for _, where, crd in bundled.crds()}
    for name, released in [("inferencepools.inference.networking.x-k8s.io",
                            ["inference.networking.x-k8s.io_inferencepools_v1alpha2-gie-v1.4.0.yaml",
                             "inference.networking.x-k8s.io_inferencepools_v1alpha1-gie-v0.1.0.yaml"]),
                           ("inferencemodels.inference.networking.x-k8s.io",
                            ["inference.networking.x-k8s.io_inferencemodels_v1alpha2-gie-v0.5.1.yaml",
                             "inference.networking.x-k8s.io_inferencemodels_v1alpha1.yaml"])]:
        where, crd = by_name[name]
        assert sorted(where.split(" + ")) == sorted(released)
        parts = [load_crd(LEGACY_DIR / n) for n in released]
        # each version's schema as released; the newest release's storage version the only storage one
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha2", "v1alpha1"]
        for part, version in zip(parts, crd["spec"]["versions"]):
            (released_version,) = part["spec"]["versions"]
            assert version == {**released_version, "storage": version["name"] == "v1alpha2"}
        assert crd["metadata"] == parts[0]["metadata"] and crd["spec"]["names"] == parts[0]["spec"]["names"]
        from webhook.schema.crd_admission import check_crd

        assert check_crd(crd, EVALUATOR) == ([], [])


def test_a_v1alpha1_pool_is_judged_by_gie_v0_1_0s_schema_extension_ref_and_all():
    registry = CRDRegistry.shipped(evaluator=EVALUATOR)
    pool = {"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "InferencePool",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"selector": {"app": "vllm"}, "targetPortNumber": 8000, "extensionRef": {"name": "epp"}}}
    outcome = registry.handle("CREATE", pool, field_validation="Strict")
    assert outcome.allowed and outcome.object["spec"]["extensionRef"]["failureMode"] == "FailClose"
    without = {**pool, "spec": {"selector": {"app": "vllm"}, "targetPortNumber": 8000}}
    assert [str(e) for e in registry.handle("CREATE", without).errors] == ['spec.extensionRef: Required value']


@pytest.mark.parametrize("name", UPSTREAM)
def test_upstream_crds_are_byte_identical_to_the_recorded_reference(name):
    assert (UPSTREAM_DIR / name).read_bytes() == (CONFORMANCE / "reference" / "upstream" / name).read_bytes()


@pytest.mark.parametrize("name", SCHEMA_ONLY)
def test_schema_only_crds_are_byte_identical_to_the_upstream_reference(name):
    assert (SCHEMA_ONLY_DIR / name).read_bytes() == (CONFORMANCE / "reference" / "upstream" / name).read_bytes()


@pytest.mark.parametrize("name", LEGACY_RELEASED)
def test_earlier_released_crds_are_byte_identical_to_the_upstream_reference(name):
    assert (LEGACY_DIR / name).read_bytes() == (CONFORMANCE / "reference" / "upstream" / name).read_bytes()


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_earlier_crds_are_the_seed_era_copies(name):
    assert (LEGACY_DIR / name).read_bytes() == (CONFORMANCE / LEGACY[name]).read_bytes()


@pytest.mark.parametrize("directory", [UPSTREAM_DIR, LEGACY_DIR], ids=["upstream", "legacy"])
def test_every_third_party_file_has_its_repository_path_and_commit(directory):
    """One row per bundled file: file, repository, path, commit (and, for the files collected
    at a release tag, the tag before the commit)."""
    rows = {}
    for line in (directory / "SOURCES.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) in (4, 5) and cells[0].endswith(".yaml"):
            rows[cells[0]] = cells[1:]
    files = [p.relative_to(directory).as_posix() for p in directory.rglob("*.yaml")]
    assert sorted(rows) == sorted(files)
    for name, (repository, path, *tag, commit) in rows.items():
        assert "/" in repository and path.endswith(".yaml") and commit, name
        assert all(t.startswith("v") for t in tag) and any(len(w) == 40 for w in commit.split()), name


def test_kubeai_model_is_one_kind_with_two_schemas_the_current_one_by_default():
    def model_crd(choice=None):
        served = CRDRegistry.shipped(choice, evaluator=EVALUATOR).served("kubeai.org/v1", "Model")
        return served.crd

    assert model_crd() == model_crd("v0.23") == load_crd(UPSTREAM_DIR / bundled.KUBEAI_CRDS["v0.23"][1])
    assert model_crd("v0.12.0") == load_crd(LEGACY_DIR / bundled.KUBEAI_CRDS["v0.12.0"][1])
    assert [p.name for _, p in bundled.crd_files("v0.12.0")].count("kubeai.org_models_v1-kubeai-v0.12.0.yaml") == 1
    assert not any("kubeai-main" in p.name for _, p in bundled.crd_files("v0.12.0"))
    with pytest.raises(ValueError, match="unknown KubeAI Model CRD 'v9'"):
        bundled.crd_files("v9")


def test_the_kubeai_choices_are_the_settings_choices():
    from typing import get_args

    from webhook.server.settings import Settings

    assert set(get_args(Settings.model_fields["kubeai_crd"].annotation)) == set(bundled.KUBEAI_CRDS)
    assert Settings().kubeai_crd == bundled.DEFAULT_KUBEAI_CRD


@pytest.mark.parametrize("name", sorted(DECKHOUSE))
def test_deckhouse_crd_identity(name):
    kind, scope, short = DECKHOUSE[name]
    crd = load_crd(CHART_CRDS / name)
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{spec['names']['plural']}.ai.deckhouse.io"
    assert (spec["group"], spec["names"]["kind"], spec["scope"]) == ("ai.deckhouse.io", kind, scope)
    assert spec["names"]["shortNames"] == [short]
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Phase"] == ".status.phase" and columns["Age"] == ".metadata.creationTimestamp"


@pytest.mark.parametrize("name", sorted(DECKHOUSE))
def test_deckhouse_spec_is_bounded_for_the_cel_cost_budget(name):
    """Every list in spec has maxItems and every free string has maxLength (or an enum)."""
    spec = schema_of(load_crd(CHART_CRDS / name))["properties"]["spec"]
    for path, node in walk(spec, ".spec"):
        if node.get("type") == "array":
            assert "maxItems" in node, f"{path}: unbounded list"
        if node.get("type") == "string":
            assert "maxLength" in node or "enum" in node, f"{path}: unbounded string"


def test_class_allow_lists_are_sets():
    spec = schema_of(load_crd(CHART_CRDS / "ai.deckhouse.io_inferenceserviceclasses.yaml"))["properties"]["spec"]
    lists = {path for path, node in walk(spec, ".spec") if node.get("type") == "array"}
    assert lists == {
        ".spec.acceleratorPolicy.allowedDeviceClasses",
        ".spec.acceleratorPolicy.allowedPlacementTypes",
        ".spec.acceleratorPolicy.allowedSharingModes",
        ".spec.admissionPolicy.allowedNamespaces",
        ".spec.modelPolicy.allowedEndpointTypes",
        ".spec.modelPolicy.allowedFormats",
        ".spec.scalingPolicy.allowedPriorityClassNames",
    }
    for path, node in walk(spec, ".spec"):
        if path in lists:
            assert node.get("x-kubernetes-list-type") == "set", path


def test_the_reference_markers_are_present():
    """A sample of the module reference's enums, bounds, patterns and required markers."""
    isc = schema_of(load_crd(CHART_CRDS / "ai.deckhouse.io_inferenceserviceclasses.yaml"))["properties"]["spec"]
    nodes = dict(walk(isc, ".spec"))
    assert nodes[".spec"]["required"] == ["exposurePolicy"]
    assert nodes[".spec.acceleratorPolicy.maxAcceleratorCount"]["minimum"] == 1
    share = nodes[".spec.acceleratorPolicy.maxSharePercent"]
    assert (share["minimum"], share["maximum"]) == (1, 100)
    assert nodes[".spec.modelPolicy.maxParameterCount"]["pattern"] == r"^[0-9]+(\.[0-9]+)?[MmBb]$"
    assert nodes[".spec.exposurePolicy.https.mode"]["enum"] == ["Disabled", "CertManager", "CustomCertificate", "OnlyInURI"]
    assert nodes[".spec.updatePolicy.strategy"]["enum"] == ["RollingUpdate"]

    inf = schema_of(load_crd(CHART_CRDS / "ai.deckhouse.io_inferenceservices.yaml"))["properties"]["spec"]
    nodes = dict(walk(inf, ".spec"))
    assert nodes[".spec.launchStrategy"]["enum"] == ["Latency", "Throughput", "Balance"]
    assert "default" not in nodes[".spec.launchStrategy"]  # the webhook writes it (docs/decisions.md, InferenceService 10)
    assert nodes[".spec.model"]["required"] == ["ref", "src"]
    assert nodes[".spec.model.src"]["enum"] == ["HuggingFace", "ai-models"]
    assert nodes[".spec.model.ref.kind"]["enum"] == ["Model", "ClusterModel"]
    rules = [r["rule"] for r in nodes[".spec"]["x-kubernetes-validations"] + nodes[".spec.model"]["x-kubernetes-validations"]]
    assert any("oldSelf.inferenceServiceClassName" in r for r in rules)
    assert "self.src == oldSelf.src" in rules


def test_package_reads_the_chart_crds_in_a_checkout():
    assert crds_dir().resolve() == CHART_CRDS.resolve()
    assert data_dir("upstream_crds").resolve() == UPSTREAM_DIR.resolve()
    assert data_dir("legacy_crds").resolve() == LEGACY_DIR.resolve()


def test_wheel_carries_the_chart_crds_byte_for_byte(tmp_path):
    """Build the wheel with the project's own build config (hatchling, as pip would) and compare
    its package data with chart/crds."""
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        packaged = {
            n: archive.read(n)
            for n in archive.namelist()
            if n.startswith(("webhook/_data/crds/", "webhook/_data/third-party-crds/")) and not n.endswith("/")
        }
    shipped = {f"webhook/_data/crds/{p.name}": p.read_bytes() for p in CHART_CRDS.iterdir()}
    shipped |= {f"webhook/_data/third-party-crds/{p.relative_to(THIRD_PARTY)}": p.read_bytes()
                for p in THIRD_PARTY.rglob("*") if p.is_file()}
    assert packaged == shipped


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_the_apiserver_would_accept_the_crd(path):
    """No rejection and no warning when the CRD is created (structural schema, CEL compilation,
    estimated cost against the apiserver's budget), as webhook.schema.crd_admission judges it."""
    from webhook.schema.crd_admission import check_crd

    errors, warnings = check_crd(load_crd(path), EVALUATOR)
    assert errors == [] and warnings == []


# --- the ai.deckhouse.io rules, as the apiserver (webhook.schema) applies them -------------

_REGISTRY = []


def registry():
    from webhook.schema import CRDRegistry

    if not _REGISTRY:
        _REGISTRY.append(CRDRegistry.load([CHART_CRDS], evaluator=EVALUATOR))
    return _REGISTRY[0]


def order(spec: dict, name: str = "o") -> dict:
    return {"apiVersion": "ai.deckhouse.io/v1alpha1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": "ml-team"}, "spec": spec}


def service_class(spec: dict, name: str = "c") -> dict:
    return {"apiVersion": "ai.deckhouse.io/v1alpha1", "kind": "InferenceServiceClass",
            "metadata": {"name": name}, "spec": {"exposurePolicy": {"type": "ClusterLocal", "authentication": "None"}, **spec}}


CATALOG = {"src": "ai-models", "ref": {"kind": "Model", "name": "qwen3-8b"}}
HUGGINGFACE = {"src": "HuggingFace", "ref": {"name": "Qwen/Qwen3-8B"}}


def errors_of(operation: str, obj: dict, old: dict | None = None) -> list[str]:
    outcome = registry().handle(operation, obj, old)
    return [str(e) for e in outcome.errors]


def test_order_immutable_class_name_and_model_source():
    old = order({"inferenceServiceClassName": "a", "model": CATALOG})
    assert errors_of("UPDATE", order({"inferenceServiceClassName": "a", "model": CATALOG}), old) == []
    assert errors_of("UPDATE", order({"inferenceServiceClassName": "b", "model": CATALOG}), old) == [
        "spec.inferenceServiceClassName: Invalid value: inferenceServiceClassName is immutable"]
    assert errors_of("UPDATE", order({"model": CATALOG}), old) == [
        "spec.inferenceServiceClassName: Invalid value: inferenceServiceClassName is immutable"]
    # an order created without a class (webhook down) may get one once
    assert errors_of("UPDATE", order({"inferenceServiceClassName": "a", "model": CATALOG}), order({"model": CATALOG})) == []
    assert errors_of("UPDATE", order({"inferenceServiceClassName": "a", "model": HUGGINGFACE}), old) == [
        'spec.model.src: Invalid value: model.src is immutable']


@pytest.mark.parametrize(("model", "expected"), [
    (CATALOG, []),
    (HUGGINGFACE, []),
    ({**HUGGINGFACE, "parameterCount": "1.5B", "authSecretRef": {"name": "hf"}}, []),
    ({"src": "ai-models", "ref": {"name": "qwen3-8b"}},
     ["spec.model.ref: Invalid value: ref.kind is required for src ai-models; ref.kind and ref.namespace are not allowed for src HuggingFace"]),
    ({**CATALOG, "parameterCount": "8B"},
     ['spec.model.parameterCount: Invalid value: parameterCount is only allowed for src HuggingFace; catalog orders use catalog facts']),
    ({"src": "ai-models", "ref": {"kind": "Model", "name": "Qwen_8B"}},
     ['spec.model.ref.name: Invalid value: catalog ref.name must be a DNS-1123 subdomain (metadata.name of a Model or ClusterModel)']),
    ({**HUGGINGFACE, "parameterCount": "8K"},
     ['spec.model.parameterCount: Invalid value: "8K": spec.model.parameterCount in body should match \'^[0-9]+(\\.[0-9]+)?[MmBb]$\'']),
], ids=lambda v: str(v)[:60])
def test_order_model_rules(model, expected):
    assert errors_of("CREATE", order({"model": model})) == expected


def test_order_device_classes_are_a_non_empty_set():
    def with_classes(classes):
        return order({"model": CATALOG, "resources": {"accelerator": {"deviceClasses": classes}}})

    assert errors_of("CREATE", with_classes(["a", "b"])) == []
    assert errors_of("CREATE", with_classes(["a", "a"])) == ['spec.resources.accelerator.deviceClasses[1]: Duplicate value: "a"']
    assert errors_of("CREATE", with_classes([])) == [
        "spec.resources.accelerator.deviceClasses: Invalid value: 0: spec.resources.accelerator.deviceClasses in body should have at least 1 items"]


@pytest.mark.parametrize(("spec", "expected"), [
    ({"acceleratorPolicy": {"allowedPlacementTypes": ["Partition"], "allowedSharingModes": ["Shared"],
                            "maxAcceleratorCount": 1, "minSharePercent": 25, "maxSharePercent": 50}}, []),
    ({"scalingPolicy": {"minReplicas": 3, "maxReplicas": 2}},
     ["spec.scalingPolicy.minReplicas: Invalid value: minReplicas must be less than or equal to maxReplicas"]),
    ({"modelPolicy": {"allowedEndpointTypes": ["Chat", "Chat"]}},
     ['spec.modelPolicy.allowedEndpointTypes[1]: Duplicate value: "Chat"']),
    ({"modelPolicy": {"allowedEndpointTypes": []}},
     ["spec.modelPolicy.allowedEndpointTypes: Invalid value: 0: spec.modelPolicy.allowedEndpointTypes in body should have at least 1 items"]),
    ({"admissionPolicy": {"allowedNamespaces": ["*", "team-a"]}}, []),
    ({"exposurePolicy": {"type": "External", "authentication": "Token",
                         "https": {"mode": "CustomCertificate", "customCertificate": {"secretName": "tls"}}}}, []),
    ({"exposurePolicy": {"type": "External", "authentication": "Token",
                         "https": {"mode": "Disabled", "customCertificate": {"secretName": "tls"}}}},
     ["spec.exposurePolicy.https: Invalid value: https.customCertificate is required for, and only allowed with, mode CustomCertificate"]),
    # https on a ClusterLocal class is admitted (docs/decisions.md, InferenceService 9: the webhook warns)
    ({"exposurePolicy": {"type": "ClusterLocal", "authentication": "Token", "https": {"mode": "OnlyInURI"}}}, []),
], ids=lambda v: str(v)[:60])
def test_class_rules(spec, expected):
    assert errors_of("CREATE", service_class(spec)) == expected


def test_status_writes_skip_spec_rules_and_keep_status_schema():
    stored = order({"model": CATALOG})
    status = {**stored, "status": {"phase": "Pending", "resolved": {"placementMode": "Partition", "sharePercent": 26}}}
    assert registry().handle("UPDATE", status, stored, subresource="status").allowed
    bad = {**stored, "status": {"resolved": {"placementMode": "Half"}}}
    outcome = registry().handle("UPDATE", bad, stored, subresource="status")
    assert 'status.resolved.placementMode: Unsupported value: "Half": supported values: "Partition", "WholeDevice"' in [
        str(e) for e in outcome.errors]
    assert not [e for e in outcome.errors if str(e).startswith("spec")]


def test_the_docs_name_every_kind_and_version_served():
    section = (REPO / "docs" / "kinds.md").read_text()
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    for kind in bundled.known_kinds():
        assert any(kind.kind in row and f"`{kind.group}/" in row and kind.version in row for row in rows), kind
    values = yaml.safe_load((REPO / "chart" / "values.yaml").read_text())["crds"]
    helm = (REPO / "docs" / "helm.md").read_text()
    assert all(f"crds.{name}" in helm for name in values)


def test_the_image_build_copies_everything_the_wheel_force_includes():
    forced = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    copied = {line.split()[1] for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("COPY ")}
    assert set(forced) <= copied


def test_the_image_base_is_a_build_argument_both_stages_use():
    """Air-gapped builds (docs/install.md): ``--build-arg BASE=<any Python 3.11+ image>``."""
    lines = [line.strip() for line in (REPO / "Dockerfile").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    first_from = next(i for i, line in enumerate(lines) if line.startswith("FROM "))
    assert "ARG BASE=python:3.12-slim" in lines[:first_from]
    assert [line.split()[1] for line in lines if line.startswith("FROM ")] == ["${BASE}", "${BASE}"]
