"""What kube-apiserver says when a CustomResourceDefinition is created.

    errors, warnings = check_crd(crd)        # [] when the apiserver would accept it
    message = rejection_message(crd, errors) # the Status message of the 422

Covers the structural-schema rules, forbidden constructs, list types, patterns, defaults that
break their own schema, CEL rules (static checks, compilation, oldSelf placement) and format
warnings, with the apiserver's field paths (``spec.validation.openAPIV3Schema.properties[spec]...``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Mapping

from webhook.cel.cost.estimate import MAX as MAX_UINT64
from webhook.cel.crd import CrdRuleError, compile_schema_rules, references_old_self
from webhook.cel.limits import STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT
from webhook.gocompat.fmt import go_json, go_quote
from webhook.gocompat.regexp import compile_error
from webhook.schema.openapi import SchemaValidator
from webhook.schema.structural import compile_schema
from webhook.validation.strfmt import kept_format

if TYPE_CHECKING:
    from webhook.cel import Evaluator

_COST_HINT = ("(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, "
              "and strings are declared)")

LIST_TYPES = ("atomic", "set", "map")
# JSON-schema keywords a CRD schema must not use, with the apiserver's reason
_UNSUPPORTED = (
    ("$ref", "$ref is not supported"),
    ("definitions", "definitions are not supported"),
    ("dependencies", "dependencies are not supported"),
    ("patternProperties", "patternProperties is not supported"),
    ("uniqueItems", "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"),
)
VALUE_VALIDATION_KEYS = ("allOf", "anyOf", "oneOf", "not")


def rejection_message(crd: Mapping[str, Any], errors: list[str]) -> str:
    name = (crd.get("metadata") or {}).get("name", "")
    unique = list(dict.fromkeys(errors))
    body = unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
    return f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid: {body}'


def check_crd(crd: Mapping[str, Any], evaluator: Evaluator) -> tuple[list[str], list[str]]:
    """The apiserver's field errors and warnings for creating ``crd`` (its CEL rules compiled,
    and evaluated on its defaults, with ``evaluator``).

    A CRD whose fields have the wrong JSON types (which the apiserver cannot even decode) gets
    one error per such field instead, naming the field and the expected type.
    """
    malformed = malformed_fields(crd)
    if malformed:
        return malformed, []
    errors: list[str] = []
    warnings: list[str] = []
    for path, schema in _version_schemas(crd):
        checker = _SchemaChecker(errors, warnings, evaluator)
        checker.check_root(schema, path)
    for path, subresources in _version_subresources(crd):
        errors += subresource_errors(subresources, path)
    return errors, warnings


def _version_subresources(crd: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each version's subresources, as ``_version_schemas``: identical ones are the internal
    ``spec.subresources`` (``hasIdenticalPerVersionSubresources``)."""
    versions = [v for v in (crd.get("spec") or {}).get("versions") or [] if isinstance(v, Mapping)]
    found = [(v.get("subresources"), i) for i, v in enumerate(versions)]
    if not found or any(not isinstance(sub, Mapping) for sub, _ in found):
        yield from ((f"spec.versions[{i}].subresources", sub) for sub, i in found if isinstance(sub, Mapping))
        return
    if all(sub == found[0][0] for sub, _ in found):
        yield "spec.subresources", found[0][0]
        return
    yield from ((f"spec.versions[{i}].subresources", sub) for sub, i in found)


def subresource_errors(subresources: Mapping[str, Any], path: str) -> list[str]:
    """``ValidateCustomResourceDefinitionSubresources``: the scale subresource's JSON paths."""
    scale = subresources.get("scale")
    if not isinstance(scale, Mapping):
        return []
    errors: list[str] = []
    for key, under in (("specReplicasPath", (".spec.",)), ("statusReplicasPath", (".status.",))):
        where = f"{path}.scale.{key}"
        value = scale.get(key)
        if not value:
            errors.append(f"{where}: Required value")
            continue
        problems = _simple_json_path_errors(value, where)
        if problems:
            errors += problems
        elif not value.startswith(under):
            errors.append(f"{where}: Invalid value: {go_quote(value)}: should be a json path under {under[0][:-1]}")
    selector = scale.get("labelSelectorPath")
    if selector:
        where = f"{path}.scale.labelSelectorPath"
        problems = _simple_json_path_errors(selector, where)
        if problems:
            errors += problems
        elif not selector.startswith((".spec.", ".status.")):
            errors.append(f"{where}: Invalid value: {go_quote(selector)}: should be a json path under either .spec "
                          "or .status")
    return errors


