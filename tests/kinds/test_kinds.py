"""The registry of kinds (``webhook.kinds``) is what the rest reads: the webhook configurations'
rules, the watch lists, the controller's kinds and whose status is whose. Change a declaration
and each of them follows."""

from __future__ import annotations

import yaml

from tests.imports.test_import_cycles import import_graph
from tests.support.paths import REPO
from webhook import kinds
from webhook.controller.ownership import FORCED, OFF_BY_DEFAULT, WRITABLE, other_writer, status_writes
from webhook.inputs.watches import crd_watches, lookup_watches, webhook_crd_names, webhook_watches
from webhook.schema import bundled
from webhook.webhook_config import build_webhook_configurations, served_kinds


def rule_resources(configuration: dict) -> set[tuple[str, str, str]]:
    (hook,) = configuration["webhooks"]
    return {(group, version, plural) for rule in hook["rules"] for group in rule["apiGroups"]
            for version in rule["apiVersions"] for plural in rule["resources"]}


def test_the_webhook_configurations_rules_are_the_served_kinds_at_their_crds_versions():
    mutating, validating = build_webhook_configurations(url="https://127.0.0.1:8443")
    crd_versions = {(k.group, k.plural): set() for k in bundled.known_kinds()}
    for k in bundled.known_kinds():
        crd_versions[(k.group, k.plural)].add(k.version)
    expected = {(d.group, version, d.plural) for d in kinds.served() for version in crd_versions[(d.group, d.plural)]}
    assert rule_resources(mutating) == rule_resources(validating) == expected
    # a kind the registry does not serve is in no rule, though its CRD is bundled (schema-only)
    assert ("gateway.networking.k8s.io", "v1", "gateways") not in expected
    assert kinds.declared("gateway.networking.k8s.io", "Gateway") is None


def test_every_served_kind_has_a_bundled_crd_and_every_crd_the_webhook_watches_is_one():
    bundled_names = {k.crd_name for k in bundled.known_kinds()}
    assert webhook_crd_names() <= bundled_names
    assert {(k.group, k.kind) for k in served_kinds()} == {(d.group, d.kind) for d in kinds.served()}
    assert [w.field_selector for w in crd_watches()] == [f"metadata.name={n}" for n in sorted(webhook_crd_names())]


def test_one_declaration_per_group_and_kind():
    keys = [(d.group, d.kind) for d in kinds.DECLARATIONS]
    assert len(keys) == len(set(keys))
    for d in kinds.DECLARATIONS:
        assert d.plural == d.plural.lower() and d.plural.endswith("s"), d
        assert not (d.lookup or d.controller_reads) or d.versions, f"{d.crd_name} is read: at which version?"
        assert not d.status_version or d.status_writer, f"{d.crd_name}: whose status?"


def test_the_lookup_watches_are_the_registrys_lookups():
    watches = lookup_watches()
    assert [(w.api_version, w.kind, w.plural) for w in watches] == [
        (d.read_as.api_version, d.kind, d.plural) for d in kinds.DECLARATIONS if d.lookup]
    (secrets,) = [w for w in watches if w.kind == "Secret"]
    assert secrets.metadata_only  # policies read a Secret's metadata, never its values
    (config_map,) = [w for w in watches if w.kind == "ConfigMap"]
    assert config_map.names == frozenset({"kubeai-config"})
    (pool,) = [w for w in watches if w.kind == "InferencePool" and w.api_version.startswith("inference.networking.x")]
    assert pool.api_versions == ("inference.networking.x-k8s.io/v1alpha2", "inference.networking.x-k8s.io/v1alpha1")
    assert webhook_watches() == watches + crd_watches()


def test_the_controllers_kinds_are_the_registrys():
    assert set(kinds.OWNED) == {d.status_kind for d in kinds.DECLARATIONS if d.status_version}
    assert set(WRITABLE) == {d.crd_name for d in kinds.DECLARATIONS if d.status_version}
    # KubeAI's controller owns its Model's status: written only when asked for, never forced
    assert OFF_BY_DEFAULT == {kinds.KUBEAI_MODEL} and kinds.KUBEAI_MODEL not in FORCED
    assert kinds.KUBEAI_MODEL not in status_writes() and kinds.KUBEAI_MODEL in status_writes(["models.kubeai.org=on"])
    # the seed-era pool: infergate writes v1alpha1's Ready; v1alpha2's status is the gateways'
    pool = {"apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferencePool"}
    assert other_writer(pool, status_writes()) == kinds.declared("inference.networking.x-k8s.io",
                                                                "InferencePool").status_writer
    assert other_writer({**pool, "apiVersion": kinds.INFERENCE_POOL.api_version}, status_writes()) is None
    assert {k for k in kinds.WATCHED if k not in kinds.OWNED} == {
        d.read_as for d in kinds.DECLARATIONS if d.controller_reads}


