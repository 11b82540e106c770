"""A CRD ``date-time`` field's offset, as cel-go keeps it: Kubernetes reads the field with
kube-openapi's strfmt.ParseDateTime (Go's time.Parse: a fixed zone for a non-zero offset, the
apiserver's Local, UTC, for a zero one) into a ``types.Timestamp`` holding that ``time.Time``.

Where cel-go shows the location: ``string()`` is ``t.Format(time.RFC3339Nano)``
(cel-go common/types/timestamp.go, ``ConvertToType(StringType)``), and so is ``format``'s
``%s`` (ext/formatting.go, ``formatString``: ``arg.ConvertToType(types.StringType)``; the
strings extension at version 2, as Kubernetes enables it). Where it does not:
comparisons are on instants, and the getters without a time zone argument read UTC (cel-go
common/stdlib/standard.go: ``timestampGetHours(ts, utcTZ)``). Both engines must agree."""

from __future__ import annotations

import pytest

from webhook.cel.crd import CostBudget, compile_schema_rules
from webhook.cel import Evaluator

ENGINES = ["cel-expr", "cel-python"]


def _schema(*entries: dict) -> dict:
    """A fresh schema node (rules are cached per node object, so per engine too)."""
    return {
        "type": "object",
        "properties": {
            "since": {"type": "string", "format": "date-time"},
            "times": {"type": "array", "maxItems": 4, "items": {"type": "string", "format": "date-time"}},
            "day": {"type": "string", "format": "date"},
        },
        "x-kubernetes-validations": list(entries),
    }


def failed(engine: str, value: dict, *entries: dict) -> list:
    rules = compile_schema_rules(_schema(*entries), is_root=False, path="spec", engine=Evaluator(engine).engine)
    return rules.evaluate(value, budget=CostBudget())


# (the field's text, cel-go's string() of it): Go's RFC3339Nano layout
# "2006-01-02T15:04:05.999999999Z07:00" trims the fraction's trailing zeros (and a bare dot)
# and writes "Z" for UTC, the offset otherwise
GO_STRINGS = [
    ("2011-08-18T19:03:37.01+01:00", "2011-08-18T19:03:37.01+01:00"),  # crd_values-0161
    ("2011-08-18T19:03:37.010000-05:30", "2011-08-18T19:03:37.01-05:30"),
    ("2011-08-18T19:03:37.000+09:00", "2011-08-18T19:03:37+09:00"),
    ("2011-08-18T19:03:37+00:00", "2011-08-18T19:03:37Z"),  # a zero offset is the apiserver's UTC
    ("2011-08-18T19:03:37.123456Z", "2011-08-18T19:03:37.123456Z"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("text, expected", GO_STRINGS, ids=[t for t, _ in GO_STRINGS])
def test_string_of_a_date_time_field_prints_its_own_offset(engine, text, expected) -> None:
    value = {"since": text, "times": [text]}
    assert failed(engine, value,
                  {"rule": f"string(self.since) == '{expected}'"},
                  {"rule": f"string(self.times[0]) == '{expected}'"}) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_message_expression_prints_the_offset_too(engine) -> None:
    [result] = failed(engine, {"since": "2011-08-18T19:03:37.01+01:00"},
                      {"rule": "false", "messageExpression": "'since ' + string(self.since)"})
    assert result.message == "since 2011-08-18T19:03:37.01+01:00"


@pytest.mark.parametrize("engine", ENGINES)
def test_format_s_prints_the_offset(engine) -> None:
    value = {"since": "2011-08-18T19:03:37.01+01:00", "times": ["2011-08-18T19:03:37-07:00"]}
    assert failed(engine, value,
                  {"rule": "'%s'.format([self.since]) == '2011-08-18T19:03:37.01+01:00'"},
                  {"rule": "'%d: %s'.format([1, self.times[0]]) == '1: 2011-08-18T19:03:37-07:00'"}) == []
    [result] = failed(engine, value,
                      {"rule": "false", "messageExpression": "'since %s'.format([self.since])"})
    assert result.message == "since 2011-08-18T19:03:37.01+01:00"


@pytest.mark.parametrize("engine", ENGINES)
def test_the_instant_and_the_getters_are_utc(engine) -> None:
    value = {"since": "2011-08-18T19:03:37.01+01:00", "day": "2011-08-18"}
    assert failed(engine, value,
                  {"rule": "self.since == timestamp('2011-08-18T18:03:37.01Z')"},
                  {"rule": "self.since.getHours() == 18 && self.since.getHours('+01:00') == 19"},
                  {"rule": "string(self.day) == '2011-08-18T00:00:00Z'"},
                  {"rule": "string(self.since).size() == 28 && self.since - duration('1h') < self.since"}) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_a_value_of_another_kind_is_converted_as_before(engine) -> None:
    # text that is no date-time (only rules run on data that skipped validation meet it) stays a string
    [result] = failed(engine, {"since": "not a time"}, {"rule": "string(self.since) == 'x'"})
    assert result.error is None
    assert failed(engine, {"since": "not a time"}, {"rule": "string(self.since) == 'not a time'"}) == []