def _simple_json_path_errors(value: str, where: str) -> list[str]:
    if not value.startswith("."):
        return [f"{where}: Invalid value: {go_quote(value)}: must be a simple json path starting with ."]
    return []


def _version_schemas(crd: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    versions = (crd.get("spec") or {}).get("versions") or []
    schemas = [((v.get("schema") or {}).get("openAPIV3Schema"), i) for i, v in enumerate(versions)]
    present = [(s, i) for s, i in schemas if isinstance(s, Mapping)]
    if not present:
        return
    # identical per-version schemas are stored (and reported) as the top-level spec.validation
    if len(present) == len(versions) and all(s == present[0][0] for s, _ in present):
        yield "spec.validation.openAPIV3Schema", present[0][0]
        return
    for schema, index in present:
        yield f"spec.versions[{index}].schema.openAPIV3Schema", schema


def _child(path: str, name: str) -> str:
    return f"{path}.{name}"


# --- JSON shapes the apiserver's decoder requires ------------------------------------------------

_STRING, _BOOL, _INT, _NUMBER, _LIST, _OBJECT = "string", "boolean", "integer", "number", "array", "object"
_KEYWORD_TYPES: dict[str, str] = {
    "type": _STRING, "format": _STRING, "pattern": _STRING, "title": _STRING, "description": _STRING,
    "$ref": _STRING, "x-kubernetes-list-type": _STRING, "x-kubernetes-map-type": _STRING,
    "nullable": _BOOL, "uniqueItems": _BOOL, "exclusiveMinimum": _BOOL, "exclusiveMaximum": _BOOL,
    "x-kubernetes-preserve-unknown-fields": _BOOL, "x-kubernetes-embedded-resource": _BOOL,
    "x-kubernetes-int-or-string": _BOOL,
    "maxLength": _INT, "minLength": _INT, "maxItems": _INT, "minItems": _INT, "maxProperties": _INT,
    "minProperties": _INT,
    "minimum": _NUMBER, "maximum": _NUMBER, "multipleOf": _NUMBER,
    "enum": _LIST, "required": _LIST, "x-kubernetes-list-map-keys": _LIST, "x-kubernetes-validations": _LIST,
    "allOf": _LIST, "anyOf": _LIST, "oneOf": _LIST,
    "properties": _OBJECT, "not": _OBJECT, "definitions": _OBJECT, "patternProperties": _OBJECT,
}
_RULE_FIELD_TYPES = {"rule": _STRING, "message": _STRING, "messageExpression": _STRING, "reason": _STRING,
                     "fieldPath": _STRING, "optionalOldSelf": _BOOL}


def _is(value: Any, kind: str) -> bool:
    if kind == _STRING:
        return isinstance(value, str)
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == _INT:
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())
    if kind == _NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == _LIST:
        return isinstance(value, list)
    return isinstance(value, Mapping)


def malformed_fields(crd: Any) -> list[str]:
    """Fields whose JSON type the CustomResourceDefinition API does not accept."""
    problems: list[str] = []

    def expect(value: Any, kind: str, where: str) -> bool:
        if _is(value, kind):
            return True
        problems.append(f"{where}: Invalid value: {go_json(value)}: must be of type {kind}")
        return False

    if not expect(crd, _OBJECT, "<nil>"):
        return problems
    spec = crd.get("spec", {})
    if not expect(spec, _OBJECT, "spec"):
        return problems
    versions = spec.get("versions", [])
    if not expect(versions, _LIST, "spec.versions"):
        return problems
    for index, version in enumerate(versions):
        where = f"spec.versions[{index}]"
        if not expect(version, _OBJECT, where):
            continue
        schema = version.get("schema", {})
        if expect(schema, _OBJECT, f"{where}.schema") and "openAPIV3Schema" in schema:
            _malformed_schema(schema["openAPIV3Schema"], f"{where}.schema.openAPIV3Schema", expect)
    return problems


