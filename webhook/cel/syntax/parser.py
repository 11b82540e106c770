"""A CEL parser producing cel-go's AST shape (``ast``): node ids, source offsets, macro expansion,
and cel-go's display of syntax errors.

Offsets follow cel-go: an operator's node sits at its operator token, a call at its ``(``, a
field selection at its ``.``, macro-generated nodes at the macro call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from webhook.cel.syntax.ast import (
    ACCUMULATOR, Call, Comprehension, CreateList, CreateMap, CreateStruct, Expr, Ident, Literal, MapEntry, Select)


class CelSyntaxError(Exception):
    def __init__(self, offset: int, message: str) -> None:
        super().__init__(message)
        self.offset = offset
        self.message = message


# --- lexer -------------------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\n\r\f]+|//[^\n]*)
  | (?P<string>(?:[rR][bB]?|[bB][rR]?|[bB])?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<num>0[xX][0-9a-fA-F]+[uU]?
           |\d+\.\d+(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+
           |\d+[uU]?)
  | (?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,()\[\]{}])
  | (?P<quoted>`[^`]*`)
""", re.X | re.S)


@dataclass(slots=True)
class Token:
    kind: str       # string num ident op eof quoted
    text: str
    offset: int


def tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            raise CelSyntaxError(position, f"Syntax error: token recognition error at: '{source[position]}'")
        kind = match.lastgroup or ""
        if kind != "ws":
            tokens.append(Token(kind, match.group(0), position))
        position = match.end()
    tokens.append(Token("eof", "<EOF>", len(source)))
    return tokens


_PRIMARY_START = ("{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
                  "BYTES, IDENTIFIER}")
_RESERVED = frozenset({"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
                       "loop", "package", "namespace", "return", "var", "void", "while"})
_LITERAL_WORDS = {"true": ("bool", True), "false": ("bool", False), "null": ("null", None)}


# --- parser ------------------------------------------------------------------------------------

