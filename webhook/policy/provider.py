"""The current set of policies, and a directory of them that hot-reloads.

:class:`PolicyDirectory` polls the files' modification times in a background thread and
swaps in a new :class:`PolicySet` only when the whole directory loads; a broken file
keeps the last good set in force (and is reported by :attr:`PolicyDirectory.error`).

A file that held policies and is now empty counts as broken too, until it has content
again or is removed: editors that save by truncating and then writing leave it empty for
a moment, and a reload then would open a window without its policies (a disk that fills
up mid-write leaves it empty for good). Removing the file is how its policies go.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from webhook.policy.actions import NO_OVERRIDES, ActionOverrides, ActionsError, own_actions
from webhook.policy.builtin import BUILTIN_POLICIES
from webhook.policy.scope import PolicyInput
from webhook.policy.loader import PolicyLoadError, load_directory, load_file, policy_files
from webhook.policy.native.loader import NativePolicies, load_native
from webhook.policy.typecheck import KindSchemas
from webhook.policy.verdict import Verdict

if TYPE_CHECKING:
    from webhook.cel import Evaluator

log = logging.getLogger(__name__)


class Policy(Protocol):
    """A policy from a file, or one written in Python where CEL is the wrong tool."""

    name: str
    file: str
    validation_actions: frozenset[str]  # Deny, Warn, Audit: what its failed validations do

    @property
    def mutating_stage(self) -> bool:
        """Whether it has work in the mutating webhook (mutations, or validations placed there)."""

    def evaluate(self, inp: PolicyInput, *, mutating: bool, explain: bool = False) -> Verdict | None: ...


@dataclass(frozen=True)
class PolicySet:
    """An immutable, ordered set of policies (files in name order, then the built-in ones)."""

    policies: tuple[Policy, ...] = ()
    source: str = ""
    generation: int = 0
    # operators' choice of validation actions per policy (``--policy-actions``): what
    # ``actions_for`` answers before the policy's own ``validationActions``
    actions: ActionOverrides = NO_OVERRIDES
    # Kubernetes' own ValidatingAdmissionPolicies and bindings of the directory, for the offline
    # commands (``webhook.policy.native``; ``load(..., native=True)``); ``serve`` leaves them to the
    # apiserver
    native: NativePolicies | None = None
    # (rule key, mutating) -> the policies that may apply (``for_review``)
    _candidates: dict[tuple[Any, bool], tuple[Policy, ...]] = field(default_factory=dict, init=False,
                                                                    repr=False, compare=False)

    @classmethod
    def load(cls, location: str | Path | Sequence[str | Path], *, evaluator: Evaluator, builtin: bool = True,
             schemas: KindSchemas | None = None, actions: ActionOverrides = NO_OVERRIDES,
             native: bool = False) -> "PolicySet":
        """The policies of ``location`` (a directory, or files and directories read in order),
        compiled for ``evaluator``; ``schemas``: the kinds they are type-checked against (default:
        the shipped CRDs'); ``actions``: the operator's overrides, each of which must name a policy
        of the set; ``native``: also the ValidatingAdmissionPolicies and bindings among its files
        (the offline commands)."""
        one_directory = isinstance(location, (str, Path))  # a directory it must be
        paths = [Path(location)] if one_directory else [Path(p) for p in location]
        problems: list[str] = []
        loaded: list[Policy] = []
        for path in paths:
            if not one_directory and not path.exists():
                problems.append(f"{path}: no such file or directory")
                continue
            try:
                loaded += load_file(path, evaluator, schemas=schemas) if path.is_file() and not one_directory \
                    else load_directory(path, evaluator, schemas=schemas)
            except PolicyLoadError as exc:
                problems += exc.problems
        found = None
        readable = [p for p in paths if p.is_dir() or (p.is_file() and not one_directory)]
        if native and readable:
            try:
                found = load_native(readable, evaluator, schemas) or None
            except PolicyLoadError as exc:
                problems += [p for p in exc.problems if p not in problems]
        if problems:
            raise PolicyLoadError(problems)
        if builtin:
            loaded += BUILTIN_POLICIES
        source = ", ".join(map(str, paths))
        try:
            actions.check(p.name for p in loaded)
        except ActionsError as exc:
            raise PolicyLoadError([f"{source}: {exc}"]) from None
        return cls(tuple(loaded), source, actions=actions, native=found)

    def actions_for(self, policy: Policy, inp: PolicyInput) -> tuple[frozenset[str], str]:
        """The validation actions in force for ``policy`` on the review ``inp`` (an operator's
        override for its namespace, else the policy's own) and the binding that chose them
        ("" for the policy's own, else ``override[<i>]``)."""
        if self.actions:
            return self.actions.resolve(policy, inp)
        return own_actions(policy), ""

    def current(self) -> "PolicySet":
        return self

    def for_review(self, rule_key: tuple[str, str, Any, str], *, mutating: bool) -> tuple[Policy, ...]:
        """The policies, in order, that may apply to a request whose rules key is
        ``rule_key`` (``PolicyInput.rule_key``) in the mutating or validating webhook: a
        policy without work in that stage, or whose rules do not match, is left out (each
        still checks its selectors and matchConditions). Kept per set: a review does not
        walk every policy twice to find the two that apply."""
        key = (rule_key, mutating)
        found = self._candidates.get(key)
        if found is None:
            if len(self._candidates) >= _CANDIDATE_KEYS:  # requests name any kind they like: keep it bounded
                self._candidates.clear()
            found = self._candidates[key] = tuple(p for p in self.policies if _may_apply(p, rule_key, mutating))
        return found

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.policies]


class PolicySetProvider(Protocol):
    def current(self) -> PolicySet: ...


_CANDIDATE_KEYS = 1024


def _may_apply(policy: Policy, rule_key: tuple[str, str, Any, str], mutating: bool) -> bool:
    """Whether ``policy`` has work in the stage and its rules match (a policy written in
    Python says so itself, in ``evaluate``)."""
    if mutating and not policy.mutating_stage:
        return False
    rules_match = getattr(policy, "may_apply", None)
    return rules_match is None or rules_match(rule_key, mutating)


def _refuse_emptied(in_force: PolicySet) -> None:
    """Raise when a file the policies in force came from is now empty (see the module doc)."""
    problems = []
    for file in dict.fromkeys(p.file for p in in_force.policies if not p.file.startswith("builtin:")):
        try:
            empty = not Path(file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue  # removed (its policies go), or unreadable (the loader says so)
        if empty:
            names = ", ".join(p.name for p in in_force.policies if p.file == file)
            problems.append(f"{file}: empty; its policies ({names}) stay in force until it has content "
                            "again or is removed")
    if problems:
        raise PolicyLoadError(problems)


def directory_fingerprint(directory: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for file in policy_files(directory):
        try:
            st = file.stat()
        except OSError:
            continue
        out.append((str(file), st.st_mtime_ns, st.st_size))
    return tuple(out)


@dataclass
class PolicyDirectory:
    """A directory of policies, compiled for ``evaluator``, reloaded when its files change."""

    directory: Path
    evaluator: Evaluator
    interval: float = 2.0
    builtin: bool = True
    schemas: KindSchemas | None = None  # the kinds the policies are type-checked against (default: shipped)
    actions: ActionOverrides = NO_OVERRIDES  # operators' validation actions (a reload must keep their policies)
    error: str | None = None
    # called with a reloaded set before it is in force (the watch cache starts what it reads)
    on_load: list[Callable[[PolicySet], None]] = field(default_factory=list)
    _set: PolicySet = field(init=False)
    _fingerprint: tuple = field(init=False, default=())
    _stop: threading.Event = field(init=False, default_factory=threading.Event)
    _thread: threading.Thread | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        self._fingerprint = directory_fingerprint(self.directory)
        self._set = PolicySet.load(self.directory, evaluator=self.evaluator, builtin=self.builtin,
                                   schemas=self.schemas, actions=self.actions)  # must succeed

    def current(self) -> PolicySet:
        return self._set

    def poll(self) -> bool:
        """Reload if the files changed; True when a new set is in force."""
        fingerprint = directory_fingerprint(self.directory)
        if fingerprint == self._fingerprint:
            return False
        self._fingerprint = fingerprint
        try:
            _refuse_emptied(self._set)
            fresh = PolicySet.load(self.directory, evaluator=self.evaluator, builtin=self.builtin,
                                   schemas=self.schemas, actions=self.actions)
        except PolicyLoadError as exc:
            self.error = str(exc)
            log.error("policies not reloaded, the last good set stays in force:\n%s", exc)
            return False
        self.error = None
        fresh = PolicySet(fresh.policies, fresh.source, self._set.generation + 1, fresh.actions)
        for listener in self.on_load:
            try:
                listener(fresh)
            except Exception:  # noqa: BLE001 - a listener's fault must not keep the policies out
                log.exception("policies reloaded: a listener failed")
        self._set = fresh  # one atomic swap
        log.info("policies reloaded: %d in force", len(fresh.policies))
        return True

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="policy-reload", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - the reloader must outlive any surprise
                log.exception("policy reload failed")
