"""Where cel-cpp (and celpy) answer differently from cel-go as Kubernetes runs it, both engines
answer as cel-go does: compile errors, runtime errors and values (cel-go's source is the
reference: ext/lists.go, common/decls, common/types, Kubernetes' library/lists.go)."""

import datetime

import pytest

from tests.cel.vectors import engine_for
import yaml

from webhook.cel import CelCompileError, CelEvalError
from webhook.cel.checker.checker import check
from webhook.cel.crd import ABSENT, CostBudget, CrdRuleError, compile_schema_rules
from webhook.cel.syntax.parser import parse
from webhook.cel.common.types import INT
from webhook.schema import CRDRegistry
from tests.support.cel import EVALUATOR
from webhook.cel import Evaluator

ENGINES = ["cel-expr", "cel-python"]


@pytest.fixture(params=ENGINES)
def engine(request):
    return engine_for(request.param)


def evaluate(engine, expression, **variables):
    return engine.compile(expression, variables.keys()).evaluate(variables)


def outcome(engine, expression, **variables):
    """``("value", v)`` or ``("error", message)``: cel-go's answer either way, as recorded."""
    try:
        return "value", evaluate(engine, expression, **variables)
    except CelEvalError as err:
        return "error", str(err)


def error_of(engine, expression, **variables):
    with pytest.raises(CelEvalError) as caught:
        evaluate(engine, expression, **variables)
    return str(caught.value)


def compile_error_of(engine, expression, *variables):
    with pytest.raises(CelCompileError) as caught:
        engine.compile(expression, variables)
    return str(caught.value)


# --- compile errors --------------------------------------------------------------------------


@pytest.mark.parametrize("expression, report", [
    # cel-go's homogeneousAggregateLiteralValidator (cel/validator.go): every element has the
    # first one's type, dyn being a type of its own (Kubernetes vector sets-0049: a in [b, 32])
    ("[a, 32]", "ERROR: <input>:1:5: expected type 'dyn' but found 'int'\n | [a, 32]\n | ....^"),
    ("[1, dyn('x')]",  # (a call's position is its '(')
     "ERROR: <input>:1:8: expected type 'int' but found 'dyn'\n | [1, dyn('x')]\n | .......^"),
    # a map reports every key and value that differs from the first entry's, in source order
    ("{'a': 1, 'b': a, a: 2}",
     "ERROR: <input>:1:15: expected type 'int' but found 'dyn'\n | {'a': 1, 'b': a, a: 2}\n | ..............^\n"
     "ERROR: <input>:1:18: expected type 'string' but found 'dyn'\n | {'a': 1, 'b': a, a: 2}\n | .................^"),
])
def test_literals_of_dyn_and_typed_values(engine, expression, report):
    assert compile_error_of(engine, expression, "a") == report


def test_literals_may_mix_dyn_values_where_the_caller_says_so(engine):
    # a CRD rule's self (typed by checker.py against the schema), infergate's JSON patch maps
    program = engine.compile("[a, 32] == [dyn(1), 32] && size({'op': 'add', 'value': dyn(0)}) == 2",
                             ["a"], mixed_literals=True)
    assert program.evaluate({"a": 1}) is True


@pytest.mark.parametrize("expression, report", [
    # a declared function with an arity it lacks: cel-cpp says "undeclared reference"
    ("'hello'.substring(1, 2, 3)",
     "ERROR: <input>:1:18: found no matching overload for 'substring' applied to 'string.(int, int, int)'\n"
     " | 'hello'.substring(1, 2, 3)\n | .................^"),
    ("self.indexOf('a', 1, 2, 3)",
     "ERROR: <input>:1:13: found no matching overload for 'indexOf' applied to 'dyn.(string, int, int, int)'\n"
     " | self.indexOf('a', 1, 2, 3)\n | ............^"),
    ("sets.contains([1])",  # cel-cpp: the namespace undeclared, the call on an error
     "ERROR: <input>:1:14: found no matching overload for 'sets.contains' applied to '(list(int))'\n"
     " | sets.contains([1])\n | .............^"),
    ("optional.of(1, 2)",
     "ERROR: <input>:1:12: found no matching overload for 'optional.of' applied to '(int, int)'\n"
     " | optional.of(1, 2)\n | ...........^"),
    # what cel-go does not declare stays undeclared
    ("self.foo(1)", "ERROR: <input>:1:9: undeclared reference to 'foo' (in container '')\n | self.foo(1)\n | ........^"),
    # conversions cel-cpp declares and cel-go does not
    ("duration(1)",
     "ERROR: <input>:1:9: found no matching overload for 'duration' applied to '(int)'\n | duration(1)\n | ........^"),
])
def test_compile_errors_read_as_cel_go(engine, expression, report):
    assert compile_error_of(engine, expression, "self") == report