class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.position = 0
        self.next_id = 1
        self.last_end = 0                        # end offset of the last consumed token
        self.spans: dict[int, tuple[int, int]] = {}   # node id -> source [start, end)

    # helpers
    def _new_id(self) -> int:
        node_id = self.next_id
        self.next_id += 1
        return node_id

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.position + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.tokens[self.position]
        self.position += 1
        self.last_end = token.offset + len(token.text)
        return token

    def span(self, node: Expr, start: int) -> Expr:
        """Record that ``node`` covers the source from ``start`` to the last consumed token."""
        self.spans[node.id] = (start, self.last_end)
        return node

    def start_of(self, node: Expr) -> int:
        return self.spans.get(node.id, (node.offset, node.offset))[0]

    def at(self, text: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.text == text

    def expect(self, text: str) -> Token:
        token = self.peek()
        if token.kind == "op" and token.text == text:
            return self.advance()
        raise self._mismatch(token, f"'{text}'")

    def _mismatch(self, token: Token, expecting: str) -> CelSyntaxError:
        shown = token.text if token.kind != "eof" else "<EOF>"
        return CelSyntaxError(token.offset, f"Syntax error: mismatched input '{shown}' expecting {expecting}")

    # grammar
    def parse(self) -> Expr:
        expr = self.expr()
        token = self.peek()
        if token.kind != "eof":
            raise CelSyntaxError(token.offset, f"Syntax error: mismatched input '{token.text}' expecting <EOF>")
        return expr

    def expr(self) -> Expr:
        condition = self.conditional_or()
        if self.at("?"):
            op = self.advance()
            if_true = self.conditional_or()
            self.expect(":")
            if_false = self.expr()
            return self.span(Call(self._new_id(), op.offset, "_?_:_", [condition, if_true, if_false]),
                             self.start_of(condition))
        return condition

    def conditional_or(self) -> Expr:
        left = self.conditional_and()
        while self.at("||"):
            op = self.advance()
            right = self.conditional_and()
            left = self.span(Call(self._new_id(), op.offset, "_||_", [left, right]), self.start_of(left))
        return left

    def conditional_and(self) -> Expr:
        left = self.relation()
        while self.at("&&"):
            op = self.advance()
            right = self.relation()
            left = self.span(Call(self._new_id(), op.offset, "_&&_", [left, right]), self.start_of(left))
        return left

    _RELATIONS = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_"}

    def relation(self) -> Expr:
        left = self.addition()
        while True:
            token = self.peek()
            if token.kind == "op" and token.text in self._RELATIONS:
                function = self._RELATIONS[token.text]
            elif token.kind == "ident" and token.text == "in":
                function = "@in"
            else:
                return left
            self.advance()
            right = self.addition()
            left = self.span(Call(self._new_id(), token.offset, function, [left, right]), self.start_of(left))

    def addition(self) -> Expr:
        left = self.multiplication()
        while self.at("+") or self.at("-"):
            op = self.advance()
            right = self.multiplication()
            left = self.span(Call(self._new_id(), op.offset, "_+_" if op.text == "+" else "_-_", [left, right]),
                             self.start_of(left))
        return left

    def multiplication(self) -> Expr:
        left = self.unary()
        while self.at("*") or self.at("/") or self.at("%"):
            op = self.advance()
            right = self.unary()
            left = self.span(Call(self._new_id(), op.offset, {"*": "_*_", "/": "_/_", "%": "_%_"}[op.text],
                                  [left, right]), self.start_of(left))
        return left

    def unary(self) -> Expr:
        if self.at("!"):
            ops = []
            while self.at("!"):
                ops.append(self.advance())
            operand = self.member()
            if len(ops) % 2 == 0:
                return operand
            return self.span(Call(self._new_id(), ops[0].offset, "!_", [operand]), ops[0].offset)
        if self.at("-"):
            # a single '-' directly before a number literal is part of the literal
            if self.peek(1).kind == "num" and not (self.peek(2).kind == "op" and self.peek(2).text in (".", "[")):
                minus = self.advance()
                return self.member(negative_literal=minus)
            ops = []
            while self.at("-"):
                ops.append(self.advance())
            operand = self.member()
            if len(ops) % 2 == 0:
                return operand
            return self.span(Call(self._new_id(), ops[0].offset, "-_", [operand]), ops[0].offset)
        return self.member()

    def member(self, negative_literal: Token | None = None) -> Expr:
        expr = self.primary(negative_literal)
        start = self.start_of(expr)
        while True:
            if self.at("."):
                dot = self.advance()
                optional = False
                if self.at("?"):
                    self.advance()
                    optional = True
                name_token = self.peek()
                if name_token.kind == "quoted":
                    self.advance()
                    name = name_token.text[1:-1]
                elif name_token.kind == "ident" and name_token.text not in _LITERAL_WORDS and name_token.text != "in":
                    self.advance()
                    name = name_token.text
                else:
                    raise self._mismatch(name_token, "IDENTIFIER")
                if self.at("(") and not optional:
                    open_paren = self.advance()
                    args = self.expr_list(")")
                    expr = self.span(self.member_call(expr, name, args, open_paren.offset), start)
                else:
                    expr = self.span(Select(self._new_id(), dot.offset, expr, name, optional=optional), start)
            elif self.at("["):
                bracket = self.advance()
                optional = False
                if self.at("?"):
                    self.advance()
                    optional = True
                index = self.expr()
                self.expect("]")
                expr = self.span(Call(self._new_id(), bracket.offset, "_[?_]" if optional else "_[_]",
                                      [expr, index]), start)
            elif self.at("{") and _qualified(expr) is not None:
                # a message construction, ``Name{field: value}`` (cel-go's CreateMessage: a
                # possibly dotted, possibly leading-dot name, then the field initialisers)
                brace = self.advance()
                expr = self.span(self.struct_literal(_qualified(expr), brace), start)
            else:
                return expr

    def struct_literal(self, name: str, open_token: Token) -> Expr:
        fields: list[tuple[str, Expr]] = []
        offsets: list[int] = []
        node_id = self._new_id()
        while not self.at("}"):
            token = self.peek()
            if token.kind == "quoted":
                self.advance()
                field = token.text[1:-1]
            elif token.kind == "ident" and token.text not in _LITERAL_WORDS:
                self.advance()
                field = token.text
            else:
                raise self._mismatch(token, "IDENTIFIER")
            offsets.append(self.expect(":").offset)
            fields.append((field, self.expr()))
            if self.at(","):
                self.advance()
                continue
            break
        self.expect("}")
        return CreateStruct(node_id, open_token.offset, name, fields, offsets)

    def expr_list(self, closing: str) -> list[Expr]:
        args: list[Expr] = []
        if self.at(closing):
            self.advance()
            return args
        while True:
            args.append(self.expr())
            if self.at(","):
                self.advance()
                continue
            self.expect(closing)
            return args

    def primary(self, negative_literal: Token | None = None) -> Expr:
        token = self.peek()
        if negative_literal is not None:
            self.advance()
            return self.span(self.number(token, negative_literal), negative_literal.offset)
        if token.kind == "num":
            self.advance()
            return self.span(self.number(token, None), token.offset)
        if token.kind == "string":
            self.advance()
            return self.span(self.string(token), token.offset)
        if token.kind == "ident":
            if token.text in _LITERAL_WORDS:
                self.advance()
                kind, value = _LITERAL_WORDS[token.text]
                return self.span(Literal(self._new_id(), token.offset, kind, value), token.offset)
            if token.text == "in":
                raise self._mismatch(token, "IDENTIFIER")
            self.advance()
            return self.span(self.ident_or_call(token, leading_dot=False), token.offset)
        if token.kind == "op":
            if token.text == ".":
                self.advance()
                name = self.peek()
                if name.kind != "ident":
                    raise self._mismatch(name, "IDENTIFIER")
                self.advance()
                return self.span(self.ident_or_call(name, leading_dot=True), token.offset)
            if token.text == "(":
                self.advance()
                inner = self.expr()
                self.expect(")")
                return self.span(inner, token.offset)
            if token.text == "[":
                self.advance()
                return self.span(self.list_literal(token), token.offset)
            if token.text == "{":
                self.advance()
                return self.span(self.map_literal(token), token.offset)
        shown = "<EOF>" if token.kind == "eof" else token.text
        raise CelSyntaxError(token.offset, f"Syntax error: mismatched input '{shown}' expecting {_PRIMARY_START}")

    def ident_or_call(self, token: Token, *, leading_dot: bool) -> Expr:
        name = ("." if leading_dot else "") + token.text
        if token.text in _RESERVED:
            raise CelSyntaxError(token.offset, f"reserved identifier: {token.text}")
        if self.at("("):
            open_paren = self.advance()
            args = self.expr_list(")")
            return self.global_call(name, args, open_paren.offset)
        return Ident(self._new_id(), token.offset, name)

    def list_literal(self, open_token: Token) -> Expr:
        elements: list[Expr] = []
        optional: set[int] = set()
        node_id = self._new_id()
        while not self.at("]"):
            if self.at("?"):
                self.advance()
                optional.add(len(elements))
            elements.append(self.expr())
            if self.at(","):
                self.advance()
                continue
            break
        self.expect("]")
        return CreateList(node_id, open_token.offset, elements, frozenset(optional))

    def map_literal(self, open_token: Token) -> Expr:
        entries: list[MapEntry] = []
        node_id = self._new_id()
        while not self.at("}"):
            optional = False
            if self.at("?"):
                self.advance()
                optional = True
            key = self.expr()
            colon = self.expect(":")
            value = self.expr()
            entries.append(MapEntry(self._new_id(), colon.offset, key, value, optional))
            if self.at(","):
                self.advance()
                continue
            break
        self.expect("}")
        return CreateMap(node_id, open_token.offset, entries)

    # literals
    def number(self, token: Token, minus: Token | None) -> Expr:
        text = token.text
        offset = minus.offset if minus is not None else token.offset
        sign = -1 if minus is not None else 1
        if text[-1] in "uU":
            if minus is not None:
                raise CelSyntaxError(minus.offset, "Syntax error: mismatched input '-' expecting ...")
            digits = text[:-1]
            value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits)
            if value > 2**64 - 1:
                raise CelSyntaxError(offset, "invalid uint literal")
            return Literal(self._new_id(), offset, "uint", value)
        if text[:2].lower() == "0x":
            value = sign * int(text, 16)
        elif any(c in text for c in ".eE"):
            return Literal(self._new_id(), offset, "double", sign * float(text))
        else:
            value = sign * int(text)
        if not -(2**63) <= value <= 2**63 - 1:
            raise CelSyntaxError(offset, "invalid int literal")
        return Literal(self._new_id(), offset, "int", value)

    def string(self, token: Token) -> Expr:
        text = token.text
        prefix_end = 0
        while text[prefix_end] not in "'\"":
            prefix_end += 1
        prefix = text[:prefix_end].lower()
        body = text[prefix_end:]
        quote = body[:3] if body[:3] in ("'''", '"""') else body[0]
        inner = body[len(quote):-len(quote)]
        is_bytes, is_raw = "b" in prefix, "r" in prefix
        if is_raw:
            raw = inner.encode("utf-8") if is_bytes else inner
        else:
            raw = _unescape(inner, is_bytes, token.offset)
        if is_bytes:
            return Literal(self._new_id(), token.offset, "bytes", raw if isinstance(raw, bytes) else raw.encode())
        return Literal(self._new_id(), token.offset, "string", raw)

    # calls and macros
    def global_call(self, name: str, args: list[Expr], offset: int) -> Expr:
        if name == "has" and len(args) == 1:
            operand = args[0]
            if not isinstance(operand, Select) or operand.optional:
                raise CelSyntaxError(offset, "invalid argument to has() macro")
            return Select(self._new_id(), offset, operand.operand, operand.field, test_only=True)
        return Call(self._new_id(), offset, name, args)

    def member_call(self, target: Expr, name: str, args: list[Expr], offset: int) -> Expr:
        expand = _MACROS.get((name, len(args)))
        if expand is not None:
            return expand(self, target, args, offset)
        return Call(self._new_id(), offset, name, args, target)

    def ident_name(self, expr: Expr, offset: int, message: str = "argument must be a simple name") -> str:
        if isinstance(expr, Ident) and not expr.name.startswith("."):
            return expr.name
        raise CelSyntaxError(expr.offset if expr is not None else offset, message)

    def node(self, cls: type, offset: int, *args: Any, **kwargs: Any) -> Any:
        return cls(self._new_id(), offset, *args, **kwargs)


