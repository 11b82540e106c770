"""Kubernetes library calls as plain CEL, so no Python call is left in the program: the list
functions (``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf``) as
comprehensions, cel-go's dispatch on a dyn receiver included; ``optional.unwrap``/``unwrapOpt``;
``find``/``findAll`` with a constant, group-free pattern as cel-cpp's RE2 extension."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webhook.cel.common.typenames import DURATION, TIMESTAMP
from webhook.cel.environment.env import FAIL_FUNCTION
from webhook.cel.library.base import Overload
from webhook.cel.library.regex import RegexError, compile_pattern
from webhook.cel.optimize.nodes import AstBuilder, constant_value, is_string_const

NATIVE_LISTS = {"isSorted", "sum", "min", "max", "indexOf", "lastIndexOf"}


_ZERO = {"int": 0, "uint": ("uint", 0), "double": 0.0}
# Kubernetes' list functions' element types (library/lists.go summableTypes, comparableTypes)
_NUMERIC = ("int", "uint", "double")


_SUMMABLE = (*_NUMERIC, DURATION)


_COMPARABLE = (*_NUMERIC, "bool", "string", "bytes", DURATION, TIMESTAMP)


class PlainCel(AstBuilder):
    """The rewrites into plain CEL (``refs``: the checked AST's reference map, set by the pass)."""

    refs: Any

    def native_list(self, function: str, args: list[Any], node: Any) -> Any:
        """A Kubernetes list function as plain CEL; on a dyn receiver that is no list at
        runtime, cel-go's dispatch error (a map would otherwise be iterated by its keys)."""
        if self.type_of(args[0]).startswith("list("):
            return self.native_list_body(function, args)
        if function == "sum":
            # ``+ []`` fails on anything but a list ("no such overload"); unlike a type() test
            # it keeps the program on the native fast path, which sums lists only
            return self.native_list_body(function, [self.op("_+_", args[0], self.list_of())])
        return self.bind("@recv", args[0], lambda receiver: self.cond(
            self.op("_==_", self.call("type", receiver()), self.ident("list")),
            self.native_list_body(function, [receiver(), *args[1:]]),
            self.no_such_overload(function, [receiver, *(lambda arg=arg: arg for arg in args[1:])]),
        ))

    def native_list_body(self, function: str, args: list[Any]) -> Any:
        receiver = args[0]
        element = self.type_of(receiver)
        element = element[5:-1] if element.startswith("list(") else "dyn"
        if function in ("indexOf", "lastIndexOf"):
            last = function == "lastIndexOf"
            return self.bind("@l", receiver, lambda l: self.bind("@v", args[1], lambda v: self.bind(
                "@hits",
                self.filter_indices(l, lambda i: self.op("_==_", self.op("_[_]", l(), i()), v())),
                lambda hits: self.cond(
                    self.op("_==_", self.call("size", hits()), self.const(0)),
                    self.const(-1),
                    self.op("_[_]", hits(), self.op("_-_", self.call("size", hits()), self.const(1)) if last else self.const(0)),
                ),
            )))
        if function == "isSorted":
            if element not in _COMPARABLE:
                return self.dyn_is_sorted(receiver)
            return self.bind("@l", receiver, lambda l: self.all_indices(l, lambda i: self.op(
                "_||_", self.op("_==_", i(), self.const(0)),
                self.op("_<=_", self.op("_[_]", l(), self.op("_-_", i(), self.const(1))), self.op("_[_]", l(), i())),
            )))
        if function == "sum":
            if element in _ZERO or element == DURATION:
                zero = self.call("duration", self.const("0s")) if element == DURATION else self.const(_ZERO[element])
                return self.fold(receiver, zero, lambda acc, x: self.op("_+_", acc, x), lambda acc: acc)
            return self.dyn_sum(receiver)
        if element not in _COMPARABLE:
            return self.dyn_min_max(function, receiver)
        # min / max: the first element wins ties, as in Kubernetes
        better = "_<_" if function == "min" else "_>_"
        return self.bind("@l", receiver, lambda l: self.cond(
            self.op("_==_", self.call("size", l()), self.const(0)),
            self.call(FAIL_FUNCTION, self.const(f"{function} called on empty list")),
            self.fold(
                l(), self.op("_[_]", l(), self.const(0)),
                lambda acc, x: self.cond(self.op(better, x, acc), x, acc),
                lambda acc: acc,
            ),
        ))

    def dyn_sum(self, receiver: Any) -> Any:
        duration, timestamp = DURATION, TIMESTAMP

        def step(acc: Any, x: Any) -> Any:
            a, v = lambda: self.ident("@acc"), lambda: self.ident("@x")
            same = self.op("_&&_", self.op("_==_", self.call("type", a()), self.call("type", v())),
                           self.call("!_", self.is_type(v, (timestamp,))))
            adds = self.op("_||_", same, self.op("_||_",
                           self.op("_&&_", self.is_type(a, (duration,)), self.is_type(v, (timestamp,))),
                           self.op("_&&_", self.is_type(a, (timestamp,)), self.is_type(v, (duration,)))))
            first = self.cond(self.is_type(v, _SUMMABLE), v(), self.call(FAIL_FUNCTION, self.const("no such overload: sum(list)")))
            return self.cond(self.op("_==_", acc, self.const(None)), first,
                             self.cond(adds, self.op("_+_", acc, x), self.call(FAIL_FUNCTION, self.const("no such overload"))))

        return self.fold(receiver, self.const(None), step,
                         lambda acc: self.cond(self.op("_==_", acc, self.const(None)), self.const(0), acc))

    def dyn_is_sorted(self, receiver: Any) -> Any:
        """Kubernetes' isSorted on a list of dyn values, element by element as cel-go walks it:
        the first element picks the overload (a map, a list or null: "no such overload:
        isSorted(list)"), a later one that is no traits.Comparer fails ("no such overload"),
        one of another kind than the element before is not compared (its Compare error is no
        IntOne), and the first pair out of order ends the walk: false."""
        def stops_at(l: Callable[[], Any], i: Callable[[], Any]) -> Any:
            current = lambda: self.op("_[_]", l(), i())  # noqa: E731
            previous = lambda: self.op("_[_]", l(), self.op("_-_", i(), self.const(1)))  # noqa: E731
            ordered = self.op("_||_", self.op("_==_", self.call("type", previous()), self.call("type", current())),
                              self.op("_&&_", self.is_type(previous, _NUMERIC), self.is_type(current, _NUMERIC)))
            descends = self.op("_&&_", self.op("_>_", i(), self.const(0)),
                               self.op("_&&_", ordered, self.op("_>_", previous(), current())))
            return self.op("_||_", self.call("!_", self.is_type(current, _COMPARABLE)), descends)

        def walk(l: Callable[[], Any]) -> Any:
            i, stop = (lambda: self.ident("@i")), (lambda: self.ident("@stop"))
            return self.comprehension(
                "@i", self.call("lists.range", self.call("size", l())), "@stop", self.const(-1),
                self.op("_==_", stop(), self.const(-1)), self.cond(stops_at(l, i), i(), stop()), stop(),
            )

        return self.bind("@l", receiver, lambda l: self.bind("@stop", walk(l), lambda stop: self.cond(
            self.op("_==_", stop(), self.const(-1)), self.const(True),
            self.cond(self.is_type(lambda: self.op("_[_]", l(), stop()), _COMPARABLE), self.const(False),
                      self.cond(self.op("_==_", stop(), self.const(0)),
                                self.call(FAIL_FUNCTION, self.const("no such overload: isSorted(list)")),
                                self.call(FAIL_FUNCTION, self.const("no such overload")))),
        )))

    def dyn_min_max(self, function: str, receiver: Any) -> Any:
        better = "_<_" if function == "min" else "_>_"

        def step(acc: Any, x: Any) -> Any:
            a, v = lambda: self.ident("@acc"), lambda: self.ident("@x")
            ordered = self.op("_||_", self.op("_==_", self.call("type", a()), self.call("type", v())),
                              self.op("_&&_", self.is_type(a, _NUMERIC), self.is_type(v, _NUMERIC)))
            return self.cond(self.is_type(v, _COMPARABLE),
                             self.cond(self.op("_&&_", ordered, self.op(better, x, acc)), x, acc),
                             self.call(FAIL_FUNCTION, self.const("no such overload")))

        return self.bind("@l", receiver, lambda l: self.cond(
            self.op("_==_", self.call("size", l()), self.const(0)),
            self.call(FAIL_FUNCTION, self.const(f"{function} called on empty list")),
            self.cond(self.is_type(lambda: self.op("_[_]", l(), self.const(0)), _COMPARABLE),
                      self.fold(l(), self.op("_[_]", l(), self.const(0)), step, lambda acc: acc),
                      self.call(FAIL_FUNCTION, self.const(f"no such overload: {function}(list)"))),
        ))

    def filter_indices(self, items: Callable[[], Any], keep: Callable[[Callable[[], Any]], Any]) -> Any:
        """``lists.range(size(items)).filter(i, keep(i))``."""
        indices = self.call("lists.range", self.call("size", items()))
        return self.comprehension(
            "@i", indices, "@out", self.list_of(), self.const(True),
            self.cond(keep(lambda: self.ident("@i")), self.op("_+_", self.ident("@out"), self.list_of(self.ident("@i"))), self.ident("@out")),
            self.ident("@out"),
        )

    def all_indices(self, items: Callable[[], Any], test: Callable[[Callable[[], Any]], Any]) -> Any:
        indices = self.call("lists.range", self.call("size", items()))
        return self.comprehension(
            "@i", indices, "@ok", self.const(True), self.call("@not_strictly_false", self.ident("@ok")),
            self.op("_&&_", self.ident("@ok"), test(lambda: self.ident("@i"))), self.ident("@ok"),
        )

    def native_unwrap(self, node: Any) -> Any:
        call = node.call_expr
        items = call.target if call.HasField("target") else call.args[0]
        rewritten = self.comprehension(
            "@o", items, "@out", self.list_of(), self.const(True),
            self.cond(
                self.call("hasValue", target=self.ident("@o")),
                self.op("_+_", self.ident("@out"), self.list_of(self.call("value", target=self.ident("@o")))),
                self.ident("@out"),
            ),
            self.ident("@out"),
        )
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def native_regex(self, function: str, args: list[Any]) -> Any | None:
        """``find``/``findAll`` with a constant, group-free pattern: cel-cpp's RE2 extension."""
        if not is_string_const(args[1]):
            return None
        try:
            pattern = compile_pattern(args[1].const_expr.string_value)
        except RegexError:
            return None
        if pattern.groups:
            return None
        if function == "find":
            return self.call("orValue", self.const(""), target=self.call("regex.extract", args[0], args[1]))
        found = self.call("regex.extractAll", args[0], args[1])
        if len(args) == 2:
            return found
        ok, limit = constant_value(args[2])
        if not ok or not isinstance(limit, int):
            return None
        if limit < 0:
            return found
        return self.bind("@found", found, lambda f: self.cond(
            self.op("_<=_", self.call("size", f()), self.const(limit)), f(),
            self.call("slice", self.const(0), self.const(limit), target=f()),
        ))

    def mixed_call(self, node: Any, candidates: list[Overload]) -> Any:
        """A dyn receiver matched both a Kubernetes list function and a strings-extension one
        (``indexOf``/``lastIndexOf``): decide by the receiver's runtime type."""
        call = node.call_expr
        if not call.HasField("target") or candidates[0].function not in NATIVE_LISTS:
            return node
        self.refs.pop(node.id, None)
        args = list(call.args)

        def choose(receiver: Callable[[], Any]) -> Any:
            as_string = self.call(call.function, *args, target=receiver())
            as_list = self.native_list_body(candidates[0].function, [receiver(), *args])
            failed = self.no_such_overload(call.function, [receiver, *(lambda arg=arg: arg for arg in args)])
            return self.cond(self.op("_==_", self.call("type", receiver()), self.ident("list")), as_list,
                             self.cond(self.op("_==_", self.call("type", receiver()), self.ident("string")), as_string,
                                       failed))

        rewritten = self.bind("@recv", call.target, choose)
        rewritten.id = node.id
        return rewritten