@pytest.mark.parametrize("literal, valid", [
    ("2000-01-01T00:00:00,5Z", True), ("2000-01-01t00:00:00z", False), ("0000-01-01T00:00:00Z", False),
    ("9999-12-31T23:59:59-01:00", False),  # past year 9999 in UTC
])
def test_timestamp_literals_are_checked_by_gos_parser(engine, literal, valid):
    expression = f"timestamp('{literal}') > timestamp(0)"
    if valid:
        assert evaluate(engine, expression) is True
    else:
        assert "invalid timestamp argument" in compile_error_of(engine, expression)


@pytest.mark.parametrize("literal, valid", [
    ("+1s", True), ("1μs", True), ("1µs", True), ("2562047h47m16.854775807s", True),  # Go accepts
    ("2562047h47m16.854775808s", False), ("3000000h", False), ("1", False),        # beyond Go's int64 ns
])
def test_duration_literals_are_checked_by_gos_parser(engine, literal, valid):
    expression = f"duration('{literal}') > duration('0s')"
    if valid:
        assert evaluate(engine, expression) is True
    else:
        assert "invalid duration argument" in compile_error_of(engine, expression)


def test_overloads_resolve_in_kubernetes_declaration_order():
    """cel-go binds ``[]``'s element type to the first overload that fits: int."""
    for function in ("sum", "min", "max"):
        assert check(parse(f"[].{function}()"), {}, {}).result_type == INT


# --- runtime: Kubernetes' list functions and the strings extension on dyn values ---------------


@pytest.mark.parametrize("expression, value, message", [
    ("self.isSorted()", {"a": 1}, "no such overload: isSorted(map)"),
    ("self.max()", "ab", "no such overload: max(string)"),
    ("self.indexOf(1)", {"a": 1}, "no such overload: indexOf(map, int)"),
    ("self.lastIndexOf('b')", None, "no such overload: lastIndexOf(null_type, string)"),
    ("self.indexOf('b', 1)", {"a": 1}, "no such overload: indexOf(map, string, int)"),  # cel-cpp: -1
    ("self.charAt(0)", [1], "no such overload: charAt(list, int)"),
    ("'abc'.substring(self)", True, "no such overload: substring(string, bool)"),
])
def test_failed_dispatch_names_the_runtime_types(engine, expression, value, message):
    assert error_of(engine, expression, self=value) == message


@pytest.mark.parametrize("expression, value, message", [
    ("quantity(self)", 2, "no such overload: quantity(int)"),  # an int-or-string field holding an int
    ("url(self).getHost()", None, "no such overload: url(null_type)"),
    ("self.getHost()", "http://x", "no such overload: getHost(string)"),
    ("cidr('10.0.0.0/8').containsIP(self)", [1], "no such overload: containsIP(net.CIDR, list)"),
    ("format.dns1123Label().validate(self)", 1, "no such overload: validate(kubernetes.NamedFormat, int)"),
    ("self.format([1])", datetime.timedelta(seconds=1), "no such overload: format(google.protobuf.Duration, list)"),
])
def test_kubernetes_library_calls_name_the_runtime_types(engine, expression, value, message):
    assert error_of(engine, expression, self=value) == message


@pytest.mark.parametrize("expression, value, message", [
    ("self.lowerAscii()", {"a": 1}, "no such overload: lowerAscii(map)"),
    ("self.replace('a', 'b')", 1, "no such overload: replace(int, string, string)"),
    ("self.slice(0, 1)", "ab", "no such overload: slice(string, int, int)"),
    ("lists.range(self)", "3", "no such overload: lists.range(string)"),  # not the cost guard's comparison
    ("sets.intersects([1], self)", {"a": 1}, "no such overload: sets.intersects(list, map)"),  # celpy: false
    ("self.sort()", {"a": 1}, "no such overload: sort"),  # a trait check in cel-go, not a type guard
    ("self.sort()", "ab", "no such overload"),  # a string is a receiver type
])
def test_extension_calls_name_the_runtime_types(engine, expression, value, message):
    assert error_of(engine, expression, self=value) == message


