"""The default backend: cel-expr-python (Google's C++ CEL runtime).

``compile`` type-checks against the Kubernetes declarations (``env.new_env``), runs the
checked AST through ``optimize`` and plans the result in the runtime env; ``evaluate``
is then one C++ call plus the conversion of the result.
"""

from __future__ import annotations

import datetime
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cel_expr_python import cel
from google.protobuf import duration_pb2, timestamp_pb2

from webhook.cel import protos
from webhook.cel.checker import check
from webhook.cel.declarations import TYPE_IDENTS, functions
from webhook.cel.syntax import CelSyntaxError, Ident, location, parse, walk
from webhook.cel.typenames import operator_error
from webhook.cel.types import DYN
from webhook.cel.env import cut_by_runtime, from_runtime, new_env, runtime_env, to_runtime
from webhook.cel.runtime_bound import PER_CALL_LIMIT, CostShape, measure, shape
from webhook.cel.errors import CelCompileError, CelCostExceeded, CelEvalError
from webhook.cel.library.base import NONE, OptionalValue
from webhook.cel.library import OPAQUE_TYPES, OVERLOADS, LibraryError
from webhook.gocompat.regexp import go_error_text
from webhook.cel.native import NativeProgram, NotNative, compile_native
from webhook.cel.optimize import (
    COST_EXCEEDED, HOIST_VARIABLES, SIGNED_DISPATCH, Hoist, Issue, _children, optimize, select_overload,
)

# cel-cpp prefixes messages with an absl status code ("INVALID_ARGUMENT: ...") and may
# suffix the compile report with it ("... [INVALID_ARGUMENT]"); cel-go shows neither.
_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r" \[[A-Z_]+\]$")
# cel-cpp wording -> cel-go wording for the runtime errors users meet most
_EVAL_WORDING = [
    (re.compile(r'^Key not found in map : "?(.*?)"?$'), r"no such key: \1"),
    (re.compile(r"^No matching overloads found : .*"), "no such overload"),
    (re.compile(r"^Index error: index=(-?\d+) size=\d+$"), r"index out of bounds: \1"),
    (re.compile(r"^divide by zero$"), "division by zero"),
    (re.compile(r"^flatten\(\): level must be non-negative$"), "level must be non-negative"),
    # conversions (cel-go: strconv/time parsers, then types' overflow errors)
    (re.compile(r"^cannot convert string to (int|uint|double)$"), r"type conversion error from 'string' to '\1'"),
    (re.compile(r"^Type conversion error from '([^']*)' to '([^']*)'$"), r"type conversion error from '\1' to '\2'"),
    (re.compile(r"^String to (Timestamp|Duration) conversion failed$"),
     r"type conversion error from 'string' to 'google.protobuf.\1'"),
    (re.compile(r'^Duration ".*" (?:above maximum|below minimum) allowed duration ".*"$'),
     "type conversion error from 'string' to 'google.protobuf.Duration'"),
    (re.compile(r"^(?:double|uint64) out of int64 range$"), "integer overflow"),
    (re.compile(r"^(?:double|int64) out of uint64 range$"), "unsigned integer overflow"),
    (re.compile(r"^No value with name \"(.*)\" found in Activation$"), r"no such attribute(s): \1"),
]


def clean_message(message: str) -> str:
    message = _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", message.strip()))
    if _FOR_CEL_GO.match(message):
        return message  # cel-cpp's own words: see ``_CEL_CPP_ONLY``
    dispatch = _dispatch_error(message)
    if dispatch is not None:
        return dispatch
    for pattern, replacement in _EVAL_WORDING:
        if pattern.match(message):
            return pattern.sub(replacement, message)
    bad_regex = _BAD_REGEX.match(message)
    if bad_regex:
        # cel-go's String.Match returns Go's regexp error itself; RE2 (cel-cpp) names the
        # whole pattern where Go does
        return go_error_text(bad_regex.group(1))
    return message


_BAD_REGEX = re.compile(r"^invalid regular expression: (.+)$")


