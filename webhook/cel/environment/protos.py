"""CEL's AST protos (``cel.expr.CheckedExpr`` & co.), the bridge to cel-expr-python's AST.

cel-expr-python serializes a compiled expression as a ``CheckedExpr`` and plans any
``CheckedExpr`` it is given. Its wheel carries the ``cel/expr`` proto descriptors but no
Python classes for them, so the descriptors are read from the extension module itself.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from cel_expr_python import cel
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf import duration_pb2, empty_pb2, struct_pb2, timestamp_pb2  # noqa: F401  (dependencies)
from google.protobuf.internal.decoder import _DecodeVarint

_FILES = ("cel/expr/syntax.proto", "cel/expr/checked.proto")
_FILE_DESCRIPTOR_FIELDS = range(1, 15)  # FileDescriptorProto's field numbers


def _embedded_file(blob: bytes, name: str) -> bytes:
    """The serialized ``FileDescriptorProto`` named ``name`` inside a binary."""
    encoded = name.encode()
    start = blob.find(b"\n" + bytes([len(encoded)]) + encoded)
    if start < 0:
        raise RuntimeError(f"cel-expr-python does not embed {name}")
    pos = start
    while pos < len(blob):
        tag, after = _DecodeVarint(blob, pos)
        field, wire_type = tag >> 3, tag & 7
        if field not in _FILE_DESCRIPTOR_FIELDS or wire_type not in (0, 2):
            break
        if wire_type == 2:
            length, after = _DecodeVarint(blob, after)
            after += length
        else:
            _, after = _DecodeVarint(blob, after)
        pos = after
    return blob[start:pos]


@cache
def _pool() -> descriptor_pool.DescriptorPool:
    with open(cel.__file__, "rb") as f:
        blob = f.read()
    pool = descriptor_pool.Default()
    for name in _FILES:
        try:
            pool.FindFileByName(name)
        except KeyError:
            pool.Add(descriptor_pb2.FileDescriptorProto.FromString(_embedded_file(blob, name)))
    return pool


def message_class(full_name: str) -> type:
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(full_name))


CheckedExpr = message_class("cel.expr.CheckedExpr")
Expr = message_class("cel.expr.Expr")
Constant = message_class("cel.expr.Constant")
Reference = message_class("cel.expr.Reference")


def decode(expression: cel.Expression) -> CheckedExpr:
    wrapper = any_pb2.Any.FromString(expression.serialize())
    return CheckedExpr.FromString(wrapper.value)


def encode(checked: CheckedExpr) -> bytes:
    wrapper = any_pb2.Any()
    wrapper.Pack(checked)
    return wrapper.SerializeToString()


def children(node: Any) -> list[Any]:
    """The sub-expressions of a checked AST node, in cel-go's order."""
    kind = node.WhichOneof("expr_kind")
    if kind == "select_expr":
        return [node.select_expr.operand]
    if kind == "call_expr":
        return ([node.call_expr.target] if node.call_expr.HasField("target") else []) + list(node.call_expr.args)
    if kind == "list_expr":
        return list(node.list_expr.elements)
    if kind == "struct_expr":
        return [x for e in node.struct_expr.entries for x in ((e.map_key, e.value) if e.HasField("map_key") else (e.value,))]
    if kind == "comprehension_expr":
        c = node.comprehension_expr
        return [c.iter_range, c.accu_init, c.loop_condition, c.loop_step, c.result]
    return []
