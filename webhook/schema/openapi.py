"""Structural schema validation with kube-openapi's semantics, messages and ratcheting.

A port of ``k8s.io/kube-openapi/pkg/validation/validate`` as the apiserver runs it on a
custom resource: per node, the type check, ``allOf``/``anyOf``/``oneOf``/``not``, string,
format, number, array, enum and object checks, in that order, with the same error texts.
On UPDATE, errors in a subtree equal to its correlated old value are dropped (ratcheting).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from webhook.gocompat.fmt import go_float, go_json, go_quote
from webhook.schema import fielderrors as fe
from webhook.schema.equality import OldItems, enum_matches, json_equal, unchanged
from webhook.schema.fastvalid import compile_fast
from webhook.schema.structural import ABSENT, Node, fits_type

_MAX_JSON_FLOAT = float(2 ** 53 - 1)
_TYPE_INFO = {str: ("string", ""), bool: ("boolean", ""), int: ("integer", "int64"), float: ("number", "float64"),
              list: ("array", ""), dict: ("object", "")}


def _info(value: Any) -> tuple[str, str]:
    """kube-openapi's ``schemaInfoForType``: JSON type and Go number format of a value."""
    if isinstance(value, bool):
        return "boolean", ""
    if isinstance(value, int):
        return "integer", "int64"
    if isinstance(value, float):
        return "number", "float64"
    if isinstance(value, str):
        return "string", ""
    if isinstance(value, list):
        return "array", ""
    return "object", ""


def _is_json_integer(value: float) -> bool:
    return not (math.isnan(value) or math.isinf(value)) and -_MAX_JSON_FLOAT <= value <= _MAX_JSON_FLOAT \
        and value.is_integer()


def _swag_is_integer(value: float) -> bool:
    """go-openapi's ``swag.IsFloat64AJSONInteger``: integral within a relative error of 1e-9."""
    if math.isnan(value) or math.isinf(value) or not -_MAX_JSON_FLOAT <= value <= _MAX_JSON_FLOAT:
        return False
    if value.is_integer():
        return True
    if value < 0:  # Go's uint64() of a negative float is far off: the relative error is huge
        return False
    whole = float(math.trunc(value))
    if whole == 0:
        return False
    return abs(value - whole) / (value + whole) < 1e-9


def _range_error(value: Any, typ: str, fmt: str, prefix: str, path: str) -> str | None:
    if fits_type(value, typ, fmt):
        return None
    return _range_message(typ, fmt, prefix, path)


def _range_message(typ: str, fmt: str, prefix: str, path: str) -> str:
    if fmt:
        return f"{prefix} value must be of type {typ} with format {fmt} in {path}"
    return f"{prefix} value must be of type {typ} (default format) in {path}"


def _enum_text(value: Any) -> str:
    return value if isinstance(value, str) else go_json(value)


_UNBUILT = object()  # a fast path not built yet


