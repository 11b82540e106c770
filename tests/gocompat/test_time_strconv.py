"""Go's time and strconv parsers and formats, as Kubernetes' answers show them."""

from datetime import datetime, timedelta, timezone

import pytest

from webhook.gocompat.strconv import go_parse_float, go_parse_int
from webhook.gocompat.time import go_rfc3339_nano, parse_go_duration, parse_rfc3339
from webhook.cel import Evaluator


@pytest.mark.parametrize("moment, text", [
    (datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "2026-01-02T03:04:05Z"),
    (datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=timezone.utc), "2026-01-02T03:04:05.12Z"),
    (datetime(1, 1, 1, tzinfo=timezone.utc), "0001-01-01T00:00:00Z"),  # Go pads the year to four digits
    (datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=-5, minutes=-30))), "2026-01-02T03:04:05-05:30"),
])
def test_rfc3339_nano(moment, text):
    assert go_rfc3339_nano(moment) == text


def test_rfc3339_round_trip_and_refusals():
    assert parse_rfc3339("2026-01-02T03:04:05.5+01:00") == datetime(2026, 1, 2, 2, 4, 5, 500000, tzinfo=timezone.utc)
    for text in ("2026-01-02t03:04:05Z", "2026-01-02T03:04:60Z", "2026-02-30T00:00:00Z", "2026-01-02T03:04:05+0100"):
        assert parse_rfc3339(text) is None, text


@pytest.mark.parametrize("text, nanos", [("1h30m", 5_400_000_000_000), ("-1.5s", -1_500_000_000), ("0", 0),
                                         ("1µs", 1_000), ("", None), ("1", None), ("1d", None)])
def test_parse_duration(text, nanos):
    assert parse_go_duration(text) == nanos


def test_parse_int_and_float_as_go():
    assert go_parse_int("-9223372036854775808") == -(2**63) and go_parse_int("9223372036854775808") is None
    assert go_parse_int("-1", signed=False) is None and go_parse_int("18446744073709551615", signed=False) == 2**64 - 1
    assert go_parse_int(" 1") is None and go_parse_int("1_000") is None
    assert go_parse_float("0x1p-2") == 0.25 and go_parse_float("0x1") is None and go_parse_float("1e309") is None


@pytest.mark.parametrize("engine", ["cel-expr", "cel-python"])
def test_string_format_prints_timestamps_as_go(engine):
    """cel-go's ``%s`` of a timestamp is ``Format(time.RFC3339Nano)`` in UTC: a year below 1000 padded."""
    program = Evaluator(engine).engine.compile("'%s'.format([timestamp('0001-01-01T00:00:00Z')])", ())
    assert program.evaluate({}) == "0001-01-01T00:00:00Z"
