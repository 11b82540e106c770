"""``infergate native-policies``: the policies as the apiserver's own ValidatingAdmissionPolicies
and MutatingAdmissionPolicies (``webhook.policy.native_export``).

    infergate native-policies | kubectl apply --server-side -f -
    infergate native-policies --policies my-policies/ -o json

Prints a YAML stream (``-o json``: a ``List``) of the generated objects; every rule that stays
with the webhook gets one line on stderr: the policy, the rule and why.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from webhook import command_line
from webhook.inputs.policies import PolicySource, load_policy_set
from webhook.policy import PolicyLoadError
from webhook.policy.actions import ActionsError
from webhook.policy.native_export import Kept, export, kind_resources

EXAMPLES = """\
infergate native-policies | kubectl apply --server-side -f -   # the shipped policies' exportable rules
infergate native-policies --policies my-policies/ -o json
infergate native-policies --policy-actions kubeai-model-engine=Warn
"""

EXIT_CODES = """\
exit status:
  0  the objects were printed (rules that stay with the webhook are named on stderr)
  2  usage or input error (a bad flag, a policy that does not load)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = command_line.epilog(EXAMPLES, exit_codes=EXIT_CODES)
    parser.add_argument("--policies", type=Path, default=None,
                        help="directory of AdmissionPolicy files (default: the shipped policies)")
    parser.add_argument("--policy-actions", action="append", metavar="NAME=ACTION[,ACTION][@SELECTOR]",
                        help="an operator's validation actions for a policy, as serve takes them (repeatable): "
                             "written into the bindings where a binding can express them")
    parser.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml",
                        help="yaml (default: a YAML stream) or json (a v1 List)")


def run(args: argparse.Namespace) -> int:
    # the AdmissionPolicy files alone: the built-in policies are Python, exported as kept below
    source = PolicySource(args.policies, tuple(args.policy_actions or ()), builtin=False)
    try:
        policies = load_policy_set(source, args.evaluator)
    except ActionsError as exc:
        return command_line.error(str(exc))
    except PolicyLoadError as exc:
        for problem in exc.problems:
            print(f"infergate: error: {problem}", file=sys.stderr)
        return command_line.USAGE
    from webhook.schema.bundled import known_kinds

    result = export([p.definition for p in policies.policies], kind_resources(known_kinds()), policies.actions)
    if args.output == "json":
        sys.stdout.write(json.dumps(result.as_list(), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump_all(result.objects, sort_keys=False, allow_unicode=True, width=1000))
    from webhook.policy.builtin import BUILTIN_POLICIES

    kept = list(result.kept) + [Kept(p.name, "*", "written in Python (exact decimal arithmetic), not CEL")
                                for p in BUILTIN_POLICIES]
    for item in kept:
        print(item.line(), file=sys.stderr)
    return command_line.OK