def _qualified(expr: Expr) -> str | None:
    """The dotted name ``expr`` spells (``a.b.c``, ``.a.b``), or None when it is not a name."""
    parts: list[str] = []
    while isinstance(expr, Select) and not expr.optional and not expr.test_only:
        parts.append(expr.field)
        expr = expr.operand
    if not isinstance(expr, Ident):
        return None
    return ".".join([expr.name, *reversed(parts)])


def _unescape(text: str, is_bytes: bool, offset: int) -> str | bytes:
    buffer = bytearray()
    chars: list[str] = []
    i = 0

    def emit_char(ch: str) -> None:
        if is_bytes:
            buffer.extend(ch.encode("utf-8"))
        else:
            chars.append(ch)

    while i < len(text):
        ch = text[i]
        if ch != "\\":
            emit_char(ch)
            i += 1
            continue
        i += 1
        if i >= len(text):
            raise CelSyntaxError(offset, "invalid escape sequence")
        esc = text[i]
        simple = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                  "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?"}
        if esc in simple:
            emit_char(simple[esc])
            i += 1
        elif esc in "xX":
            code = int(text[i + 1:i + 3], 16)
            if is_bytes:
                buffer.append(code)
            else:
                chars.append(chr(code))
            i += 3
        elif esc == "u":
            emit_char(chr(int(text[i + 1:i + 5], 16)))
            i += 5
        elif esc == "U":
            emit_char(chr(int(text[i + 1:i + 9], 16)))
            i += 9
        elif esc in "0123":
            code = int(text[i:i + 3], 8)
            if is_bytes:
                buffer.append(code)
            else:
                chars.append(chr(code))
            i += 3
        else:
            raise CelSyntaxError(offset, "invalid escape sequence")
    return bytes(buffer) if is_bytes else "".join(chars)


