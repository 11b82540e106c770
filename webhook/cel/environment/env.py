"""cel-expr-python environments with the Kubernetes 1.36 base libraries.

Two environments per variable declaration:

* the **checking** env (``new_env``) declares every Kubernetes function with Kubernetes'
  overloads and types (optional types included, declared through cel-cpp's YAML config),
  cross-type numeric comparisons, and the cel-cpp extensions Kubernetes enables; programs
  are type-checked against it, so compile errors read as Kubernetes' do;
* the **runtime** env (``runtime_env``) plans the optimised checked AST (``webhook.cel.optimize``):
  each Kubernetes function is a private ``@k8s.<name>`` function implemented in Python.

Library values with their own CEL type (``kubernetes.Quantity``, ``net.IP``, ...) travel
through the C++ runtime as one-field protobuf messages holding the value's canonical key;
message equality is then exactly Kubernetes' equality of those values.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from functools import cache, lru_cache
from typing import Any

import orjson
from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

from webhook.cel.library import OPAQUE_TYPES, OVERLOADS, LibraryError, OpaqueValue, Overload
from webhook.cel.library.base import OptionalValue, no_such_overload
from webhook.cel.common.typenames import DURATION, TIMESTAMP, TypeName, parse_type, yaml_type

KEY_FIELD = "canonical_form"
PRIVATE_PREFIX = "@k8s."
FAIL_FUNCTION = "@k8s.fail"
MAP_INSERT_FUNCTION = "@k8s.mapInsert"

# cel-cpp extensions at the versions of the Kubernetes base env. The strings extension
# (v2) is declared by hand in the checking env (``_STRINGS_V2``) because Kubernetes' list
# ``indexOf``/``lastIndexOf`` share its function names; ``regex`` is only in the runtime
# env (native ``find``/``findAll``): Kubernetes users cannot call ``regex.*``.
_EXTENSIONS = [{"name": "lists"}, {"name": "sets"}, {"name": "optional"}, {"name": "two-var-comprehensions"}]
_RUNTIME_EXTENSIONS = [{"name": "strings", "version": 2}, *_EXTENSIONS, {"name": "regex"}]

# cel-go ext.Strings(version 2): (function, overload id, params, result, member);
# ``format`` is Kubernetes' formatter, in library/strings_format.py
_STRINGS_V2 = [
    ("charAt", "string_char_at_int", ["string", "int"], "string", True),
    ("indexOf", "string_index_of_string", ["string", "string"], "int", True),
    ("indexOf", "string_index_of_string_int", ["string", "string", "int"], "int", True),
    ("lastIndexOf", "string_last_index_of_string", ["string", "string"], "int", True),
    ("lastIndexOf", "string_last_index_of_string_int", ["string", "string", "int"], "int", True),
    ("lowerAscii", "string_lower_ascii", ["string"], "string", True),
    ("upperAscii", "string_upper_ascii", ["string"], "string", True),
    ("replace", "string_replace_string_string", ["string", "string", "string"], "string", True),
    ("replace", "string_replace_string_string_int", ["string", "string", "string", "int"], "string", True),
    ("split", "string_split_string", ["string", "string"], "list(string)", True),
    ("split", "string_split_string_int", ["string", "string", "int"], "list(string)", True),
    ("substring", "string_substring_int", ["string", "int"], "string", True),
    ("substring", "string_substring_int_int", ["string", "int", "int"], "string", True),
    ("trim", "string_trim", ["string"], "string", True),
    ("join", "list_join", ["list(string)"], "string", True),
    ("join", "list_join_string", ["list(string)", "string"], "string", True),
    ("strings.quote", "strings_quote", ["string"], "string", False),
]
# cel-go optional-types functions cel-cpp lacks (evaluated natively, see webhook.cel.optimize)
_OPTIONAL_EXTRAS = [
    ("optional.unwrap", "optional_unwrap", ["list(optional_type(V))"], "list(V)", False),
    ("unwrapOpt", "optional_unwrapOpt", ["list(optional_type(V))"], "list(V)", True),
]

_COMPARABLE = ["int", "uint", "double", "string", "bytes", "bool", TIMESTAMP, DURATION]
_CROSS_NUMERIC = [("int", "double"), ("double", "int"), ("int", "uint"), ("uint", "int"), ("uint", "double"), ("double", "uint")]
_STRING_FROM = ["string", "int", "uint", "double", "bytes", "bool", TIMESTAMP, DURATION]


# --- opaque library values as protobuf messages ------------------------------------------


@cache
def descriptor_pool_with_library_types() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    by_package: dict[str, list[str]] = defaultdict(list)
    for opaque in OPAQUE_TYPES:
        package, _, name = opaque.cel_type.rpartition(".")
        by_package[package].append(name)
    for package, names in by_package.items():
        file = descriptor_pb2.FileDescriptorProto(name=f"infergate/{package}.proto", package=package, syntax="proto3")
        for name in names:
            message = file.message_type.add(name=name)
            message.field.add(name=KEY_FIELD, number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
        pool.Add(file)
    return pool


@cache
def _message_classes() -> dict[str, type]:
    pool = descriptor_pool_with_library_types()
    return {t.cel_type: message_factory.GetMessageClass(pool.FindMessageTypeByName(t.cel_type)) for t in OPAQUE_TYPES}


_OPAQUE_BY_NAME = {t.cel_type: t for t in OPAQUE_TYPES}


def to_message(value: OpaqueValue) -> Any:
    return _message_classes()[value.cel_type](**{KEY_FIELD: value.key})


@lru_cache(maxsize=8192)
def library_value(cel_type: str, key: str) -> OpaqueValue:
    """The library value of type ``cel_type`` with canonical ``key``."""
    return _OPAQUE_BY_NAME[cel_type].from_key(key)


def from_message(message: Any) -> OpaqueValue:
    return library_value(message.DESCRIPTOR.full_name, getattr(message, KEY_FIELD))


def is_library_message(value: Any) -> bool:
    descriptor = getattr(value, "DESCRIPTOR", None)
    return descriptor is not None and descriptor.full_name in _OPAQUE_BY_NAME


def to_runtime(value: Any) -> Any:
    """A library function's Python result as the C++ runtime takes it."""
    if type(value) in _PLAIN:
        return _whole_text(value)
    return _rebuild(value, _runtime_leaf, optional_as_list=True, key_of=_same)


