"""The one way every command loads its policies: a :class:`PolicySource` (the directory, else
the shipped ``policies/``, and the operator's ``--policy-actions``) becomes a set compiled once
(``validate``, ``audit``) or a directory reloaded when its files change (``serve``, the
controller's audit). The actions are parsed and checked against the policies' names first,
and applied once, by the set's load.

Errors say what is wrong in one line where they can: ``ActionsError`` names ``--policy-actions``,
``PolicyLoadError`` the file and line; each command prefixes its own flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from webhook import shipped_data
from webhook.policy import PolicyDirectory, PolicySet
from webhook.policy.actions import ActionOverrides, parse_overrides
from webhook.policy.builtin import BUILTIN_POLICIES
from webhook.policy.loader import PolicyLoadError, policy_names
from webhook.policy.typecheck import KindSchemas

if TYPE_CHECKING:
    from webhook.cel import Evaluator
    from webhook.schema import CRDRegistry

__all__ = ["PolicySource", "load_policy_directory", "load_policy_set"]


@dataclass(frozen=True)
class PolicySource:
    directory: Path | None = None  # None: the shipped policies
    actions: tuple[str, ...] = field(default=())  # ``--policy-actions`` items, as given

    @property
    def path(self) -> Path:
        return Path(self.directory) if self.directory is not None else shipped_data.policies_dir()

    def overrides(self) -> ActionOverrides:
        """The actions parsed and checked against the policies' names, read without compiling
        them (milliseconds: a start-up check); ``ActionsError`` in one line. Names that cannot be
        read are left to the load to report, with its file and line."""
        overrides = parse_overrides(self.actions)
        if self.actions:
            try:
                names = policy_names(self.path) + [p.name for p in BUILTIN_POLICIES]
            except (PolicyLoadError, OSError):
                names = None
            if names is not None:
                overrides.check(names)
        return overrides


def _schemas(registry: CRDRegistry | None) -> KindSchemas | None:
    # the kinds the expressions are type-checked against (None: the shipped CRDs')
    return KindSchemas(registry.crds) if registry is not None else None


def load_policy_set(source: PolicySource, evaluator: Evaluator, registry: CRDRegistry | None = None, *,
                    native: bool = False) -> PolicySet:
    """The policies of ``source`` compiled once, type-checked against ``registry``'s CRDs,
    under its actions; ``native``: the ValidatingAdmissionPolicies and bindings beside them too
    (the offline commands: ``serve`` leaves those to the apiserver)."""
    return PolicySet.load(source.path, evaluator=evaluator, schemas=_schemas(registry), actions=source.overrides(),
                          native=native)


def load_policy_directory(source: PolicySource, evaluator: Evaluator,
                          registry: CRDRegistry | None = None) -> PolicyDirectory:
    """The policies of ``source``, loaded now and reloaded when their files change once started
    (the last good set stays in force when a change does not load)."""
    return PolicyDirectory(source.path, evaluator, schemas=_schemas(registry), actions=source.overrides())
