"""The Go ports behind the Kubernetes libraries, on cases the upstream vectors leave out."""

import pytest

from webhook.cel import CelEvalError
from webhook.cel.library import LibraryError
from webhook.cel.library import format as fmt
from webhook.cel.library.ip import parse_ip
from webhook.cel.library.quantity import parse_quantity
from webhook.cel.library.semver import semver
from tests.support.cel import EVALUATOR


def evaluate(rule, **variables):
    return EVALUATOR.engine.compile(rule, variables).evaluate(variables)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("010.0.0.1", 'ParseAddr("010.0.0.1"): IPv4 field has octet with leading zero'),
        ("1.2.3", 'ParseAddr("1.2.3"): IPv4 address too short'),
        ("256.0.0.1", 'ParseAddr("256.0.0.1"): IPv4 field has value >255'),
        ("fe80::1%", 'ParseAddr("fe80::1%"): zone must be a non-empty string'),
        ("1::2::3", 'ParseAddr("1::2::3"): multiple :: in address (at ":3")'),
        ("host", 'ParseAddr("host"): unable to parse IP'),
    ],
)
def test_ip_parse_errors_read_as_go(text, message):
    with pytest.raises(LibraryError) as err:
        parse_ip(text)
    assert str(err.value) == f'IP Address "{text}" parse error during conversion from string: {message}'


def test_ip_rejects_zones_and_ipv4_mapped_ipv6():
    with pytest.raises(LibraryError, match='IP address "fe80::1%eth0" with zone value is not allowed'):
        parse_ip("fe80::1%eth0")
    with pytest.raises(LibraryError, match='IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed'):
        parse_ip("::ffff:1.2.3.4")


def test_ip_canonical_forms():
    assert parse_ip("2001:DB8:0:0:0:0:0:1").key == "2001:db8::1"
    assert evaluate("ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:db8:0::1')") is True
    assert evaluate("ip('10.0.0.1').isGlobalUnicast() && !ip('ff02::1').isGlobalUnicast()") is True


def test_cidr_keeps_host_bits_and_masks_them_on_request():
    assert evaluate("string(cidr('10.1.2.3/8')) == '10.1.2.3/8' && string(cidr('10.1.2.3/8').masked()) == '10.0.0.0/8'")
    with pytest.raises(CelEvalError, match=r'netip.ParsePrefix\("10.0.0.0/33"\): prefix length out of range'):
        evaluate("cidr('10.0.0.0/33')")


def test_quantities_round_up_to_nano_and_compare_exactly():
    assert parse_quantity("0.0000000001").key == "1E-9"
    assert parse_quantity("-0.0000000001").key == "-1E-9"
    assert parse_quantity("1Ki") == parse_quantity("1024")
    assert parse_quantity("100Ei").key == str(2**63 - 1)  # binary quantities cap at int64
    assert evaluate("quantity('1.5Gi').isGreaterThan(quantity('1.6G')) == true") is True
    assert evaluate("quantity('999m').add(quantity('1m')) == quantity('1')") is True
    assert evaluate("sign(quantity('-1m')) == -1 && quantity('2.5').isInteger() == false") is True


def test_quantity_parse_errors():
    with pytest.raises(LibraryError, match="quantities must match the regular expression"):
        parse_quantity("1.2.3")
    with pytest.raises(LibraryError, match="unable to parse quantity's suffix"):
        parse_quantity("1kk")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.2", "No Major.Minor.Patch elements found"),
        ("1.2.03", 'Patch number must not contain leading zeroes "03"'),
        ("1.2.3-01", 'Numeric PreRelease version must not contain leading zeroes "01"'),
        ("1.2.3+", "Build meta data is empty"),
        ("a.2.3", 'Invalid character(s) found in major number "a"'),
    ],
)
def test_semver_parse_errors(text, message):
    with pytest.raises(LibraryError, match=message.replace("(", r"\(").replace(")", r"\)")):
        semver(text)


def test_semver_precedence_ignores_build_metadata():
    assert evaluate("semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))") is True
    assert evaluate("semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))") is True
    assert evaluate("semver('1.0.0+build.1') == semver('1.0.0+build.2')") is True
    assert evaluate("semver('v1.2', true).minor() == 2") is True


def test_url_errors_and_getters():
    with pytest.raises(CelEvalError, match='URL parse error during conversion from string: parse "../x": invalid URI for request'):
        evaluate("url('../x')")
    assert evaluate("url('https://[::1]:8443/a%20b?x=1&x=2').getQuery() == {'x': ['1', '2']}") is True
    assert evaluate("url('https://[::1]:8443/a%20b').getEscapedPath() == '/a%20b'") is True
    assert evaluate("url('https://[::1]:8443/').getHostname() == '::1'") is True


def test_named_format_messages():
    assert fmt.VALIDATORS["qualifiedName"]("/name") == ["prefix part must be non-empty"]
    # apimachinery v0.36: IsValidLabelValue is content.IsLabelValue (bytes)
    assert fmt.VALIDATORS["labelValue"]("a" * 64)[0] == "must be no more than 63 bytes"
    assert fmt.VALIDATORS["qualifiedName"]("a/b/c") == [
        "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
        "(e.g. 'example.com/MyName')"]
    assert fmt.VALIDATORS["dns1123Label"]("a.b") == ["must not contain dots"]
    assert fmt.VALIDATORS["dns1123LabelPrefix"]("abc-") == []  # a trailing dash is allowed in a prefix
    assert fmt.VALIDATORS["uuid"]("123E4567E89B12D3A456426614174000") == []


def test_regex_find_all_with_groups_and_limits():
    assert evaluate("'a1b22c333'.findAll('([a-z])([0-9]+)', 2) == ['a1', 'b22']") is True
    assert evaluate("s.find('[0-9]+') == ''", s="none") is True
    with pytest.raises(CelEvalError, match="Illegal regex"):
        evaluate("s.find(p)", s="x", p="(")


def test_list_functions_on_mixed_lists():
    # cel-go's isSorted compares neighbours of one kind only (test_cel_go_parity has the rest)
    assert evaluate("l.isSorted()", l=[1, "a"]) is True
    with pytest.raises(CelEvalError, match="no such overload"):
        evaluate("l.isSorted()", l=[1, None])
    assert evaluate("l.sum() == 3.5", l=[1.5, 2.0]) is True
    assert evaluate("l.min() == 'a' && l.max() == 'c'", l=["b", "a", "c"]) is True