# --- macros (cel-go's expansions) ---------------------------------------------------------------

def _call(p: _Parser, offset: int, function: str, *args: Expr, target: Expr | None = None) -> Call:
    return Call(p._new_id(), offset, function, list(args), target)


def _ident(p: _Parser, offset: int, name: str) -> Ident:
    return Ident(p._new_id(), offset, name)


def _lit(p: _Parser, offset: int, kind: str, value: Any) -> Literal:
    return Literal(p._new_id(), offset, kind, value)


def _comprehension(p: _Parser, offset: int, iter_var: str, iter_range: Expr, accu_init: Expr,
                   condition: Expr, step: Expr, result: Expr, iter_var2: str | None = None) -> Comprehension:
    return Comprehension(p._new_id(), offset, iter_var, iter_range, ACCUMULATOR, accu_init, condition, step,
                         result, iter_var2)


def _check_var(p: _Parser, expr: Expr, offset: int) -> str:
    return p.ident_name(expr, offset, "argument must be a simple name")


def _all(p: _Parser, target: Expr, args: list[Expr], offset: int) -> Expr:
    variables, predicate = args[:-1], args[-1]
    names = [_check_var(p, v, offset) for v in variables]
    init = _lit(p, offset, "bool", True)
    condition = _call(p, offset, "@not_strictly_false", _ident(p, offset, ACCUMULATOR))
    step = _call(p, offset, "_&&_", _ident(p, offset, ACCUMULATOR), predicate)
    return _comprehension(p, offset, names[0], target, init, condition, step, _ident(p, offset, ACCUMULATOR),
                          names[1] if len(names) > 1 else None)


