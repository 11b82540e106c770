"""A ValidatingAdmissionPolicy's type check, as the apiserver writes it into
``status.typeChecking.expressionWarnings`` (``validating/typechecking.go``): every validation's
``expression`` and ``messageExpression`` compiled against the schema of each kind its
``matchConstraints.resourceRules`` name without a wildcard (in group, version, kind order),
``object`` and ``oldObject`` typed by it; a problem is a warning ``<group>/<version>,
Kind=<kind>: <cel-go's errors>``, one line per kind, and never stops the
policy. Only kinds a CRD serves are checked here (the rest are ``dyn``), ``params`` too (typed by
its kind's schema when a CRD serves it), and ``variables`` stay ``dyn``; an expression that reads
the authorizer is left alone."""

from __future__ import annotations

import re
from typing import Any, Callable

from webhook.apiversion import group_of, split
from webhook.cel.checker.checker import check
from webhook.cel.common.types import DYN
from webhook.cel.crd import object_types
from webhook.cel.syntax.parser import CelSyntaxError, format_errors, parse
from webhook.policy.native.model import ValidatingPolicy
from webhook.policy.typecheck import KindSchemas, KindType

_DYN_VARIABLES = ("request", "namespaceObject", "params", "variables")
_AUTHORIZER = re.compile(r"(?<![.\w])authorizer\b")

# (apiVersion, plural) -> the kind a CRD serves there, or None
KindOf = Callable[[str, str], "str | None"]


def _kinds(policy: ValidatingPolicy, kind_of: KindOf, schemas: KindSchemas) -> list[KindType]:
    """``typesToCheck``: the kinds of the rules without wildcards, sorted by group, version, kind."""
    found: dict[tuple[str, str, str], KindType] = {}
    for rule in policy.match.resource_rules:
        if any("*" in g for g in rule.api_groups) or any("*" in v for v in rule.api_versions):
            continue
        resources = [r for r in rule.resources if "*" not in r and "/" not in r]
        for group in sorted(rule.api_groups):
            for version in sorted(rule.api_versions):
                for resource in sorted(resources):
                    api_version = f"{group}/{version}" if group else version
                    kind = kind_of(api_version, resource)
                    if kind is None:
                        continue
                    typed = next((t for t in schemas.types(group, kind) if t.api_version == api_version), None)
                    if typed is not None:
                        found.setdefault((group, version, kind), typed)
    return [found[key] for key in sorted(found)]


def type_warnings(policy: ValidatingPolicy, kind_of: KindOf, schemas: KindSchemas) -> list[tuple[tuple[Any, ...], str]]:
    """``(path of the expression, warning)`` as ``status.typeChecking`` would list them."""
    kinds = _kinds(policy, kind_of, schemas)
    if not kinds:
        return []
    params: KindType | None = None  # typed by its kind's schema when a CRD serves it
    if policy.param_kind is not None:
        api_version, kind_name = policy.param_kind
        params = next((t for t in schemas.types(group_of(api_version), kind_name)
                       if t.api_version == api_version), None)
    out = []
    for i, validation in enumerate(policy.validations):
        for field, source in (("expression", validation.expression), ("messageExpression", validation.message_expression)):
            if not source or _AUTHORIZER.search(source):
                continue
            try:
                parsed = parse(source)
            except CelSyntaxError:
                continue  # a syntax error is refused when the policy is written (the loader says so)
            lines = []
            for kind in kinds:
                variables = {name: DYN for name in _DYN_VARIABLES}
                variables["object"] = variables["oldObject"] = kind.decl.cel
                objects = object_types(kind.decl)
                if params is not None:
                    variables["params"] = params.decl.cel
                    objects = {**objects, **object_types(params.decl)}
                checked = check(parsed, variables, objects)
                if checked.errors:
                    group, version = split(kind.api_version)
                    lines.append(f"{group}/{version}, Kind={kind.kind}: {format_errors(source, checked.errors)}\n")
            if lines:
                out.append((("spec", "validations", i, field), "\n".join(lines)))
    return out