def _malformed_schema(schema: Any, where: str, expect: Any) -> None:
    if not expect(schema, _OBJECT, where):
        return
    for keyword, kind in _KEYWORD_TYPES.items():
        if keyword in schema and schema[keyword] is not None:
            expect(schema[keyword], kind, _child(where, keyword))
    for keyword in ("properties", "definitions", "patternProperties"):
        if isinstance(schema.get(keyword), Mapping):
            for name, sub in schema[keyword].items():
                _malformed_schema(sub, f"{where}.{keyword}[{name}]", expect)
    items = schema.get("items")
    for index, sub in enumerate(items if isinstance(items, list) else [items] if items is not None else []):
        _malformed_schema(sub, f"{where}.items" if not isinstance(items, list) else f"{where}.items[{index}]", expect)
    additional = schema.get("additionalProperties")
    if additional is not None and not isinstance(additional, bool):
        _malformed_schema(additional, _child(where, "additionalProperties"), expect)
    for keyword in ("allOf", "anyOf", "oneOf"):
        if isinstance(schema.get(keyword), list):
            for index, sub in enumerate(schema[keyword]):
                _malformed_schema(sub, f"{where}.{keyword}[{index}]", expect)
    if isinstance(schema.get("not"), Mapping):
        _malformed_schema(schema["not"], _child(where, "not"), expect)
    for keyword, kind in (("required", _STRING), ("x-kubernetes-list-map-keys", _STRING)):
        if isinstance(schema.get(keyword), list):
            for index, entry in enumerate(schema[keyword]):
                expect(entry, kind, f"{where}.{keyword}[{index}]")
    if isinstance(schema.get("x-kubernetes-validations"), list):
        for index, rule in enumerate(schema["x-kubernetes-validations"]):
            rule_where = f"{where}.x-kubernetes-validations[{index}]"
            if expect(rule, _OBJECT, rule_where):
                for name, kind in _RULE_FIELD_TYPES.items():
                    if rule.get(name) is not None:
                        expect(rule[name], kind, f"{rule_where}.{name}")


def _key(path: str, name: str) -> str:
    return f"{path}.properties[{name}]"


def cost_error_message(cost_name: str, cost: int, limit: int) -> str:
    """apiextensions' getCostErrorMessage, with its factor formatting."""
    factor = cost / limit
    if factor > 100.0:
        shown = "more than 100x"
    elif factor < 1.5:
        shown = f"{factor:f}x"
    else:
        shown = f"{factor:.1f}x"
    return f"{cost_name} exceeds budget by factor of {shown} {_COST_HINT}"


