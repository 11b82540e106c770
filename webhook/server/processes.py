"""``serve --processes N``: N server processes on one port, so a pod uses every core it is given
(one Python process uses one: the GIL).

- How many (:func:`process_count`): ``auto`` is the cgroup's CPU quota (v2 ``cpu.max``, v1
  ``cpu.cfs_quota_us``), else the pod's CPU request given through the Downward API
  (``INFERGATE_CPU_REQUEST_MILLICORES``, which the chart sets), else 1; each rounded up. Never
  the node's core count: every process holds the loaded chain and a view of the cluster, so a
  large node would multiply memory for CPU the pod may not have.
- When (:func:`run`): the chain's CRDs and policies are loaded and compiled once, in the
  supervising process, and its heap frozen; then the servers are forked, sharing that memory
  copy on write. Each starts the chain's threads (policy reloads, its own watches: see
  BENCHMARKS.md, "Every core") and listens on the port with ``SO_REUSEPORT``, in its own
  accept loop (:mod:`webhook.server.balance`): a connection goes to the process of the CPU that
  handled its SYN, and a process holding more connections than a sibling passes new ones on.
- As one server: the first process alone writes certificates (the Secret, the caBundle); the
  others serve and reload what it writes. Every process answers ``/readyz`` for the group and
  ``/metrics`` summed over it, asking its siblings over a Unix socket each (:class:`Siblings`).
  SIGTERM reaches every process through the supervisor; each fails readiness for the drain
  time before its listener closes, so that no connection waits in the accept queue of a
  closed listener (closing one drops its queue).
- Each server's log lines carry ``"process": N``. A server that exits on its own stops the
  group (the others drain), and the supervisor exits non-zero: the kubelet restarts the
  container.
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook import logs
from webhook.server.balance import GroupSharing

log = logs.get("server")

CPU_REQUEST_VARIABLE = "INFERGATE_CPU_REQUEST_MILLICORES"  # the chart: resourceFieldRef requests.cpu, divisor 1m
PROCESS_HEADER = "X-Infergate-Process"  # on /readyz and /metrics: which process answered
SCOPE_PROCESS = "process"  # ?scope=process: one process's own answer, as its siblings ask it


class ProcessCountError(ValueError):
    pass


def parse_processes(value: str | int) -> int | None:
    """``auto`` (None) or a count of at least 1; raises :class:`ProcessCountError`."""
    text = str(value).strip().lower()
    if text == "auto":
        return None
    try:
        count = int(text)
    except ValueError:
        raise ProcessCountError(f"must be auto or a whole number of at least 1, got {value!r}") from None
    if count < 1:
        raise ProcessCountError(f"must be auto or a whole number of at least 1, got {value!r}")
    return count


def process_count(value: str | int, *, environ: Mapping[str, str] = os.environ,
                  cgroup_root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup")) -> int:
    """How many server processes ``--processes value`` means here (see the module's doc)."""
    count = parse_processes(value)
    if count is not None:
        return count
    quota = cgroup_cpu_quota(cgroup_root, proc_cgroup)
    if quota is not None:
        return max(1, math.ceil(quota))
    request = environ.get(CPU_REQUEST_VARIABLE, "").strip()
    if request:
        try:
            millicores = int(request)
        except ValueError:
            raise ProcessCountError(f"{CPU_REQUEST_VARIABLE} must be whole millicores, got {request!r}") from None
        if millicores > 0:
            return math.ceil(millicores / 1000)
    return 1


def cgroup_cpu_quota(root: Path, proc_cgroup: Path) -> float | None:
    """CPUs the cgroup of this process may use (quota ÷ period; the tightest of its cgroup and
    its ancestors under ``root``), or None without a quota. cgroup v2 (``cpu.max``) or v1
    (``cpu/cpu.cfs_quota_us`` and ``cpu.cfs_period_us``)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    v2 = v1 = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "" and line.startswith("0::"):
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    quotas: list[float] = []
    if v1 is not None and (root / "cpu").is_dir():
        base = (root / "cpu").resolve()
        for directory in _ancestors(base, v1):
            quota, period = _read_int(directory / "cpu.cfs_quota_us"), _read_int(directory / "cpu.cfs_period_us")
            if quota is not None and period and quota > 0:
                quotas.append(quota / period)
    elif v2 is not None:
        for directory in _ancestors(root, v2):
            try:
                fields = (directory / "cpu.max").read_text().split()
            except OSError:
                continue
            if len(fields) == 2 and fields[0] != "max":
                quotas.append(int(fields[0]) / int(fields[1]))
    return min(quotas) if quotas else None


def _ancestors(base: Path, path: str) -> Iterable[Path]:
    """``base/path`` and each parent up to ``base`` (a container sees its own cgroup as ``/``)."""
    parts = [p for p in path.split("/") if p]
    for depth in range(len(parts), -1, -1):
        yield base.joinpath(*parts[:depth])


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------
# The group, as one server


@dataclass(frozen=True)
class ProcessGroup:
    """One server process's place in the group."""

    index: int
    count: int
    socket_dir: Path
    sharing: GroupSharing | None = None  # the connection counts and passing sockets (webhook.server.balance)

    def socket(self, index: int) -> Path:
        return self.socket_dir / f"{index}.sock"  # short: a Unix socket path has at most 107 bytes

    @property
    def writes_certificates(self) -> bool:
        return self.index == 0

    @property
    def siblings(self) -> list[int]:
        return [i for i in range(self.count) if i != self.index]


class Siblings:
    """What the other processes of the group answer, asked over their Unix sockets."""

    def __init__(self, group: ProcessGroup, timeout: float = 2.0):
        self.group = group
        self.timeout = timeout

    async def _ask(self, index: int, path: str) -> tuple[int, bytes]:
        import aiohttp

        connector = aiohttp.UnixConnector(path=str(self.group.socket(index)))
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            async with session.get(f"http://process-{index}{path}?scope={SCOPE_PROCESS}") as response:
                return response.status, await response.read()

    async def _ask_all(self, path: str) -> list[tuple[int, tuple[int, bytes] | Exception]]:
        indexes = self.group.siblings
        answers = await asyncio.gather(*(self._ask(i, path) for i in indexes), return_exceptions=True)
        return list(zip(indexes, answers))

    async def readiness(self) -> list[tuple[str, str | None]]:
        """``(process-N, None)`` for each ready sibling, else what it said failed."""
        checks = []
        for index, answer in await self._ask_all("/readyz"):
            name = f"process-{index}"
            if isinstance(answer, BaseException):
                checks.append((name, f"not answering ({type(answer).__name__}: {answer})".replace(": )", ")")))
            elif answer[0] == 200:
                checks.append((name, None))
            else:
                failed = [line[3:] for line in answer[1].decode(errors="replace").splitlines() if line.startswith("[-]")]
                checks.append((name, "; ".join(failed) or f"HTTP {answer[0]}"))
        return checks

    async def metrics(self, own: bytes) -> bytes:
        """The exposition of ``own`` and every sibling's, summed (a sibling not answering is
        left out, and named in ``infergate_server_processes_unanswered``)."""
        texts, missing = [own.decode()], 0
        for _, answer in await self._ask_all("/metrics"):
            if isinstance(answer, BaseException) or answer[0] != 200:
                missing += 1
            else:
                texts.append(answer[1].decode())
        return merge_expositions(texts, unanswered=missing)


def merge_expositions(texts: list[str], *, unanswered: int = 0) -> bytes:
    """Prometheus text expositions of the same metrics summed into one: counters, histograms
    and their sums added; a gauge (the certificates' expiry, the same in every process) and a
    ``_created`` time the earliest of them."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.metrics_core import GaugeMetricFamily, Metric
    from prometheus_client.parser import text_string_to_metric_families
    from prometheus_client.samples import Sample

    families: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            families.setdefault(family.name, Metric(family.name, family.documentation, family.type, family.unit))
            into = values.setdefault(family.name, {})
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                earliest = family.type == "gauge" or sample.name.endswith("_created")
                if key not in into:
                    into[key] = sample.value
                else:
                    into[key] = min(into[key], sample.value) if earliest else into[key] + sample.value
    for name, family in families.items():
        family.samples = [Sample(sample, dict(labels), value) for (sample, labels), value in values[name].items()]

    class Merged:
        def collect(self) -> Iterable[Metric]:
            yield from families.values()
            gauge = GaugeMetricFamily("infergate_server_processes_unanswered",
                                      "Server processes of this pod whose metrics this scrape is missing.")
            gauge.add_metric([], unanswered)
            yield gauge

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Merged())
    return generate_latest(registry)


# ---------------------------------------------------------------------------------------
# The supervisor


def bind_port(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` with ``SO_REUSEPORT`` and not listening: the port the
    servers share (chosen here when ``port`` is 0). A port in use is found before forking,
    even by another server sharing it the same way (another ``serve --processes``): it is
    bound once without ``SO_REUSEPORT`` first."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as alone:
        alone.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        alone.bind(address)
        address = alone.getsockname()
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


Child = Callable[[ProcessGroup, int, Callable[[], None]], int]


def run(count: int, *, probe: socket.socket, child: Child, ready_timeout: float = 120.0) -> int:
    """Fork ``count`` server processes (``child(group, port, listening)`` in each, returning
    its exit code; ``listening()`` once it accepts) on the port ``probe`` holds (see
    :func:`bind_port`), and supervise them until they exit.

    The first process starts alone (it writes the certificates the others read); the others
    once it listens. SIGTERM and SIGINT are passed on to every process."""
    port = probe.getsockname()[1]
    socket_dir = Path(tempfile.mkdtemp(prefix="infergate-"))
    sharing = GroupSharing(count)  # before the fork: every process shares it
    children: dict[int, int] = {}  # pid -> index
    stopping = False

    def pass_on(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            _kill(pid, signum)

    previous = {sig: signal.signal(sig, pass_on) for sig in (signal.SIGTERM, signal.SIGINT)}
    failed = False
    try:
        for index in range(count):
            pid, listening = _fork(ProcessGroup(index, count, socket_dir, sharing), port, child, previous, probe)
            children[pid] = index
            # one at a time: the first writes the certificates the others read
            started = _wait_listening(listening, ready_timeout)
            os.close(listening)
            if stopping:
                break
            if not started:  # it exited (its error logged) or hangs: the group stops
                log.error("server process did not start; stopping the others", extra={"fields": {"process": index}})
                failed = True
                for other in children:
                    _kill(other, signal.SIGTERM)
                break
        else:
            log.info("serving with processes", extra={"fields": {"processes": count, "port": port,
                                                                   "pids": sorted(children)}})
        probe.close()
        sharing.close()  # the processes hold theirs
        worst = _supervise(children, lambda: stopping or failed)
        return max(worst, 1) if failed else worst
    finally:
        probe.close()
        sharing.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(socket_dir, ignore_errors=True)


def _fork(group: ProcessGroup, port: int, child: Child, handlers: dict[int, Any], probe: socket.socket) -> tuple[int, int]:
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the server process: never returns
        code = 1
        try:
            os.close(read_end)
            probe.close()
            if group.sharing is not None:
                group.sharing.keep_for(group.index)
            logs.add_fields({"process": group.index})
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

            def listening() -> None:
                os.write(write_end, b"1")
                os.close(write_end)

            code = child(group, port, listening)
        except BaseException:  # noqa: BLE001 - reported, and the process exits
            log.exception("server process failed", extra={"fields": {"process": group.index}})
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(write_end)
    return pid, read_end


def _wait_listening(read_end: int, timeout: float) -> bool:
    import select

    readable, _, _ = select.select([read_end], [], [], timeout)
    return bool(readable) and os.read(read_end, 1) == b"1"


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _supervise(children: dict[int, int], stopping: Callable[[], bool]) -> int:
    """Wait for every process; the first to exit unasked stops the others. The exit code is
    the worst of theirs (1 when one died of a signal)."""
    worst, stopped = 0, False
    while children:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        index = children.pop(pid, None)
        if index is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        code = code if code >= 0 else 1
        worst = max(worst, code)
        if not (stopping() or stopped):
            stopped = True
            log.error("server process exited; stopping the others",
                      extra={"fields": {"process": index, "pid": pid, "exit_code": code}})
            worst = max(worst, 1)
            for other in children:
                _kill(other, signal.SIGTERM)
    return worst
