"""The merge types of Kubernetes' built-in kinds, as kube-apiserver v1.36 types a
MutatingAdmissionPolicy's ApplyConfiguration on them.

The apiserver builds its type converter from the OpenAPI v3 document of the kind's
group-version (``mutating/patch/typeconverter.go``: ``managedfields.NewTypeConverter`` on the
document's component schemas; no static converter), converted by
``k8s.io/kube-openapi/pkg/schemaconv`` into structured-merge-diff's atoms. This module holds
those documents trimmed to what the conversion reads (``builtin_merge_types.json.gz``, written by
``scripts/builtin_merge_types.py``: its ``source`` says from which apiserver, which paths,
when) and converts them the same way, one type at a time as a merge reaches it:

- a schema without ``type``: a scalar, a list and a map at once (the value decides which:
  IntOrString, whose ``oneOf`` is not read, takes a map too);
- ``object``: a map of its properties; other keys typed by ``additionalProperties``, any key
  when it has no properties (or ``x-kubernetes-preserve-unknown-fields``), else none;
  ``x-kubernetes-map-type`` atomic or granular (beside a reference: overriding the
  referred type's);
- ``array``: atomic unless ``x-kubernetes-list-type`` says ``set`` or ``map`` (keyed by
  ``x-kubernetes-list-map-keys``); without a list-type, ``x-kubernetes-patch-strategy: merge``
  makes it a list-map keyed by ``x-kubernetes-patch-merge-key`` (a set without a key) and
  ``retainKeys`` atomic;
- a string with a ``format`` other than ``byte`` (``int-or-string``, ``date-time``) is an
  untyped scalar; Quantity an untyped scalar; RawExtension untyped (atomic lists and maps).

The table is read once, on the first ApplyConfiguration of a built-in kind or into an object's
``metadata`` (a custom resource's ObjectMeta is the same type), never at start (the
module is imported only then; it holds plain classes, no dataclasses, and imports ``gzip`` only
to read the table).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("builtin_merge_types.json.gz")

_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_RAW_EXTENSION = "io.k8s.apimachinery.pkg.runtime.RawExtension"
_UNTYPED = "__untyped_atomic_"
_DEDUCED = "__untyped_deduced_"


class MapType:
    __slots__ = ("fields", "element", "atomic", "defaults")

    def __init__(self, fields: dict[str, TypeRef], element: TypeRef | None, atomic: bool,
                 defaults: dict[str, Any]) -> None:
        self.fields = fields
        self.element = element  # the other keys' type; None: no other key is declared
        self.atomic = atomic
        self.defaults = defaults  # the fields' scalar defaults (a list-map key's default)


class ListType:
    __slots__ = ("element", "atomic", "keys")

    def __init__(self, element: TypeRef, atomic: bool, keys: tuple[str, ...]) -> None:
        self.element = element
        self.atomic = atomic
        self.keys = keys  # associative with keys: a list-map; associative without: a set


class Atom:
    """A structured-merge-diff atom: what a value of the type may be (several: the value decides)."""

    __slots__ = ("scalar", "map", "list")

    def __init__(self, scalar: str | None = None, map: MapType | None = None,  # noqa: A002 (SMD's names)
                 list: ListType | None = None) -> None:  # noqa: A002
        self.scalar = scalar  # string | numeric | boolean | untyped
        self.map = map
        self.list = list

    def deduced(self, value: Any) -> Atom:
        """``deduceAtom`` then ``handleAtom``'s choice: the one form ``value`` takes, else (a CEL
        null, or a value of no form the type has) the map, the scalar, the list, in that order."""
        if isinstance(value, dict) and self.map is not None:
            return Atom(map=self.map)
        if isinstance(value, list) and self.list is not None:
            return Atom(list=self.list)
        if value is not None and not isinstance(value, (dict, list)) and self.scalar is not None:
            return Atom(scalar=self.scalar)
        if self.map is not None:
            return Atom(map=self.map)
        if self.scalar is not None:
            return Atom(scalar=self.scalar)
        return Atom(list=self.list)


class TypeRef:
    """A reference to one type: a named component schema (with an override of its map type) or
    a schema inlined where it is used."""

    __slots__ = ("_table", "_name", "_inline", "_map_type", "_preserve", "_atom")

    def __init__(self, table: MergeTypes, name: str | None = None, inline: dict[str, Any] | None = None,
                 map_type: str = "", preserve: bool = False) -> None:
        self._table, self._name, self._inline = table, name, inline
        self._map_type, self._preserve = map_type, preserve
        self._atom: Atom | None = None

    def atom(self) -> Atom:
        if self._atom is None:
            if self._name is not None:
                atom = self._table.named(self._name)
                if self._map_type and atom.map is not None:  # schema.Resolve: the field's override
                    atom = Atom(map=MapType(atom.map.fields, atom.map.element, self._map_type == "atomic",
                                            atom.map.defaults))
            else:
                atom = self._table.convert(self._inline or {}, self._preserve)
            self._atom = atom
        return self._atom

    def __repr__(self) -> str:
        return f"TypeRef({self._name or 'inline'})"


class MergeTypes:
    """The built-in kinds' types: each kind's root by (apiVersion, kind), the components by name."""

    def __init__(self, kinds: dict[str, str], schemas: dict[str, dict[str, Any]], source: dict[str, Any]) -> None:
        self.kinds, self.schemas, self.source = kinds, schemas, source
        self._named: dict[str, Atom] = {}

    def root(self, api_version: str, kind: str) -> TypeRef | None:
        name = self.kinds.get(f"{api_version} {kind}")
        return TypeRef(self, name) if name is not None else None

    def named(self, name: str) -> Atom:
        atom = self._named.get(name)
        if atom is None:
            if name == _QUANTITY:
                atom = Atom(scalar="untyped")
            elif name in (_RAW_EXTENSION, _UNTYPED):
                untyped = TypeRef(self, _UNTYPED)
                atom = Atom(scalar="untyped", list=ListType(untyped, True, ()),
                            map=MapType({}, untyped, True, {}))
            elif name == _DEDUCED:
                atom = Atom(scalar="untyped", list=ListType(TypeRef(self, _UNTYPED), True, ()),
                            map=MapType({}, TypeRef(self, _DEDUCED), False, {}))
            else:
                # a top-level model starts without preserve-unknown-fields (ToSchemaFromOpenAPI)
                atom = self.convert(self.schemas.get(name, {}), False)
            self._named[name] = atom
        return atom

    def convert(self, schema: dict[str, Any], preserve: bool) -> Atom:
        """``convert.parseSchema``."""
        if schema.get("x-kubernetes-preserve-unknown-fields") is True:
            preserve = True
        kind = schema.get("type", "")
        if kind == "":
            return Atom(scalar="untyped", list=self._list(schema, preserve), map=self._map(schema, preserve))
        if kind == "object":
            return Atom(map=self._map(schema, preserve))
        if kind == "array":
            return Atom(list=self._list(schema, preserve))
        if kind in ("integer", "number"):
            return Atom(scalar="numeric")
        if kind == "boolean":
            return Atom(scalar="boolean")
        if kind == "string" and schema.get("format", "") in ("", "byte"):
            return Atom(scalar="string")
        return Atom(scalar="untyped")

    def _ref(self, schema: dict[str, Any], preserve: bool) -> TypeRef:
        """``convert.makeOpenAPIRef``: a reference (its map type overriding), else inlined."""
        if "$ref" in schema:
            return TypeRef(self, schema["$ref"], map_type=_map_type(schema))
        return TypeRef(self, inline=schema, preserve=preserve)

    def _map(self, schema: dict[str, Any], preserve: bool) -> MapType:
        properties = schema.get("properties") or {}
        fields = {name: self._ref(sub, preserve) for name, sub in properties.items()}
        defaults = {name: sub["default"] for name, sub in properties.items() if "default" in sub}
        additional = schema.get("additionalProperties")
        element: TypeRef | None
        if additional is None:
            element = TypeRef(self, _DEDUCED) if preserve or not properties else None
        elif isinstance(additional, dict):
            element = self._ref(additional, preserve)
        else:
            element = TypeRef(self, _DEDUCED) if additional else None
        return MapType(fields, element, _map_type(schema) == "atomic", defaults)

    def _list(self, schema: dict[str, Any], preserve: bool) -> ListType:
        atomic, keys = _list_type(schema)
        items = schema.get("items")
        element = self._ref(items, preserve) if isinstance(items, dict) else TypeRef(self, _UNTYPED)
        return ListType(element, atomic, keys)


def _map_type(schema: dict[str, Any]) -> str:
    return {"atomic": "atomic", "granular": "granular"}.get(schema.get("x-kubernetes-map-type", ""), "")


def _list_type(schema: dict[str, Any]) -> tuple[bool, tuple[str, ...]]:
    """``getListElementRelationship``: (atomic, the keys of an associative list)."""
    list_type = schema.get("x-kubernetes-list-type")
    if list_type is not None:
        if list_type == "set":
            return False, ()
        if list_type == "map":
            return False, tuple(schema.get("x-kubernetes-list-map-keys") or ())
        return True, ()
    strategy = schema.get("x-kubernetes-patch-strategy")
    if strategy in ("merge", "merge,retainKeys"):
        key = schema.get("x-kubernetes-patch-merge-key")
        return False, (key,) if isinstance(key, str) else ()
    return True, ()


@functools.cache
def builtin_merge_types() -> MergeTypes:
    """The table, read from the package data on first use (immutable: one per process)."""
    import gzip

    document = json.loads(gzip.decompress(DATA.read_bytes()))
    return MergeTypes(document["kinds"], document["types"], document["source"])


def object_meta() -> TypeRef:
    """``io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta``: every kind's ``metadata``, a custom
    resource's too."""
    return TypeRef(builtin_merge_types(), _OBJECT_META)


def builtin_root(api_version: Any, kind: Any) -> TypeRef | None:
    """The type of a built-in ``kind`` at ``api_version`` (None: not one the table holds)."""
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    return builtin_merge_types().root(api_version, kind)
