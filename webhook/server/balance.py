"""How the processes of ``serve --processes N`` share the port's connections.

With ``SO_REUSEPORT`` alone the kernel hashes each connection to a process, so a client's
connections cross over all of them. A client and the server process it talks to then seldom
share a core's cache, which measured about +17% CPU per review (median; up to +30%) on two
cores shared with the clients (BENCHMARKS.md, "Every core"). So:

- **Steering by CPU** (:func:`steer_by_cpu`): a classic BPF program on the group's reuseport
  listeners picks the process by the CPU that handled the SYN (its place among the CPUs the
  processes may run on, mod N). The kernel's
  scheduler tends to run a process on the CPU that woke it, so a client and its server process
  share a core. It needs no privilege; a kernel that refuses it leaves the hash (one log line).
- **Balance**: steering alone can starve a process (every SYN handled by one CPU: one client
  process, or a node whose network interrupts land on one core). Each process counts the
  connections it was given in a shared-memory table (:class:`ConnectionCounts`, created before
  the fork). A process that accepts a connection while holding more than its least-loaded
  sibling counts it as its own for :data:`SETTLE_SECONDS` (the siblings may be about to accept
  their own share of the same burst), then, if it still holds at least two more, passes the
  accepted socket to that sibling over a Unix socket (``SCM_RIGHTS``), which serves it as its
  own: the TLS handshake starts there, under the same header deadline and idle timeout. While
  the group drains nothing is passed.

This is our accept loop (:class:`GroupListener`) rather than ``loop.create_server``: the latter
serves whatever it accepts. A single ``serve`` keeps ``create_server``.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import mmap
import os
import socket
from collections.abc import Callable
from typing import Any

from webhook import logs
from webhook.server.connections import Connections

log = logs.get("server")

SETTLE_SECONDS = 0.05  # a connection about to be passed on waits this long for the siblings' own accepts
ACCEPTS_PER_WAKEUP = 64  # accept() calls per readable listener, as asyncio's backlog bound
SO_ATTACH_REUSEPORT_CBPF = getattr(socket, "SO_ATTACH_REUSEPORT_CBPF", 51)  # include/uapi/asm-generic/socket.h
LISTEN_BACKLOG = 128  # as aiohttp's sites


class ConnectionCounts:
    """A table in shared memory (anonymous ``MAP_SHARED``, made before the fork): how many
    connections each process gave each process (itself included), how many each has ended, and
    whether each takes passed connections. Every cell has one writer, its row's process, so no
    lock: a reader sees each cell whole (aligned 8 bytes) if a moment late, enough for a hint."""

    def __init__(self, count: int):
        self.count = count
        self._memory = mmap.mmap(-1, 8 * (count * count + 2 * count))
        cells = memoryview(self._memory).cast("q")
        self._given = cells[:count * count]  # given[giver * count + taker]
        self._ended = cells[count * count:count * count + count]
        self._taking = cells[count * count + count:]

    def give(self, giver: int, taker: int, delta: int = 1) -> None:
        self._given[giver * self.count + taker] += delta

    def end(self, process: int) -> None:
        self._ended[process] += 1

    def load(self, process: int) -> int:
        """Connections ``process`` holds or is about to (passed, not yet received)."""
        return sum(self._given[giver * self.count + process] for giver in range(self.count)) - self._ended[process]

    def set_taking(self, process: int, taking: bool) -> None:
        self._taking[process] = int(taking)

    def taking(self, process: int) -> bool:
        return bool(self._taking[process])


class GroupSharing:
    """What the group's processes share to balance connections, made before the fork: the
    counts and one ``SOCK_SEQPACKET`` pair per process (it reads its inbox; the others write
    the paired end). Sequenced packets rather than datagrams: a Unix datagram queue holds ten
    (``net.unix.max_dgram_qlen``), a burst's worth."""

    def __init__(self, count: int):
        self.counts = ConnectionCounts(count)
        pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(count)]
        self.inboxes = [inbox for inbox, _ in pairs]
        self.outboxes = [outbox for _, outbox in pairs]
        for sock in (*self.inboxes, *self.outboxes):
            sock.setblocking(False)

    def keep_for(self, index: int) -> None:
        """In process ``index``: close the other processes' inboxes (a connection queued to a
        process that died is then refused to its sender rather than held) and its own outbox."""
        for other, inbox in enumerate(self.inboxes):
            if other != index:
                inbox.close()
        self.outboxes[index].close()

    def close(self) -> None:
        for sock in (*self.inboxes, *self.outboxes):
            sock.close()


