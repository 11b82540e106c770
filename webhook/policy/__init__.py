"""Admission policies as data: the format (``model``), loading with precise errors
(``loader``), evaluation (``compiled``), Python policies (``builtin``) and hot reload
(``provider``)."""

from webhook.policy.compiled import CompiledPolicy
from webhook.policy.expression import CEL_VARIABLES
from webhook.policy.scope import PolicyInput
from webhook.policy.loader import PolicyLoadError, load_directory, load_file
from webhook.policy.provider import Policy, PolicyDirectory, PolicySet, PolicySetProvider
from webhook.policy.verdict import Denial, Trace, Verdict

__all__ = [
    "CEL_VARIABLES",
    "CompiledPolicy",
    "Denial",
    "Policy",
    "PolicyDirectory",
    "PolicyInput",
    "PolicyLoadError",
    "PolicySet",
    "PolicySetProvider",
    "Trace",
    "Verdict",
    "load_directory",
    "load_file",
]
