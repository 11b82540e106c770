"""``infergate serve``: its flags (:func:`add_arguments`) and its start (:func:`run`):
settings read, start-up errors as one line (``infergate: error: ...``, exit 2), then the
server on uvloop."""

from __future__ import annotations

import argparse
import asyncio
import functools

from pydantic import ValidationError

from webhook import command_line, logs
from webhook.server.decode import summarize
from webhook.server.processes import ProcessCountError, process_count
from webhook.server.wiring import load_admitter, policy_actions_problem, serve, serve_processes, unusable_paths
from webhook.server.settings import Settings

EXAMPLES = """\
infergate serve                                            # local certificates in certs/, the shipped policies
infergate serve --service ns/name --san webhook.example    # the Service's DNS names in the certificate
infergate serve --cert-mode files --cert-dir /mnt/tls      # certificates managed elsewhere (cert-manager)
infergate serve --kube-state --policies-dir /etc/infergate/policies
infergate serve --policy-actions kubeai-model-engine=Warn                 # admit with a warning instead of denying
infergate serve --policy-actions 'inference-pool-selector=Warn@team in (a,b)'   # ... in those teams' namespaces
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags mirror :class:`Settings` (also settable as INFERGATE_<NAME> variables)."""
    a = parser.add_argument
    a("--host", help="address to listen on (default 0.0.0.0)")
    a("--port", type=int, help="port to listen on (default 8443; 0 picks a free one)")
    a("--cert-mode", choices=["self", "files", "secret"],
      help="self: generate and rotate in --cert-dir (default); files: serve and reload files managed elsewhere; "
           "secret: keep them in a Secret and inject the caBundle")
    a("--cert-dir", help="directory of ca.crt, ca.key, tls.crt, tls.key (default certs)")
    a("--cert-secret", help="NAMESPACE/NAME of the Secret holding the certificates (--cert-mode secret)")
    a("--service", help="NAMESPACE/NAME of the webhook's Service: its DNS names go into the certificate")
    a("--san", dest="extra_sans", metavar="NAME", action="append", help="extra DNS name or IP for the certificate (repeatable)")
    a("--client-ca-file", help="reviews require a client certificate signed by this CA (the apiserver's: mTLS); "
                               "/healthz, /readyz and /metrics answer without one (the kubelet's probes)")
    a("--kubeconfig", help="kubeconfig outside a pod, for --kube-state and --cert-mode secret (default: $KUBECONFIG "
                           "or ~/.kube/config)")
    a("--webhook-name", help="name of the webhook configurations to inject the caBundle into (default infergate)")
    a("--crds-dir", help="CRDs to serve (default: the bundled ones; with --kube-state, the cluster's)")
    a("--kubeai-crd", choices=["v0.23", "v0.12.0"],
      help="the bundled KubeAI Model CRD: the current one (v0.23, default) or v0.12.0's")
    a("--policies-dir", help="policies to enforce (default: the shipped policies/)")
    a("--policy-actions", dest="policy_actions", action="append", metavar="NAME=ACTION[,ACTION][@SELECTOR]",
      help="validation actions of the policy NAME instead of its own validationActions: Deny, Warn, Audit (Deny and "
           "Warn not together); with @SELECTOR (kubectl -l form) only in namespaces whose labels it selects, the "
           "first such entry of a policy winning; also a JSON mapping {NAME: [ACTION, ...] or [{namespaceSelector, "
           "actions}, ...]} (repeatable; see policies/README.md)")
    a("--state-dir", help="cluster state as YAML files (default: the example state in examples/state)")
    a("--kube-state", action="store_const", const=True, help="watch the cluster for its state instead of files")
    a("--native-policies", action="store_const", const=True,
      help="with --kube-state: leave to the apiserver the rules of the ValidatingAdmissionPolicies the controller "
           "generated and marked enforced (controller --native-policies; docs/native-policies.md)")
    a("--failure-mode", choices=["deny", "allow"], help="answer on internal timeout or error (default deny)")
    a("--default-timeout", type=float, help="seconds allowed when the apiserver sends no ?timeout= (default 10)")
    a("--max-body-bytes", type=int, help="largest accepted request body, else 413 (default 7 MiB: a review carries "
                                         "the object and the old one, each within the apiserver's 3 MiB)")
    a("--idle-timeout", type=float, metavar="SECONDS",
      help="an idle kept-alive connection is closed after this long (default 120: longer than the apiserver keeps "
           "one idle, 90 s, so that it never sends a review on a connection just closed)")
    a("--header-timeout", type=float, metavar="SECONDS",
      help="a connection whose request headers are not whole this long after their first byte (after the "
           "connection opened, for its first request; the TLS handshake too) is closed (default 10)")
    a("--body-timeout", type=float, metavar="SECONDS",
      help="seconds to read a request body that did not come with its headers; a slower one is answered 408 "
           "and its connection closed (default 10)")
    a("--workers", type=int, help="threads judging large reviews and kinds that were slow to judge (default 4; "
                                  "small reviews of quick kinds are judged on the event loop); 0 judges every review "
                                  "on the event loop: a review that overruns its timeout cannot be cut short")
    a("--shutdown-timeout", type=float, help="seconds to finish in-flight reviews after SIGTERM (default 25)")
    a("--shutdown-delay", type=float, help="seconds to keep answering after SIGTERM with /readyz failing, "
                                           "before the listener closes (default 0; the chart sets 5)")
    a("--processes", metavar="N|auto",
      help="server processes sharing the port (SO_REUSEPORT), forked once the policies are compiled; auto: the "
           "cgroup's CPU quota, else the pod's CPU request ($INFERGATE_CPU_REQUEST_MILLICORES, which the chart sets "
           "from resources.requests.cpu), else 1, rounded up; never the node's cores (default auto)")
    a("--log-level", type=command_line.log_level, metavar="LEVEL",
      help="debug, info, warning or error, in any case; debug logs every review (default info)")
    parser.epilog = command_line.epilog(EXAMPLES, exit_codes=command_line.SERVICE_EXIT_CODES)


def run(args: argparse.Namespace) -> int:
    flags = dict(vars(args))
    evaluator = flags.pop("evaluator")  # the CEL engine the command line chose (``webhook.cli``)
    try:
        settings = Settings.load(flags)
    except ValidationError as exc:
        return command_line.error(f"serve: {summarize(exc)}")
    if problems := unusable_paths(settings):
        for problem in problems:
            command_line.error(problem)
        return command_line.USAGE
    if settings.native_policies and not settings.kube_state:
        return command_line.error("serve: --native-policies needs --kube-state (the marks are read from the cluster)")
    if problem := policy_actions_problem(settings):
        return command_line.error(problem)
    try:
        count = process_count(settings.processes)
    except ProcessCountError as exc:
        return command_line.error(f"serve: {exc}")
    logs.configure(settings.log_level)
    if count > 1:
        return serve_processes(settings, count, evaluator)
    load = functools.partial(load_admitter, evaluator=evaluator)
    try:
        import uvloop
    except ImportError:  # Windows
        return asyncio.run(serve(settings, load=load))
    return uvloop.run(serve(settings, load=load))