def _dispatch_error(message: str) -> str | None:
    """cel-go's words for a call or an index on values of types it does not take, from
    cel-cpp's message with the runtime kinds ("No matching overloads found : f(map, int64)")."""
    library_call = _LIBRARY_NO_OVERLOAD.match(message)
    if library_call:
        dispatch = _library_no_overload(library_call[1] == "member.", library_call[2], _split_types(library_call[3]))
        return message if dispatch is None else dispatch  # (None: see ``_CEL_CPP_ONLY``)
    extension_call = _EXTENSION_NO_OVERLOAD.match(message)
    if extension_call and extension_call[2] in SIGNED_DISPATCH:
        kinds = ([extension_call[1]] if extension_call[1] else []) + _split_types(extension_call[3])
        return f"no such overload: {extension_call[2]}({', '.join(_CPP_KINDS.get(k, k) for k in kinds)})"
    operator_call = _OPERATOR_NO_OVERLOAD.match(message)
    if operator_call:
        operands = ([operator_call[1]] if operator_call[1] else []) + _split_types(operator_call[3])
        if operands:
            return operator_error(operator_call[2], _CPP_KINDS.get(operands[0], operands[0]))
    list_index = _LIST_INDEX.match(message)
    if list_index:  # cel-go: types.IndexOrError (a fractional double names its value: not known here)
        return f"unsupported index type '{_CPP_KINDS.get(list_index[1], list_index[1])}' in list"
    return None


# a cel-go extension function cel-cpp could not dispatch: "(map).lowerAscii()", "sets.contains(map, list)"
_EXTENSION_NO_OVERLOAD = re.compile(r"^No matching overloads found : (?:\((\w+)\)\.)?([\w.]+)\((.*)\)$")
# an operator or size() on operands it does not take: "_+_(map, int64)", "(bool).size()"
_OPERATOR_NO_OVERLOAD = re.compile(r"^No matching overloads found : (?:\((\w+)\)\.)?(_[-+*/%]_|-_|_[<>]=?_|size|sort)\((.*)\)$")
_LIST_INDEX = re.compile(r"^Index error: expected integer type, got (?!double$)(\S+)$")
# a Kubernetes library call the runtime could not dispatch (``optimize`` names them @k8s.*)
_LIBRARY_NO_OVERLOAD = re.compile(r"^No matching overloads found : @k8s\.(member\.)?([\w.]+)\((.*)\)$")
_CPP_KINDS = {"int64": "int", "uint64": "uint", "duration": "google.protobuf.Duration",
              "timestamp": "google.protobuf.Timestamp"}
_OPAQUE_NAMES = frozenset(t.cel_type for t in OPAQUE_TYPES)


def _library_no_overload(member: bool, function: str, kinds: list[str]) -> str | None:
    """cel-go's ``no such overload: f(<runtime types>)`` from cel-cpp's kinds; a library value
    is a "struct" to cel-cpp, named from the function's overloads when only one type fits
    (None when more do: ``isGreaterThan`` of a Quantity or a Semver)."""
    names = []
    for i, kind in enumerate(kinds):
        if kind == "struct":
            fitting = {o.params[i] for o in OVERLOADS if o.function == function and o.member == member
                       and len(o.params) == len(kinds) and o.params[i] in _OPAQUE_NAMES}
            if len(fitting) != 1:
                return None
            kind = fitting.pop()
        names.append(_CPP_KINDS.get(kind, kind))
    return f"no such overload: {function}({', '.join(names)})"


_NO_OVERLOAD = re.compile(r"^(ERROR: <input>:(\d+):(\d+): found no matching overload for '([^']+)' applied to )'\((.*)\)'$", re.M)


