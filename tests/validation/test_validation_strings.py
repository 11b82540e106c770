"""``webhook.validation``: Kubernetes' name checks and strfmt formats, written once and used by both
the schema engine (ObjectMeta, ``format:`` keywords) and the CEL ``format`` library."""

from __future__ import annotations

import pytest

from webhook.cel import CelEvalError
from webhook.cel.crd import CostBudget, compile_schema_rules
from webhook.gocompat.time import parse_go_duration
from webhook.schema.crd_admission import check_crd
from webhook.schema.objectmeta import validate_object_meta
from webhook.validation import names, strfmt
from webhook.validation.strfmt import FORMAT_CHECKERS
from tests.support.cel import EVALUATOR

LABEL_REGEX_ERROR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def _cel_errors(fmt: str, value: str) -> list[str]:
    """What ``format.<fmt>().validate(value)`` answers, as a list ([] for optional.none())."""
    program = EVALUATOR.engine.compile(f"format.{fmt}().validate(v).orValue([])", ["v"])
    return list(program.evaluate({"v": value}))


@pytest.mark.parametrize("value,expected", [
    ("my-name", []),
    ("a.b", ["must not contain dots"]),  # a valid subdomain that is no label: IsDNS1123Label's own wording
    ("Bad_Label", [LABEL_REGEX_ERROR]),
    ("a" * 64, ["must be no more than 63 characters"]),
    ("a." + "b" * 62, ["must be no more than 63 characters", "must not contain dots"]),
])
def test_dns1123_label_is_one_check_for_namespaces_and_cel(value, expected):
    assert names.dns1123_label(value) == expected
    assert _cel_errors("dns1123Label", value) == expected
    namespace_errors = validate_object_meta({"name": "x", "namespace": value}, namespaced=True)
    assert [e.detail for e in namespace_errors] == expected


def test_prefix_checks_mask_a_trailing_dash_as_go_does():
    assert names.name_is_dns_label("abc-", True) == [] and names.name_is_dns_label("abc-", False) != []
    assert _cel_errors("dns1123LabelPrefix", "abc-") == [] and _cel_errors("dns1035LabelPrefix", "abc-") == []
    assert _cel_errors("dns1123SubdomainPrefix", "-") == names.dns1123_subdomain("-")


@pytest.mark.parametrize("fmt,value,valid", [
    ("uuid", "123e4567-e89b-12d3-a456-426614174000", True),
    ("uuid", "123E4567E89B12D3A456426614174000", True),
    ("uuid", "123e4567e89b-12d3-a456-426614174000", True),  # kube-openapi's dashes are each optional
    ("uuid", "123e4567-e89b-12d3-a456-42661417400", False),
    ("byte", "aGVsbG8=", True),
    ("byte", "", False),  # govalidator's IsBase64 wants at least one quantum (recorded: w-045)
    ("byte", "aGVsbG8", False),
    ("date", "0000-01-01", True),  # Go's time.Parse knows year 0
    ("date", "2024-02-30", False),
    ("datetime", "2020-01-01T00:00:00Z", True),
    ("datetime", "2020-01-32T00:00:00Z", False),
])
def test_cel_formats_are_the_schema_engine_checkers(fmt, value, valid):
    assert FORMAT_CHECKERS[fmt](value) is valid
    messages = {"uuid": "does not match the UUID format", "byte": "invalid base64", "date": "invalid date",
                "datetime": "invalid datetime"}
    assert _cel_errors(fmt, value) == ([] if valid else [messages[fmt]])


@pytest.mark.parametrize("text, go, kube_openapi", [
    ("1h2m3s4ms", 3_723_004_000_000, 3_723_004_000_000),
    ("-1.5s", -1_500_000_000, -1_500_000_000),
    (".5s", 500_000_000, 500_000_000),
    ("1.s", 1_000_000_000, 1_000_000_000),
    ("9223372036854775807ns", 2 ** 63 - 1, 2 ** 63 - 1),
    ("-9223372036854775808ns", -2 ** 63, -2 ** 63),
    ("9223372036854775808ns", None, None),  # Go: overflow
    ("2562048h", None, 2562048 * 3_600_000_000_000 - 2 ** 64),  # the scala form wraps silently, as Go's int64
    ("3 days", None, 3 * 86_400_000_000_000),
    ("1 weeks 2 hrs", None, 604_800_000_000_000),  # "hrs" is no unit: only the week counts
    ("1", None, None), (".s", None, None), ("", None, None), ("5 parsecs", None, None), ("-1 s", None, None),
])
def test_durations_parse_as_go_and_kube_openapi_do(text, go, kube_openapi):
    assert parse_go_duration(text) == go
    assert strfmt.parse_duration(text) == kube_openapi
    assert FORMAT_CHECKERS["duration"](text) is (kube_openapi is not None)


def test_cel_reads_a_format_duration_as_kubernetes_does():
    schema = {"type": "object", "properties": {"t": {"type": "string", "format": "duration"}},
              "x-kubernetes-validations": [{"rule": "self.t == duration('72h')"}]}
    rules = compile_schema_rules(schema, is_root=False, engine=EVALUATOR.engine)
    assert rules.evaluate({"t": "3 days"}, budget=CostBudget()) == []
    assert rules.evaluate({"t": "72h"}, budget=CostBudget()) == []
    assert [r.message for r in rules.evaluate({"t": "1h"}, budget=CostBudget())] == [
        "failed rule: self.t == duration('72h')"]


@pytest.mark.parametrize("text, error", [
    ("https://example.com/a?b=c#d", None),
    ("/just/a/path", None),
    ("*", None),
    ("https://example.com/a%zz", 'parse "https://example.com/a%zz": invalid URL escape "%zz"'),
    ("http://x/%2", 'parse "http://x/%2": invalid URL escape "%2"'),
    ("not a uri", 'parse "not a uri": invalid URI for request'),
])
def test_one_url_parser_for_the_uri_format_and_cel(text, error):
    """Go's url.ParseRequestURI behind the schema's ``format: uri``, ``format.uri()`` and ``isURL()``."""
    assert FORMAT_CHECKERS["uri"](text) is (error is None)
    assert _cel_errors("uri", text) == ([] if error is None else [error])
    assert EVALUATOR.engine.compile("isURL(v)", ["v"]).evaluate({"v": text}) is (error is None)


@pytest.mark.parametrize("pattern, go_error", [
    ("x{2,1}", "invalid repeat count: `{2,1}`"),
    ("a)", "unexpected ): `a)`"),
    ("(a", "missing closing ): `(a`"),
    ("a**", "invalid nested repetition operator: `**`"),
    ("\\", "trailing backslash at end of expression: `\\`"),
])
def test_one_go_regexp_error_for_crd_patterns_and_cel(pattern, go_error):
    """Go's regexp.Compile wording, the same in a CRD's ``pattern`` and in CEL's regex functions."""
    crd = {"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
        "type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}}}]}}
    errors, _ = check_crd(crd, EVALUATOR)
    assert f"error parsing regexp: {go_error}" in errors[0]
    with pytest.raises(CelEvalError) as caught:
        EVALUATOR.engine.compile("s.find(p)", ["s", "p"]).evaluate({"s": "x", "p": pattern})
    assert str(caught.value) == f"Illegal regex: {go_error}"
