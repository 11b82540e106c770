"""The Kubernetes CEL libraries, written once in plain Python and shared by both backends.

Each module declares its functions as ``Overload`` records with Kubernetes' names, overload
ids and CEL types; ``webhook.cel.environment.env`` (cel-expr-python) and ``webhook.cel.engine.cel_python``
adapt them to their runtime. Library values are plain Python objects (``Quantity``,
``IP``, ``CIDR``, ``URL``, ``Semver``, ``NamedFormat``); an implementation raises
``LibraryError`` with the Kubernetes message to produce a CEL evaluation error.
"""

from __future__ import annotations

from webhook.cel.library import cidr, format, ip, lists, quantity, regex, semver, strings_format, urls
from webhook.cel.library.base import LibraryError, OpaqueValue, Overload

# the Kubernetes libraries of the 1.36 base environment, and cel-go's string.format
MODULES = (lists, regex, urls, quantity, ip, cidr, format, semver, strings_format)
OVERLOADS: tuple[Overload, ...] = tuple(o for module in MODULES for o in module.OVERLOADS)
OPAQUE_TYPES: tuple[type[OpaqueValue], ...] = tuple(t for module in MODULES for t in getattr(module, "TYPES", ()))

__all__ = ["MODULES", "OPAQUE_TYPES", "OVERLOADS", "LibraryError", "OpaqueValue", "Overload"]
