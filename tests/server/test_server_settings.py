"""`infergate serve`'s settings: flags over INFERGATE_* variables over the defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from webhook.server.settings import Settings


def test_variables_fill_what_flags_leave_out_and_flags_win():
    env = {"INFERGATE_PORT": "9443", "INFERGATE_HOST": "10.0.0.1", "INFERGATE_KUBE_STATE": "true",
           "INFERGATE_CERT_WATCH_INTERVAL": "0.2", "INFERGATE_CEL_ENGINE": "cel-python"}  # not a serve setting
    settings = Settings.load({"host": "127.0.0.1", "port": None, "cert_dir": "/tls"}, env)
    assert (settings.host, settings.port, settings.kube_state) == ("127.0.0.1", 9443, True)
    assert settings.cert_watch_interval == 0.2 and settings.cert_dir == Path("/tls")
    assert Settings.load({}, {}) == Settings()


@pytest.mark.parametrize("text", ['["a.example", "10.0.0.7"]', "a.example, 10.0.0.7"])
def test_list_variables_take_json_or_commas(text):
    assert Settings.load({}, {"INFERGATE_EXTRA_SANS": text}).extra_sans == ["a.example", "10.0.0.7"]


def test_a_bad_variable_names_its_field():
    with pytest.raises(ValidationError, match="port"):
        Settings.load({}, {"INFERGATE_PORT": "eighty"})
    with pytest.raises(ValidationError, match="cert_secret"):
        Settings.load({}, {"INFERGATE_CERT_SECRET": "no-namespace"})


@pytest.mark.parametrize("text, expected", [
    ("kubeai-model-engine=Warn,Audit", ["kubeai-model-engine=Warn,Audit"]),  # one override: its commas kept
    ('["a=Warn,Audit@team in (x,y)", "b=Audit"]', ["a=Warn,Audit@team in (x,y)", "b=Audit"]),
    ('{"a": ["Warn"]}', ['{"a": ["Warn"]}']),
])
def test_policy_actions_variable_is_one_override_or_a_json_list(text, expected):
    assert Settings.load({}, {"INFERGATE_POLICY_ACTIONS": text}).policy_actions == expected
