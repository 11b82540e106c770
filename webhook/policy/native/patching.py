"""A MutatingAdmissionPolicy's patch applied to the object, as kube-apiserver v1.36 applies it
(``admission/plugin/policy/mutating/patch``).

ApplyConfiguration (``smd.go``): the patch object is typed by the kind's schema (a field the
schema does not declare, a value of another type, a list-map item without its key, a
duplicated item: errors in ``typed/validate.go``'s words), refused when it sets an atomic list, map or struct
(``may not mutate atomic arrays, maps or structs: <paths>``), then merged into the object as
``sigs.k8s.io/structured-merge-diff`` merges: maps and structs key by key, an atomic value
replaced whole, a list-map by its keys and a set by its values in SMD's order (the object's
items first, the patch's merged in where they are shared, new ones after), a scalar replaced.
A custom resource's schema gives the merge types as the apiserver's converter reads its
OpenAPI: ``x-kubernetes-map-type``, ``x-kubernetes-list-type`` (no list-type: atomic),
``x-kubernetes-list-map-keys``; ``x-kubernetes-preserve-unknown-fields`` without a schema
below it: maps merged, lists atomic; ``metadata`` (the root's, an embedded resource's) as the
apiserver's ObjectMeta, ``apiVersion`` and ``kind`` strings (apiextensions' OpenAPI builder
declares them so: an embedded resource's set to a number is refused, ``expected string``;
the root's are the object's whatever the patch says). A built-in kind's merge types come from the apiserver's own OpenAPI
(``builtin_merge_types``), and so does ObjectMeta's. In both, a list-map item's missing key
takes the key field's default (a Service port without ``protocol`` is the ``TCP`` one).

JSONPatch (``json_patch.go``): RFC 6902 as ``gopkg.in/evanphx/json-patch.v4`` applies it, with
its error texts (``replace`` of a missing object key adds it; negative array indices count from
the end); a failed ``test`` leaves the object as it was, every operation undone. The patched
JSON is decoded again by a strict serializer: an ``apiVersion`` or ``kind`` that is no string
(``type_meta_error``), or a field a built-in kind does not have (whatever the request's
``fieldValidation``), is an internal error (500) that ends the plugin (recorded).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webhook.gocompat.fmt import go_json, go_quote, go_type_name, go_value
from webhook.schema.structural import ABSENT, Node

if TYPE_CHECKING:
    from webhook.policy.native.builtin_merge_types import TypeRef


class PatchError(ValueError):
    """A patch the apiserver cannot apply, in its words."""


class DecodingError(Exception):
    """The object a JSONPatch leaves cannot be decoded again: the apiserver answers it with an
    internal error (500) that ends the plugin, whatever the policy's failurePolicy."""


class MergeTypesUnknown(Exception):
    """An ApplyConfiguration of a kind whose schema (its lists' and maps' merge types) is not
    known here (neither a CRD's nor a built-in kind ``builtin_merge_types`` holds) sets more
    than its metadata."""


# -- the merge types of a schema ----------------------------------------------------------------

@dataclass(frozen=True)
class _Shape:
    """One schema node as structured-merge-diff sees it."""

    kind: str  # "map" | "list" | "scalar"
    atomic: bool = False
    fields: dict[str, Any] | None = None  # a struct's declared fields -> their schemas
    element: Any = None  # a map's values' or a list's items' schema
    list_type: str = "atomic"  # atomic | set | map
    keys: tuple[str, ...] = ()
    any_field: bool = False  # a map of any keys (additionalProperties or deduced)
    key_defaults: dict[str, Any] | None = None  # a list-map's key fields' defaults


_DEDUCED = "deduced"  # no schema: maps merged key by key, lists atomic
_OBJECT_META = "metadata"  # ObjectMeta, a custom resource's (root or embedded) as a built-in kind's
_STRING = "string"  # an object's apiVersion and kind: strings in the apiserver's OpenAPI (root and embedded)


def _object_meta() -> TypeRef:
    """ObjectMeta's type: the apiserver's OpenAPI refers a custom resource's ``metadata`` (its
    root's and each embedded resource's: apiextensions' ``openapi/builder``) to the same
    ``io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`` as a built-in kind's, so it is read from
    the built-in kinds' table (labels and annotations maps of strings, finalizers a set,
    ownerReferences keyed by uid, managedFields atomic)."""
    from webhook.policy.native.builtin_merge_types import object_meta  # imported only when needed

    return object_meta()


