"""Function declarations of the Kubernetes 1.36 CEL base environment, for the type checker.

The CEL standard library is declared here by hand; the Kubernetes and cel-go extension libraries
are read from ``k8s_cel_functions.md``-style signature tables embedded below (receiver style
``T.f(args)`` or global ``f(args)``, type parameters as ``<A>``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from webhook.cel.common.types import (
    BOOL, BYTES, CelType, DOUBLE, DURATION, DYN, INT, NULL, STRING, TIMESTAMP, UINT, list_of, map_of, opaque,
    optional_of, type_of)


@dataclass(frozen=True, slots=True)
class Overload:
    id: str
    params: tuple[CelType, ...]     # receiver first for member overloads
    result: CelType
    member: bool


def param(name: str) -> CelType:
    return CelType("typeparam", name=name)


A, K, V = param("A"), param("K"), param("V")

_ORDERED = {"bool": BOOL, "int64": INT, "uint64": UINT, "double": DOUBLE, "string": STRING, "bytes": BYTES,
            "timestamp": TIMESTAMP, "duration": DURATION}
_CROSS_NUMERIC = {"int64_double": (INT, DOUBLE), "int64_uint64": (INT, UINT), "uint64_double": (UINT, DOUBLE),
                  "uint64_int64": (UINT, INT), "double_int64": (DOUBLE, INT), "double_uint64": (DOUBLE, UINT)}


def _standard() -> list[tuple[str, Overload]]:
    out: list[tuple[str, Overload]] = []

    def g(name: str, oid: str, params: tuple[CelType, ...], result: CelType) -> None:
        out.append((name, Overload(oid, params, result, False)))

    def m(name: str, oid: str, params: tuple[CelType, ...], result: CelType) -> None:
        out.append((name, Overload(oid, params, result, True)))

    g("!_", "logical_not", (BOOL,), BOOL)
    g("-_", "negate_int64", (INT,), INT)
    g("-_", "negate_double", (DOUBLE,), DOUBLE)
    g("_&&_", "logical_and", (BOOL, BOOL), BOOL)
    g("_||_", "logical_or", (BOOL, BOOL), BOOL)
    g("_?_:_", "conditional", (BOOL, A, A), A)
    g("@not_strictly_false", "not_strictly_false", (BOOL,), BOOL)
    g("_==_", "equals", (A, A), BOOL)
    g("_!=_", "not_equals", (A, A), BOOL)
    for op, prefix in (("_<_", "less"), ("_<=_", "less_equals"), ("_>_", "greater"), ("_>=_", "greater_equals")):
        for suffix, t in _ORDERED.items():
            g(op, f"{prefix}_{suffix}", (t, t), BOOL)
        for suffix, (left, right) in _CROSS_NUMERIC.items():
            g(op, f"{prefix}_{suffix}", (left, right), BOOL)
    for t, name in ((INT, "int64"), (UINT, "uint64"), (DOUBLE, "double")):
        g("_+_", f"add_{name}", (t, t), t)
        g("_-_", f"subtract_{name}", (t, t), t)
        g("_*_", f"multiply_{name}", (t, t), t)
        g("_/_", f"divide_{name}", (t, t), t)
    g("_%_", "modulo_int64", (INT, INT), INT)
    g("_%_", "modulo_uint64", (UINT, UINT), UINT)
    g("_+_", "add_string", (STRING, STRING), STRING)
    g("_+_", "add_bytes", (BYTES, BYTES), BYTES)
    g("_+_", "add_list", (list_of(A), list_of(A)), list_of(A))
    g("_+_", "add_timestamp_duration", (TIMESTAMP, DURATION), TIMESTAMP)
    g("_+_", "add_duration_timestamp", (DURATION, TIMESTAMP), TIMESTAMP)
    g("_+_", "add_duration_duration", (DURATION, DURATION), DURATION)
    g("_-_", "subtract_timestamp_timestamp", (TIMESTAMP, TIMESTAMP), DURATION)
    g("_-_", "subtract_timestamp_duration", (TIMESTAMP, DURATION), TIMESTAMP)
    g("_-_", "subtract_duration_duration", (DURATION, DURATION), DURATION)
    g("_[_]", "index_list", (list_of(A), INT), A)
    g("_[_]", "index_map", (map_of(K, V), K), V)
    g("@in", "in_list", (A, list_of(A)), BOOL)
    g("@in", "in_map", (K, map_of(K, V)), BOOL)
    for t, name in ((STRING, "string"), (BYTES, "bytes"), (list_of(A), "list"), (map_of(K, V), "map")):
        g("size", f"size_{name}", (t,), INT)
        m("size", f"{name}_size", (t,), INT)
    conversions = {
        "int": (INT, [(INT, "int64_to_int64"), (UINT, "uint64_to_int64"), (DOUBLE, "double_to_int64"),
                      (STRING, "string_to_int64"), (TIMESTAMP, "timestamp_to_int64")]),
        "uint": (UINT, [(UINT, "uint64_to_uint64"), (INT, "int64_to_uint64"), (DOUBLE, "double_to_uint64"),
                        (STRING, "string_to_uint64")]),
        "double": (DOUBLE, [(DOUBLE, "double_to_double"), (INT, "int64_to_double"), (UINT, "uint64_to_double"),
                            (STRING, "string_to_double")]),
        "string": (STRING, [(STRING, "string_to_string"), (BOOL, "bool_to_string"), (INT, "int64_to_string"),
                            (UINT, "uint64_to_string"), (DOUBLE, "double_to_string"), (BYTES, "bytes_to_string"),
                            (TIMESTAMP, "timestamp_to_string"), (DURATION, "duration_to_string")]),
        "bytes": (BYTES, [(BYTES, "bytes_to_bytes"), (STRING, "string_to_bytes")]),
        "bool": (BOOL, [(BOOL, "bool_to_bool"), (STRING, "string_to_bool")]),
        "timestamp": (TIMESTAMP, [(TIMESTAMP, "timestamp_to_timestamp"), (STRING, "string_to_timestamp"),
                                  (INT, "int64_to_timestamp")]),
        "duration": (DURATION, [(DURATION, "duration_to_duration"), (STRING, "string_to_duration")]),
    }
    for name, (result, sources) in conversions.items():
        for source, oid in sources:
            g(name, oid, (source,), result)
    g("dyn", "to_dyn", (A,), DYN)
    g("type", "type", (A,), type_of(A))
    g("matches", "matches", (STRING, STRING), BOOL)
    m("matches", "matches_string", (STRING, STRING), BOOL)
    m("contains", "contains_string", (STRING, STRING), BOOL)
    m("startsWith", "starts_with_string", (STRING, STRING), BOOL)
    m("endsWith", "ends_with_string", (STRING, STRING), BOOL)
    for name in ("getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek",
                 "getHours", "getMinutes", "getSeconds", "getMilliseconds"):
        m(name, f"timestamp_to_{name}", (TIMESTAMP,), INT)
        m(name, f"timestamp_to_{name}_with_tz", (TIMESTAMP, STRING), INT)
    for name in ("getHours", "getMinutes", "getSeconds", "getMilliseconds"):
        m(name, f"duration_to_{name}", (DURATION,), INT)
    return out


# Kubernetes libraries and cel-go extensions enabled in the 1.36 base environment:
# signature | result | overload id
_LIBRARIES = """
kubernetes.URL.getEscapedPath() | string | url_get_escaped_path
kubernetes.URL.getHost() | string | url_get_host
kubernetes.URL.getHostname() | string | url_get_hostname
kubernetes.URL.getPort() | string | url_get_port
kubernetes.URL.getQuery() | map(string, list(string)) | url_get_query
kubernetes.URL.getScheme() | string | url_get_scheme
isURL(string) | bool | is_url_string
url(string) | kubernetes.URL | string_to_url
string.find(string) | string | string_find_string
string.findAll(string) | list(string) | string_find_all_string
string.findAll(string, int) | list(string) | string_find_all_string_int
list(<A>).indexOf(<A>) | int | list_a_index_of_int
list(<A>).lastIndexOf(<A>) | int | list_a_last_index_of_int
kubernetes.Quantity.add(kubernetes.Quantity) | kubernetes.Quantity | quantity_add
kubernetes.Quantity.add(int) | kubernetes.Quantity | quantity_add_int
kubernetes.Quantity.asApproximateFloat() | double | quantity_get_float
kubernetes.Quantity.asInteger() | int | quantity_get_int
kubernetes.Quantity.compareTo(kubernetes.Quantity) | int | quantity_compare_to
kubernetes.Quantity.isGreaterThan(kubernetes.Quantity) | bool | quantity_is_greater_than
kubernetes.Quantity.isInteger() | bool | quantity_is_integer
kubernetes.Quantity.isLessThan(kubernetes.Quantity) | bool | quantity_is_less_than
isQuantity(string) | bool | is_quantity_string
quantity(string) | kubernetes.Quantity | string_to_quantity
sign(kubernetes.Quantity) | int | quantity_sign
kubernetes.Quantity.sub(kubernetes.Quantity) | kubernetes.Quantity | quantity_sub
kubernetes.Quantity.sub(int) | kubernetes.Quantity | quantity_sub_int
net.IP.family() | int | ip_family
ip(string) | net.IP | string_to_ip
ip.isCanonical(string) | bool | ip_is_canonical
net.IP.isGlobalUnicast() | bool | ip_is_global_unicast
isIP(string) | bool | is_ip
net.IP.isLinkLocalMulticast() | bool | ip_is_link_local_multicast
net.IP.isLinkLocalUnicast() | bool | ip_is_link_local_unicast
net.IP.isLoopback() | bool | ip_is_loopback
net.IP.isUnspecified() | bool | ip_is_unspecified
string(net.IP) | string | ip_to_string
cidr(string) | net.CIDR | string_to_cidr
net.CIDR.containsCIDR(net.CIDR) | bool | cidr_contains_cidr
net.CIDR.containsCIDR(string) | bool | cidr_contains_cidr_string
net.CIDR.containsIP(net.IP) | bool | cidr_contains_ip_ip
net.CIDR.containsIP(string) | bool | cidr_contains_ip_string
net.CIDR.ip() | net.IP | cidr_ip
isCIDR(string) | bool | is_cidr
net.CIDR.masked() | net.CIDR | cidr_masked
net.CIDR.prefixLength() | int | cidr_prefix_length
string(net.CIDR) | string | cidr_to_string
format.named(string) | optional_type(kubernetes.NamedFormat) | format-named
kubernetes.NamedFormat.validate(string) | optional_type(list(string)) | format-validate
kubernetes.Semver.compareTo(kubernetes.Semver) | int | semver_compare_to
kubernetes.Semver.isGreaterThan(kubernetes.Semver) | bool | semver_is_greater_than
kubernetes.Semver.isLessThan(kubernetes.Semver) | bool | semver_is_less_than
isSemver(string) | bool | is_semver_string
isSemver(string, bool) | bool | is_semver_string_bool
kubernetes.Semver.major() | int | semver_major
kubernetes.Semver.minor() | int | semver_minor
kubernetes.Semver.patch() | int | semver_patch
semver(string, bool) | kubernetes.Semver | string_bool_to_semver
semver(string) | kubernetes.Semver | string_to_semver
string.charAt(int) | string | string_char_at_int
string.format(list(dyn)) | string | string_format
string.indexOf(string) | int | string_index_of_string
string.indexOf(string, int) | int | string_index_of_string_int
list(string).join() | string | list_join
list(string).join(string) | string | list_join_string
string.lastIndexOf(string) | int | string_last_index_of_string
string.lastIndexOf(string, int) | int | string_last_index_of_string_int
string.lowerAscii() | string | string_lower_ascii
string.replace(string, string) | string | string_replace_string_string
string.replace(string, string, int) | string | string_replace_string_string_int
string.split(string) | list(string) | string_split_string
string.split(string, int) | list(string) | string_split_string_int
strings.quote(string) | string | strings_quote
string.substring(int) | string | string_substring_int
string.substring(int, int) | string | string_substring_int_int
string.trim() | string | string_trim
string.upperAscii() | string | string_upper_ascii
sets.contains(list(<T>), list(<T>)) | bool | list_sets_contains_list
sets.equivalent(list(<T>), list(<T>)) | bool | list_sets_equivalent_list
sets.intersects(list(<T>), list(<T>)) | bool | list_sets_intersects_list
list(<T>).@sortByAssociatedKeys(list(bool)) | list(<T>) | list_bool_sortByAssociatedKeys
list(<T>).@sortByAssociatedKeys(list(bytes)) | list(<T>) | list_bytes_sortByAssociatedKeys
list(<T>).@sortByAssociatedKeys(list(double)) | list(<T>) | list_double_sortByAssociatedKeys
list(<T>).@sortByAssociatedKeys(list(google.protobuf.Duration)) | list(<T>) | list_google.protobuf.Duration_sortByAssociatedKeys
list(<T>).@sortByAssociatedKeys(list(google.protobuf.Timestamp)) | list(<T>) | list_google.protobuf.Timestamp_sortByAssociatedKeys
list(<T>).@sortByAssociatedKeys(list(int)) | list(<T>) | list_int_sortByAssociatedKeys
list(<T>).@sortByAssociatedKeys(list(string)) | list(<T>) | list_string_sortByAssociatedKeys
list(<T>).@sortByAssociatedKeys(list(uint)) | list(<T>) | list_uint_sortByAssociatedKeys
list(<T>).distinct() | list(<T>) | list_distinct
list(list(<T>)).flatten() | list(<T>) | list_flatten
list(dyn).flatten(int) | list(dyn) | list_flatten_int
lists.range(int) | list(int) | lists_range
list(<T>).reverse() | list(<T>) | list_reverse
list(<T>).slice(int, int) | list(<T>) | list_slice
list(bool).sort() | list(bool) | list_bool_sort
list(bytes).sort() | list(bytes) | list_bytes_sort
list(double).sort() | list(double) | list_double_sort
list(google.protobuf.Duration).sort() | list(google.protobuf.Duration) | list_google.protobuf.Duration_sort
list(google.protobuf.Timestamp).sort() | list(google.protobuf.Timestamp) | list_google.protobuf.Timestamp_sort
list(int).sort() | list(int) | list_int_sort
list(string).sort() | list(string) | list_string_sort
list(uint).sort() | list(uint) | list_uint_sort
cel.@mapInsert(map(<K>, <V>), <K>, <V>) | map(<K>, <V>) | @mapInsert_map_key_value
cel.@mapInsert(map(<K>, <V>), map(<K>, <V>)) | map(<K>, <V>) | @mapInsert_map_map
_[?_](list(<V>), int) | optional_type(<V>) | list_optindex_optional_int
_[?_](map(<K>, <V>), <K>) | optional_type(<V>) | map_optindex_optional_value
_[?_](optional_type(list(<V>)), int) | optional_type(<V>) | optional_list_optindex_optional_int
_[?_](optional_type(map(<K>, <V>)), <K>) | optional_type(<V>) | optional_map_optindex_optional_value
_[_](optional_type(list(<V>)), int) | optional_type(<V>) | optional_list_index_int
_[_](optional_type(map(<K>, <V>)), <K>) | optional_type(<V>) | optional_map_index_value
list(<V>).first() | optional_type(<V>) | list_first
optional_type(<V>).hasValue() | bool | optional_hasValue
list(<V>).last() | optional_type(<V>) | list_last
optional.none() | optional_type(<V>) | optional_none
optional.of(<V>) | optional_type(<V>) | optional_of
optional.ofNonZeroValue(<V>) | optional_type(<V>) | optional_ofNonZeroValue
optional.unwrap(list(optional_type(<V>))) | list(<V>) | optional_unwrap
optional_type(<V>).or(optional_type(<V>)) | optional_type(<V>) | optional_or_optional
optional_type(<V>).orValue(<V>) | <V> | optional_orValue_value
list(optional_type(<V>)).unwrapOpt() | list(<V>) | optional_unwrapOpt
optional_type(<V>).value() | <V> | optional_value
kubernetes.authorization.Decision.allowed() | bool | decision_allowed
kubernetes.authorization.PathCheck.check(string) | kubernetes.authorization.Decision | pathcheck_check
kubernetes.authorization.ResourceCheck.check(string) | kubernetes.authorization.Decision | resourcecheck_check
kubernetes.authorization.Decision.error() | string | decision_error
kubernetes.authorization.Decision.errored() | bool | decision_errored
kubernetes.authorization.Authorizer.group(string) | kubernetes.authorization.GroupCheck | authorizer_group
kubernetes.authorization.ResourceCheck.name(string) | kubernetes.authorization.ResourceCheck | resourcecheck_name
kubernetes.authorization.ResourceCheck.namespace(string) | kubernetes.authorization.ResourceCheck | resourcecheck_namespace
kubernetes.authorization.Authorizer.path(string) | kubernetes.authorization.PathCheck | authorizer_path
kubernetes.authorization.Decision.reason() | string | decision_reason
kubernetes.authorization.GroupCheck.resource(string) | kubernetes.authorization.ResourceCheck | groupcheck_resource
kubernetes.authorization.Authorizer.serviceAccount(string, string) | kubernetes.authorization.Authorizer | authorizer_serviceaccount
kubernetes.authorization.ResourceCheck.subresource(string) | kubernetes.authorization.ResourceCheck | resourcecheck_subresource
kubernetes.authorization.ResourceCheck.fieldSelector(string) | kubernetes.authorization.ResourceCheck | authorizer_fieldselector
kubernetes.authorization.ResourceCheck.labelSelector(string) | kubernetes.authorization.ResourceCheck | authorizer_labelselector
"""

_FORMATS = ("dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName", "dns1123LabelPrefix",
            "dns1123SubdomainPrefix", "dns1035LabelPrefix", "labelValue", "uri", "uuid", "byte", "date", "datetime")

_NAMED = {"int": INT, "uint": UINT, "double": DOUBLE, "bool": BOOL, "string": STRING, "bytes": BYTES,
          "dyn": DYN, "null_type": NULL, "google.protobuf.Timestamp": TIMESTAMP,
          "google.protobuf.Duration": DURATION}


def parse_type(text: str) -> CelType:
    text = text.strip()
    if text.startswith("<") and text.endswith(">"):
        return param(text[1:-1])
    if text in _NAMED:
        return _NAMED[text]
    match = re.fullmatch(r"(list|map|optional_type)\((.*)\)", text)
    if match:
        args = _split_args(match.group(2))
        kind = match.group(1)
        if kind == "list":
            return list_of(parse_type(args[0]))
        if kind == "map":
            return map_of(parse_type(args[0]), parse_type(args[1]))
        return optional_of(parse_type(args[0]))
    return opaque(text)


def _split_args(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        current += ch
    if current.strip():
        parts.append(current)
    return parts


_SIGNATURE = re.compile(r"^(?:(?P<receiver>.+)\.)?(?P<name>[@\w?\[\]]+)\((?P<args>.*)\)$")


def _library() -> list[tuple[str, Overload]]:
    out = []
    for line in _LIBRARIES.strip().splitlines():
        signature, result, oid = (part.strip() for part in line.split("|"))
        match = _SIGNATURE.match(signature)
        assert match, signature
        receiver, name, args = match.group("receiver"), match.group("name"), match.group("args")
        params = tuple(parse_type(a) for a in _split_args(args))
        if receiver is not None and receiver in ("ip", "sets", "lists", "strings", "optional", "format", "cel"):
            out.append((f"{receiver}.{name}", Overload(oid, params, parse_type(result), False)))
        elif receiver is not None:
            out.append((name, Overload(oid, (parse_type(receiver),) + params, parse_type(result), True)))
        else:
            out.append((name, Overload(oid, params, parse_type(result), False)))
    # Kubernetes' declaration order: the checker binds a type parameter to the first overload
    # that fits, so ``[].sum()`` is an int (library/lists.go comparableTypes, summableTypes)
    comparable = {"int": INT, "uint": UINT, "double": DOUBLE, "bool": BOOL, "duration": DURATION,
                  "timestamp": TIMESTAMP, "string": STRING, "bytes": BYTES}
    for short, t in comparable.items():
        out.append(("isSorted", Overload(f"list_{short}_is_sorted_bool", (list_of(t),), BOOL, True)))
        out.append(("max", Overload(f"list_{short}_max_{short}", (list_of(t),), t, True)))
        out.append(("min", Overload(f"list_{short}_min_{short}", (list_of(t),), t, True)))
        if short in ("double", "duration", "int", "uint"):
            out.append(("sum", Overload(f"list_{short}_sum_{short}", (list_of(t),), t, True)))
    named_format = opaque("kubernetes.NamedFormat")
    for fmt in _FORMATS:
        out.append((f"format.{fmt}", Overload(f"format-{fmt}", (), named_format, False)))
    return out


@cache
def functions() -> dict[str, tuple[Overload, ...]]:
    table: dict[str, list[Overload]] = {}
    for name, overload in _standard() + _library():
        table.setdefault(name, []).append(overload)
    return {name: tuple(overloads) for name, overloads in table.items()}


# identifiers that name types (``type(x) == int``)
TYPE_IDENTS = {
    "int": type_of(INT), "uint": type_of(UINT), "double": type_of(DOUBLE), "bool": type_of(BOOL),
    "string": type_of(STRING), "bytes": type_of(BYTES), "null_type": type_of(NULL),
    "list": type_of(list_of(DYN)), "map": type_of(map_of(DYN, DYN)), "type": type_of(CelType("type")),
    "google.protobuf.Timestamp": type_of(TIMESTAMP), "google.protobuf.Duration": type_of(DURATION),
    "net.IP": type_of(opaque("net.IP")), "net.CIDR": type_of(opaque("net.CIDR")),
    "kubernetes.Quantity": type_of(opaque("kubernetes.Quantity")),
    "kubernetes.URL": type_of(opaque("kubernetes.URL")),
    "kubernetes.Semver": type_of(opaque("kubernetes.Semver")),
    "optional_type": type_of(optional_of(DYN)),
}