def test_crds_dir_gives_the_rules_its_crds_served_versions(tmp_path):
    """``webhook-config --crds-dir``: the rules name the CRDs given, every served version."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object"}}},
                                 {"name": "v1beta1", "served": False, "storage": False,
                                  "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    (tmp_path / "widgets.yaml").write_text(yaml.safe_dump(crd))
    _, validating = build_webhook_configurations(url="https://127.0.0.1:8443", served=served_kinds(tmp_path))
    assert rule_resources(validating) == {("example.com", "v1", "widgets")}


def test_the_controller_does_not_import_what_prints_webhook_configurations():
    graph = import_graph()
    reached, todo = set(), [m for m in graph if m.startswith("webhook.controller")]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += graph[module]
    assert "webhook.webhook_config" not in reached
    assert "webhook.kinds" in reached
    assert (REPO / "webhook" / "controller" / "kinds.py").exists() is False


def test_what_infergate_writes_whole_and_the_admission_kinds_are_declared_and_read_from_there():
    from webhook.audit import build_report
    from webhook.certs.cabundle import WEBHOOK_CONFIGURATIONS
    from webhook.controller import report_writes
    from webhook.controller.events import EVENT
    from webhook.controller.leader import LEASE
    from webhook.policy.native.model import is_native
    from webhook.schema.watched import CRD_API_VERSION, CRD_KIND, CRD_PLURAL

    written = {d.read_as for d in kinds.DECLARATIONS if d.written_by == "infergate's controller"}
    reports = [k for api in report_writes.REPORT_APIS for k in api.kinds]
    assert reports == [kinds.REPORT, kinds.CLUSTER_REPORT, kinds.POLICY_REPORT, kinds.CLUSTER_POLICY_REPORT]
    assert {*reports, LEASE, EVENT} <= written
    assert (LEASE.plural, EVENT.api_version, EVENT.plural) == ("leases", "v1", "events")
    for api in report_writes.REPORT_APIS:  # the reports built are of the declared kinds
        for kind in api.kinds:
            assert (kind.api_version, kind.kind) == _report_kind(build_report, api.api_version, kind.namespaced)
    mutating, validating = build_webhook_configurations(url="https://127.0.0.1:8443")
    assert [(c["apiVersion"], c["kind"]) for c in (mutating, validating)] == [
        (k.api_version, k.kind) for k in (kinds.MUTATING_WEBHOOK_CONFIGURATION, kinds.VALIDATING_WEBHOOK_CONFIGURATION)]
    assert set(WEBHOOK_CONFIGURATIONS) == {mutating["kind"], validating["kind"]}
    for kind in (kinds.VALIDATING_ADMISSION_POLICY, kinds.VALIDATING_ADMISSION_POLICY_BINDING,
                 kinds.MUTATING_ADMISSION_POLICY, kinds.MUTATING_ADMISSION_POLICY_BINDING):
        assert is_native({"apiVersion": kind.api_version, "kind": kind.kind})
    assert (CRD_API_VERSION, CRD_KIND, CRD_PLURAL) == kinds.CUSTOM_RESOURCE_DEFINITION[:3]


def _report_kind(build_report, api_version: str, namespaced: bool) -> tuple[str, str]:
    from webhook.audit import ObjectAudit, ResourceRef

    resource = ResourceRef("v1", "ConfigMap" if namespaced else "Namespace", "ns" if namespaced else "", "x", "uid-1")
    report = build_report(ObjectAudit(resource, ()), api=api_version)
    return report["apiVersion"], report["kind"]


def test_the_declared_built_in_kinds_scope_is_kubernetes_own():
    from webhook.offline.builtin_kinds import is_builtin_group
    from webhook.state.knowledge import cluster_scoped_builtin

    built_in = [d for d in kinds.DECLARATIONS if d.versions and is_builtin_group(d.read_as.api_version)]
    assert {"Lease", "Event", "ValidatingAdmissionPolicy", "Namespace"} <= {d.kind for d in built_in}
    for d in built_in:
        assert d.namespaced != cluster_scoped_builtin(d.group, d.kind), d