def _is_builtin(schema: Any) -> bool:
    """Whether ``schema`` is a built-in kind's type (``builtin_merge_types.TypeRef``; that
    module is imported only when one is needed, so it is known here by what it has)."""
    return hasattr(schema, "atom")


def _typed_shape(ref: TypeRef, value: Any) -> _Shape:
    """A built-in kind's type, in the form ``value`` takes."""
    atom = ref.atom().deduced(value)
    if atom.map is not None:
        return _Shape("map", atomic=atom.map.atomic, fields=dict(atom.map.fields), element=atom.map.element,
                      any_field=atom.map.element is not None)
    if atom.list is not None:
        kind = atom.list
        list_type = "atomic" if kind.atomic else "map" if kind.keys else "set"
        defaults: dict[str, Any] = {}
        if kind.keys:
            item = kind.element.atom().map
            defaults = {k: item.defaults[k] for k in kind.keys if item is not None and k in item.defaults}
        return _Shape("list", atomic=kind.atomic, element=kind.element, list_type=list_type, keys=kind.keys,
                      key_defaults=defaults)
    return _Shape("scalar")


def _shape(schema: Any, value: Any) -> _Shape:
    if schema == _OBJECT_META:
        schema = _object_meta()
    if _is_builtin(schema):
        return _typed_shape(schema, value)
    if schema == _DEDUCED or schema is None:
        if isinstance(value, dict):
            return _Shape("map", element=_DEDUCED, any_field=True)
        if isinstance(value, list):
            return _Shape("list", atomic=True, element=_DEDUCED)
        return _Shape("scalar")
    if schema == _STRING:
        return _Shape("scalar")
    node: Node = schema
    types = set(node.types)
    if node.int_or_string or (types and not types & {"object", "array"}):
        return _Shape("scalar")
    if "array" in types or (not types and node.items is not None):
        list_type = node.list_type or "atomic"
        keys = tuple(node.list_map_keys)
        # the key fields' defaults, which the CRD's published OpenAPI carries (schemaconv's StructField.Default)
        item_fields = node.items.properties if node.items is not None else {}
        defaults = {k: item_fields[k].default for k in keys if k in item_fields and item_fields[k].default is not ABSENT}
        return _Shape("list", atomic=list_type == "atomic", element=node.items if node.items is not None else _DEDUCED,
                      list_type=list_type, keys=keys, key_defaults=defaults)
    if "object" in types or node.properties or node.additional is not None or node.preserve_unknown:
        fields: dict[str, Any] = dict(node.properties)
        if node.embedded:
            fields.setdefault("apiVersion", _STRING)
            fields.setdefault("kind", _STRING)
            fields.setdefault("metadata", _OBJECT_META)
        any_field = node.additional is not None or node.preserve_unknown
        element = node.additional if node.additional is not None else _DEDUCED
        return _Shape("map", atomic=node.map_type == "atomic", fields=fields, element=element, any_field=any_field)
    return _shape(_DEDUCED, value)  # a node without a type (x-kubernetes-preserve-unknown-fields above it)


def _root(schema: Node | None) -> Any:
    """The object's schema with ``metadata`` as ObjectMeta, ``apiVersion`` and ``kind`` strings."""
    return _Root(schema if schema is not None else Node(types=("object",)))


@dataclass(frozen=True)
class _Root:
    node: Node


def _field_schema(shape: _Shape, key: str) -> tuple[Any, bool]:
    """The schema of a map's key, and whether the schema declares it."""
    if shape.fields is not None and key in shape.fields:
        return shape.fields[key], True
    if shape.any_field:
        return shape.element, True
    return None, False


def _resolve(schema: Any, value: Any) -> _Shape:
    if isinstance(schema, _Root):
        shape = _shape(schema.node, value)
        fields = {**(shape.fields or {}), "apiVersion": _STRING, "kind": _STRING, "metadata": _OBJECT_META}
        return _Shape("map", fields=fields, element=shape.element, any_field=shape.any_field)
    return _shape(schema, value)


# -- ApplyConfiguration -----------------------------------------------------------------------