@pytest.mark.parametrize("engine_name", ["cel-expr", "cel-python"])
@pytest.mark.parametrize("expression, value, expected", [
    # cel-cpp's own words ("Applying SELECT to non-message type", "Invalid container type") make
    # the cel-expr backend hand the evaluation to cel-python, which follows cel-go
    ("self.foo", "a", ("error", "no such key: foo")),  # cel-go qualifies any other value as a missing key
    ("self.foo", [1], ("error", "unsupported index type 'string' in list")),
    ("has(self.foo)", 1, ("value", False)),
    ("has(self.foo)", [1], ("error", "unsupported index type 'string' in list")),
    ("self[1]", "ab", ("error", "no such key: 1")),
])
def test_selecting_from_another_value(engine_name, expression, value, expected):
    engine = engine_for(engine_name)
    assert outcome(engine, expression, self=value) == expected


@pytest.mark.parametrize("expression, value, expected", [
    # cel-go qualifies optionally with a presence test (interpreter/attributes.go refQualify): a
    # value with no fields or elements has none, so the answer is optional.none()
    ("self.?foo.orValue(2)", None, ("value", 2)),
    ("self.?a.b.orValue(2)", None, ("value", 2)),  # after .?, every qualifier tests presence
    ("self.?a.?b.orValue(2)", {"a": None}, ("value", 2)),
    ("self.?a.?b.orValue(2)", {"a": "x"}, ("value", 2)),
    ("self[?'a'].orValue(2)", None, ("value", 2)),
    ("self[?0].orValue(2)", "ab", ("value", 2)),
    ("self[?1].hasValue()", [1], ("value", False)),
    ("self[?0].orValue(2)", [1], ("value", 1)),
    # a list qualified by another type: types.IndexOrError
    ("self[?'a'].orValue(2)", [1], ("error", "unsupported index type 'string' in list")),
    ("self[?1.5].orValue(2)", [1], ("error", "unsupported index value 1.5 in list")),
    ("self.?a.?b.orValue(2)", {"a": [1]}, ("error", "unsupported index type 'string' in list")),
])
def test_optional_qualifiers_of_any_value(engine, expression, value, expected):
    assert outcome(engine, expression, self=value) == expected


def test_an_optional_index_at_the_root_is_an_optional(engine):
    # cel-cpp's checker types dyn[?int] as dyn: the value is still an optional
    assert evaluate(engine, "self[?0]", self=[7]) == evaluate(engine, "optional.of(7)")
    assert not evaluate(engine, "self[?1]", self=[7]).has_value


@pytest.mark.parametrize("key, message", [("'k'", "unsupported index type 'string' in list"),
                                          ("true", "unsupported index type 'bool' in list")])
def test_a_list_indexed_by_another_type(engine, key, message):
    assert error_of(engine, f"self[{key}]", self=[1]) == message


@pytest.mark.parametrize("expression, value, message", [
    # the first operand lacks the operator's trait: cel-go names the function
    ("self + 1", {"a": 1}, "no such overload: _+_"),
    ("self - 1", [1], "no such overload: _-_"),
    ("self < 1", None, "no such overload: _<_"),
    ("self % 2", 1.5, "no such overload: _%_"),
    ("size(self)", True, "no such overload: size"),
    # it has the trait (or is a receiver type): the operand's own error
    ("self + 1", "a", "no such overload"),
    ("self * 2", datetime.timedelta(seconds=1), "no such overload"),  # celpy scaled it
    ("1 + self", {"a": 1}, "no such overload"),
])
def test_operators_on_other_types_fail_as_cel_go_dispatches_them(engine, expression, value, message):
    assert error_of(engine, expression, self=value) == message


def test_types_are_values_with_their_qualified_names(engine):
    assert evaluate(engine, "type(self) == google.protobuf.Duration && type(timestamp(0)) == google.protobuf.Timestamp",
                    self=datetime.timedelta(seconds=1)) is True


def test_the_sum_of_a_map_is_an_error(engine):
    """cel-cpp summed the keys ('a'); the apiserver fails the dispatch (here without the
    runtime types, which keeps sum() on the native fast path)."""
    assert error_of(engine, "self.sum()", self={"a": 1}).startswith("no such overload")


