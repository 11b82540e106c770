"""Where cel-cpp and cel-go part ways: cel-go's range checks and messages around the strings
extension, a computed ``lists.range(n)`` capped, Go's parsers for strings converted to numbers,
durations and timestamps, Go's zero time, a ``flatten`` depth that is no int, cel-go's
printing of timestamps and durations and its ``getMilliseconds()``, ``format``'s arguments as
Kubernetes' formatter sees them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from webhook.cel.common.typenames import DURATION, GO_VALUE_TYPES, TypeName, not_an_int, parse_type
from webhook.cel.environment.env import FAIL_FUNCTION, KEY_FIELD
from webhook.cel.errors import COST_EXCEEDED
from webhook.cel.library.strings_format import ExactDuration, MapEntries
from webhook.cel.limits import RANGE_LIMIT
from webhook.cel.optimize.nodes import AstBuilder, is_string_const
from webhook.gocompat.strconv import go_parse_float, go_parse_int
from webhook.gocompat.time import parse_go_duration, valid_rfc3339

_GO_DURATION_MAX = 2**63 - 1  # nanoseconds: Go's time.Duration


_DOUBLE_MAX = 1.7976931348623157e308


class Guards(AstBuilder):
    """The guarded rewrites (``refs``: the checked AST's reference map, set by the pass)."""

    refs: Any

    def exact_arguments(self, arguments: Any) -> None:
        """``format``'s duration and map arguments as Kubernetes' formatter sees them.
        cel-expr-python hands Python a duration as a ``timedelta`` (microseconds:
        ``duration('2ns')`` would print as 0s) and a map as a ``dict`` (where the keys ``1``
        and ``true`` are one): a duration is passed as ``ExactDuration`` (cel-cpp's exact
        ``string(d)``), a map as ``[MapEntries(), [key, value], ...]``, at any depth of a list
        or map of a known type. (A ``dyn`` value is looked at one level deep: a duration or a
        map inside a dyn list or map still crosses as Python's.)"""
        duration = DURATION

        def message(name: str, key: Any) -> Any:
            node = self.new()
            node.struct_expr.message_name = name
            entry = node.struct_expr.entries.add(id=self._next_id, field_key=KEY_FIELD)
            self._next_id += 1
            entry.value.CopyFrom(key)
            return node

        def crosses_inexactly(kind: TypeName) -> bool:
            if kind.name in (duration, "dyn"):
                return True
            if kind.name == "list" and kind.params:
                return crosses_inexactly(kind.params[0])
            if kind.name == "map" and len(kind.params) == 2:
                return kind.params[0].name != "string" or crosses_inexactly(kind.params[1])
            return False

        def entries(value: Callable[[], Any], item: TypeName | None) -> Any:
            def exact_item() -> Any:
                found = (lambda: self.op("_[_]", value(), self.ident("@k")))  # noqa: E731
                return (exact(found, item) if item is not None else None) or found()

            pairs = self.comprehension(
                "@k", value(), "@out", self.list_of(), self.const(True),
                self.op("_+_", self.ident("@out"), self.list_of(self.list_of(self.ident("@k"), exact_item()))),
                self.ident("@out"))
            return self.op("_+_", self.list_of(message(MapEntries.cel_type, self.const(""))), pairs)

        def exact(value: Callable[[], Any], kind: TypeName) -> Any | None:
            """``value`` (a node factory) as it must cross to Python, None when it crosses exactly."""
            if not crosses_inexactly(kind):
                return None
            if kind.name == duration:
                return message(ExactDuration.cel_type, self.call("string", value()))
            if kind.name == "list":
                element = exact(lambda: self.ident("@e"), kind.params[0])
                return self.comprehension(
                    "@e", value(), "@out", self.list_of(), self.const(True),
                    self.op("_+_", self.ident("@out"), self.list_of(element)), self.ident("@out"))
            if kind.name == "map":  # (bound first: an inner map's ``@k`` hides the outer one)
                return self.bind("@arg", value(), lambda v: entries(v, kind.params[1]))
            return self.bind("@arg", value(), lambda v: self.cond(  # dyn
                self.is_type(v, (duration,)), message(ExactDuration.cel_type, self.call("string", v())),
                self.cond(self.is_type(v, ("map",)), entries(v, None), v())))

        for element in arguments.elements:
            rewritten = exact(lambda element=element: element, parse_type(self.type_of(element)))
            if rewritten is not None:
                rewritten.id = element.id
                element.CopyFrom(rewritten)

    def go_time_string(self, node: Any, *, only_time: bool) -> Any:
        """cel-go prints a timestamp as Go's RFC 3339 with nanoseconds and a duration as its
        shortest seconds ("...37.01Z", "1.01s"); cel-cpp writes the fraction in whole groups of
        three digits ("...37.010Z", "1.010s"): its trailing zeros (and a bare dot) go."""
        def trimmed(v: Callable[[], Any]) -> Any:
            text = self.call("string", v())
            text = self.call("regex.replace", text, self.const(r"(\.[0-9]*[1-9])0+([sZ])$"), self.const(r"\1\2"))
            return self.call("regex.replace", text, self.const(r"\.0+([sZ])$"), self.const(r"\1"))

        def by_type(v: Callable[[], Any]) -> Any:
            is_time = self.op("_||_",
                              self.op("_==_", self.call("type", v()), self.call("type", self.call("timestamp", self.const(0)))),
                              self.op("_==_", self.call("type", v()), self.call("type", self.call("duration", self.const("0s")))))
            return self.cond(is_time, trimmed(v), self.call("string", v()))

        rewritten = self.bind("@str", node.call_expr.args[0], trimmed if only_time else by_type)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def duration_milliseconds(self, node: Any, *, maybe_timestamp: bool) -> Any:
        """cel-go's ``duration.getMilliseconds()`` is the whole duration in milliseconds, cel-cpp's
        only the part below a second: add the whole seconds back (a dyn receiver is checked at
        runtime, since a timestamp's ``getMilliseconds()`` is that component in both)."""
        def total(d: Callable[[], Any]) -> Any:
            seconds = self.op("_*_", self.call("getSeconds", target=d()), self.const(1000))
            return self.op("_+_", seconds, self.call("getMilliseconds", target=d()))

        def by_type(d: Callable[[], Any]) -> Any:
            is_duration = self.op("_==_", self.call("type", d()), self.call("type", self.call("duration", self.const("0s"))))
            return self.cond(is_duration, total(d), self.call("getMilliseconds", target=d()))

        rewritten = self.bind("@ms", node.call_expr.target, by_type if maybe_timestamp else total)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def guard_string_call(self, node: Any, overload_id: str) -> Any:
        """cel-go's range checks (and messages) around cel-cpp's strings extension calls."""
        call = node.call_expr
        names = ["@str", "@a", "@b"][: 1 + len(call.args)]
        values = [call.target, *call.args]

        params = _STRING_PARAMS[overload_id]
        dyn = [i for i, value in enumerate(values) if self.type_of(value) != params[i]]

        def build(refs: list[Callable[[], Any]]) -> Any:
            native = self.call(call.function, *(r() for r in refs[1:]), target=refs[0]())
            guarded = STRING_GUARDS[overload_id](self, refs, native)
            if not dyn:
                return guarded
            # a dyn argument of another type: cel-go's dispatch error, not a range check on it
            typed = [self.op("_==_", self.call("type", refs[i]()), self.ident(params[i])) for i in dyn]
            condition = typed[0]
            for test in typed[1:]:
                condition = self.op("_&&_", condition, test)
            return self.cond(condition, guarded, self.no_such_overload(call.function, refs))

        def bind_all(i: int, refs: list[Callable[[], Any]]) -> Any:
            if i == len(names):
                return build(refs)
            return self.bind(names[i], values[i], lambda ref: bind_all(i + 1, [*refs, ref]))

        rewritten = bind_all(0, [])
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def go_duration(self, node: Any) -> Any:
        """``duration(string)`` as Go's ``time.ParseDuration`` reads it: a constant becomes its
        nanoseconds (cel-cpp's parser lacks the ``µs`` units); any other string has them
        spelled ``us`` and fails beyond Go's range (±2562047h47m16.854775807s), which is
        narrower than cel-cpp's (±10000 years)."""
        call = node.call_expr
        if is_string_const(call.args[0]):
            nanos = parse_go_duration(call.args[0].const_expr.string_value)
            if nanos is not None:  # else check_literals reported it
                call.args[0].const_expr.string_value = _seconds(nanos)
            return node
        failed = self.call(FAIL_FUNCTION, self.const("type conversion error from 'string' to 'google.protobuf.Duration'"))

        def parse(text: Callable[[], Any]) -> Any:
            micro = self.call("replace", self.const("µs"), self.const("us"), target=text())
            converted = self.call("duration", self.call("replace", self.const("μs"), self.const("us"), target=micro))
            return self.bind("@duration", converted, lambda value: self.cond(
                self.op("_||_", self.op("_>_", value(), self.call("duration", self.const(_seconds(_GO_DURATION_MAX)))),
                        self.op("_<_", value(), self.call("duration", self.const(_seconds(-_GO_DURATION_MAX - 1))))),
                failed, value()))

        return self.parsed_string_conversion(node, "duration", parse)

    def parsed_string_conversion(self, node: Any, function: str, parse: Callable[[Callable[[], Any]], Any]) -> Any:
        """``function(x)`` (a conversion call ``node``) with a string ``x`` read by ``parse``
        (Go's parser, as cel-go converts) and any other ``x`` converted as before."""
        call = node.call_expr

        def by_type(value: Callable[[], Any]) -> Any:
            if self.type_of(call.args[0]) == "string":
                return parse(value)
            is_string = self.op("_==_", self.call("type", value()), self.ident("string"))
            return self.cond(is_string, parse(value), self.call(function, value()))

        rewritten = self.bind("@text", call.args[0], by_type)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def go_timestamp(self, node: Any) -> Any:
        """``timestamp(string)`` as Go's ``time.Parse(time.RFC3339, s)`` reads it: cel-cpp's
        parser also takes a lower-case ``t``/``z``, an offset without a colon and second 60,
        and refuses a comma before the fraction."""
        call = node.call_expr
        if is_string_const(call.args[0]):
            if valid_rfc3339(call.args[0].const_expr.string_value):  # else check_literals reported it
                call.args[0].const_expr.string_value = _cpp_rfc3339(call.args[0].const_expr.string_value)
            return node
        failed = self.call(FAIL_FUNCTION, self.const("type conversion error from 'string' to 'google.protobuf.Timestamp'"))

        def parse(text: Callable[[], Any]) -> Any:
            well_formed = self.call("matches", self.const(_RFC3339_PATTERN), target=text())
            converted = self.call("timestamp", self.call("replace", self.const(","), self.const("."), target=text()))
            return self.cond(well_formed, converted, failed)

        return self.parsed_string_conversion(node, "timestamp", parse)

    def go_number_syntax(self, node: Any) -> Any:
        """``int``/``uint``/``double`` of a string parse as Go's strconv does in cel-go; cel-cpp's
        parsers also take surrounding whitespace, ``uint('+1')``, a hex double without an
        exponent (``'0x10'``) and an out-of-range double as infinity.

        A constant is parsed here; a string Go refuses becomes one cel-cpp refuses too. A
        computed one is guarded (``native`` runs ``int()``'s guard as well, so its programs keep
        the fast path)."""
        function = node.call_expr.function
        argument = node.call_expr.args[0]
        if is_string_const(argument):
            text = argument.const_expr.string_value
            parsed = go_parse_float(text) if function == "double" else go_parse_int(text, signed=function == "int")
            if parsed is None:
                argument.const_expr.string_value = ""
            return node
        failed = self.call(FAIL_FUNCTION, self.const(f"type conversion error from 'string' to '{function}'"))

        def parse(text: Callable[[], Any]) -> Any:
            converted = self.call(function, text())
            lower = lambda: self.call("lowerAscii", target=text())  # noqa: E731
            contains = lambda part: self.call("contains", self.const(part), target=lower())  # noqa: E731
            invalid = self.op("_!=_", self.call("trim", target=text()), text())
            if function == "uint":
                invalid = self.op("_||_", invalid, self.call("startsWith", self.const("+"), target=text()))
            if function != "double":
                return self.cond(invalid, failed, converted)
            invalid = self.op("_||_", invalid, self.op("_&&_", contains("0x"), self.call("!_", contains("p"))))
            invalid = self.op("_||_", invalid, self.op("@in", lower(), self.list_of(self.const("+nan"), self.const("-nan"))))
            return self.cond(invalid, failed, self.bind("@double", converted, lambda value: self.cond(
                self.op("_&&_", self.op("_||_", self.op("_>_", value(), self.const(_DOUBLE_MAX)),
                                        self.op("_<_", value(), self.const(-_DOUBLE_MAX))),
                        self.call("!_", contains("inf"))),
                failed, value())))

        def by_type(value: Callable[[], Any]) -> Any:
            if self.type_of(node.call_expr.args[0]) == "string":
                return parse(value)
            is_string = self.op("_==_", self.call("type", value()), self.ident("string"))
            return self.cond(is_string, parse(value), self.call(function, value()))

        rewritten = self.bind("@number", node.call_expr.args[0], by_type)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def go_zero_timestamp(self, node: Any) -> Any:
        """``optional.ofNonZeroValue(t)``: cel-go's zero timestamp is Go's zero time
        (0001-01-01T00:00:00Z), cel-cpp's the Unix epoch."""
        def by_value(value: Callable[[], Any]) -> Any:
            is_time = lambda text: self.op("_==_", value(), self.call("timestamp", self.const(text)))  # noqa: E731
            return self.cond(is_time("0001-01-01T00:00:00Z"), self.call("optional.none"),
                             self.cond(is_time("1970-01-01T00:00:00Z"), self.call("optional.of", value()),
                                       self.call("optional.ofNonZeroValue", value())))

        rewritten = self.bind("@value", node.call_expr.args[0], by_value)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def guard_flatten_depth(self, node: Any) -> Any:
        """``flatten(depth)`` with a dyn depth that is no int fails as in the apiserver (a Go
        panic's text, ``library.ext.not_an_int``), not as cel-cpp's "no such overload"."""
        def by_type(depth: Callable[[], Any]) -> Any:
            kind = lambda name: self.op("_==_", self.call("type", depth()), self.type_value(name))  # noqa: E731
            error: Any = self.const(not_an_int("?"))
            for name, go_type in reversed(GO_VALUE_TYPES.items()):
                error = self.cond(kind(name), self.const(not_an_int(go_type)), error)
            flattened = self.call("flatten", depth(), target=node.call_expr.target)
            return self.cond(kind("int"), flattened, self.call(FAIL_FUNCTION, error))

        rewritten = self.bind("@depth", node.call_expr.args[0], by_type)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def guard_range(self, node: Any) -> Any:
        """``lists.range(n)`` of a computed ``n`` never allocates past the per-call limit."""
        count = node.call_expr.args[0]

        def too_large(n: Callable[[], Any]) -> Any:
            test = self.op("_>_", n(), self.const(RANGE_LIMIT))
            if self.type_of(count) == "int":
                return test
            # a dyn count of another type is lists.range's own dispatch error, not the comparison's
            return self.op("_&&_", self.op("_==_", self.call("type", n()), self.ident("int")), test)

        rewritten = self.bind("@n", count, lambda n: self.cond(
            too_large(n), self.call(FAIL_FUNCTION, self.const(COST_EXCEEDED)), self.call("lists.range", n()),
        ))
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten


def _guard_char_at(o: Guards, r: list, native: Any) -> Any:
    size = lambda: o.call("size", r[0]())  # noqa: E731
    return o.cond(o.outside(r[1], size, False), o.out_of_range(r[1]()), native)


def _guard_substring(o: Guards, r: list, native: Any) -> Any:
    size = lambda: o.call("size", r[0]())  # noqa: E731
    if len(r) == 2:
        return o.cond(o.outside(r[1], size, False), o.out_of_range(r[1]()), native)
    invalid = o.op("_+_", o.op("_+_", o.op("_+_", o.const("invalid substring range. start: "), o.call("string", r[1]())),
                                     o.const(", end: ")), o.call("string", r[2]()))
    return o.cond(
        o.op("_>_", r[1](), r[2]()), o.call(FAIL_FUNCTION, invalid),
        o.cond(o.outside(r[1], size, False), o.out_of_range(r[1]()),
               o.cond(o.outside(r[2], size, False), o.out_of_range(r[2]()), native)),
    )


def _guard_index_of(o: Guards, r: list, native: Any) -> Any:
    """cel-go: an empty substring answers the offset; offset < 0 fails; offset >= size is -1."""
    return o.cond(
        o.op("_==_", r[1](), o.const("")), r[2](),
        o.cond(o.op("_<_", r[2](), o.const(0)), o.out_of_range(r[2]()),
               o.cond(o.op("_>=_", r[2](), o.call("size", r[0]())), o.const(-1), native)),
    )


_STRING_PARAMS = {
    "string_char_at_int": ("string", "int"),
    "string_substring_int": ("string", "int"),
    "string_substring_int_int": ("string", "int", "int"),
    "string_index_of_string_int": ("string", "string", "int"),
    "string_last_index_of_string_int": ("string", "string", "int"),
}


STRING_GUARDS = {
    "string_char_at_int": _guard_char_at,
    "string_substring_int": _guard_substring,
    "string_substring_int_int": _guard_substring,
    "string_index_of_string_int": _guard_index_of,
    "string_last_index_of_string_int": _guard_index_of,
}


def _seconds(nanos: int) -> str:
    """A duration literal cel-cpp parses exactly (its parser takes seconds, not 2**63 ns)."""
    sign = "-" if nanos < 0 else ""
    whole, fraction = divmod(abs(nanos), 1_000_000_000)
    return f"{sign}{whole}.{fraction:09d}s"


def _cpp_rfc3339(text: str) -> str:
    """An RFC 3339 timestamp Go reads, spelled as cel-cpp reads the same instant: a dot before
    the fraction, at most nine fraction digits."""
    match = _FRACTION.search(text)
    if match is None:
        return text
    return text[:match.start()] + "." + match[1][:9] + text[match.end():]


_FRACTION = re.compile(r"[.,]([0-9]+)")


# Go's time.Parse(time.RFC3339) syntax, ranges left to cel-cpp's parser (which checks them too)
_RFC3339_PATTERN = (r"^[0-9]{4}-(0[1-9]|1[0-2])-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.,][0-9]+)?"
                    r"(Z|[+-][0-9]{2}:[0-9]{2})$")