def apply_configuration(schema: Node | None, live: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``ApplyStructuredMergeDiff``: ``patch`` merged into ``live`` (neither is changed).
    ``schema``: the CRD's; None: a kind no CRD serves, typed by the apiserver's OpenAPI when it
    is a built-in kind ``builtin_merge_types`` holds (by the patch's apiVersion and kind: the
    object's); else only ``metadata`` (ObjectMeta's merge types, as above) can be merged, and
    anything more raises :class:`MergeTypesUnknown`."""
    root: Any
    if schema is not None:
        root = _root(schema)
    else:
        from webhook.policy.native.builtin_merge_types import builtin_root  # imported only when needed

        root = builtin_root(patch.get("apiVersion"), patch.get("kind"))
        if root is None:
            if set(patch) - {"apiVersion", "kind", "metadata"}:
                raise MergeTypesUnknown()
            root = _root(None)
    invalid = _typed_errors(root, patch, "")
    if invalid:
        raise PatchError("error applying patch: failed to convert patch object to typed object: "
                         + _validation_errors(invalid))
    atomics = _atomics(root, patch, "")
    if atomics:
        raise PatchError("error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or "
                         f"structs: {', '.join(atomics)}")
    return _merge(root, live, patch)


def _validation_errors(errors: list[str]) -> str:
    """``typed.ValidationErrors.Error()``."""
    if len(errors) == 1:
        return errors[0]
    return "\n".join(["errors:", *("  " + e for e in errors)])


def _expected(schema: Any, value: Any) -> tuple[str, str]:
    """What a schema node takes, as structured-merge-diff's atom: (``map`` | ``list`` |
    ``scalar`` | ``deduced``, the scalar's type: ``string`` | ``numeric`` | ``boolean`` | ``untyped``);
    a built-in kind's type in the form ``value`` takes."""
    if schema == _OBJECT_META:
        schema = _object_meta()
    if _is_builtin(schema):
        atom = schema.atom().deduced(value)
        if atom.map is not None:
            return "map", ""
        if atom.list is not None:
            return "list", ""
        return "scalar", atom.scalar or "untyped"
    if schema == _STRING:
        return "scalar", "string"
    if isinstance(schema, _Root):
        return "map", ""
    if not isinstance(schema, Node):
        return "deduced", ""
    types = set(schema.types)
    if schema.int_or_string:
        return "scalar", "untyped"
    if "object" in types or (not types and (schema.properties or schema.additional is not None)):
        return "map", ""
    if "array" in types or (not types and schema.items is not None):
        return "list", ""
    for name, scalar in (("string", "string"), ("integer", "numeric"), ("number", "numeric"), ("boolean", "boolean")):
        if name in types:
            return "scalar", scalar
    return "deduced", ""


def _go_sharp(value: Any) -> str:
    """Go's ``%#v`` of what an unstructured value holds (a CEL null: the protobuf NullValue 0)."""
    if value is None:
        return "0"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return go_value(value)
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(_go_sharp(v) for v in value) + "}"
    return "map[string]interface {}{" + ", ".join(f"{go_quote(k)}:{_go_sharp(value[k])}" for k in sorted(value)) + "}"


def _wrapped(value: Any) -> str:
    """``%v`` of a ``*value.valueUnstructured`` holding ``value``: ``&{<%v of value>}``."""
    return "&{" + ("0" if value is None else go_value(value)) + "}"


def _go_type(value: Any) -> str:
    return "structpb.NullValue" if value is None else go_type_name(value)


def _key_text(item: Any) -> str:
    return go_json(item) if not isinstance(item, str) else json.dumps(item, ensure_ascii=False)


def _typed_errors(schema: Any, value: Any, path: str) -> list[str]:
    """``typeConverter.ObjectToTyped``'s validation of the patch (``typed/validate.go``): each
    value of the type its schema declares, declared fields only, list-map items with a key,
    no duplicate list items. A ``None`` in a patch is CEL's null, which reaches the
    apiserver as the protobuf NullValue 0 (not a JSON null)."""
    kind, scalar = _expected(schema, value)
    prefix = f"{path}: " if path else ""
    if kind == "deduced":
        return []
    if kind == "scalar":
        if scalar == "string" and not isinstance(value, str):
            return [f"{prefix}expected string, got &value.valueUnstructured{{Value:{_go_sharp(value)}}}"]
        if scalar == "numeric" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return [f"{prefix}expected numeric (int or float), got {_go_type(value)}"]
        if scalar == "boolean" and not isinstance(value, bool):
            return [f"{prefix}expected boolean, got {_wrapped(value)}"]
        if scalar == "untyped" and (value is None or isinstance(value, (dict, list))):
            return [f"{prefix}expected any scalar, got {_wrapped(value)}"]
        return []
    if kind == "map":
        if not isinstance(value, dict):
            return [f"{prefix}expected map, got {_wrapped(value)}"]
        shape = _resolve(schema, value)
        errors: list[str] = []
        for key, item in value.items():
            child, declared = _field_schema(shape, key)
            if not declared:
                errors.append(f"{path}.{key}: field not declared in schema")
                break  # visitMapItems stops at the first
            errors += _typed_errors(child, item, f"{path}.{key}")
        return errors
    if not isinstance(value, list):
        return [f"{prefix}expected list, got {_wrapped(value)}"]
    shape = _resolve(schema, value)
    errors = []
    seen: set[str] = set()
    for i, item in enumerate(value):
        if shape.atomic or shape.list_type == "atomic":
            element = f"[{i}]"
        elif shape.list_type == "map":
            if item is None:
                return errors + [f"{prefix}element {i}: associative list with keys may not have a null element"]
            if not isinstance(item, dict):
                return errors + [f"{prefix}element {i}: associative list with keys may not have non-map elements"]
            key = _key_fields(shape, item)
            if not key:
                quoted = " ".join(go_quote(k) for k in shape.keys)  # %q of a []string
                return errors + [f"{prefix}element {i}: associative list with keys has an element that omits all key "
                                 f"fields [{quoted}] (and doesn't have default values for any key fields)"]
            element = "[" + ",".join(f"{k}={_key_text(v)}" for k, v in key) + "]"
        else:
            if isinstance(item, dict):
                return errors + [f"{prefix}element {i}: associative list without keys has an element that's a map type"]
            if isinstance(item, list):
                return errors + [f"{prefix}element {i}: not supported: associative list with lists as elements"]
            if item is None:
                return errors + [f"{prefix}element {i}: associative list without keys has an element that's an "
                                 "explicit null"]
            element = f"[={_key_text(item)}]"
        if element in seen:  # (an atomic list's elements are by index: never)
            errors.append(f"{prefix}duplicate entries for key {element}")
        seen.add(element)
        errors += _typed_errors(shape.element, item, f"{path}{element}")
    return errors


def _atomics(schema: Any, value: Any, path: str) -> list[str]:
    """``findAtomics``: where the patch sets an atomic map, struct or list (a struct's declared
    fields descended into, a list's items by index)."""
    shape = _resolve(schema, value)
    found: list[str] = []
    if isinstance(value, dict) and shape.kind == "map":
        if shape.atomic:
            found.append(path)
        for key, item in value.items():
            if shape.fields is not None and key in shape.fields:
                found += _atomics(shape.fields[key], item, f"{path}.{key}")
    if isinstance(value, list) and shape.kind == "list":
        if shape.atomic:
            found.append(path)
        for i, item in enumerate(value):
            found += _atomics(shape.element, item, f"{path}[{i}]")
    return found


_ABSENT = object()


def _merge(schema: Any, lhs: Any, rhs: Any) -> Any:
    """``typed.Merge``: ``rhs`` (the patch) merged into ``lhs`` (the object)."""
    if rhs is _ABSENT:
        return copy.deepcopy(lhs)
    if lhs is _ABSENT:
        return copy.deepcopy(rhs)
    shape = _resolve(schema, rhs)
    if shape.kind == "map" and isinstance(lhs, dict) and isinstance(rhs, dict) and not shape.atomic:
        out = {}
        for key in [*lhs, *(k for k in rhs if k not in lhs)]:
            child, _ = _field_schema(shape, key)
            out[key] = _merge(child, lhs.get(key, _ABSENT), rhs.get(key, _ABSENT))
        return out
    if shape.kind == "list" and isinstance(lhs, list) and isinstance(rhs, list) and not shape.atomic:
        return _merge_lists(shape, lhs, rhs)
    return copy.deepcopy(rhs)


def _key_fields(shape: _Shape, item: dict[str, Any]) -> list[tuple[str, Any]]:
    """``keyedAssociativeListItemToPathElement``: a list-map item's key fields, sorted by name,
    each its value or its field's default (a key with neither left out)."""
    defaults = shape.key_defaults or {}
    return [(k, item[k] if k in item else defaults[k]) for k in sorted(shape.keys)
            if k in item or defaults.get(k) is not None]


def _item_key(shape: _Shape, item: Any) -> str:
    """A list item's path element as a comparable text: its keys (list-map) or its value (set)."""
    if shape.list_type == "map":
        if not isinstance(item, dict):
            raise PatchError("error applying patch: failed to merge patch: expected map, got " + json.dumps(item))
        return json.dumps(_key_fields(shape, item), sort_keys=True)
    return json.dumps(item, sort_keys=True)


def _merge_lists(shape: _Shape, lhs: list[Any], rhs: list[Any]) -> list[Any]:
    """``mergingWalker.visitListItems``, step by step."""
    rhs_keys = [_item_key(shape, item) for item in rhs]
    lhs_keys = [_item_key(shape, item) for item in lhs]
    observed_rhs = dict(zip(rhs_keys, rhs))
    observed_lhs: dict[str, Any] = {}
    for key, item in zip(lhs_keys, lhs):
        observed_lhs[key] = item if key not in observed_lhs else None  # a duplicated item is not merged
    shared = [key for key in rhs_keys if key in observed_lhs]
    next_shared = shared.pop(0) if shared else None
    merged: set[str] = set()
    out: list[Any] = []
    li = ri = 0
    while li < len(lhs_keys) or ri < len(rhs_keys):
        if li < len(lhs_keys) and ri < len(rhs_keys):
            key = lhs_keys[li]
            if key == rhs_keys[ri]:
                merged.add(key)
                out.append(_merge_item(shape, observed_lhs.get(key), observed_rhs[key]))
                li += 1
                ri += 1
                next_shared = shared.pop(0) if shared else None
                continue
            if key in observed_rhs and next_shared is not None and next_shared != key:
                li += 1
                continue
        if li < len(lhs_keys):
            key = lhs_keys[li]
            if key not in observed_rhs:
                out.append(copy.deepcopy(lhs[li]))
                li += 1
                continue
            if key in merged:
                li += 1
        if ri < len(rhs_keys):
            key = rhs_keys[ri]
            merged.add(key)
            out.append(_merge_item(shape, observed_lhs.get(key, _ABSENT), observed_rhs[key]))
            ri += 1
            if next_shared is not None and next_shared == key:
                next_shared = shared.pop(0) if shared else None
    return out


def _merge_item(shape: _Shape, lhs: Any, rhs: Any) -> Any:
    return _merge(shape.element, _ABSENT if lhs is None else lhs, rhs)


# -- JSONPatch -----------------------------------------------------------------------------------

class _TestFailed(Exception):
    pass


def json_patch(obj: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """``jsonpatch.Patch.Apply`` on ``obj`` (not changed): the patched object, ``obj`` itself
    when a ``test`` fails, or :class:`PatchError` (``JSON Patch: <error>``)."""
    doc = copy.deepcopy(obj)
    try:
        for operation in operations:
            doc = _apply_one(doc, operation)
    except _TestFailed:
        return obj
    except PatchError as exc:
        raise PatchError(f"JSON Patch: {exc}") from None
    return doc


# encoding/json's name of a JSON value's type, as an UnmarshalTypeError gives it
_JSON_TYPE_WORDS = ((bool, "bool"), ((int, float), "number"), (list, "array"), (dict, "object"))


def type_meta_error(obj: dict[str, Any]) -> str | None:
    """What decoding the patched object's JSON says first when its ``apiVersion`` or ``kind`` is
    no string (``json.DefaultMetaFactory.Interpret``, before anything else is decoded; keys in
    Go's sorted order, so ``apiVersion`` first); None when both are strings, null or absent."""
    for key in ("apiVersion", "kind"):
        value = obj.get(key)
        if value is None or isinstance(value, str):
            continue
        word = next(w for types, w in _JSON_TYPE_WORDS if isinstance(value, types))
        return (f"couldn't get version/kind; json parse error: json: cannot unmarshal {word} into Go struct field "
                f".{key} of type string")
    return None


def _decode(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")  # strings.NewReplacer("~1", "/", "~0", "~")


def _find(doc: Any, path: str) -> tuple[Any, str] | None:
    """``findObject``: the container holding the path's last part, and that part decoded."""
    split = path.split("/")
    if len(split) < 2:
        return None
    current = doc
    for part in split[1:-1]:
        found = _get(current, _decode(part))
        if found is _ABSENT or found is None or not isinstance(found, (dict, list)):
            return None
        current = found
    return current, _decode(split[-1])


def _atoi(key: str) -> int:
    """Go's ``strconv.Atoi`` (an optional sign, decimal digits)."""
    text = key[1:] if key[:1] in "+-" else key
    if not text or not text.isascii() or not text.isdigit():
        raise PatchError(f'strconv.Atoi: parsing {json.dumps(key)}: invalid syntax')
    return int(key)


def _index(container: list[Any], key: str, size: int) -> int:
    index = _atoi(key)
    if index < 0:
        if index < -size:
            raise PatchError(f"Unable to access invalid index: {index}: invalid index referenced")
        index += size
    return index


def _get(container: Any, key: str) -> Any:
    """A container's item: ``_ABSENT`` for a missing object key; an array's bad index is an error."""
    if isinstance(container, dict):
        return container.get(key, _ABSENT)
    try:
        index = _index(container, key, len(container))
    except PatchError:
        return _ABSENT
    return container[index] if index < len(container) else _ABSENT


def _apply_one(doc: Any, operation: dict[str, Any]) -> Any:
    op = operation.get("op", "")
    path = operation.get("path", "")
    value = copy.deepcopy(operation.get("value"))
    if op == "add":
        found = _find(doc, path)
        if found is None:
            raise PatchError(f'add operation does not apply: doc is missing path: "{path}": missing value')
        _add(*found, value, f"error in add for path: '{path}'")
    elif op == "remove":
        found = _find(doc, path)
        if found is None:
            raise PatchError(f'remove operation does not apply: doc is missing path: "{path}": missing value')
        _remove(*found, f"error in remove for path: '{path}'")
    elif op == "replace":
        if path == "":
            if not isinstance(value, (dict, list)):
                raise PatchError("replace operation value must be object or array: <nil>")
            return value
        found = _find(doc, path)
        if found is None:
            raise PatchError(f"replace operation does not apply: doc is missing path: {path}: missing value")
        container, key = found
        if isinstance(container, list):
            try:
                index = _index(container, key, len(container))
            except PatchError:
                index = len(container)
            if index >= len(container):
                raise PatchError(f"replace operation does not apply: doc is missing key: {path}: missing value")
            container[index] = value
        else:
            container[key] = value  # v4 replaces a missing object key by adding it
    elif op in ("move", "copy"):
        source = operation.get("from", "")
        found = _find(doc, source)
        if found is None:
            raise PatchError(f"{op} operation does not apply: doc is missing from path: {source}: missing value")
        container, key = found
        moved = _get(container, key)
        if moved is _ABSENT and isinstance(container, list):
            raise PatchError(f"error in {op} for {'path' if op == 'move' else 'from'}: "
                             f"'{key if op == 'move' else source}': Unable to access invalid index: "
                             f"{_atoi(key)}: invalid index referenced")
        moved = None if moved is _ABSENT else moved
        if op == "move":
            _remove(container, key, f"error in move for path: '{key}'")
        else:
            moved = copy.deepcopy(moved)
        target = _find(doc, path)
        if target is None:
            raise PatchError(f"{op} operation does not apply: doc is missing destination path: {path}: missing value")
        _add(*target, moved, f"error in move for path: '{path}'" if op == "move"
             else "error while adding value during copy")
    elif op == "test":
        if path == "":
            if doc != value:
                raise _TestFailed()
            return doc
        found = _find(doc, path)
        if found is None:
            raise PatchError(f"test operation does not apply: is missing path: {path}: missing value")
        container, key = found
        current = _get(container, key)
        if current is _ABSENT and isinstance(container, list):
            raise PatchError(f"error in test for path: '{path}': Unable to access invalid index: "
                             f"{_atoi(key)}: invalid index referenced")
        if current is _ABSENT or current is None:
            if "value" in operation and operation["value"] is not None:
                raise _TestFailed()
        elif not _json_equal(current, value):
            raise _TestFailed()
    else:
        raise PatchError(f"Unexpected kind: {op}")
    return doc


def _json_equal(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _add(container: Any, key: str, value: Any, context: str) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    if key == "-":
        container.append(value)
        return
    try:
        index = _atoi(key)
    except PatchError as exc:
        raise PatchError(f"{context}: value was not a proper array index: '{key}': {exc}") from None
    size = len(container) + 1
    if index >= size or index < -size:
        raise PatchError(f"{context}: Unable to access invalid index: {index}: invalid index referenced")
    if index < 0:
        index += size
    container.insert(index, value)


def _remove(container: Any, key: str, context: str) -> None:
    if isinstance(container, dict):
        if key not in container:
            raise PatchError(f"{context}: Unable to remove nonexistent key: {key}: missing value")
        del container[key]
        return
    try:
        index = _atoi(key)
    except PatchError as exc:
        raise PatchError(f"{context}: {exc}") from None
    if index >= len(container) or index < -len(container):
        raise PatchError(f"{context}: Unable to access invalid index: {index}: invalid index referenced")
    del container[index if index >= 0 else index + len(container)]