def _same(value: Any) -> Any:
    return value


def _runtime_leaf(value: Any) -> Any:
    return to_message(value) if isinstance(value, OpaqueValue) else _whole_text(value)


def _whole_text(value: Any) -> Any:
    """A string with a NUL as a ``google.protobuf.StringValue``, which the C++ runtime takes
    whole and reads as a string (cel-expr-python cuts a Python str at its first NUL; no
    library function returns bytes)."""
    if type(value) is str and "\x00" in value:
        return wrappers_pb2.StringValue(value=value)
    return value


_PLAIN = {bool, int, float, str, bytes, type(None)}


def from_runtime(value: Any) -> Any:
    """A value handed over by the C++ runtime as the library modules take it."""
    if type(value) in _PLAIN:  # most values
        return value
    if type(value) is list and all(type(v) in _PLAIN for v in value):  # a batch's list of bools
        return value
    return _rebuild(value, _python_leaf)


def _python_leaf(value: Any) -> Any:
    if type(value) in _PLAIN:
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    if is_library_message(value):
        return from_message(value)
    return value


def cut_by_runtime(values: Iterable[Any]) -> bool:
    """Whether any text in ``values`` (a string, bytes or map key at any depth) holds a NUL:
    cel-expr-python 0.1.3 cuts such text at its first NUL when it takes a Python value, so
    that evaluation is not the C++ runtime's to answer. orjson serialises the values in a few
    µs and escapes a NUL as ``\\u0000`` (a string spelling out those six characters is a false
    alarm, and only costs the slower exact answer)."""
    values = list(values)
    try:
        text = orjson.dumps(values, default=_text_of)
    except orjson.JSONEncodeError:  # keys other than strings, nesting past orjson's 255 levels, integers past 64 bits
        return _holds_nul(values)
    return b"\\u0000" in text


def _text_of(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("latin-1")
    if isinstance(value, OptionalValue):
        return [value.value] if value.has_value else None
    return None  # durations, library values: no text of the user's


def _holds_nul(values: list[Any]) -> bool:
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return True
        elif isinstance(value, (bytes, bytearray)):
            if b"\x00" in value:
                return True
        elif isinstance(value, dict):
            stack.extend(value)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, OptionalValue) and value.has_value:
            stack.append(value.value)
    return False