class _SchemaChecker:
    def __init__(self, errors: list[str], warnings: list[str], evaluator: Evaluator) -> None:
        self.errors = errors
        self.warnings = warnings
        self.evaluator = evaluator
        self.cost_errors: list[str] = []
        self.total_cost = 0
        self.most_expensive: list[tuple[str, int]] = []

    def _observe(self, where: str, cost: int) -> None:
        self.total_cost = min(self.total_cost + cost, MAX_UINT64)
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT // 100:   # rules under 1% of the limit are not named
            return
        self.most_expensive.append((where, cost))
        self.most_expensive.sort(key=lambda item: -item[1])
        del self.most_expensive[4:]

    # --- structure ---------------------------------------------------------------------------

    def check_root(self, schema: Mapping[str, Any], path: str) -> None:
        self._node(schema, path, level="root", uncorrelatable=None, cardinality=1)
        self.errors.extend(self.cost_errors)
        if self.total_cost > STATIC_ESTIMATED_CRD_COST_LIMIT:
            for where, _ in self.most_expensive:
                self.errors.append(f"{where}: Forbidden: contributed to estimated rule cost total exceeding cost "
                                   "limit for entire OpenAPIv3 schema")
            message = cost_error_message("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 "
                                         "schema", self.total_cost, STATIC_ESTIMATED_CRD_COST_LIMIT)
            self.errors.append(f"{path}: Forbidden: {message}")

    def _node(self, schema: Mapping[str, Any], path: str, *, level: str, uncorrelatable: str | None,
              cardinality: int | None, in_metadata: bool = False) -> None:
        err = self.errors.append
        for keyword, detail in _UNSUPPORTED:
            if schema.get(keyword):
                err(f"{_child(path, keyword)}: Forbidden: {detail}")
        if schema.get("type") == "null":
            err(f"{_child(path, 'type')}: Forbidden: type cannot be set to null, use nullable as an alternative")
        if isinstance(schema.get("items"), list):
            err(f"{_child(path, 'items')}: Forbidden: items must be a schema object and not an array")
        if schema.get("properties") and "additionalProperties" in schema and schema["additionalProperties"] is not True:
            err(f"{_child(path, 'additionalProperties')}: Forbidden: additionalProperties and properties are mutual "
                "exclusive")
        if schema.get("x-kubernetes-preserve-unknown-fields") is False:
            err(f"{_child(path, 'x-kubernetes-preserve-unknown-fields')}: Invalid value: false: "
                "must be true or undefined")
        kind = schema.get("type")
        self._format_warning(schema)
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            problem = compile_error(pattern)
            if problem is not None:
                err(f"{_child(path, 'pattern')}: Invalid value: {go_quote(pattern)}: must be a valid regular "
                    f"expression, but isn't: {problem}")
        self._list_type(schema, path)
        if in_metadata and "default" in schema:
            err(f"{_child(path, 'default')}: Forbidden: must not be set in top-level metadata")
        elif "default" in schema:
            self._default(schema, path)

        items = schema.get("items")
        if kind == "array" and not isinstance(items, Mapping):
            err(f"{_child(path, 'items')}: Required value: must be specified")
        if isinstance(items, Mapping):
            list_type = schema.get("x-kubernetes-list-type")
            item_uncorrelatable = uncorrelatable
            if item_uncorrelatable is None and list_type != "map":
                item_uncorrelatable = path
            self._node(items, _child(path, "items"), level="item", uncorrelatable=item_uncorrelatable,
                       cardinality=_times(cardinality, schema.get("maxItems")))
        for name in sorted(schema.get("properties") or {}):
            prop = schema["properties"][name]
            if isinstance(prop, Mapping):
                self._node(prop, _key(path, name), level="field", uncorrelatable=uncorrelatable,
                           cardinality=cardinality, in_metadata=(level == "root" and name == "metadata"))
                if level == "root" and name == "metadata":
                    for meta_name in sorted(prop.get("properties") or {}):
                        meta_prop = prop["properties"][meta_name]
                        if isinstance(meta_prop, Mapping) and "default" in meta_prop:
                            err(f"{_child(_key(_key(path, 'metadata'), meta_name), 'default')}: Forbidden: "
                                "must not be set in top-level metadata")
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            self._node(additional, _child(path, "additionalProperties"), level="field",
                       uncorrelatable=uncorrelatable, cardinality=_times(cardinality, schema.get("maxProperties")))
        int_or_string_any_of = _is_int_or_string_any_of(schema)
        for keyword in VALUE_VALIDATION_KEYS:
            nested = schema.get(keyword)
            if int_or_string_any_of and keyword in ("anyOf", "allOf"):
                continue  # the two int-or-string patterns the apiserver allows
            if keyword == "not" and isinstance(nested, Mapping):
                self._value_validation(nested, _child(path, "not"))
            elif isinstance(nested, list):
                for index, sub in enumerate(nested):
                    if isinstance(sub, Mapping):
                        self._value_validation(sub, f"{path}.{keyword}[{index}]")

        self._structural(schema, path, level)
        if schema.get("x-kubernetes-validations"):
            self._rules(schema, path, is_root=level == "root" or bool(schema.get("x-kubernetes-embedded-resource")),
                        uncorrelatable=uncorrelatable, cardinality=cardinality)

    def _structural(self, schema: Mapping[str, Any], path: str, level: str) -> None:
        err = self.errors.append
        kind = schema.get("type")
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
        if embedded and not preserve and not schema.get("properties"):
            err(f"{_child(path, 'properties')}: Required value: must not be empty if x-kubernetes-embedded-resource "
                "is true without x-kubernetes-preserve-unknown-fields")
        if embedded and kind != "object":
            if not kind:
                err(f"{_child(path, 'type')}: Required value: must be object if x-kubernetes-embedded-resource is true")
            else:
                err(f"{_child(path, 'type')}: Invalid value: {go_quote(kind)}: must be object if "
                    "x-kubernetes-embedded-resource is true")
        elif not (kind or embedded or int_or_string or preserve or "$ref" in schema):
            where = {"root": "at the root", "item": "for specified array items"}.get(level, "for specified object fields")
            err(f"{_child(path, 'type')}: Required value: must not be empty {where}")
        if level == "root" and kind and kind != "object":
            err(f"{_child(path, 'type')}: Invalid value: {go_quote(kind)}: must be object at the root")
        if level == "root":
            metadata = (schema.get("properties") or {}).get("metadata")
            if isinstance(metadata, Mapping):
                if metadata.get("type") not in (None, "object"):
                    err(f"{_child(_key(path, 'metadata'), 'type')}: Invalid value: {go_quote(metadata['type'])}: "
                        "must be object")
                extra = set(metadata) - {"type", "properties"}
                names = set(metadata.get("properties") or {})
                if extra or names - {"name", "generateName"}:
                    err(f"{_key(path, 'metadata')}: Forbidden: must not specify anything other than name and "
                        "generateName, but metadata is implicitly specified")

    def _list_type(self, schema: Mapping[str, Any], path: str) -> None:
        err = self.errors.append
        list_type = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys")
        kind = schema.get("type")
        if list_type is not None:
            if list_type not in LIST_TYPES:
                err(f"{_child(path, 'x-kubernetes-list-type')}: Unsupported value: {go_quote(list_type)}: "
                    "supported values: " + ", ".join(f'"{t}"' for t in LIST_TYPES))
            elif kind != "array":
                err(f"{_child(path, 'type')}: Invalid value: {go_quote(kind or '')}: must be array if "
                    "x-kubernetes-list-type is specified")
        if keys and list_type != "map":
            shown = go_quote(list_type) if list_type is not None else "null"
            err(f"{_child(path, 'x-kubernetes-list-type')}: Invalid value: {shown}: must be map "
                "if x-kubernetes-list-map-keys is non-empty")
        map_type = schema.get("x-kubernetes-map-type")
        if map_type is not None:
            if kind != "object":
                if not kind:
                    err(f"{_child(path, 'type')}: Required value: must be object if x-kubernetes-map-type is specified")
                else:
                    err(f"{_child(path, 'type')}: Invalid value: {go_quote(kind)}: must be object if "
                        "x-kubernetes-map-type is specified")
            if map_type not in ("atomic", "granular"):
                err(f"{_child(path, 'x-kubernetes-map-type')}: Unsupported value: {go_quote(str(map_type))}: "
                    'supported values: "atomic", "granular"')
        items = schema.get("items") if isinstance(schema.get("items"), Mapping) else None
        if list_type == "set" and items is not None and items.get("type") == "object" \
                and items.get("x-kubernetes-map-type") != "atomic":
            value = go_quote(items["x-kubernetes-map-type"]) if "x-kubernetes-map-type" in items else "null"
            err(f"{path}.items.x-kubernetes-map-type: Invalid value: {value}: must be atomic as item of a list "
                "with x-kubernetes-list-type=set")
        if list_type == "map" and kind == "array" and not keys:
            err(f"{_child(path, 'x-kubernetes-list-map-keys')}: Required value: must not be empty if "
                "x-kubernetes-list-type is map")
        if list_type == "map" and kind == "array" and items is None and not isinstance(schema.get("items"), list):
            err(f"{_child(path, 'items')}: Required value: must have a schema if x-kubernetes-list-type is map")
        if list_type == "map" and items is not None and items.get("type") != "object":
            err(f"{path}.items.type: Invalid value: {go_quote(items.get('type') or '')}: must be object if parent "
                "array's x-kubernetes-list-type is map")
        elif list_type == "map" and items is not None and keys:
            properties = items.get("properties") or {}
            for key in keys:
                prop = properties.get(key)
                if isinstance(prop, Mapping) and prop.get("type") in ("array", "object"):
                    err(f"{path}.items.properties[{key}].type: Invalid value: \"object\": must be a scalar type if "
                        "parent array's x-kubernetes-list-type is map")
            if any(k not in properties for k in keys):
                err(f"{_child(path, 'x-kubernetes-list-map-keys')}: Invalid value: {go_json(list(keys))}: entries "
                    "must all be names of item properties")
            elif len(set(keys)) != len(keys):
                err(f"{_child(path, 'x-kubernetes-list-map-keys')}: Invalid value: {go_json(list(keys))}: must not "
                    "contain duplicate entries")
        if list_type in ("set", "map") and items is not None:
            self._map_list_keys_map_set(items, list_type, keys or (), path)

    def _map_list_keys_map_set(self, items: Mapping[str, Any], list_type: str, keys: Any, path: str) -> None:
        """``validateMapListKeysMapSet``: set and map items are not nullable, nor are map keys,
        which are required or defaulted."""
        err = self.errors.append
        if items.get("nullable"):
            err(f"{path}.items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is {list_type}")
        if list_type != "map":
            return
        properties = items.get("properties") if isinstance(items.get("properties"), Mapping) else {}
        required = set(items.get("required") or ())
        for key in keys:
            prop = properties.get(key)
            if not isinstance(prop, Mapping):
                continue  # named already: "entries must all be names of item properties"
            if key not in required and "default" not in prop:
                err(f"{path}.items.properties[{key}].default: Required value: this property is in "
                    "x-kubernetes-list-map-keys, so it must have a default or be a required property")
            if prop.get("nullable"):
                err(f"{path}.items.properties[{key}].nullable: Forbidden: this property is in "
                    "x-kubernetes-list-map-keys, so it cannot be nullable")

    def _value_validation(self, schema: Mapping[str, Any], path: str) -> None:
        """``validateNestedValueValidation`` (structural schema, as ``ValidateStructural`` runs it
        for a CRD: no nested ``additionalProperties`` nor ``x-kubernetes-validations``)."""
        err = self.errors.append
        for keyword in ("anyOf", "allOf", "oneOf"):
            for index, sub in enumerate(schema.get(keyword) if isinstance(schema.get(keyword), list) else ()):
                if isinstance(sub, Mapping):
                    self._value_validation(sub, f"{path}.{keyword}[{index}]")
        if isinstance(schema.get("not"), Mapping):
            self._value_validation(schema["not"], _child(path, "not"))
        if isinstance(schema.get("items"), Mapping):
            self._value_validation(schema["items"], _child(path, "items"))
        for name in sorted(schema.get("properties") or {}):
            prop = schema["properties"][name]
            if isinstance(prop, Mapping):
                self._value_validation(prop, _key(path, name))
        if schema.get("type"):
            err(f"{_child(path, 'type')}: Forbidden: must be empty to be structural")
        if "additionalProperties" in schema:
            err(f"{_child(path, 'additionalProperties')}: Forbidden: must be undefined to be structural")
        for key, detail in (("default", "must be undefined to be structural"),
                            ("title", "must be empty to be structural"),
                            ("description", "must be empty to be structural"),
                            ("nullable", "must be false to be structural")):
            if key in schema and (schema[key] if key != "default" else schema[key] is not None):
                err(f"{_child(path, key)}: Forbidden: {detail}")
        for key in ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
                    "x-kubernetes-int-or-string"):
            if schema.get(key):
                err(f"{_child(path, key)}: Forbidden: must be false to be structural")
        if schema.get("x-kubernetes-list-map-keys"):
            err(f"{_child(path, 'x-kubernetes-list-map-keys')}: Forbidden: must be empty to be structural")
        for key in ("x-kubernetes-list-type", "x-kubernetes-map-type"):
            if schema.get(key) is not None:
                err(f"{_child(path, key)}: Forbidden: must be undefined to be structural")
        if schema.get("x-kubernetes-validations"):
            err(f"{_child(path, 'x-kubernetes-validations')}: Forbidden: must be empty to be structural")
        if "metadata" in (schema.get("properties") or {}):
            err(f"{_key(path, 'metadata')}: Forbidden: must not be specified in a nested context")

    def _format_warning(self, schema: Mapping[str, Any]) -> None:
        """``GetUnrecognizedFormats``: a format the schema engine strips (the same ``kept_format``)."""
        fmt = schema.get("format")
        kind = schema.get("type")
        if fmt and isinstance(fmt, str) and kept_format(kind if isinstance(kind, str) else "", fmt) != fmt:
            self.warnings.append(f"unrecognized format {go_quote(fmt)}")

    # --- defaults ------------------------------------------------------------------------------

    def _default(self, schema: Mapping[str, Any], path: str) -> None:
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        where = _child(path, "default")
        value = schema["default"]
        if value is None:
            return
        if _has_unknown_fields(value, schema):   # the apiserver prunes a copy and compares
            self.errors.append(f"{where}: Invalid value: {go_json(value)}: must not have unknown fields")
        # then validated as an object's value is, with paths relative to the default (" in body ..."),
        # and if that passes, against the CEL rules of its schema (self and oldSelf the default):
        # structural defaulting's validate
        node = compile_schema(dict(schema))
        schema_errors = SchemaValidator(node, prefix=where).validate(value)
        self.errors.extend(str(error) for error in schema_errors)
        if not schema_errors and node.has_rules:
            from webhook.schema.celrules import CelValidator

            # the default as both self and oldSelf; then, that passing, as a create (oldSelf absent:
            # what an optionalOldSelf rule meets when the default is written)
            validator = CelValidator(node, self.evaluator)
            cel_errors, _ = validator.validate(value, value, prefix=where, is_root=embedded, ratchet=False)
            if not cel_errors:
                cel_errors, _ = validator.validate(value, prefix=where, is_root=embedded, ratchet=False)
            self.errors.extend(str(error) for error in cel_errors)

    # --- CEL ------------------------------------------------------------------------------------

    def _rules(self, schema: Mapping[str, Any], path: str, *, is_root: bool, uncorrelatable: str | None,
               cardinality: int | None) -> None:
        if uncorrelatable is not None:
            for index, entry in enumerate(schema.get("x-kubernetes-validations") or []):
                rule = (entry or {}).get("rule") or ""
                if references_old_self(rule):
                    self.errors.append(
                        f"{path}.x-kubernetes-validations[{index}].rule: Invalid value: {go_quote(rule)}: oldSelf "
                        f"cannot be used on the uncorrelatable portion of the schema within {uncorrelatable}")
                    return
        try:
            rules = compile_schema_rules(schema, is_root=is_root, path=path, engine=self.evaluator.engine)
            costs, unbounded = rules.costs, rules.max_cardinality
        except CrdRuleError as rejected:
            self.errors.extend(rejected.errors)
            costs, unbounded = rejected.costs, rejected.max_cardinality
        repeat = cardinality if cardinality is not None else unbounded
        for cost in costs:
            where = f"{path}.x-kubernetes-validations[{cost.index}]"
            for field, name, single in (("rule", "estimated rule cost", cost.rule),
                                        ("messageExpression", "estimated messageExpression cost",
                                         cost.message_expression)):
                if single is None:
                    continue
                total = min(single * repeat, MAX_UINT64)
                if total > STATIC_ESTIMATED_COST_LIMIT:
                    self.cost_errors.append(f"{where}.{field}: Forbidden: "
                                            f"{cost_error_message(name, total, STATIC_ESTIMATED_COST_LIMIT)}")
                self._observe(f"{where}.{field}", total)