BPF_LD_W_ABS, BPF_JEQ_K, BPF_ALU_MOD_K, BPF_RET_A, BPF_RET_K = 0x20, 0x15, 0x94, 0x16, 0x06
SKF_AD_CPU = 0xFFFFF000 + 36  # SKF_AD_OFF + SKF_AD_CPU
MAX_CPU_TABLE = 250  # CPUs + processes: a jump's offset is one byte; beyond, ``cpu mod N``


def steering_program(count: int, cpus: list[int]) -> list[tuple[int, int, int, int]]:
    """The classic BPF program (``code, jt, jf, k``) choosing a listener by the CPU that
    handled the SYN: the CPU's position in ``cpus`` (the processes' allowed CPUs, sorted) mod
    ``count``, so that a cpuset such as {3, 7} still spreads over the processes (``cpu mod 2``
    would send both to process 1); CPUs outside it, or a set too large for the table,
    ``cpu mod count``."""
    program = [(BPF_LD_W_ABS, 0, 0, SKF_AD_CPU)]
    if cpus != list(range(len(cpus))) and len(cpus) + count <= MAX_CPU_TABLE:
        returns = len(cpus) + 3  # where the "ret #i" instructions begin: after the table, mod and ret a
        for position, cpu in enumerate(cpus):
            here = position + 1
            program.append((BPF_JEQ_K, returns + position % count - here - 1, 0, cpu))
    program += [(BPF_ALU_MOD_K, 0, 0, count), (BPF_RET_A, 0, 0, 0)]
    if len(program) > 3:
        program += [(BPF_RET_K, 0, 0, index) for index in range(count)]
    return program


def steer_by_cpu(sock: socket.socket, count: int, cpus: list[int] | None = None) -> bool:
    """Attach :func:`steering_program` to ``sock``'s reuseport group (the listener of the
    index it returns, in the order they listened; ``cpus``: this process's allowed CPUs);
    False if the kernel refuses."""

    class Instruction(ctypes.Structure):  # struct sock_filter
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):  # struct sock_fprog
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Instruction))]

    instructions = steering_program(count, sorted(os.sched_getaffinity(0)) if cpus is None else cpus)
    code = (Instruction * len(instructions))(*(Instruction(*fields) for fields in instructions))
    program = Program(len(code), ctypes.cast(code, ctypes.POINTER(Instruction)))
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, bytes(program))
    except OSError as exc:
        log.warning("connections not steered by CPU: the kernel hashes them over the processes",
                    extra={"fields": {"error": str(exc)}})
        return False
    return True


