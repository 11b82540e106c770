"""The admission webhook over HTTPS (aiohttp): ``infergate serve``.

The request path is: limits and content type → decode (:mod:`webhook.admission.review`)
→ the admission chain, on the event loop for small reviews of quick kinds (a batch per
turn of the loop) or else in a worker thread against the apiserver's deadline → encode
in the AdmissionReview version asked. The chain is pure CPU work behind a one-method
interface (:class:`Admitter`), so everything here is the edge: HTTP, TLS, health,
metrics, logs and shutdown.

One module per job, each importing only those above it:

- :mod:`~webhook.server.settings`: the settings (flags over ``INFERGATE_*`` variables over
  the embedded default);
- :mod:`~webhook.server.metrics`: the Prometheus metrics;
- :mod:`~webhook.server.admitter`: the ``Admitter`` interface, the slot the chain loads
  into, readiness checks;
- :mod:`~webhook.server.scheduling`: where and when a review is judged (``Placement``,
  ``LoopBatch``, the worker pool, the failure mode's answers);
- :mod:`~webhook.server.decode`: a request body decoded into a review, or what is
  wrong with it;
- :mod:`~webhook.server.http`: routes, reading and answering reviews, 4xx answers,
  health, readiness and metrics;
- :mod:`~webhook.server.connections`: the listening socket, idle connections kept apart
  from the header deadline;
- :mod:`~webhook.server.balance`: how the servers of ``--processes`` share connections
  (steered by the SYN's CPU, balanced by passing accepted sockets);
- :mod:`~webhook.server.processes`: ``--processes``, N servers forked onto one port and
  answering as one;
- :mod:`~webhook.server.wiring`: the chain built from its inputs, certificates, the
  socket, GC freezing, shutdown (``serve``);
- :mod:`~webhook.server.command`: the ``infergate serve`` flags and start-up errors.
"""

from webhook.server.admitter import Admitter, AdmitterSlot, ReadinessCheck
from webhook.server.command import add_arguments, run
from webhook.server.decode import BadReview, decode_review, timeout_seconds
from webhook.server.http import STATE, ServerConfig, create_app
from webhook.server.scheduling import LoopBatch, Placement, failure_result
from webhook.server.wiring import InputsFailed, build_cert_keeper, load_admitter, serve

__all__ = [
    "Admitter", "AdmitterSlot", "BadReview", "InputsFailed", "LoopBatch", "Placement", "ReadinessCheck", "STATE",
    "ServerConfig", "add_arguments", "build_cert_keeper", "create_app", "decode_review", "failure_result",
    "load_admitter", "run", "serve", "timeout_seconds",
]