def _rebuild(value: Any, leaf: Callable[[Any], Any], *, optional_as_list: bool = False,
             key_of: Callable[[Any], Any] | None = None) -> Any:
    """``value`` with lists and maps rebuilt and every other value (and map key, unless
    ``key_of`` is given for them) passed through ``leaf``, in a loop: values nest as deep as the input allows (the server's
    1,024 levels and more), deeper than Python's recursion limit."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        item, parent, slot = pop()
        if isinstance(item, list):
            built: Any = [None] * len(item)
            for i, element in enumerate(item):
                push((element, built, i))
        elif isinstance(item, dict):
            built = {}
            for key, element in item.items():
                key = (key_of or leaf)(key)
                built[key] = None  # the slot keeps the map's order
                push((element, built, key))
        elif optional_as_list and isinstance(item, OptionalValue):  # ``[...].first()`` once optimised
            built = [None] if item.has_value else []
            if item.has_value:
                push((item.value, built, 0))
        else:
            built = leaf(item)
        parent[slot] = built
    return root[0]


# --- declarations (the checking env) -----------------------------------------------------


def _overload_yaml(oid: str, params: list[str], result: str, member: bool) -> dict[str, Any]:
    types = [yaml_type(parse_type(p)) for p in params]
    entry: dict[str, Any] = {"id": oid}
    if member:
        entry["target"], types = types[0], types[1:]
    if types:
        entry["args"] = types
    entry["return"] = yaml_type(parse_type(result))
    return entry


def _standard_redeclarations() -> dict[str, list[dict[str, Any]]]:
    """Standard functions Kubernetes extends: cross-type numeric comparisons, ``string()``."""
    functions: dict[str, list[dict[str, Any]]] = {}
    for op, word in (("_<_", "less"), ("_<=_", "less_equals"), ("_>_", "greater"), ("_>=_", "greater_equals")):
        pairs = [(t, t) for t in _COMPARABLE] + _CROSS_NUMERIC
        functions[op] = [
            _overload_yaml(f"{word}_{a.split('.')[-1].lower()}_{b.split('.')[-1].lower()}", [a, b], "bool", False)
            for a, b in pairs
        ]
    functions["string"] = [
        _overload_yaml(f"{t.split('.')[-1].lower()}_to_string", [t], "string", False) for t in _STRING_FROM
    ]
    return functions


@cache
def _config_yaml(runtime: bool) -> str:
    functions: dict[str, list[dict[str, Any]]] = {} if runtime else _standard_redeclarations()
    if not runtime:
        for function, oid, params, result, member in _STRINGS_V2 + _OPTIONAL_EXTRAS:
            functions.setdefault(function, []).append(_overload_yaml(oid, params, result, member))
        for overload in OVERLOADS:
            functions.setdefault(overload.function, []).append(
                _overload_yaml(overload.id, list(overload.params), overload.result, overload.member)
            )
    config: dict[str, Any] = {
        "extensions": _RUNTIME_EXTENSIONS if runtime else _EXTENSIONS,
    }
    if not runtime:
        config["stdlib"] = {"exclude_functions": [{"name": name} for name in _standard_redeclarations()]}
        config["functions"] = [{"name": name, "overloads": overloads} for name, overloads in functions.items()]
    return json.dumps(config)  # JSON is YAML, and json writes it far faster than a YAML emitter


def new_env(variables: Mapping[str, cel.Type]) -> cel.Env:
    """The checking env: Kubernetes' declarations, ``variables`` declared as given."""
    return cel.NewEnv(
        descriptor_pool=descriptor_pool_with_library_types(),
        config=cel.NewEnvConfigFromYaml(_config_yaml(runtime=False)),
        variables=dict(variables),
    )


# --- implementations (the runtime env) ---------------------------------------------------

_KIND_TYPES = {
    "int": cel.Type.INT,
    "uint": cel.Type.UINT,
    "double": cel.Type.DOUBLE,
    "bool": cel.Type.BOOL,
    "string": cel.Type.STRING,
    "bytes": cel.Type.BYTES,
    "list": cel.Type.LIST,
    "map": cel.Type.MAP,
    TIMESTAMP: cel.Type.TIMESTAMP,
    DURATION: cel.Type.DURATION,
}