@pytest.mark.parametrize("expression, value, expected", [
    # Kubernetes' library/lists.go on a dyn list: cel-go dispatches on the first element's type
    # (common/types.Type.IsAssignableRuntimeType; none of summableTypes/comparableTypes fits a map,
    # a list or null: common/decls MaybeNoSuchOverload names the function and the runtime type)
    ("self.sum()", [{}], ("error", "no such overload: sum(list)")),
    ("self.sum()", [None, None], ("error", "no such overload: sum(list)")),
    ("self.sum()", ["a", "b"], ("error", "no such overload: sum(list)")),
    ("self.min()", [{"a": 1}, {"b": 2}], ("error", "no such overload: min(list)")),
    ("self.max()", [None], ("error", "no such overload: max(list)")),
    ("self.max()", [[1], [2]], ("error", "no such overload: max(list)")),
    # a later element the chosen overload cannot add or compare: types.MaybeNoSuchOverloadErr
    ("self.sum()", [1, {}], ("error", "no such overload")),
    ("self.sum()", [1, 2.5], ("error", "no such overload")),  # Int.Add takes ints only
    ("self.min()", [1, None], ("error", "no such overload")),
    # min/max ignore the error of comparing two values of other kinds (cmp != IntOne)
    ("self.min()", [2, "a", 1], ("value", 1)),
    ("self.max()", ["a", 1], ("value", "a")),
    ("self.min()", [3, 1.5, 2], ("value", 1.5)),  # numbers compare across kinds
    ("self.sum()", [datetime.timedelta(seconds=1), datetime.timedelta(seconds=2)], ("value", datetime.timedelta(seconds=3))),
])
def test_sum_min_max_of_a_dyn_list(engine, expression, value, expected):
    assert outcome(engine, expression, self=value) == expected


@pytest.mark.parametrize("expression, value, expected", [
    # Kubernetes' library/lists.go isSorted on a dyn list: cel-go's dispatch tries the
    # list(int), list(uint), ... overloads in order, each matching on the first element only
    # (common/types.Type.isAssignableRuntimeType); none fits null, a map or a list:
    # common/decls.MaybeNoSuchOverload names the function and the runtime type
    ("self.isSorted()", [None], ("error", "no such overload: isSorted(list)")),
    ("self.isSorted()", [{"a": 1}], ("error", "no such overload: isSorted(list)")),
    ("self.isSorted()", [[1], [0]], ("error", "no such overload: isSorted(list)")),
    ("[null].isSorted()", None, ("error", "no such overload: isSorted(list)")),  # checked as list(duration)
    # an empty list fits the first overload; one element is never compared
    ("self.isSorted()", [], ("value", True)),
    ("self.isSorted()", [3], ("value", True)),
    # the walk: a later element that is no traits.Comparer fails (types.MaybeNoSuchOverloadErr),
    # the first pair whose Compare is IntOne ends it (false), and Compare of two other kinds is
    # an error, which is no IntOne: the pair counts as sorted
    ("self.isSorted()", [1, None], ("error", "no such overload")),
    ("self.isSorted()", [1, None, 2, 1], ("error", "no such overload")),
    ("self.isSorted()", [2, 1, None], ("value", False)),
    ("self.isSorted()", [1, "a"], ("value", True)),
    ("self.isSorted()", [2, "a", 1], ("value", True)),
    ("self.isSorted()", ["b", 1, "a"], ("value", True)),
    ("self.isSorted()", [True, 0], ("value", True)),
    ("self.isSorted()", [2, 1.5], ("value", False)),  # numbers compare across kinds
    ("self.isSorted()", [1, 1.5, 2], ("value", True)),
    ("self.isSorted()", ["a", "b", "a"], ("value", False)),
])
def test_is_sorted_of_a_dyn_list(engine, expression, value, expected):
    try:
        got = ("value", evaluate(engine, expression, self=value))
    except CelEvalError as err:
        got = ("error", str(err))
    assert got == expected


@pytest.mark.parametrize("expression, value, expected", [
    # cel-go ext/strings.go: list_join's runtime guard checks the first element (list(string));
    # joinValSeparator refuses a later one with fmt's %v of it
    ("self.join()", [1, 2], ("error", "no such overload: join(list)")),
    ("self.join(',')", [1, 2], ("error", "no such overload: join(list, string)")),
    ("self.join(',')", ["a", 1], ("error", "join: invalid input: 1")),
    ("self.join()", ["a", "b", 2.5], ("error", "join: invalid input: 2.5")),
    ("self.join('-')", ["a", "b"], ("value", "a-b")),
])
def test_join_of_other_values_than_strings(engine, expression, value, expected):
    assert outcome(engine, expression, self=value) == expected