def _split_types(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    return parts + [last] if last or parts else parts


def cel_go_overload_errors(expression: str, report: str) -> str:
    """cel-cpp prints a member call's receiver as the first argument; cel-go as ``T.(args)``."""
    lines = expression.split("\n")

    def member(match: re.Match[str]) -> str:
        line, column, function = int(match[2]), int(match[3]), match[4]
        source = lines[line - 1] if line - 1 < len(lines) else ""
        name_start = column - 1 - len(function.rsplit(".", 1)[-1])
        is_member = name_start > 0 and source[name_start - 1 : name_start] == "." and source[name_start:column - 1] == function.rsplit(".", 1)[-1]
        types = _split_types(match[5])
        if not is_member or not types:
            return match[0]
        return f"{match[1]}'{types[0]}.({', '.join(types[1:])})'"

    report = _NO_OVERLOAD.sub(member, report)
    report = _wrong_arity(expression, report)

    def duplicate(match: re.Match[str]) -> str:
        line, column = int(match[2]), int(match[3])
        source = lines[line - 1] if line - 1 < len(lines) else ""
        name = re.match(r"\s*(\w+)", source[column - 1 :])
        return f"{match[1]}duplicate variable name: {name[1] if name else ''}"

    report = _DUPLICATE_VARIABLE.sub(duplicate, report)
    for pattern, replacement in _MACRO_WORDING:
        report = pattern.sub(replacement, report)
    return report


_ENTRY = re.compile(r"^ERROR: <input>:(\d+):(\d+): (.*)$")
_UNDECLARED = re.compile(r"undeclared reference to '([^']+)' \(in container ''\)")


def _wrong_arity(expression: str, report: str) -> str:
    """cel-cpp reports a call of a declared function with an arity it lacks as an undeclared
    reference (of the function, or of a namespace: ``sets`` in ``sets.contains(x)``); cel-go as
    no matching overload for the argument types, which cel-go's checker (``webhook.cel.checker``,
    variables ``dyn`` as here) words. Runs only on a failed compile."""
    undeclared = set(_UNDECLARED.findall(report))
    if not undeclared & _CALLABLE:
        return report
    try:
        expr = parse(expression)
        variables = {node.name: DYN for node in walk(expr) if isinstance(node, Ident)
                     and node.name not in undeclared and node.name not in _NAMESPACES and node.name not in TYPE_IDENTS}
        checked = check(expr, variables, {}, validate_literals=False)
    except (CelSyntaxError, RecursionError):
        return report
    errors = {location(expression, offset): message for offset, message in checked.errors}
    entries = []
    for entry in re.split(r"\n(?=ERROR: )", report):
        match = _ENTRY.match(entry.split("\n", 1)[0])
        if match is None:
            entries.append(entry)
            continue
        position, message = (int(match[1]), int(match[2])), match[3]
        name = _UNDECLARED.fullmatch(message)
        ours = errors.get(position)
        if name and name[1] in _NAMESPACES and ours is None:
            continue  # cel-go resolves the namespaced function and reports only the call
        wrong_call = name or (message.startswith("found no matching overload") and "*error*" in message)
        if wrong_call and ours is not None and ours.startswith("found no matching overload"):
            entry = entry.replace(message, ours, 1)
        entries.append(entry)
    return "\n".join(entries)


# the first part of namespaced functions (``sets.contains``): not variables
_NAMESPACES = frozenset(name.split(".")[0] for name in functions() if "." in name)
# what cel-cpp may call undeclared in a call of a declared function
_CALLABLE = frozenset(functions().keys() | _NAMESPACES | {name.rsplit(".", 1)[-1] for name in functions()})

# cel-cpp's two-variable comprehension macro errors -> cel-go's wording
_DUPLICATE_VARIABLE = re.compile(r"^(ERROR: <input>:(\d+):(\d+): )\w+\(\) second variable must be different from the first variable$", re.M)
_MACRO_WORDING = [
    (re.compile(r"\w+\(\) (?:first|second) variable name must be a simple identifier"), "argument must be a simple name"),
    (re.compile(r"\w+\(\) (?:first|second) variable name cannot be __result__"), "iteration variable overwrites accumulator variable"),
    (re.compile(r"cannot be the range of a comprehension"), "cannot be range of a comprehension"),
]


def format_issues(expression: str, source_info: Any, issues: list[Issue]) -> str:
    """cel-go's error report: ``ERROR: <input>:line:col: msg`` with the source line and a caret."""
    lines = expression.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    out = []
    for issue in issues:
        offset = source_info.positions.get(issue.node_id, 0)
        line_no = max(i for i, start in enumerate(starts) if start <= offset)
        column = offset - starts[line_no]
        out.append(f"ERROR: <input>:{line_no + 1}:{column + 1}: {issue.message}\n | {lines[line_no]}\n | {'.' * column}^")
    return "\n".join(out)


class Bindings(dict):
    """Variables that several evaluations share (one review's policies): each is converted
    into a CEL value once, when an evaluation first reads it, instead of on every evaluation.

    A cel-expr ``Activation`` converts a variable on first read and keeps the result; one is
    built for these values on the first evaluation. The values must not change once bound:
    new values make new ``Bindings``."""

    __slots__ = ("_activation", "_sizes", "_cut")

    def __init__(self, values: Mapping[str, Any] = ()) -> None:
        super().__init__(values)
        self._activation: cel.Activation | None = None
        self._sizes: dict[str, tuple[int, int]] = {}
        self._cut: dict[str, bool] = {}

    def activation(self, env: cel.Env) -> cel.Activation:
        if self._activation is None:
            self._activation = env.Activation(self)
        return self._activation

    def sizes(self, names: Iterable[str]) -> tuple[int, int]:
        """(longest list or map, longest string) over the named values, each measured once."""
        longest_list = longest_string = 0
        for name in names:
            size = self._sizes.get(name)
            if size is None:
                size = self._sizes[name] = measure((self.get(name),))
            longest_list, longest_string = max(longest_list, size[0]), max(longest_string, size[1])
        return longest_list, longest_string

    def cut_by_runtime(self, names: Iterable[str]) -> bool:
        """Whether a named value holds text the C++ runtime would cut (``env.cut_by_runtime``),
        each value looked at once."""
        for name in names:
            cut = self._cut.get(name)
            if cut is None:
                cut = self._cut[name] = name in self and cut_by_runtime((self[name],))
            if cut:
                return True
        return False


class CelExprProgram:
    """A compiled expression: one C++ program, plus, when library calls read selected data,
    the values those calls need (``hoists``) and the plain program to fall back on."""

    __slots__ = ("expression", "_program", "_fallback", "_hoists", "_optional_root", "python_calls", "cost", "_measure",
                 "_env", "reads", "native", "_declared", "_rename", "_mixed_literals", "_exact")

    def __init__(
        self,
        expression: str,
        program: cel.Expression,
        *,
        optional_root: bool,
        python_calls: int,
        cost: CostShape,
        hoists: tuple[Hoist, ...] = (),
        fallback: cel.Expression | None = None,
        env: cel.Env | None = None,
        reads: frozenset[str] = frozenset(),
        native: NativeProgram | None = None,
        declared: frozenset[str] = frozenset(),
        rename: Mapping[str, str] | None = None,
        mixed_literals: bool = False,
    ) -> None:
        self.expression = expression
        self._program = program
        self._fallback = fallback
        self._hoists = hoists
        self._optional_root = optional_root
        self.python_calls = python_calls  # library calls left to Python, per evaluation (static count)
        self.cost = cost
        self._measure = cost.needs_measure
        self._env = env  # the runtime env, for the Activation of shared ``Bindings``
        self.reads = reads  # the variables the program reads
        self.native = native  # the same program as generated Python, when it fits (``native``)
        self._declared, self._rename, self._mixed_literals = declared, dict(rename or {}), mixed_literals  # for ``_as_cel_go``
        self._exact: Any = None  # ``_python_program``

    @property
    def hoisted_calls(self) -> int:
        """Library calls on selected data computed in Python before each evaluation (``Hoist``)."""
        return len(self._hoists)

    def evaluate(self, activation: Mapping[str, Any], *, cost_limit: int | None = None,
                 accept: Callable[[Any], bool] | None = None) -> Any:
        """The program's value on ``activation``. ``accept``: the answers the caller can use
        without cel-expr's exact errors and messages (all rules true, a patch); the native
        program answers first, and a value it passes is the answer (see ``native``)."""
        given = activation
        shared = type(activation) is Bindings and self._env is not None
        if accept is not None and self.native is not None:
            try:  # it bounds its own work (CelCostExceeded past the limit): no measure first
                value = self.native(activation, cost_limit or PER_CALL_LIMIT)
            except NotNative:
                pass
            else:
                if accept(value):
                    return value
        if self._measure:
            sizes = activation.sizes(self.reads) if shared else measure(activation.values())
            if self.cost.at(*sizes) > (cost_limit or PER_CALL_LIMIT):
                raise CelCostExceeded()
        # text with a NUL: see ``env.cut_by_runtime`` (hoisted results cross whole: ``to_runtime``)
        cut = activation.cut_by_runtime(self.reads) if shared else cut_by_runtime(activation.values())
        if cut and self._python_program() is not None:
            return self._on_python(given, cost_limit)
        program = self._program
        if self._hoists:
            if shared:  # the hidden variables differ per program: this one gets its own data
                activation, shared = {name: activation[name] for name in self.reads if name in activation}, False
            values = hoisted_values(self._hoists, activation)
            if values is None:  # a selection or a library call fails: let CEL report it
                program = self._fallback
            else:
                activation = {**activation, **values}
        if shared:
            result = self._eval_on(program, activation.activation(self._env))
        else:
            result = self._eval(program, activation)
        value = result.value()
        if value is True or value is False:  # most rules: no type check, no conversion
            return value
        if result.type() == _ERROR and _NON_CEL_VALUE in value:
            # dynamically typed values take timestamps/durations only as protobuf well-known types
            names = self.reads if shared else activation
            result = self._eval(program, {name: well_known(activation[name]) for name in names if name in activation})
        if result.type() == _ERROR:
            message = clean_message(result.value())
            if message.startswith(_CEL_CPP_ONLY):
                return self._as_cel_go(given, cost_limit, message)
            raise _eval_error(message)
        value = from_runtime(result.plain_value())
        if self._optional_root:
            return OptionalValue.of(value[0]) if value else NONE
        return value

    def _as_cel_go(self, activation: Mapping[str, Any], cost_limit: int | None, message: str) -> Any:
        """cel-cpp fails a selection or an index on a value of another kind (a field of a
        string, ``has()`` on a number, ``null.?f``) and some dispatches (``-d`` of a duration,
        ``join()`` of numbers, a Quantity method given a Semver) with words of its own, where
        cel-go names the field, key or runtime types, or answers (``has()`` of a scalar's field
        is false, ``null.?f`` is optional.none()). The pure-Python backend follows cel-go
        there: it answers these rare evaluations, under the same cost limit."""
        if self._python_program() is None:
            raise _eval_error(message)
        return self._on_python(activation, cost_limit)

    def _python_program(self) -> Any:
        """The same expression on the pure-Python backend (compiled when first needed), or
        None where that backend cannot compile it."""
        from webhook.cel.cel_python import CelPythonEngine  # (it builds on this module)

        if self._exact is None:
            try:
                self._exact = CelPythonEngine().compile(self.expression, self._declared, mixed_literals=self._mixed_literals)
            except CelCompileError:
                self._exact = False
        return self._exact or None

    def _on_python(self, activation: Mapping[str, Any], cost_limit: int | None) -> Any:
        data = {name: activation[self._rename.get(name, name)] for name in self._declared
                if self._rename.get(name, name) in activation}
        return self._python_program().evaluate(data, cost_limit=cost_limit)

    @staticmethod
    def _eval(program: cel.Expression, activation: Mapping[str, Any]) -> cel.Value:
        try:
            return program.eval(data=activation)
        except (RuntimeError, TypeError, ValueError) as err:
            raise _eval_error(clean_message(str(err))) from None

    @staticmethod
    def _eval_on(program: cel.Expression, activation: cel.Activation) -> cel.Value:
        try:
            return program.eval(activation=activation)
        except (RuntimeError, TypeError, ValueError) as err:
            raise _eval_error(clean_message(str(err))) from None

    def __repr__(self) -> str:
        return f"<CelExprProgram {self.expression!r}>"


def warm_up_fallback() -> None:
    """Build the pure-Python backend that ``_as_cel_go`` answers with: its parser takes
    ~0.4 s to build on first use. The server calls this once its chain is loaded, off the
    event loop, so that the first such evaluation does not stall the reviews behind it."""
    from webhook.cel.cel_python import CelPythonEngine

    CelPythonEngine().compile("true", ())


def hoisted_values(hoists: tuple[Hoist, ...], activation: Mapping[str, Any]) -> dict[str, Any] | None:
    """The hidden variables' values, or None when any selection or call would fail."""
    values, results = {}, {}
    for hoist in hoists:
        args = []
        for extractor in hoist.args:
            if extractor[0] == "const":
                args.append(extractor[1])
                continue
            if extractor[0] == "hoisted":
                args.append(results[extractor[1]])
                continue
            _, root, steps = extractor
            if root not in activation:
                return None
            value = activation[root]
            for _, key in steps:
                try:
                    value = value[key]
                except (KeyError, IndexError, TypeError):
                    return None
            args.append(value)
        overload = select_overload(hoist.overloads, args)
        if overload is None:
            return None
        try:
            results[hoist.variable] = overload.impl(*args)
        except LibraryError:
            return None
        values[hoist.variable] = to_runtime(results[hoist.variable])
    return values


_ERROR = cel.Type.ERROR
# cel-cpp's failed dispatches where cel-go answers, or words its error with the runtime types:
# an optional selection or index of a value with no fields or elements (``null.?f``,
# ``'ab'[?0]``: optional.none()), the negation of a duration, ``join()`` of a list holding
# other values than strings (``join: invalid input: 1``)
_FOR_CEL_GO = re.compile(r"^No matching overloads found : (?:_\?\._|_\[\?_\]|-_\(duration\)$|join$)")
# cel-cpp's own words for a selection or index on a value of another kind, and the dispatches
# above or of a library function given a library value of another type (see ``_as_cel_go``)
_CEL_CPP_ONLY = ("Applying SELECT to non-message type", "Invalid container type", "No matching overloads found : ")
_NON_CEL_VALUE = "Non-CEL value type"
# cel-cpp's own bound: 10,000 comprehension iterations per evaluation
_ITERATION_BUDGET = "Iteration budget exceeded"


def _eval_error(message: str) -> CelEvalError:
    if message in (_ITERATION_BUDGET, COST_EXCEEDED):
        return CelCostExceeded()
    return CelEvalError(message)


def well_known(value: Any) -> Any:
    """``datetime``/``timedelta`` anywhere in ``value`` as protobuf Timestamp/Duration."""
    if isinstance(value, datetime.datetime):
        stamp = timestamp_pb2.Timestamp()
        stamp.FromDatetime(value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc))
        return stamp
    if isinstance(value, datetime.timedelta):
        duration = duration_pb2.Duration()
        duration.FromTimedelta(value)
        return duration
    if isinstance(value, dict):
        return {k: well_known(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [well_known(v) for v in value]
    return value


_EXISTS_ONE = ".exists_one("


def _starts_string(text: str, i: int) -> bool:
    """A string literal starts at ``i``: a quote, or r/b prefixes (not inside a name) and a quote."""
    j = i
    while j < len(text) and j - i < 2 and text[j] in "rRbB":
        j += 1
    if j >= len(text) or text[j] not in "'\"":
        return False
    return j == i or i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")


def _string_end(text: str, start: int) -> int:
    """Index just past the string literal starting at ``start`` (quote, or r/b prefix)."""
    i = start
    while text[i] in "rRbB":
        i += 1
    quote = text[i : i + 3] if text[i : i + 3] in ('"""', "\'\'\'") else text[i]
    raw = "r" in text[start:i].lower()
    i += len(quote)
    while i < len(text):
        if not raw and text[i] == "\\":
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote)
        i += 1
    return len(text)


def two_variable_exists_one(expression: str) -> str:
    """cel-cpp spells the two-variable ``exists_one(k, v, p)`` only ``existsOne``; rename it
    (same length, so error positions do not move), skipping string literals."""
    if _EXISTS_ONE not in expression:
        return expression
    out, i = list(expression), 0
    while i < len(expression):
        if _starts_string(expression, i):
            i = _string_end(expression, i)
            continue
        if expression.startswith(_EXISTS_ONE, i):
            depth, commas, j = 0, 0, i + len(_EXISTS_ONE)
            while j < len(expression) and depth >= 0:
                if _starts_string(expression, j):
                    j = _string_end(expression, j)
                    continue
                c = expression[j]
                depth += c in "([{"
                depth -= c in ")]}"
                commas += c == "," and depth == 0
                j += 1
            if commas == 2:
                out[i + 1 : i + len(_EXISTS_ONE)] = list("existsOne (")
        i += 1
    return "".join(out)


_PROGRAM_CACHE_SIZE = 4096
_programs: OrderedDict[tuple[str, tuple], CelExprProgram] = OrderedDict()
_envs: dict[tuple, tuple[cel.Env, cel.Env]] = {}  # per variable declarations: (checking, runtime)
_cache_lock = threading.Lock()


def compile_typed(expression: str, variables: Mapping[str, cel.Type],
                  rename: Mapping[str, str] | None = None, mixed_literals: bool = False) -> CelExprProgram:
    """Compile against typed variable declarations; cached by expression and declarations.

    ``rename`` gives some variables another name at evaluation (type-checked under the
    declared name): programs of different sources that share one ``Bindings`` each read
    their own value of, say, ``params``. ``mixed_literals``: as ``Engine.compile`` takes it."""
    declarations = tuple(sorted((name, t.name()) for name, t in variables.items()))
    renamed = tuple(sorted((rename or {}).items()))
    key = (expression, declarations, renamed, mixed_literals)
    with _cache_lock:
        program = _programs.get(key)
        if program is not None:
            _programs.move_to_end(key)
            return program
        envs = _envs.get(declarations)
        if envs is None:
            envs = _envs[declarations] = (new_env(variables), runtime_env(variables, HOIST_VARIABLES))
    program = _compile(expression, *envs, dict(renamed), frozenset(variables), mixed_literals)
    with _cache_lock:
        _programs[key] = program
        if len(_programs) > _PROGRAM_CACHE_SIZE:
            _programs.popitem(last=False)
    return program


def _compile(expression: str, checking: cel.Env, runtime: cel.Env, rename: Mapping[str, str],
             variables: frozenset[str], mixed_literals: bool) -> CelExprProgram:
    try:
        checked_expr = checking.compile(two_variable_exists_one(expression))
    except RuntimeError as err:
        raise CelCompileError(cel_go_overload_errors(expression, clean_message(str(err)))) from None

    def checked() -> Any:
        decoded = protos.decode(checked_expr)
        return rename_variables(decoded, rename) if rename else decoded

    plain = optimize(checked(), mixed_literals=mixed_literals)
    if plain.issues:
        raise CelCompileError(format_issues(expression, plain.checked.source_info, plain.issues))
    reads = free_variables(plain.checked.expr, variables | set(rename.values())) - set(rename)
    fallback = runtime.deserialize(protos.encode(plain.checked))
    native = None if plain.optional_root else compile_native(plain.checked.expr)
    hoisted = optimize(checked(), hoist=True, mixed_literals=mixed_literals)
    if not hoisted.hoists:
        return CelExprProgram(
            expression, fallback, optional_root=plain.optional_root, python_calls=plain.python_calls,
            cost=shape(plain.checked.expr), env=runtime, reads=reads, native=native,
            declared=variables, rename=rename, mixed_literals=mixed_literals,
        )
    return CelExprProgram(
        expression,
        runtime.deserialize(protos.encode(hoisted.checked)),
        optional_root=hoisted.optional_root,
        python_calls=hoisted.python_calls,
        cost=shape(plain.checked.expr),
        hoists=hoisted.hoists,
        fallback=fallback,
        env=runtime,
        reads=reads,
        native=native,
        declared=variables,
        rename=rename,
        mixed_literals=mixed_literals,
    )


def _walk_free(expr: Any, visit: Any) -> None:
    """Call ``visit(node)`` for each identifier not bound by an enclosing comprehension."""
    stack = [(expr, frozenset())]
    while stack:
        node, bound = stack.pop()
        kind = node.WhichOneof("expr_kind")
        if kind == "ident_expr":
            if node.ident_expr.name not in bound:
                visit(node)
        elif kind == "comprehension_expr":
            c = node.comprehension_expr
            inner = bound | {c.iter_var, c.iter_var2, c.accu_var}
            stack += [(c.iter_range, bound), (c.accu_init, bound), (c.loop_condition, inner), (c.loop_step, inner),
                      (c.result, bound | {c.accu_var})]
        else:
            stack += [(child, bound) for child in _children(node)]


def free_variables(expr: Any, variables: Iterable[str]) -> frozenset[str]:
    """The declared ``variables`` an expression reads."""
    variables, found = set(variables), set()
    _walk_free(expr, lambda node: found.add(node.ident_expr.name) if node.ident_expr.name in variables else None)
    return frozenset(found)


def rename_variables(checked: Any, rename: Mapping[str, str]) -> Any:
    """``checked`` reading each variable ``old`` of ``rename`` as ``rename[old]``."""
    def visit(node: Any) -> None:
        new = rename.get(node.ident_expr.name)
        if new is not None:
            node.ident_expr.name = new
            if node.id in checked.reference_map:
                checked.reference_map[node.id].name = new

    _walk_free(checked.expr, visit)
    return checked


class CelExprEngine:
    name = "cel-expr"

    def compile(self, expression: str, variables: Iterable[str],
                rename: Mapping[str, str] | None = None, *, mixed_literals: bool = False) -> CelExprProgram:
        return compile_typed(expression, {name: cel.Type.DYN for name in variables}, rename, mixed_literals)

    @staticmethod
    def bind(values: Mapping[str, Any]) -> Bindings:
        """Values for many evaluations, converted into CEL values once (see ``Bindings``)."""
        return Bindings(values)


ENGINE_CLASS = CelExprEngine