def listening_socket(host: str, port: int) -> socket.socket:
    """A non-blocking TCP listener on ``host:port`` with ``SO_REUSEPORT`` (the address as
    :func:`webhook.server.processes.bind_port` resolved it)."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class GroupListener:
    """One process's listener in the group: accepts, keeps or passes on (see the module's doc),
    and serves what it keeps or is passed with ``connections`` over TLS (the handshake bounded
    by the header deadline). ``close`` stops accepting, as ``asyncio.Server.close`` does."""

    def __init__(self, connections: Connections, sock: socket.socket, *, ssl_context: Any, index: int,
                 sharing: GroupSharing | None):
        self.connections = connections
        self.sockets = [sock]
        self.ssl_context = ssl_context
        self.index = index
        self.sharing = sharing
        self.passing = sharing is not None and sharing.counts.count > 1
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task] = set()
        self._settling: dict[asyncio.TimerHandle, Callable[[], None]] = {}
        self._closed = False
        self._loop.add_reader(sock.fileno(), self._accept)
        if sharing is not None:
            self._loop.add_reader(sharing.inboxes[index].fileno(), self._receive)
            sharing.counts.set_taking(index, True)
        connections.on_drain.append(self.stop_passing)

    def stop_passing(self) -> None:
        """Draining: keep what is accepted, and take nothing more from the siblings (what they
        passed before is still received and served)."""
        self.passing = False
        if self.sharing is not None:
            self.sharing.counts.set_taking(self.index, False)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.stop_passing()
        sock = self.sockets[0]
        self._loop.remove_reader(sock.fileno())
        sock.close()
        for handle, settle in list(self._settling.items()):  # decided now: kept, as the drain passes nothing
            handle.cancel()
            settle()
        if self.sharing is not None:
            self._receive()  # anything passed before the drain began
            self._loop.remove_reader(self.sharing.inboxes[self.index].fileno())

    # -- accepting

    def _accept(self) -> None:
        sock = self.sockets[0]
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO):
                    continue
                # EMFILE and the like: leave the rest queued a second, as asyncio does
                log.warning("cannot accept a connection", extra={"fields": {"error": str(exc)}})
                self._loop.remove_reader(sock.fileno())
                self._loop.call_later(1.0, self._resume_accepting)
                return
            conn.setblocking(False)
            self._place(conn)

    def _resume_accepting(self) -> None:
        if not self._closed:
            self._loop.add_reader(self.sockets[0].fileno(), self._accept)

    def _place(self, conn: socket.socket) -> None:
        """Keep ``conn``, or, holding more than a sibling, count it as ours for a moment (the
        siblings may be accepting their own share of the same burst) and then decide."""
        if not self.passing or self._lighter_sibling(by=1) is None:
            self._keep(conn)
            return
        self.sharing.counts.give(self.index, self.index)  # type: ignore[union-attr]
        handle: asyncio.TimerHandle

        def settle() -> None:
            self._settling.pop(handle, None)
            taker = self._lighter_sibling(by=2) if self.passing else None  # passing it makes them closer
            if taker is None or not self._pass(conn, taker):
                self._serve(conn)

        handle = self._loop.call_later(SETTLE_SECONDS, settle)
        self._settling[handle] = settle

    def _lighter_sibling(self, *, by: int) -> int | None:
        """The least-loaded sibling taking connections, if it holds at least ``by`` fewer."""
        counts = self.sharing.counts  # type: ignore[union-attr]
        own = counts.load(self.index)
        loads = [(counts.load(i), i) for i in range(counts.count) if i != self.index and counts.taking(i)]
        if not loads:
            return None
        load, taker = min(loads)
        return taker if own - load >= by else None

    def _pass(self, conn: socket.socket, taker: int) -> bool:
        """Pass ``conn`` (counted as this process's) on to ``taker``."""
        counts = self.sharing.counts  # type: ignore[union-attr]
        counts.give(self.index, taker)
        counts.give(self.index, self.index, -1)
        try:
            socket.send_fds(self.sharing.outboxes[taker], [b"c"], [conn.fileno()],  # type: ignore[union-attr]
                            socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
        except OSError as exc:  # its queue full, or it exited: served here
            counts.give(self.index, taker, -1)
            counts.give(self.index, self.index)
            log.debug("connection not passed on", extra={"fields": {"to_process": taker, "error": str(exc)}})
            return False
        conn.close()  # the sibling's copy is in flight
        return True

    def _receive(self) -> None:
        inbox = self.sharing.inboxes[self.index]  # type: ignore[union-attr]
        while True:
            try:
                _, fds, _, _ = socket.recv_fds(inbox, 16, 16, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("cannot receive a passed connection", extra={"fields": {"error": str(exc)}})
                return
            if not fds:  # end of file: every sibling has exited (the group is stopping)
                self._loop.remove_reader(inbox.fileno())
                return
            for fd in fds:
                conn = socket.socket(fileno=fd)
                conn.setblocking(False)
                self._serve(conn)

    def _keep(self, conn: socket.socket) -> None:
        if self.sharing is not None:
            self.sharing.counts.give(self.index, self.index)
        self._serve(conn, counted=self.sharing is not None)

    # -- serving

    def _serve(self, conn: socket.socket, *, counted: bool = True) -> None:
        ended = not counted

        def end() -> None:  # once, whether the handshake failed or the connection closed later
            nonlocal ended
            if not ended:
                ended = True
                self.sharing.counts.end(self.index)  # type: ignore[union-attr]

        async def serve() -> None:
            try:
                await self._loop.connect_accepted_socket(
                    lambda: self.connections(on_lost=end), conn, ssl=self.ssl_context,
                    ssl_handshake_timeout=self.connections.header_timeout)
            except BaseException as exc:  # a failed or late handshake; the listener closing
                end()
                conn.close()
                if not isinstance(exc, (OSError, asyncio.TimeoutError, asyncio.CancelledError)):
                    log.debug("connection not served", extra={"fields": {"error": repr(exc)}})

        task = self._loop.create_task(serve())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def attach(connections: Connections, host: str, port: int, *, ssl_context: Any, index: int,
           sharing: GroupSharing | None, steer: Callable[[socket.socket, int], bool] = steer_by_cpu) -> GroupListener:
    """Process ``index``'s listener: the first steers the group's connections by CPU."""
    sock = listening_socket(host, port)
    if index == 0 and sharing is not None and sharing.counts.count > 1:
        if steer(sock, sharing.counts.count):
            log.info("connections steered by CPU, balanced between processes",
                     extra={"fields": {"processes": sharing.counts.count}})
    return GroupListener(connections, sock, ssl_context=ssl_context, index=index, sharing=sharing)