@pytest.mark.parametrize("expression, value, message", [
    # a Kubernetes library method given a value of another type: the function's dispatch over its
    # Quantity and Semver overloads fails (common/decls MaybeNoSuchOverload with the runtime types)
    ("quantity('1').isGreaterThan(self)", 1, "no such overload: isGreaterThan(kubernetes.Quantity, int)"),
    ("quantity('1').compareTo(self)", "1", "no such overload: compareTo(kubernetes.Quantity, string)"),
    ("self.isLessThan(quantity('1'))", 1.5, "no such overload: isLessThan(double, kubernetes.Quantity)"),
    ("semver('1.0.0').compareTo(self)", 1, "no such overload: compareTo(kubernetes.Semver, int)"),
    ("quantity('1').isGreaterThan(dyn(semver('1.0.0')))", 0,
     "no such overload: isGreaterThan(kubernetes.Quantity, kubernetes.Semver)"),
])
def test_library_methods_on_a_value_of_another_type(engine, expression, value, message):
    assert error_of(engine, expression, self=value) == message


@pytest.mark.parametrize("value, negated", [
    (datetime.timedelta(seconds=90), datetime.timedelta(seconds=-90)),  # cel-go: Duration.Negate
    (datetime.timedelta(seconds=-1, microseconds=5), datetime.timedelta(microseconds=999995)),
    (3, -3),
])
def test_negating_a_dyn_duration(engine, value, negated):
    assert evaluate(engine, "-self", self=value) == negated


_CELPY_DURATIONS = pytest.mark.xfail(strict=True, reason=(
    "celpy's durations are datetime.timedelta subclasses (microseconds): the nanoseconds are gone "
    "before string.format sees them"))


@pytest.mark.parametrize("engine_name", ["cel-expr", pytest.param("cel-python", marks=_CELPY_DURATIONS)])
@pytest.mark.parametrize("expression, value, expected", [
    # cel-go: FormatString -> Duration.ConvertToType(StringType): FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
    ("'%s'.format([duration('2ns')])", None, "0.000000002s"),
    ("'%s and %s'.format([self + duration('1ns'), 1])", datetime.timedelta(seconds=1), "1.000000001s and 1"),
])
def test_format_prints_a_duration_to_the_nanosecond(engine_name, expression, value, expected):
    assert evaluate(engine_for(engine_name), expression, self=value) == expected


@pytest.mark.parametrize("engine_name", ["cel-expr", pytest.param("cel-python", marks=pytest.mark.xfail(
    strict=True, reason="celpy's maps are Python dicts: the keys 1 and true are one, the literal fails"))])
def test_format_prints_a_map_with_keys_one_and_true(engine_name):
    # cel-go formatMap: each key formatted, the entries sorted by it
    assert evaluate(engine_for(engine_name), "'%s'.format([{true: 'b', 1: 'a', 'k': self}])", self={"z": 0, "y": 1}) \
        == '{"k":{"y":1, "z":0}, 1:"a", true:"b"}'


@pytest.mark.parametrize("engine_name", ["cel-expr", pytest.param("cel-python", marks=_CELPY_DURATIONS)])
@pytest.mark.parametrize("expression, expected", [
    # cel-go formatList/formatMap: each element or value by its clause, quoted for CEL (quoteForCEL)
    ("'%s'.format([[duration('2ns')]])", '[duration("0.000000002s")]'),
    ("'%s'.format([[[duration('2ns'), duration('1s')]]])", '[[duration("0.000000002s"), duration("1s")]]'),
    ("'%s'.format([{'a': duration('2ns')}])", '{"a":duration("0.000000002s")}'),
    ("'%s'.format([[dyn(duration('2ns'))]])", '[duration("0.000000002s")]'),
])
def test_format_prints_a_nested_duration_to_the_nanosecond(engine_name, expression, expected):
    assert evaluate(engine_for(engine_name), expression) == expected


def test_format_prints_nested_lists_and_maps_of_other_values(engine):
    assert evaluate(engine, "'%s %s'.format([[1, 2], {'a': [self]}])", self="x") == '[1, 2] {"a":["x"]}'


