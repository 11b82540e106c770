"""``infergate controller``'s typed configuration: built once from its flags and what the chart
passes (``POD_NAMESPACE``), checked before anything starts; the setup reads it, never argparse."""

from __future__ import annotations

import argparse

import pytest

from tests.support.cel import EVALUATOR
from webhook import kinds
from webhook.controller.runner import ControllerConfig, add_arguments


def config(*flags: str, environ: dict[str, str] | None = None) -> ControllerConfig:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser)
    return ControllerConfig.from_flags(parser.parse_args(list(flags)), EVALUATOR, environ or {})


def test_the_lease_namespace_is_the_flag_else_the_pods_else_default():
    assert config(environ={"POD_NAMESPACE": "infergate-system"}).lease.namespace == "infergate-system"
    assert config("--lease-namespace", "ops", environ={"POD_NAMESPACE": "infergate-system"}).lease.namespace == "ops"
    assert config().lease.namespace == "default"
    assert config("--no-leader-elect").lease is None


def test_the_settings_are_typed_and_frozen():
    made = config("--workers", "2", "--replan-timeout", "90", "--no-audit", "--status-writes", "models.kubeai.org=on",
                  "--policy-actions", "x=Warn")
    assert made.runner.workers == 2 and made.reconcile.replan_timeout.total_seconds() == 90 and made.audit is None
    assert kinds.KUBEAI_MODEL in made.writes_status and kinds.KUBEAI_MODEL not in config().writes_status
    assert made.policies.actions == ("x=Warn",) and made.client.pool_size and made.client.kubeconfig is None
    with pytest.raises(AttributeError):
        made.identity = "another"  # type: ignore[misc]


@pytest.mark.parametrize("flags, says", [
    (("--workers", "0"), "--workers must be >= 1, replan settings >= 0"),
    (("--audit-max-results", "0"), "--audit-max-results 0: must be 1 or more"),
    (("--audit-interval", "soon"), "--audit-interval 'soon': expected a duration"),
    (("--kubeconfig", "/nonexistent/kubeconfig"), "--kubeconfig /nonexistent/kubeconfig: no such file"),
])
def test_a_bad_flag_is_one_line_naming_it(flags, says):
    with pytest.raises(ValueError) as raised:
        config(*flags)
    assert str(raised.value).startswith(says) and "\n" not in str(raised.value)