def _exists(p: _Parser, target: Expr, args: list[Expr], offset: int) -> Expr:
    variables, predicate = args[:-1], args[-1]
    names = [_check_var(p, v, offset) for v in variables]
    init = _lit(p, offset, "bool", False)
    condition = _call(p, offset, "@not_strictly_false", _call(p, offset, "!_", _ident(p, offset, ACCUMULATOR)))
    step = _call(p, offset, "_||_", _ident(p, offset, ACCUMULATOR), predicate)
    return _comprehension(p, offset, names[0], target, init, condition, step, _ident(p, offset, ACCUMULATOR),
                          names[1] if len(names) > 1 else None)


def _exists_one(p: _Parser, target: Expr, args: list[Expr], offset: int) -> Expr:
    variables, predicate = args[:-1], args[-1]
    names = [_check_var(p, v, offset) for v in variables]
    init = _lit(p, offset, "int", 0)
    condition = _lit(p, offset, "bool", True)
    step = _call(p, offset, "_?_:_", predicate,
                 _call(p, offset, "_+_", _ident(p, offset, ACCUMULATOR), _lit(p, offset, "int", 1)),
                 _ident(p, offset, ACCUMULATOR))
    result = _call(p, offset, "_==_", _ident(p, offset, ACCUMULATOR), _lit(p, offset, "int", 1))
    return _comprehension(p, offset, names[0], target, init, condition, step, result,
                          names[1] if len(names) > 1 else None)


def _map(p: _Parser, target: Expr, args: list[Expr], offset: int) -> Expr:
    name = _check_var(p, args[0], offset)
    transform = args[-1]
    condition = _lit(p, offset, "bool", True)
    append = _call(p, offset, "_+_", _ident(p, offset, ACCUMULATOR), CreateList(p._new_id(), offset, [transform]))
    step: Expr = append
    if len(args) == 3:
        step = _call(p, offset, "_?_:_", args[1], append, _ident(p, offset, ACCUMULATOR))
    return _comprehension(p, offset, name, target, CreateList(p._new_id(), offset, []), condition, step,
                          _ident(p, offset, ACCUMULATOR))


def _filter(p: _Parser, target: Expr, args: list[Expr], offset: int) -> Expr:
    name = _check_var(p, args[0], offset)
    condition = _lit(p, offset, "bool", True)
    append = _call(p, offset, "_+_", _ident(p, offset, ACCUMULATOR),
                   CreateList(p._new_id(), offset, [_ident(p, offset, name)]))
    step = _call(p, offset, "_?_:_", args[1], append, _ident(p, offset, ACCUMULATOR))
    return _comprehension(p, offset, name, target, CreateList(p._new_id(), offset, []), condition, step,
                          _ident(p, offset, ACCUMULATOR))


def _transform_list(p: _Parser, target: Expr, args: list[Expr], offset: int) -> Expr:
    first, second = _check_var(p, args[0], offset), _check_var(p, args[1], offset)
    transform = args[-1]
    condition = _lit(p, offset, "bool", True)
    append = _call(p, offset, "_+_", _ident(p, offset, ACCUMULATOR), CreateList(p._new_id(), offset, [transform]))
    step: Expr = append
    if len(args) == 4:
        step = _call(p, offset, "_?_:_", args[2], append, _ident(p, offset, ACCUMULATOR))
    return _comprehension(p, offset, first, target, CreateList(p._new_id(), offset, []), condition, step,
                          _ident(p, offset, ACCUMULATOR), second)


