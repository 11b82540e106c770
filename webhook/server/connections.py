"""The listening socket and what a connection may take.

Two bounds that aiohttp folds into one timer (its ``keepalive_timeout``), kept apart here:

- an idle kept-alive connection stays open ``idle_timeout`` (default 120 s): the apiserver's
  client keeps idle connections 90 s (Go's ``http.DefaultTransport``, which client-go's
  ``SetTransportDefaults`` keeps), and a request sent on a connection the server has just
  closed fails with EOF, a failed write under ``failurePolicy: Fail``;
- a request's headers must be whole within ``header_timeout`` of its first byte (of the
  connection's opening, for its first request), so that a client trickling headers
  (slowloris) holds a connection for seconds, not minutes. The TLS handshake has the same
  bound. The body has its own (``--body-timeout``, :mod:`webhook.server.http`).

aiohttp's keep-alive timer stays the idle bound; the header deadline is kept by
:class:`HeaderDeadlineHandler`, aiohttp's protocol with one timer more, which learns that a
request's headers were parsed through the server's ``request_factory`` (a public seam of
:class:`aiohttp.web.Server`), and that its answer was written through ``finish_response``.

While the pod drains (:meth:`Connections.drain`, from SIGTERM until the listener closes) each
answer carries ``Connection: close`` and its connection closes once it is written. The apiserver
keeps its connections to a draining pod (kube-proxy's DNAT holds an established connection
whatever the endpoints say) and sends it reviews until that pod closes them; a connection closed
while idle at the end of the drain can cross a review already on its way (an EOF, a failed
write). Closed after an answer that says so, its next review opens a new connection, which the
Service sends to a Ready pod. What stays open to the end is what no review used during the drain.

Headers of a pipelined request that start arriving while the previous one is judged are
bounded by the idle timeout rather than the header deadline (aiohttp does not say where one
request's bytes end): such a connection costs what an idle one does. The apiserver does not
pipeline.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from webhook import logs

log = logs.get("server")


class HeaderDeadlineHandler(RequestHandler):
    """aiohttp's per-connection protocol, closing a connection whose request headers are not
    whole ``header_timeout`` seconds after their first byte (or after the connection opened)."""

    __slots__ = ("header_timeout", "connections", "on_lost", "_event_loop", "_header_timer", "_between_requests")

    def __init__(self, manager: web.Server, *, loop: asyncio.AbstractEventLoop, header_timeout: float,
                 connections: Connections, on_lost: Callable[[], None] | None = None, **kwargs: Any):
        super().__init__(manager, loop=loop, **kwargs)
        self.header_timeout = header_timeout
        self.connections = connections
        self.on_lost = on_lost  # the group's connection count (webhook.server.balance)
        self._event_loop = loop
        self._header_timer: asyncio.TimerHandle | None = None
        self._between_requests = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()  # the first request's headers: from the opening

    def data_received(self, data: bytes) -> None:
        if self._between_requests and self._header_timer is None and data:
            self._arm()  # the first byte of the next request on a kept-alive connection
        super().data_received(data)

    def request_started(self) -> None:
        """A request's headers were parsed: its handler is about to run."""
        self._between_requests = False
        self._disarm()

    async def finish_response(self, request: Any, resp: Any, start_time: float | None) -> Any:
        if self.connections.draining and isinstance(resp, web.StreamResponse) and not resp.prepared:
            resp.force_close()  # "Connection: close", and closed once written (see the module's doc)
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            self._between_requests = True  # idle now: only the idle timeout runs until a byte comes

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        try:
            super().connection_lost(exc)
        finally:
            if self.on_lost is not None:
                self.on_lost()

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self._event_loop.call_later(self.header_timeout, self._headers_late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._between_requests:
            log.debug("request headers not received in time; connection closed",
                      extra={"fields": {"header_timeout_seconds": self.header_timeout}})
            self.force_close()


class Connections:
    """The protocol factory of the listening socket: one :class:`HeaderDeadlineHandler` per
    connection, serving ``server`` (an ``AppRunner``'s, set up)."""

    def __init__(self, server: web.Server, *, idle_timeout: float, header_timeout: float):
        self.server = server
        self.idle_timeout = idle_timeout
        self.header_timeout = header_timeout
        self.draining = False
        self.on_drain: list[Callable[[], None]] = []  # the group's listener stops passing connections on
        make_request = server.request_factory

        def request_factory(message, payload, protocol, writer, task):  # type: ignore[no-untyped-def]
            if isinstance(protocol, HeaderDeadlineHandler):  # not the sibling processes' Unix socket
                protocol.request_started()
            return make_request(message, payload, protocol, writer, task)

        server.request_factory = request_factory

    def drain(self) -> None:
        """From now on every answer closes its connection (see the module's doc)."""
        self.draining = True
        for stop_passing in self.on_drain:
            stop_passing()

    def __call__(self, *, on_lost: Callable[[], None] | None = None) -> HeaderDeadlineHandler:
        """A connection's protocol; ``on_lost`` is called once it has closed."""
        return HeaderDeadlineHandler(self.server, loop=asyncio.get_running_loop(), header_timeout=self.header_timeout,
                                     connections=self, on_lost=on_lost, keepalive_timeout=self.idle_timeout,
                                     access_log=None)


async def listen(
    connections: Connections, host: str, port: int, *, ssl_context: Any, sock: socket.socket | None = None,
) -> asyncio.Server:
    """The listening socket on ``host:port`` (or ``sock``, already bound), serving TLS;
    a TLS handshake gets the header deadline too. (A process of ``serve --processes`` has its
    own accept loop: :mod:`webhook.server.balance`.)"""
    loop = asyncio.get_running_loop()
    if sock is not None:
        return await loop.create_server(connections, sock=sock, ssl=ssl_context,
                                        ssl_handshake_timeout=connections.header_timeout)
    return await loop.create_server(connections, host, port, ssl=ssl_context, reuse_address=True,
                                    ssl_handshake_timeout=connections.header_timeout)


def bound_port(listener: asyncio.Server) -> int:
    return listener.sockets[0].getsockname()[1]