@pytest.mark.parametrize("engine_name", ["cel-expr", pytest.param("cel-python", marks=pytest.mark.xfail(
    strict=True, reason="celpy's maps are Python dicts: the keys 1 and true are one, the literal fails"))])
@pytest.mark.parametrize("expression, expected", [
    ("'%s'.format([[{true: 'b', 1: 'a'}]])", '[{1:"a", true:"b"}]'),
    ("'%s'.format([{'x': {true: 'b', 1: 'a'}}])", '{"x":{1:"a", true:"b"}}'),
])
def test_format_prints_a_nested_map_with_keys_one_and_true(engine_name, expression, expected):
    assert evaluate(engine_for(engine_name), expression) == expected


@pytest.mark.xfail(strict=True, reason=(
    "a value checked as dyn is looked at one level deep (optimize.exact_arguments): here the inner "
    "map is a value of the outer map(dyn, dyn), and its duration reaches Python as cel-expr-python "
    "converts it (datetime.timedelta: microseconds)"))
def test_format_of_a_duration_inside_a_dyn_map():
    assert evaluate(engine_for("cel-expr"), "'%s'.format([{'x': {true: 'b', 1: 'a', 'k': {2: duration('3ns')}}}])") \
        == '{"x":{"k":{2:duration("0.000000003s")}, 1:"a", true:"b"}}'


def test_list_functions_still_take_lists(engine):
    # (sum() and max() of a dyn receiver are dyn, indexOf() an int: a literal of the three needs dyn())
    assert evaluate(engine, "[self.sum(), dyn(self.indexOf(2)), self.max()]", self=[3, 2]) == [5, 1, 3]
    assert evaluate(engine, "self.indexOf('b', 1)", self="abc") == 1


@pytest.mark.parametrize("depth, go_type", [("1", "types.String"), (1.5, "types.Double"), (True, "types.Bool"),
                                            (None, "types.Null")])
def test_a_flatten_depth_of_another_type_fails_as_the_apiserver_does(engine, depth, go_type):
    """The apiserver's cost tracker asserts the depth is a types.Int; the panic becomes the error."""
    assert error_of(engine, "[[1]].flatten(self)", self=depth) == \
        f"internal error: interface conversion: ref.Val is {go_type}, not types.Int"
    assert evaluate(engine, "[[1], [2, 3]].flatten(self)", self=1) == [1, 2, 3]


def test_a_negative_flatten_depth(engine):
    assert error_of(engine, "[[1]].flatten(self)", self=-1) == "level must be non-negative"


# --- runtime: zero values and conversions --------------------------------------------------------


def test_the_zero_timestamp_is_gos_zero_time(engine):
    year_one = datetime.datetime(1, 1, 1, tzinfo=datetime.timezone.utc)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    expression = "[optional.ofNonZeroValue(self).hasValue(), optional.ofNonZeroValue(other).hasValue(), " \
                 "optional.ofNonZeroValue(timestamp('0001-01-01T00:00:00Z')).hasValue()]"
    assert evaluate(engine, expression, self=year_one, other=epoch) == [False, True, False]


@pytest.mark.parametrize("expression, text, expected", [
    ("int(self)", "+12", 12),
    ("double(self)", "0x1p-2", 0.25),
    ("double(self)", "-Inf", float("-inf")),
    ("double(self)", "1e-400", 0.0),
    ("duration(self)", "1µs", datetime.timedelta(microseconds=1)),
    ("duration(self)", "+1.5h", datetime.timedelta(hours=1.5)),
    ("timestamp(self)", "2000-01-01T00:00:00,5+01:00",  # Go takes a comma before the fraction
     datetime.datetime(1999, 12, 31, 23, 0, 0, 500000, tzinfo=datetime.timezone.utc)),
])
def test_strings_convert_as_go_parses_them(engine, expression, text, expected):
    assert evaluate(engine, expression, self=text) == expected


