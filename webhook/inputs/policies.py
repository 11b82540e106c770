"""The one way every command loads its policies: a :class:`PolicySource` (the directory, else
the shipped ``policies/``, or a suite's files and directories; the operator's
``--policy-actions`` or a suite's ``actions:``) becomes a set compiled once (``validate``,
``audit``, ``test``) or a directory reloaded when its files change (``serve``, the controller's
audit). The actions are parsed and checked against the policies' names first, and applied once,
by the set's load.

Errors say what is wrong in one line where they can: ``ActionsError`` names ``--policy-actions``,
``PolicyLoadError`` the file and line; each command prefixes its own flag.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook import shipped_data
from webhook.policy import PolicyDirectory, PolicySet
from webhook.policy.actions import ActionOverrides, overrides_from, parse_overrides
from webhook.policy.builtin import BUILTIN_POLICIES
from webhook.policy.loader import PolicyLoadError, policy_names
from webhook.policy.typecheck import KindSchemas

if TYPE_CHECKING:
    from webhook.cel import Evaluator
    from webhook.schema import CRDRegistry

__all__ = ["PolicySource", "load_policy_directory", "load_policy_set"]


@dataclass(frozen=True)
class PolicySource:
    directory: Path | None = None  # None: the shipped policies (unless ``paths``)
    actions: tuple[str, ...] = field(default=())  # ``--policy-actions`` items, as given
    # files and directories read in order in place of ``directory`` (a suite's ``policies:``)
    paths: tuple[Path, ...] | None = None
    builtin: bool = True  # with the built-in Python policies
    # the actions in their data form, ``{NAME: [ACTION, ...] | [{namespaceSelector, actions}]}``
    # (a suite's ``actions:``), named "actions" in errors; left out of the hash (a dict), not
    # out of equality
    action_mapping: Mapping[str, Any] | None = field(default=None, hash=False)

    @property
    def path(self) -> Path:
        """The one directory (``paths`` unset)."""
        return Path(self.directory) if self.directory is not None else shipped_data.policies_dir()

    @property
    def location(self) -> Path | tuple[Path, ...]:
        """What :meth:`PolicySet.load` reads: the directory, or the files and directories."""
        return self.paths if self.paths is not None else self.path

    def overrides(self) -> ActionOverrides:
        """The actions parsed and checked against the policies' names, read without compiling
        them (milliseconds: a start-up check); ``ActionsError`` in one line. Names that cannot be
        read are left to the load to report, with its file and line."""
        overrides = parse_overrides(self.actions) if self.action_mapping is None \
            else overrides_from(self.action_mapping, "actions")
        if overrides:
            paths = self.paths if self.paths is not None else (self.path,)
            try:  # a path that is not there is the load's to report
                names = [name for path in paths for name in policy_names(path)] \
                    if all(Path(path).exists() for path in paths) else None
            except (PolicyLoadError, OSError):
                names = None
            if names is not None:
                overrides.check(names + ([p.name for p in BUILTIN_POLICIES] if self.builtin else []))
        return overrides


def _schemas(registry: CRDRegistry | None) -> KindSchemas | None:
    # the kinds the expressions are type-checked against (None: the shipped CRDs')
    return KindSchemas(registry.crds) if registry is not None else None


def load_policy_set(source: PolicySource, evaluator: Evaluator, registry: CRDRegistry | None = None, *,
                    native: bool = False) -> PolicySet:
    """The policies of ``source`` compiled once, type-checked against ``registry``'s CRDs,
    under its actions; ``native``: the ValidatingAdmissionPolicies and bindings beside them too
    (the offline commands: ``serve`` leaves those to the apiserver)."""
    return PolicySet.load(source.location, evaluator=evaluator, builtin=source.builtin, schemas=_schemas(registry),
                          actions=source.overrides(), native=native)


def load_policy_directory(source: PolicySource, evaluator: Evaluator,
                          registry: CRDRegistry | None = None) -> PolicyDirectory:
    """The policies of ``source``, loaded now and reloaded when their files change once started
    (the last good set stays in force when a change does not load)."""
    if source.paths is not None:
        raise ValueError("a policy directory reloads one directory, not files")
    return PolicyDirectory(source.path, evaluator, builtin=source.builtin, schemas=_schemas(registry),
                           actions=source.overrides())
