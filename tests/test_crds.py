"""The five CRDs in chart/crds: upstream copies, the ai.deckhouse.io schemas, one source of truth."""

from __future__ import annotations

import shutil
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from webhook.resources import crds_dir

REPO = Path(__file__).resolve().parent.parent
# shared/ sits beside the repository (CI: a fresh clone with shared/ beside it; a worktree: further up)
SHARED = next(p / "shared" for p in REPO.parents if (p / "shared" / "spec").is_dir())
CHART_CRDS = REPO / "chart" / "crds"

UPSTREAM = {
    "kubeai.org_models.yaml": "reference/kubeai/kubeai.org_models.yaml",
    "inference.networking.x-k8s.io_inferencemodels.yaml": "reference/gateway-inference/inference.networking.x-k8s.io_inferencemodels.yaml",
    "inference.networking.x-k8s.io_inferencepools.yaml": "reference/gateway-inference/inference.networking.x-k8s.io_inferencepools.yaml",
}
DECKHOUSE = {
    "ai.deckhouse.io_inferenceserviceclasses.yaml": ("InferenceServiceClass", "Cluster", "isc"),
    "ai.deckhouse.io_inferenceservices.yaml": ("InferenceService", "Namespaced", "is"),
}


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


def test_chart_ships_exactly_the_five_crds():
    names = sorted(p.name for p in CHART_CRDS.glob("*.yaml"))
    assert names == sorted([*UPSTREAM, *DECKHOUSE])


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_upstream_crds_are_byte_identical_to_the_reference(name):
    assert (CHART_CRDS / name).read_bytes() == (SHARED / UPSTREAM[name]).read_bytes()


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


def test_seed_markers_are_present():
    """A sample of the seed's enums, bounds, patterns and required markers (design notes §6.1)."""
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
    assert "default" not in nodes[".spec.launchStrategy"]  # the webhook writes it (decision 10)
    assert nodes[".spec.model"]["required"] == ["ref", "src"]
    assert nodes[".spec.model.src"]["enum"] == ["HuggingFace", "ai-models"]
    assert nodes[".spec.model.ref.kind"]["enum"] == ["Model", "ClusterModel"]
    rules = [r["rule"] for r in nodes[".spec"]["x-kubernetes-validations"] + nodes[".spec.model"]["x-kubernetes-validations"]]
    assert any("oldSelf.inferenceServiceClassName" in r for r in rules)
    assert "self.src == oldSelf.src" in rules


def test_package_reads_the_chart_crds_in_a_checkout():
    assert crds_dir().resolve() == CHART_CRDS.resolve()


def test_wheel_carries_the_chart_crds_byte_for_byte(tmp_path):
    """Build the wheel with the project's own build config (hatchling, as pip would) and compare
    its package data with chart/crds. The build runs on a copy of what the wheel is made of, so
    that a data directory another layer has not populated yet cannot break this comparison."""
    from hatchling.builders.wheel import WheelBuilder

    source = tmp_path / "src"
    for name in ("pyproject.toml", "README.md"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "webhook", source / "webhook", ignore=shutil.ignore_patterns("__pycache__", "_data"))
    forced = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    for directory in forced:
        if (REPO / directory).is_dir():
            shutil.copytree(REPO / directory, source / directory)
        else:
            (source / directory).mkdir(parents=True)
    (wheel,) = WheelBuilder(str(source)).build(directory=str(tmp_path / "dist"), versions=["standard"])
    with zipfile.ZipFile(wheel) as archive:
        packaged = {
            Path(n).name: archive.read(n)
            for n in archive.namelist()
            if n.startswith("webhook/_data/crds/") and n.endswith(".yaml")
        }
    shipped = {p.name: p.read_bytes() for p in CHART_CRDS.glob("*.yaml")}
    assert packaged == shipped


@pytest.mark.parametrize("name", sorted([*UPSTREAM, *DECKHOUSE]))
def test_the_apiserver_would_accept_the_crd(name):
    """No rejection and no warning when the CRD is created (structural schema, CEL compilation,
    estimated cost against the apiserver's budget), as webhook.schema.crd_admission judges it."""
    from webhook.schema.crd_admission import check_crd

    errors, warnings = check_crd(load_crd(CHART_CRDS / name))
    assert errors == [] and warnings == []