_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]


def _is_int_or_string_any_of(schema: Mapping[str, Any]) -> bool:
    """``anyOf: [{type: integer}, {type: string}]`` (or that as ``allOf[0]``) beside int-or-string."""
    if not schema.get("x-kubernetes-int-or-string"):
        return False
    if schema.get("anyOf") == _INT_OR_STRING_ANY_OF:
        return True
    all_of = schema.get("allOf")
    return isinstance(all_of, list) and bool(all_of) and all_of[0] == {"anyOf": _INT_OR_STRING_ANY_OF}


def _times(cardinality: int | None, bound: Any) -> int | None:
    if cardinality is None or bound is None:
        return None
    return min(cardinality * max(int(bound), 0), MAX_UINT64)


# --- default values against their own schema ---------------------------------------------------

def _has_unknown_fields(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether pruning ``value`` by ``schema`` would drop anything."""
    if isinstance(value, dict) and (schema.get("type") == "object" or "properties" in schema):
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        for key, item in value.items():
            if key in properties:
                if isinstance(properties[key], Mapping) and _has_unknown_fields(item, properties[key]):
                    return True
            elif isinstance(additional, Mapping):
                if _has_unknown_fields(item, additional):
                    return True
            elif not (preserve or additional is True or (embedded and key in ("apiVersion", "kind", "metadata"))):
                return True
        return False
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return any(_has_unknown_fields(item, schema["items"]) for item in value)
    return False
