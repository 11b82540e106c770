"""cel-cpp's messages in cel-go's words: runtime errors (``clean_message``) and compile
reports (``cel_go_overload_errors``, ``format_issues``), for the check both backends share
(``check``) and the default backend's evaluations (``engine.cel_expr``)."""

from __future__ import annotations

import re
from typing import Any

from webhook.cel.checker.checker import check
from webhook.cel.checker.declarations import TYPE_IDENTS, functions
from webhook.cel.library import OPAQUE_TYPES, OVERLOADS
from webhook.cel.library.dispatch import SIGNED_DISPATCH
from webhook.cel.optimize.checks import Issue
from webhook.cel.syntax.ast import Ident, walk
from webhook.cel.syntax.parser import CelSyntaxError, location, parse
from webhook.cel.common.typenames import operator_error
from webhook.cel.common.types import DYN
from webhook.gocompat.regexp import go_error_text

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
        return message  # cel-cpp's own words: see ``engine.cel_expr``
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
        return message if dispatch is None else dispatch  # (None: see ``engine.cel_expr``)
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



# cel-cpp's failed dispatches where cel-go answers, or words its error with the runtime types:
# an optional selection or index of a value with no fields or elements (``null.?f``,
# ``'ab'[?0]``: optional.none()), the negation of a duration, ``join()`` of a list holding
# other values than strings (``join: invalid input: 1``)
_FOR_CEL_GO = re.compile(r"^No matching overloads found : (?:_\?\._|_\[\?_\]|-_\(duration\)$|join$)")