def _transform_map(p: _Parser, target: Expr, args: list[Expr], offset: int, *, entry: bool = False) -> Expr:
    first, second = _check_var(p, args[0], offset), _check_var(p, args[1], offset)
    transform = args[-1]
    condition = _lit(p, offset, "bool", True)
    if entry:
        insert = _call(p, offset, "cel.@mapInsert", _ident(p, offset, ACCUMULATOR), transform)
    else:
        insert = _call(p, offset, "cel.@mapInsert", _ident(p, offset, ACCUMULATOR), _ident(p, offset, first), transform)
    step: Expr = insert
    if len(args) == 4:
        step = _call(p, offset, "_?_:_", args[2], insert, _ident(p, offset, ACCUMULATOR))
    return _comprehension(p, offset, first, target, CreateMap(p._new_id(), offset, []), condition, step,
                          _ident(p, offset, ACCUMULATOR), second)


def _opt_map(p: _Parser, target: Expr, args: list[Expr], offset: int, *, flat: bool = False) -> Expr:
    name = _check_var(p, args[0], offset)
    bound = Comprehension(p._new_id(), offset, "#unused", CreateList(p._new_id(), offset, []), name,
                          _call(p, offset, "value", target=target), _lit(p, offset, "bool", False),
                          _ident(p, offset, name), args[1])
    present: Expr = bound if flat else _call(p, offset, "optional.of", bound)
    return _call(p, offset, "_?_:_", _call(p, offset, "hasValue", target=target), present,
                 _call(p, offset, "optional.none"))


def _sort_by(p: _Parser, target: Expr, args: list[Expr], offset: int) -> Expr:
    """``l.sortBy(e, key)``: bind the list, then ``@sortByAssociatedKeys`` with the mapped keys."""
    bound = "@__sortBy_input__"
    keys = _map(p, _ident(p, offset, bound), args, offset)
    call = _call(p, offset, "@sortByAssociatedKeys", keys, target=_ident(p, offset, bound))
    return Comprehension(p._new_id(), offset, "#unused", CreateList(p._new_id(), offset, []), bound, target,
                         _lit(p, offset, "bool", False), _ident(p, offset, bound), call)


_MACROS: dict[tuple[str, int], Any] = {
    ("all", 2): _all, ("all", 3): _all,
    ("exists", 2): _exists, ("exists", 3): _exists,
    ("exists_one", 2): _exists_one, ("exists_one", 3): _exists_one, ("existsOne", 3): _exists_one,
    ("map", 2): _map, ("map", 3): _map,
    ("filter", 2): _filter,
    ("transformList", 3): _transform_list, ("transformList", 4): _transform_list,
    ("transformMap", 3): _transform_map, ("transformMap", 4): _transform_map,
    ("transformMapEntry", 3): lambda p, t, a, o: _transform_map(p, t, a, o, entry=True),
    ("transformMapEntry", 4): lambda p, t, a, o: _transform_map(p, t, a, o, entry=True),
    ("optMap", 2): _opt_map,
    ("sortBy", 2): _sort_by,
    ("optFlatMap", 2): lambda p, t, a, o: _opt_map(p, t, a, o, flat=True),
}


def parse(source: str) -> Expr:
    """Parse ``source``; raises ``CelSyntaxError``."""
    return _Parser(source).parse()


def parse_with_spans(source: str) -> tuple[Expr, dict[int, tuple[int, int]]]:
    """Parse ``source``; also return each source-level node's [start, end) offsets."""
    parser = _Parser(source)
    expr = parser.parse()
    return expr, parser.spans


def location(source: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of ``offset`` as cel-go reports it (columns count code points)."""
    line = source.count("\n", 0, offset) + 1
    line_start = source.rfind("\n", 0, offset) + 1
    return line, offset - line_start + 1


def format_error(source: str, offset: int, message: str) -> str:
    """One error as cel-go displays it: location, message, the source line and a caret."""
    line, column = location(source, offset)
    lines = source.split("\n")
    snippet = lines[line - 1] if line - 1 < len(lines) else ""
    indent = "".join("\t" if ch == "\t" else "." for ch in snippet[:column - 1])
    return f"ERROR: <input>:{line}:{column}: {message}\n | {snippet}\n | {indent}^"


def format_errors(source: str, errors: list[tuple[int, str]]) -> str:
    ordered = sorted(enumerate(errors), key=lambda item: (item[1][0], item[0]))
    return "\n".join(format_error(source, offset, message) for _, (offset, message) in ordered)