@pytest.mark.parametrize("expression, text, target", [
    ("uint(self)", " 1", "uint"),      # cel-cpp's parsers skip surrounding space
    ("uint(self)", "1\n", "uint"),
    ("uint(self)", "+1", "uint"),      # ParseUint takes no sign
    ("uint(self)", "٣", "uint"),       # Python's int() takes any Unicode digit
    ("double(self)", " 1.5", "double"),
    ("double(self)", "0x10", "double"),  # a hex float needs its exponent
    ("double(self)", "1e400", "double"),  # out of range, not +Inf
    ("double(self)", "+nan", "double"),
    ("bool(self)", "yes", "bool"),
    ("duration(self)", "3000000h", "google.protobuf.Duration"),  # beyond time.Duration
    ("timestamp(self)", "2000-01-01", "google.protobuf.Timestamp"),
    ("timestamp(self)", "2000-01-01t00:00:00z", "google.protobuf.Timestamp"),  # time.Parse(time.RFC3339, s)
    ("timestamp(self)", "2000-01-01T00:00:00+0100", "google.protobuf.Timestamp"),
    ("timestamp(self)", "2000-01-01T23:59:60Z", "google.protobuf.Timestamp"),
    ("timestamp(self)", "2000-01-01 00:00:00Z", "google.protobuf.Timestamp"),
])
def test_unparsable_strings_are_cel_gos_conversion_error(engine, expression, text, target):
    assert error_of(engine, expression, self=text) == f"type conversion error from 'string' to '{target}'"


@pytest.mark.parametrize("expression", ["int(' 1')", "int('1\\n')", "int('٣')", "uint('+1')", "double('0x10')"])
def test_constant_strings_are_parsed_as_go_does(engine, expression):
    target = expression.split("(")[0]
    assert error_of(engine, expression) == f"type conversion error from 'string' to '{target}'"


@pytest.mark.parametrize("value", [" 1", "1 ", "\t1", "1\n", "\u00a01"])
def test_int_of_a_computed_padded_string(engine, value):
    # cel-go: strconv.ParseInt(s, 10, 64) takes no space (cel-cpp's parser skips it)
    assert error_of(engine, "int(self)", self=value) == "type conversion error from 'string' to 'int'"
    assert error_of(engine, "int(self.split(':')[1])", self="a:" + value) == "type conversion error from 'string' to 'int'"


def test_int_of_a_computed_string_keeps_the_native_fast_path():
    program = engine_for("cel-expr").compile("int(self) + int(self.split(':')[0]) == 4", ["self"])
    assert program.native is not None and program.native({"self": "2"}) is True


@pytest.mark.parametrize("expression, value, message", [
    ("timestamp(self)", "0000-01-01T00:00:00Z", "timestamp overflow"),
    ("int(self)", 1e30, "integer overflow"),
    ("int(self)", 2**64 - 1, "integer overflow"),  # a uint
    ("uint(self)", -1, "unsigned integer overflow"),
    ("uint(self)", -1.0, "unsigned integer overflow"),
])
def test_numeric_conversions_overflow_as_cel_go(engine, expression, value, message):
    assert error_of(engine, expression, self=value) == message


# Go strings hold any byte: a NUL in a key or a value is text like any other (a JSON object
# under x-kubernetes-preserve-unknown-fields can carry any key). cel-expr-python 0.1.3 cuts
# Python text at its first NUL, so those evaluations are the pure-Python backend's.
_NUL_TEXT = {"\x00abc": 1, "a\x00b": ["\x00", b"\x00z"], "k": {"\x01\x00": "x\x00y"}}


@pytest.mark.parametrize("expression, expected", [
    ("self", _NUL_TEXT),
    ("self.map(k, k)", list(_NUL_TEXT)),
    ("'\\x00abc' in self && self['a\\x00b'][0] == '\\x00' && self.k['\\x01\\x00'] == 'x\\x00y'", True),
    ("[size(self['a\\x00b'][0]), size(self['a\\x00b'][1]), size(self.k['\\x01\\x00'])]", [1, 2, 3]),
    ("self.all(k, size(k) >= 1) && self.exists(k, k.startsWith('\\x00'))", True),
])
def test_text_with_a_nul_reaches_cel_whole(engine, expression, expected):
    assert evaluate(engine, expression, self=_NUL_TEXT) == expected


def _nested(depth, value):
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", [{1: "a\x00"}, _nested(300, "a\x00")])
def test_text_with_a_nul_in_values_json_cannot_spell(engine, value):
    # (an int key, nesting past orjson's 255 levels: the values are walked instead)
    assert evaluate(engine, "self", self=value) == value


