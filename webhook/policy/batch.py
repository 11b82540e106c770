"""A policy's work for one stage as ONE CEL program.

Handing the request to the CEL engine costs more than most expressions (cel-expr converts
the whole activation into C++ values on every call), so after its lookups a policy's
matchConditions, variables and validations/warnings/audit annotations (or mutations) run
as one program::

    (mc1) == true ? ((mc2) == true ? [v1].map(__var_a, [v2].map(__var_b, [e1, e2, ...])[0])[0] : []) : []

``variables.a`` becomes the bound name ``__var_a`` (CEL has no ``cel.bind`` in cel-expr, a
one-element ``map`` binds the same way). Variables are evaluated eagerly, in order, as the
per-expression path does. cel-expr's value of the batch is the values that path computes
one by one, so it decides the stage, failed rules included (``judged_source`` puts a failed
rule's messageExpression in the program); when the batch cannot be built (an unusual
reference to ``variables``, a type the checker rejects) or its evaluation fails, the caller
runs the expressions one by one, which gives the exact errors and messages.

Variables computed before the program (``given``: those that read only cluster state, see
``compiled``) stay ``variables.<name>`` and are read from the activation.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

from webhook.cel import CelCompileError

_BOUND_PREFIX = "__var_"

# a string literal (raw ones without escapes), or a reference to ``variables``
_TOKEN = re.compile(
    r"""(?P<raw>(?:[rR][bB]?|[bB][rR])(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'[^'\n]*'|"[^"\n]*"))"""
    r"""|(?P<str>[bB]?(?:'''(?:\\[\s\S]|[\s\S])*?'''|\"\"\"(?:\\[\s\S]|[\s\S])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))"""
    r"""|(?<![.\w])variables\b(?:\s*\.\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\())?"""
)


def bind_variables(source: str, known: Iterable[str], given: Iterable[str] = ()) -> str | None:
    """``source`` with each ``variables.<name>`` (name in ``known``) as its bound name, those
    in ``given`` as they are; None when ``variables`` is read any other way (indexed, ``.?``,
    an unknown or later name)."""
    known, given = set(known), set(given)
    out, last = [], 0
    for match in _TOKEN.finditer(source):
        if match.group("raw") is not None or match.group("str") is not None:
            continue
        name = match.group("name")
        if name in given:
            continue
        if name is None or name not in known:
            return None
        out.append(source[last:match.start()])
        out.append(_BOUND_PREFIX + name)
        last = match.end()
    out.append(source[last:])
    return "".join(out)


def batch_source(match_conditions: Sequence[str], variables: Sequence[tuple[str, str]],
                 body: Sequence[str], *, return_variables: bool = False, given: Sequence[str] = ()) -> str | None:
    """The one program of a stage; it evaluates to ``[]`` when a matchCondition is not true,
    else to the list of the ``body`` expressions' values (``[[variables...], [body...]]`` with
    ``return_variables``: the variables not ``given``). None when it cannot be written (see
    ``bind_variables``)."""
    names = [name for name, _ in variables if name not in given]
    rewritten_body = [bind_variables(s, names, given) for s in body]
    conditions = [bind_variables(s, ()) for s in match_conditions]  # evaluated before any variable
    bound: list[tuple[str, str]] = []
    for i, (name, source) in enumerate(variables):
        if name in given:
            continue
        earlier = [n for n, _ in variables[:i]]  # a variable reads only earlier ones
        rewritten = bind_variables(source, [n for n in earlier if n not in given], [n for n in earlier if n in given])
        if rewritten is None or not name.isidentifier():
            return None
        bound.append((name, rewritten))
    if any(s is None for s in rewritten_body) or any(s is None for s in conditions):
        return None
    program = list_source(rewritten_body)
    if return_variables:
        program = f"[{list_source(_BOUND_PREFIX + name for name in names)}, {program}]"
    for name, source in reversed(bound):
        program = f"[({source})].map({_BOUND_PREFIX}{name}, {program})[0]"
    for source in reversed(conditions):
        program = f"({source}) == true ? {program} : []"
    return program


def judged_source(rule: str, message: str | None) -> str:
    """A validation's or warning's part of the validating batch: its value, or, for a rule
    with a messageExpression, ``true`` when it holds and else ``[message]`` (the one-element
    list tells the message from a value of the rule's), so a failed rule's message costs no
    second evaluation. The message is evaluated only when the rule fails, as by the
    per-expression path; when it fails to evaluate, the batch fails and that path falls back
    to the rule's message."""
    if message is None:
        return rule
    return f"({rule}) ? dyn(true) : dyn([dyn({message})])"


# a root variable of the policy language, and the field selected from it (if any)
_READ = re.compile(r"(?<![.\w])(object|oldObject|params|namespaceObject|request|lookups|variables)\b"
                   r"(?:\s*\.\??(?P<field>[A-Za-z_][A-Za-z0-9_]*))?")


def request_fields_read(source: str) -> frozenset[str] | None:
    """The fields of ``request`` a batch reads, when it reads nothing else: its value is then
    a function of those fields' values alone (CEL has no other input). None when it reads
    another variable, or ``request`` any other way than by selecting a field. Read on the
    source: a name inside a string literal counts too, which can only give None."""
    fields = set()
    for match in _READ.finditer(source):
        if match.group(1) != "request" or match.group("field") is None:
            return None
        fields.add(match.group("field"))
    return frozenset(fields)


def list_source(sources: Iterable[str]) -> str:
    """A list of the expressions' values (of mixed types: each one ``dyn``)."""
    return "[" + ", ".join(f"dyn({s})" for s in sources) + "]"


def compile_batch(engine: Any, source: str | None, variables: Sequence[str],
                  rename: Mapping[str, str] | None = None) -> Any:
    """The compiled batch, or None when there is none (the per-expression path is used);
    ``rename``: the variables' names at evaluation, for an engine that can share bindings."""
    if source is None:
        return None
    try:
        if rename:  # as the policy loader compiles each expression
            return engine.compile(source, variables, rename, mixed_literals=True)
        return engine.compile(source, variables, mixed_literals=True)
    except CelCompileError:
        return None
