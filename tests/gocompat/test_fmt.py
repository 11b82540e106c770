"""Go's printing of values, as it shows in the apiserver's messages."""

import pytest

from webhook.cel.crd.rule_entry import go_rule_json
from webhook.gocompat.fmt import go_float, go_json, go_quote, go_struct_json, go_value
from webhook.validation.names import qualified_name
from webhook.validation.strfmt import FORMAT_CHECKERS


@pytest.mark.parametrize("value,text", [
    (5.0, "5"), (0.5, "0.5"), (0.35, "0.35"), (1e6, "1e+06"), (123456.0, "123456"), (1234567.0, "1.234567e+06"),
    (1e-05, "1e-05"), (0.0001, "0.0001"), (-1.5, "-1.5"), (1.7e308, "1.7e+308"),
])
def test_float_verb_v(value, text):
    assert go_float(value) == text


@pytest.mark.parametrize("value,text", [(5.0, "5"), (1e6, "1000000"), (1e21, "1e+21"), (1e-7, "1e-7")])
def test_float_json(value, text):
    assert go_float(value, json_style=True) == text


def test_quote_keeps_printable_unicode_and_escapes_the_rest():
    assert go_quote('Hello "World"\tñ\x01\\') == '"Hello \\"World\\"\\tñ\\x01\\\\"'


def test_json_is_compact_sorted_and_html_safe():
    assert go_json({"b": [1, 2.0, "<&>"], "a": None, "c": True}) == '{"a":null,"b":[1,2,"\\u003c\\u0026\\u003e"],"c":true}'


def test_struct_json_keeps_field_order_and_go_escapes():
    assert go_struct_json({"b": 1, "a": {"d": 1, "c": "<"}}) == '{"b":1,"a":{"c":"\\u003c","d":1}}'
    assert go_rule_json({"rule": "self.a < 1", "reason": "Odd\x01"}) == (
        '{"Rule":"self.a \\u003c 1","Message":"","MessageExpression":"","Reason":"Odd\\u0001","FieldPath":"",'
        '"OptionalOldSelf":null}')


def test_value_verb():
    assert go_value("hello") == "hello" and go_value(3) == "3" and go_value([1, "a"]) == "[1 a]"
    assert go_value({"b": 1, "a": True}) == "map[a:true b:1]"


def test_qualified_name_messages():
    assert qualified_name("example.com/ok") == []
    # apimachinery v0.36: IsQualifiedName is content.IsLabelKey, worded as label keys, lengths in bytes
    assert qualified_name("a/b/c")[0].startswith("a valid label key must consist of alphanumeric characters")
    assert qualified_name("x" * 64) == ["name part must be no more than 63 bytes"]
    assert qualified_name("e" * 254 + "/x")[0] == "prefix part must be no more than 253 bytes"
    assert qualified_name("-x") == [
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]


@pytest.mark.parametrize("fmt,good,bad", [
    ("isbn10", "0-306-40615-2", "0-306-40615-3"),
    ("isbn13", "978-0-306-40615-7", "978-0-306-40615-8"),
    ("creditcard", "4111 1111 1111 1111", "4111 1111 1111 1112"),
    ("ssn", "123-45-6789", "123-456-789"),
    ("rgbcolor", "rgb(0, 128, 255)", "rgb(256,0,0)"),
    ("bsonobjectid", "507f1f77bcf86cd799439011", "507f1f77bcf86cd79943901"),
    ("uri", "https://example.com/a", "not a uri"),
    ("k8sshortname", "my-name", "My-Name"),
    ("uuid5", "123e4567-e89b-52d3-a456-426614174000", "123e4567-e89b-42d3-a456-426614174000"),
])
def test_more_formats(fmt, good, bad):
    assert FORMAT_CHECKERS[fmt](good) and not FORMAT_CHECKERS[fmt](bad)