def test_a_library_result_with_a_nul_reaches_cel_whole(engine):
    # (a Python library function's result: the C++ runtime takes it as a StringValue)
    assert evaluate(engine, "['a\\x00%d'.format([self]), 'b\\x00%s'.format([self])] == ['a\\x001', 'b\\x001'] "
                    "&& size('a\\x00%d'.format([self])) == 3", self=1) is True
    assert evaluate(engine, "{'a\\x00%d'.format([self]): 'b\\x00%s'.format([self])}", self=1) == {"a\x001": "b\x001"}


def test_text_with_a_nul_reaches_cel_whole_from_shared_bindings():
    """(``bind``: values shared by many programs, the default engine's only)"""
    engine = engine_for("cel-expr")
    bindings = engine.bind({"object": {"\x00abc": "\x00"}, "other": "plain"})
    for expression, expected in (("object", {"\x00abc": "\x00"}), ("other + '!'", "plain!"),
                                 ("object.map(k, size(k) + size(object[k]))", [5])):
        program = engine.compile(expression, ["object", "other"])
        assert program.evaluate(bindings) == expected


def test_a_crd_rule_reads_unknown_fields_as_the_apiserver_decodes_them(tmp_path):
    """A map of any JSON values: keys with a NUL stay whole; integers past int64 are float64 (the apiserver's JSON decoding:
    json.Number as int64 when it fits, else float64), and CEL sees them as doubles."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {
                         "type": "object", "additionalProperties": {"x-kubernetes-preserve-unknown-fields": True},
                         "x-kubernetes-validations": [
                             {"rule": "'\\x00abc' in self && self.exists(k, size(k) == 4 && k.startsWith('\\x00'))"},
                             {"rule": "type(self.big) == double && self.big == 9223372036854775808.0"},
                             {"rule": "self.all(k, k == 'big')", "messageExpression": "'keys: ' + self.map(k, k).join(',')"},
                         ]}}}}}]}}
    (tmp_path / "crd.yaml").write_text(yaml.safe_dump(crd))
    registry = CRDRegistry.load([tmp_path], evaluator=EVALUATOR)
    obj = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "a", "namespace": "default"},
           "spec": {"\x00abc": 1, "big": 2**63}}
    outcome = registry.handle("CREATE", obj)
    assert [str(e) for e in outcome.errors] == ["spec: Invalid value: keys: \x00abc,big"]


# --- CRD rules: the schema's types and the CRD-creation checks --------------------------------------


def _rules(rule, properties):
    schema = {"type": "object", "properties": properties, "x-kubernetes-validations": [{"rule": rule}]}
    return compile_schema_rules(schema, is_root=False, path="", engine=EVALUATOR.engine)


@pytest.mark.parametrize("rule", [
    "self.durations.sum() == duration('0s') && string(self.durations.sum()) == '0s'",
    "type(self.doubles.sum()) == double",
    "self.ints.sum() == 0 && type([].sum()) == int",
])
def test_an_empty_lists_sum_is_the_zero_of_its_schema_type(rule):
    properties = {
        "durations": {"type": "array", "items": {"type": "string", "format": "duration"}},
        "doubles": {"type": "array", "items": {"type": "number"}},
        "ints": {"type": "array", "items": {"type": "integer"}},
    }
    empty = {"durations": [], "doubles": [], "ints": []}
    assert _rules(rule, properties).evaluate(empty, ABSENT, budget=CostBudget()) == []
    full = {"durations": ["1s", "1m"], "doubles": [1.5], "ints": [1]}
    assert _rules("self.durations.sum() == duration('61s') && self.doubles.sum() == 1.5", properties).evaluate(
        full, ABSENT, budget=CostBudget()) == []


def test_a_constant_find_pattern_that_does_not_compile_rejects_the_crd():
    with pytest.raises(CrdRuleError) as caught:
        _rules("self.s.find(')') == ''", {"s": {"type": "string"}})
    assert caught.value.issues[0].detail == "program instantiation failed: error parsing regexp: unexpected ): `)`"
    schema = {"type": "object", "properties": {"s": {"type": "string"}}, "x-kubernetes-validations": [
        {"rule": "self.s != ''", "messageExpression": "self.s.find('[')"}]}
    with pytest.raises(CrdRuleError) as caught:
        compile_schema_rules(schema, is_root=False, path="", engine=EVALUATOR.engine)
    issue = caught.value.issues[0]
    assert (issue.field, issue.detail) == ("x-kubernetes-validations[0].messageExpression",
                                           "messageExpression instantiation failed: error parsing regexp: "
                                           "missing closing ]: `[`")
