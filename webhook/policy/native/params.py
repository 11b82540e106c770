"""A binding's params, as ``generic.CollectParams`` finds them in the cluster view: by name, or
by selector, in the ``paramRef``'s namespace or the request's; none found and
``parameterNotFoundAction: Deny`` is an error (the policy's failurePolicy decides). A params kind
the view does not hold whole, with nothing found, is unknown: the binding is left out."""

from __future__ import annotations

from typing import Any, Callable

from webhook.apiversion import group_of, split
from webhook.policy.native.model import ParamRef
from webhook.state.knowledge import EVERYTHING
from webhook.state.selectors import SelectorError, from_label_selector


class ParamsError(Exception):
    """What the apiserver says when it cannot collect the params."""


class ParamsUnknown(Exception):
    """The cluster view does not show whether the params exist."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def gvk_text(api_version: str, kind: str) -> str:
    """``schema.GroupVersionKind.String()``: ``group/version, Kind=kind``."""
    group, version = split(api_version)
    return f"{group}/{version}, Kind={kind}" if group else f"/{version}, Kind={kind}"


def collect(param_kind: tuple[str, str] | None, ref: ParamRef | None, namespace: str, state: Any,
            namespaced: Callable[[str, str], bool]) -> list[Any]:
    """The params to evaluate the policy with, one evaluation each (``[None]``: without)."""
    if param_kind is None or ref is None:
        return [None]
    api_version, kind = param_kind
    params_namespace: str | None = None
    if namespaced(api_version, kind):
        params_namespace = ref.namespace or namespace
        if not params_namespace:
            raise ParamsError("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
    elif ref.namespace:
        raise ParamsError("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
    if ref.name:
        found = state.get(api_version, kind, ref.name, params_namespace)
        params = [found] if found is not None else []
    else:
        try:
            selector = from_label_selector(ref.selector or {})
        except (SelectorError, KeyError, TypeError, AttributeError) as exc:
            raise ParamsError(str(exc)) from None
        params = state.list(api_version, kind, params_namespace, selector=selector)
    knowledge = getattr(state, "knowledge", EVERYTHING)
    group = group_of(api_version)
    if not knowledge.holds_whole(group, kind) and (not params or not ref.name):  # a list is never known whole
        raise ParamsUnknown(f"{kind} {ref.name or 'params'}")
    if not params and ref.not_found_action == "Deny":
        raise ParamsError("no params found for policy binding with `Deny` parameterNotFoundAction")
    return params