class SchemaValidator:
    """Validates one value against a compiled schema; ``prefix`` is the field path of the value."""

    __slots__ = ("root", "prefix", "root_of_object", "_passes")

    def __init__(self, root: Node, prefix: str | None = None):
        self.root = root
        self.prefix = prefix
        # the whole object never counts as unchanged: its metadata always changes on a write
        self.root_of_object = root if prefix is None else None
        self._passes: Any = _UNBUILT

    @property
    def passes(self) -> Callable[[Any], bool] | None:
        """"Surely no errors", generated from the schema (``fastvalid``): built when first
        needed, so that loading many CRDs does not compile a predicate for kinds no request
        sends (a start-up cost); None where the schema cannot be written as one."""
        if self._passes is _UNBUILT:
            self._passes = compile_fast(self.root)
        return self._passes

    # -- error construction -------------------------------------------------------------
    def _field(self, name: str) -> str | None:
        if not name:
            return self.prefix
        return f"{self.prefix}.{name}" if self.prefix else name

    def validate(self, value: Any, old: Any = ABSENT) -> list[fe.FieldError]:
        passes = self._passes if self._passes is not _UNBUILT else self.passes
        if passes is not None and passes(value):
            return []  # the walk would report nothing (ratcheting only ever drops errors)
        return self.walk(value, old)

    def walk(self, value: Any, old: Any = ABSENT) -> list[fe.FieldError]:
        """kube-openapi's walk of ``value``, node by node, every error (what ``validate`` answers
        where the generated predicate is not sure)."""
        return self._node(self.root, value, "", old)

    # -- one node -----------------------------------------------------------------------
    def _node(self, node: Node, value: Any, path: str, old: Any) -> list[fe.FieldError]:
        kind = type(value)
        if kind is dict and node.plain_object:  # the usual inner node: straight to its fields
            errs = self._object(node, value, path, old)
            return self._ratchet(node, errs, value, old) if errs else errs
        if kind is list and node.plain_array:
            errs = self._array(node, value, path, old)
            return self._ratchet(node, errs, value, old) if errs else errs
        if kind is str and node.plain_string:
            errs = self._string(node, value, path) if node.has_string_checks else []
            if node.enum is not None and value not in node.enum_strings:
                errs.append(fe.not_supported(self._field(path), value, [_enum_text(c) for c in node.enum]))
            return self._ratchet(node, errs, value, old) if errs else errs
        errs: list[fe.FieldError] = []
        if value is None:
            if node.types and not node.nullable:
                errs.append(self._type_error(path, ",".join(node.types), "null"))
            if node.enum is not None and not any(c is None for c in node.enum):
                errs.append(fe.not_supported(self._field(path), None, [_enum_text(c) for c in node.enum]))
            return self._ratchet(node, errs, value, old)
        sch_type, fmt = _TYPE_INFO.get(type(value)) or _info(value)
        types = node.types
        if (types or node.format) and not (sch_type in types and not node.format):
            self._check_type(node, value, sch_type, fmt, path, errs)
        if node.has_combinators:
            errs += self._combinators(node, value, path, old)
        if sch_type == "string":
            if node.has_string_checks:
                errs += self._string(node, value, path)
        elif sch_type == "array":
            errs += self._array(node, value, path, old)
        elif sch_type in ("integer", "number") and node.has_number_checks:
            errs += self._number(node, value, path)
        if node.enum is not None and not (value in node.enum_strings if sch_type == "string"
                                          else any(enum_matches(value, c) for c in node.enum)):
            errs.append(fe.not_supported(self._field(path), value, [_enum_text(c) for c in node.enum]))
        if sch_type == "object":
            errs += self._object(node, value, path, old)
        return self._ratchet(node, errs, value, old) if errs else errs

    def _check_type(self, node: Node, value: Any, sch_type: str, fmt: str, path: str,
                    errs: list[fe.FieldError]) -> None:
        """kube-openapi's type validator (formats decide for numbers; strings with a format pass)."""
        types = node.types
        is_float_int = sch_type == "number" and "integer" in types and _swag_is_integer(value)
        is_int_float = sch_type == "integer" and "number" in types
        if sch_type not in ("string", "array") and node.format and not (
                sch_type in types or fmt == node.format or is_float_int or is_int_float):
            errs.append(self._type_error(path, node.format, fmt))
        elif "number" not in types and "integer" not in types and node.format and sch_type in ("string", "array"):
            return
        elif not (sch_type in types or is_float_int or is_int_float):
            errs.append(self._type_error(path, ",".join(types), sch_type))

    def _ratchet(self, node: Node, errs: list[fe.FieldError], value: Any, old: Any) -> list[fe.FieldError]:
        """Errors of a value unchanged from its correlated old value are not reported (ratcheting)."""
        if errs and old is not ABSENT and node is not self.root_of_object and unchanged(node, value, old):
            return []
        return errs

    def _type_error(self, path: str, type_name: str, actual: str) -> fe.FieldError:
        return fe.type_invalid(self._field(path), actual,
                               f"{path} in body must be of type {type_name}: {go_quote(actual)}")

    # -- keyword groups -----------------------------------------------------------------
    def _string(self, node: Node, value: str, path: str) -> list[fe.FieldError]:
        errs: list[fe.FieldError] = []
        if node.max_length is not None and len(value) > node.max_length:
            errs.append(fe.too_long(self._field(path), node.max_length))
        elif node.min_length is not None and len(value) < node.min_length:
            errs.append(fe.invalid(self._field(path), value,
                                   f"{path} in body should be at least {node.min_length} chars long"))
        elif node.pattern_text and (node.pattern is None or not node.pattern.search(value)):
            errs.append(fe.invalid(self._field(path), value,
                                   f"{path} in body should match '{node.pattern_text}'"))
        if node.format_checker is not None and not node.format_checker(value):
            errs.append(fe.type_invalid(self._field(path), value,
                                        f"{path} in body must be of type {node.format}: {go_quote(value)}"))
        return errs

    def _number(self, node: Node, value: int | float, path: str) -> list[fe.FieldError]:
        """Range of the type/format, then multipleOf, minimum, maximum (kube-openapi's merge order)."""
        errs: list[fe.FieldError] = []
        typ, fmt = node.number_type, node.number_format
        problem = None if type(value) is int and fmt != "int32" else _range_error(value, typ, fmt, "Checked", path)
        if problem:
            errs.append(fe.invalid(self.prefix, "", problem))
        native_int = isinstance(value, int)
        if node.multiple_of is not None:
            factor = node.multiple_of
            problem = None if node.multiple_of_fits else _range_message(typ, fmt, "MultipleOf", path)
            if problem:
                errs.append(fe.invalid(self.prefix, "", problem))
            if native_int and not problem:
                int_factor = int(factor)
                if int_factor <= 0:
                    errs.append(fe.invalid(self._field(path), value,
                                           f"factor MultipleOf declared for {path} must be positive: {int_factor}"))
                elif value % int_factor != 0:
                    errs.append(fe.invalid(self._field(path), value,
                                           f"{path} in body should be a multiple of {int_factor}"))
            else:
                data = float(value)
                if factor <= 0:
                    errs.append(fe.invalid(self._field(path), value,
                                           f"factor MultipleOf declared for {path} must be positive: "
                                           f"{go_float(factor)}"))
                else:
                    mult = 1 / factor * data if factor < 1 else data / factor
                    if not _is_json_integer(mult):
                        errs.append(fe.invalid(self._field(path), value,
                                               f"{path} in body should be a multiple of {go_float(factor)}"))
        if node.minimum is not None:
            bound = node.minimum
            problem = None if node.minimum_fits else _range_message(typ, fmt, "Minimum boundary", path)
            if problem:
                errs.append(fe.invalid(self.prefix, "", problem))
            if native_int and not problem and math.isfinite(bound):  # (a YAML schema can say .inf)
                bound_i = int(bound)
                bad = value <= bound_i if node.exclusive_minimum else value < bound_i
                shown = str(bound_i)
            else:
                bad = value <= bound if node.exclusive_minimum else value < bound
                shown = go_float(float(bound))
            if bad:
                word = "greater than" if node.exclusive_minimum else "greater than or equal to"
                errs.append(fe.invalid(self._field(path), value, f"{path} in body should be {word} {shown}"))
        if node.maximum is not None:
            bound = node.maximum
            problem = None if node.maximum_fits else _range_message(typ, fmt, "Maximum boundary", path)
            if problem:
                errs.append(fe.invalid(self.prefix, "", problem))
            if native_int and not problem and math.isfinite(bound):  # (a YAML schema can say .inf)
                bound_i = int(bound)
                bad = value >= bound_i if node.exclusive_maximum else value > bound_i
                shown = str(bound_i)
            else:
                bad = value >= bound if node.exclusive_maximum else value > bound
                shown = go_float(float(bound))
            if bad:
                word = "less than" if node.exclusive_maximum else "less than or equal to"
                errs.append(fe.invalid(self._field(path), value, f"{path} in body should be {word} {shown}"))
        return errs

    def _array(self, node: Node, value: list, path: str, old: Any) -> list[fe.FieldError]:
        errs: list[fe.FieldError] = []
        items = node.items
        if items is not None:
            correlate = OldItems(node, old) if old is not ABSENT and node.list_type == "map" else None
            plain = items.plain_types
            for i, item in enumerate(value):
                if type(item) in plain:
                    continue
                item_old = correlate.get(item) if correlate is not None else ABSENT
                errs += self._node(items, item, f"{path}[{i}]", item_old)
        size = len(value)
        if node.min_items is not None and size < node.min_items:
            errs.append(fe.invalid(self._field(path), size,
                                   f"{path} in body should have at least {node.min_items} items"))
        if node.max_items is not None and size > node.max_items:
            errs.append(fe.too_many(self._field(path), size, node.max_items))
        if node.unique_items:
            seen = []
            for item in value:
                if any(json_equal(item, s) for s in seen):
                    errs.append(fe.invalid(self._field(path), value, f"{path} in body shouldn't contain duplicates"))
                    break
                seen.append(item)
        return errs

    def _object(self, node: Node, value: dict, path: str, old: Any) -> list[fe.FieldError]:
        size = len(value)
        if node.min_properties is not None and size < node.min_properties:
            return [fe.invalid(self._field(path), size,
                               f"{path} in body should have at least {node.min_properties} properties")]
        if node.max_properties is not None and size > node.max_properties:
            return [fe.too_many(self._field(path), size, node.max_properties)]
        errs: list[fe.FieldError] = []
        old_map = old if isinstance(old, dict) else None
        props = node.properties
        if not node.additional_allowed:
            for key in sorted(value):
                if key not in props:
                    errs.append(fe.invalid(self._field(f"{path}.{key}" if path else key), "",
                                           f"{path}.{key} in body is a forbidden property"))
        elif node.additional is not None:
            for key in sorted(value):
                if key not in props:
                    child_path = f"{path}.{key}" if path else key
                    child_old = old_map.get(key, ABSENT) if old_map is not None else ABSENT
                    errs += self._node(node.additional, value[key], child_path, child_old)
        if len(value) < len(props):  # visit what is there, in the same (sorted) order
            present = [(key, props[key]) for key in sorted(value) if key in props]
        else:
            present = [(key, child) for key, child in node.sorted_properties if key in value]
        for key, child in present:
            item = value[key]
            if type(item) in child.plain_types:
                continue  # a plain leaf with a value of its type: nothing can fail
            child_path = f"{path}.{key}" if path else key
            child_old = old_map.get(key, ABSENT) if old_map is not None else ABSENT
            errs += self._node(child, item, child_path, child_old)
        for key in node.required:
            if key not in value:
                errs.append(fe.required(self._field(f"{path}.{key}" if path else key)))
        return errs

    def _combinators(self, node: Node, value: Any, path: str, old: Any) -> list[fe.FieldError]:
        errs: list[fe.FieldError] = []
        quoted = go_quote(path)
        if node.any_of:
            best: list[fe.FieldError] | None = None
            for branch in node.any_of:
                result = self._node(branch, value, path, old)
                if not result:
                    best = None
                    break
                if best is None:
                    best = result
            else:
                errs.append(fe.invalid(self.prefix, "", f"{quoted} must validate at least one schema (anyOf)"))
            if best:
                errs += best
        if node.one_of:
            best = None
            valid = 0
            for branch in node.one_of:
                result = self._node(branch, value, path, old)
                if not result:
                    valid += 1
                elif valid == 0 and best is None:
                    best = result
            if valid != 1:
                extra = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
                errs.append(fe.invalid(self.prefix, "",
                                       f"{quoted} must validate one and only one schema (oneOf). {extra}"))
                if valid == 0 and best:
                    errs += best
        if node.all_of:
            valid = 0
            for branch in node.all_of:
                result = self._node(branch, value, path, old)
                if not result:
                    valid += 1
                errs += result
            if valid != len(node.all_of):
                extra = ". None validated" if valid == 0 else ""
                errs.append(fe.invalid(self.prefix, "", f"{quoted} must validate all the schemas (allOf){extra}"))
        if node.not_ is not None and not self._node(node.not_, value, path, old):
            errs.append(fe.invalid(self.prefix, "", f"{quoted} must not validate the schema (not)"))
        return errs