def private_name(function: str, member: bool) -> str:
    """The runtime env's name for a Kubernetes function (member calls become global)."""
    return f"{PRIVATE_PREFIX}{'member.' if member else ''}{function}"


# the one runtime parameter type that matches values of every kind
ANY_KIND = cel.Type("google.protobuf.Any")


def _runtime_type(t: TypeName) -> cel.Type:
    if t.name in _OPAQUE_BY_NAME:
        return cel.Type(t.name)
    if t.is_type_param or t.name == "dyn":
        return ANY_KIND
    return _KIND_TYPES[t.name]


def _accepts(t: TypeName, value: Any) -> bool:
    if t.name in _OPAQUE_BY_NAME:
        return isinstance(value, _OPAQUE_BY_NAME[t.name])
    return True  # the runtime already matched the kind


def _dispatcher(overloads: list[Overload]) -> Callable[..., Any]:
    """One runtime function for overloads the C++ runtime cannot tell apart (same kinds)."""
    typed = [(o, [parse_type(p) for p in o.params]) for o in overloads]

    def call(*args: Any) -> Any:
        values = [from_runtime(a) for a in args]
        for overload, params in typed:
            if all(_accepts(t, v) for t, v in zip(params, values)):
                try:
                    return to_runtime(overload.impl(*values))
                except LibraryError as err:
                    raise ValueError(str(err)) from None
        raise ValueError(no_such_overload(overloads[0].function, values))

    return call


def _fail(message: str) -> None:
    raise ValueError(message)


def _map_insert(mapping: dict, key: Any, value: Any = None) -> dict:
    """``cel.@mapInsert`` (transformMap / transformMapEntry)."""
    entries = key if value is None and isinstance(key, dict) else {key: value}
    result = dict(mapping)
    for k, v in entries.items():
        if k in result:
            raise ValueError(f"insert failed: key {k} already exists")
        result[k] = v
    return result


@cache
def _runtime_functions() -> list[cel.FunctionDecl]:
    groups: dict[tuple[str, bool], dict[tuple[str, ...], list[Overload]]] = defaultdict(lambda: defaultdict(list))
    for overload in OVERLOADS:
        params = [parse_type(p) for p in overload.params]
        kinds = tuple("message" if p.name in _OPAQUE_BY_NAME else "any" if p.is_type_param else p.name for p in params)
        groups[(overload.function, overload.member)][kinds].append(overload)
    decls = []
    for (function, member), by_kinds in groups.items():
        cel_overloads = [
            cel.Overload(
                f"{private_name(function, member)}/{'/'.join(kinds)}",
                cel.Type.DYN,
                [_runtime_type(parse_type(p)) for p in overloads[0].params],
                impl=_dispatcher(overloads),
            )
            for kinds, overloads in by_kinds.items()
        ]
        decls.append(cel.FunctionDecl(private_name(function, member), cel_overloads))
    decls.append(cel.FunctionDecl(FAIL_FUNCTION, [cel.Overload("@k8s.fail/string", cel.Type.DYN, [cel.Type.STRING], impl=_fail)]))
    decls.append(
        cel.FunctionDecl(
            MAP_INSERT_FUNCTION,
            [
                cel.Overload("@k8s.mapInsert/3", cel.Type.MAP, [cel.Type.MAP, ANY_KIND, ANY_KIND], impl=_map_insert),
                cel.Overload("@k8s.mapInsert/2", cel.Type.MAP, [cel.Type.MAP, cel.Type.MAP], impl=_map_insert),
            ],
        )
    )
    return decls


def runtime_env(variables: Mapping[str, cel.Type], hidden: tuple[str, ...] = ()) -> cel.Env:
    """The runtime env: plans optimised ASTs; ``variables`` as in the checking env, plus the
    ``hidden`` variables that carry values computed before evaluation."""
    return cel.NewEnv(
        descriptor_pool=descriptor_pool_with_library_types(),
        config=cel.NewEnvConfigFromYaml(_config_yaml(runtime=True)),
        variables={**variables, **{name: cel.Type.DYN for name in hidden}},
        functions=_runtime_functions(),
    )
