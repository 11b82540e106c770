"""``infergate serve --processes``: how many processes ``auto`` means (cgroup quotas as the
kernel lays them out, the pod's CPU request through the Downward API), and a real
``serve --processes 2`` over HTTPS: both processes answer, /readyz and /metrics speak for
the group, SIGTERM drains without a reset, a bad value fails at start."""

from __future__ import annotations

import asyncio
import json
import os
import select
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp
import pytest

from webhook import certs
from webhook.server.processes import CPU_REQUEST_VARIABLE, PROCESS_HEADER, ProcessCountError, process_count
from tests.support.paths import REPO

from .conftest import MODEL, review


# ---------------------------------------------------------------------------------------
# auto


def cgroup_v2(tmp_path: Path, cpu_max: dict[str, str]) -> tuple[Path, Path]:
    """A cgroup v2 hierarchy (``cpu.max`` per directory, as "QUOTA PERIOD" or "max PERIOD")
    and the /proc/self/cgroup naming the innermost one."""
    root = tmp_path / "cgroup"
    for path, text in cpu_max.items():
        (root / path).mkdir(parents=True, exist_ok=True)
        (root / path / "cpu.max").write_text(text + "\n")
    innermost = max(cpu_max, key=len)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(f"0::/{innermost}\n")
    return root, proc


def cgroup_v1(tmp_path: Path, quota: int, period: int = 100000) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    own = root / "cpu,cpuacct" / "kubepods" / "pod1" / "c1"
    own.mkdir(parents=True)
    (own / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (own / "cpu.cfs_period_us").write_text(f"{period}\n")
    (root / "cpu").symlink_to("cpu,cpuacct")  # as systemd mounts it
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text("12:memory:/kubepods/pod1/c1\n4:cpu,cpuacct:/kubepods/pod1/c1\n1:name=systemd:/kubepods/pod1/c1\n")
    return root, proc


def test_auto_is_the_cgroup_v2_quota_rounded_up_the_tightest_ancestor_winning(tmp_path):
    root, proc = cgroup_v2(tmp_path, {"kubepods": "max 100000", "kubepods/pod1": "150000 100000",
                                      "kubepods/pod1/c1": "max 100000"})
    assert process_count("auto", environ={}, cgroup_root=root, proc_cgroup=proc) == 2
    (root / "kubepods" / "cpu.max").write_text("100000 100000\n")
    assert process_count("auto", environ={}, cgroup_root=root, proc_cgroup=proc) == 1
    # the quota wins over the request
    assert process_count("auto", environ={CPU_REQUEST_VARIABLE: "4000"}, cgroup_root=root, proc_cgroup=proc) == 1


def test_auto_is_the_cgroup_v1_quota(tmp_path):
    root, proc = cgroup_v1(tmp_path, quota=300000)
    assert process_count("auto", environ={}, cgroup_root=root, proc_cgroup=proc) == 3


def test_without_a_quota_auto_is_the_pods_cpu_request_rounded_up_else_one_never_the_nodes_cores(tmp_path):
    for root, proc in (cgroup_v1(tmp_path / "v1", quota=-1), cgroup_v2(tmp_path / "v2", {"": "max 100000"})):
        assert process_count("auto", environ={CPU_REQUEST_VARIABLE: "1500"}, cgroup_root=root, proc_cgroup=proc) == 2
        assert process_count("auto", environ={CPU_REQUEST_VARIABLE: "100"}, cgroup_root=root, proc_cgroup=proc) == 1
        # no request (the Downward API gives 0): one process, whatever the node has
        assert process_count("auto", environ={CPU_REQUEST_VARIABLE: "0"}, cgroup_root=root, proc_cgroup=proc) == 1
        assert process_count("auto", environ={}, cgroup_root=root, proc_cgroup=proc) == 1
    assert process_count("auto", environ={}, cgroup_root=tmp_path / "none", proc_cgroup=tmp_path / "none") == 1
    assert process_count("3", environ={CPU_REQUEST_VARIABLE: "1000"}) == 3


def test_a_bad_cpu_request_or_count_is_an_error():
    with pytest.raises(ProcessCountError, match="whole millicores"):
        process_count("auto", environ={CPU_REQUEST_VARIABLE: "1.5"}, proc_cgroup=Path("/nonexistent"))
    for bad in ("0", "-2", "two", "1.5", ""):
        with pytest.raises(ProcessCountError, match="auto or a whole number of at least 1"):
            process_count(bad)


@pytest.mark.parametrize("args,environ", [
    (["--processes", "0"], {}), (["--processes", "many"], {}), ([], {"INFERGATE_PROCESSES": "-1"}),
    ([], {CPU_REQUEST_VARIABLE: "2 CPUs"}),
])
def test_a_bad_processes_value_fails_at_start_with_one_line(tmp_path, args, environ):
    env = dict(os.environ, PYTHONPATH=str(REPO), **environ)
    done = subprocess.run([sys.executable, "-m", "webhook", "serve", "--port", "0", "--cert-dir", str(tmp_path), *args],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("infergate: error: serve: "), done.stderr
    assert "processes" in lines[0] or CPU_REQUEST_VARIABLE in lines[0]
    assert not list(tmp_path.iterdir())  # nothing started: no certificates made


# ---------------------------------------------------------------------------------------
# serve --processes 2


DRAIN = 2.0


class Group:
    def __init__(self, tmp_path: Path, *flags: str):
        self.cert_dir = tmp_path / "certs"
        env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmp_path))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", "0", "--processes", "2",
             "--cert-dir", str(self.cert_dir), "--shutdown-delay", str(DRAIN), "--shutdown-timeout", "10", *flags],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        match = re.search(r"https://127\.0\.0\.1:(\d+)", line)
        assert match, line + self.proc.stderr.read()
        self.port = int(match.group(1))
        self.base = f"https://localhost:{self.port}"
        self.stderr: list[str] = []  # drained: a full pipe would stall the servers' logging
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()
        threading.Thread(target=lambda: self.proc.stdout.read(), daemon=True).start()
        self.ssl = certs.client_context((self.cert_dir / "ca.crt").read_bytes())

    def session(self, *, fresh: bool = True) -> aiohttp.ClientSession:
        """``fresh``: every request on a new connection (so the kernel spreads them)."""
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.ssl, force_close=fresh))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)


@pytest.fixture
def group(tmp_path):
    running = Group(tmp_path)
    yield running
    running.stop()


async def until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := await predicate():
            return result
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {timeout}s: {what}")


async def answered_by(session, url: str) -> tuple[int, int, str]:
    async with session.get(url) as r:
        return r.status, int(r.headers[PROCESS_HEADER]), await r.text()


class KeptConnection:
    """One keep-alive HTTPS connection (http.client), opened on its first request."""

    def __init__(self, group: Group):
        import http.client

        self.http = http.client.HTTPSConnection("localhost", group.port, context=group.ssl, timeout=30)

    def get(self, path: str) -> tuple[int, int, str]:
        """Status, the process that answered, text."""
        self.http.request("GET", path)
        response = self.http.getresponse()
        return response.status, int(response.getheader(PROCESS_HEADER)), response.read().decode()

    def process(self) -> int:
        """Which process serves this connection (it answers ``/readyz?scope=process`` itself)."""
        status, process, _ = self.get("/readyz?scope=process")
        assert status == 200
        return process

    def validate(self, uid: str) -> tuple[int, dict]:
        self.http.request("POST", "/validate", body=json.dumps(review(MODEL, uid=uid)),
                          headers={"Content-Type": "application/json"})
        response = self.http.getresponse()
        return response.status, json.loads(response.read())

    def close(self) -> None:
        self.http.close()


async def test_both_processes_answer_and_speak_for_the_group(group):
    async with group.session() as session:
        async def ready():
            status, _, _ = await answered_by(session, group.base + "/readyz")
            return status == 200
        await until(ready, 60, "the group ready")

    def two_kept() -> dict[int, KeptConnection]:
        """Connections held open are shared by both processes, whatever CPU their SYN met: the
        second goes to the process holding none (see balance), the third if a probe's closing
        connection was still counted."""
        by_process: dict[int, KeptConnection] = {}
        for _ in range(3):
            connection = KeptConnection(group)
            if by_process.setdefault(connection.process(), connection) is not connection:
                connection.close()
            if len(by_process) == 2:
                return by_process
        raise AssertionError(f"three connections held open, all served by process {list(by_process)}")

    kept = await asyncio.to_thread(two_kept)
    try:
        seen = {process: await asyncio.to_thread(connection.get, "/readyz") for process, connection in kept.items()}
        assert all(status == 200 and by == process for process, (status, by, _) in seen.items()), seen
        assert "[+]process-1 ok" in seen[0][2] and "[+]process-0 ok" in seen[1][2]
        assert "readyz check passed" in seen[0][2] and "[+]policies ok" in seen[1][2]

        reviews = 24
        for n in range(reviews):
            status, body = await asyncio.to_thread(kept[n % 2].validate, f"r{n}")
            assert status == 200 and body["response"]["uid"] == f"r{n}"

        def answered(text: str) -> float:
            return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith("infergate_admission_reviews_total{"))

        for process, connection in kept.items():
            status, by, text = await asyncio.to_thread(connection.get, "/metrics?scope=process")
            assert status == 200 and by == process and answered(text) == reviews / 2, text  # its own
            status, by, text = await asyncio.to_thread(connection.get, "/metrics")
            assert status == 200 and by == process and answered(text) == reviews, text  # the group's
            assert "infergate_server_processes_unanswered 0.0" in text
    finally:
        for connection in kept.values():
            connection.close()
    entries = [json.loads(line) for line in group.stderr if line.startswith("{")]
    assert {e.get("process") for e in entries if e["msg"] == "listening"} == {0, 1}  # each line says whose


async def test_sigterm_drains_both_processes_without_a_reset(group):
    async with group.session() as fresh, group.session(fresh=False) as kept:
        async def ready():
            status, _, _ = await answered_by(fresh, group.base + "/readyz")
            return status == 200
        await until(ready, 60, "the group ready")
        async with kept.post(group.base + "/validate", json=review(MODEL, uid="before")) as r:
            assert r.status == 200  # a kept-alive connection, as the apiserver holds

        group.proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()

        async def both_failing():  # the answering process's own check, and its sibling's
            status, process, text = await answered_by(fresh, group.base + "/readyz")
            return (status == 503 and "[-]shutdown failed: shutting down" in text
                    and f"[-]process-{1 - process} failed: shutdown failed: shutting down" in text)
        await until(both_failing, DRAIN * 0.75, "/readyz failing in both processes")

        # until the drain time is over, every review is answered, on new connections and kept ones
        answered = 0
        while time.monotonic() - signalled < DRAIN * 0.9:
            for session in (fresh, kept):
                async with session.post(group.base + "/validate", json=review(MODEL, uid=f"d{answered}")) as r:
                    assert r.status == 200
                    answered += 1
        assert answered >= 4

        async def refused():
            try:
                await answered_by(fresh, group.base + "/readyz")
            except aiohttp.ClientConnectorError:
                return True
        await until(refused, DRAIN + 10, "the listeners closed")
        assert time.monotonic() - signalled >= DRAIN - 0.05  # not before the drain time
    assert group.proc.wait(30) == 0
    logs = "".join(group.stderr)
    assert "Traceback" not in logs and '"level":"error"' not in logs, logs


# ---------------------------------------------------------------------------------------
# connections: steered by the CPU that handled the SYN, balanced between the processes


def pinned(cpu: int, work):
    """``work()`` in a thread pinned to ``cpu``: on loopback the kernel handles a connection's
    SYN on the CPU of the thread that connects."""
    out: dict = {}

    def run():
        os.sched_setaffinity(0, {cpu})  # 0: this thread
        try:
            out["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the pinned client hung"
    if "error" in out:
        raise out["error"]
    return out["value"]


async def ready_group(group: Group) -> None:
    async with group.session() as session:
        async def ready():
            status, _, _ = await answered_by(session, group.base + "/readyz")
            return status == 200
        await until(ready, 60, "the group ready")


def two_cpus() -> list[int]:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("steering by CPU needs two CPUs to tell the processes apart")
    return cpus[:2]


async def test_a_connection_goes_to_the_process_of_the_cpu_that_handled_its_syn(group):
    """Process ``cpu mod 2`` (the order they listened in) takes a connection whose SYN that
    CPU handled, while the two hold as many: a client and its server process share a core."""
    await ready_group(group)
    opened: list[KeptConnection] = []
    try:
        for _ in range(3):  # by the kernel's hash, all six as expected by chance: 1 in 64
            for cpu in two_cpus():
                def connect(cpu=cpu):
                    connection = KeptConnection(group)
                    opened.append(connection)
                    return connection.process()
                assert await asyncio.to_thread(pinned, cpu, connect) == cpu % 2
    finally:
        for connection in opened:
            connection.close()


async def test_connections_all_from_one_cpu_are_shared_by_both_processes(group):
    """Every SYN handled by one CPU (one client thread) would steer every connection to one
    process: the one holding more passes its new connections to the other."""
    await ready_group(group)
    cpu = two_cpus()[0]

    def eight_kept() -> list[KeptConnection]:
        connections = [KeptConnection(group) for _ in range(8)]
        for connection in connections:
            connection.process()
        return connections

    connections = await asyncio.to_thread(pinned, cpu, eight_kept)
    try:
        served = [connection.process() for connection in connections]  # each stays with its process
        assert served == [connection.process() for connection in connections]
        assert served.count(0) >= 3 and served.count(1) >= 3, served  # 4 and 4 unless a probe's lingered
    finally:
        for connection in connections:
            connection.close()


async def test_while_draining_connections_stay_where_they_land_and_none_is_reset(group):
    """During the drain a process keeps what it accepts, however unbalanced (its sibling is
    draining too); kept connections are answered and then closed, nothing is reset."""
    await ready_group(group)
    cpu = two_cpus()[0]
    kept = await asyncio.to_thread(pinned, cpu, lambda: [KeptConnection(group) for _ in range(4)])
    assert sorted(await asyncio.to_thread(lambda: [c.process() for c in kept])) == [0, 0, 1, 1]
    group.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()

    async def draining():
        async with group.session() as session:
            status, _, _ = await answered_by(session, group.base + "/readyz?scope=process")
            return status == 503
    await until(draining, DRAIN * 0.75, "/readyz failing")

    def fresh_ones() -> list[int]:
        processes = []
        for _ in range(4):
            connection = KeptConnection(group)
            connection.http.request("GET", "/readyz?scope=process")
            response = connection.http.getresponse()
            assert "[-]shutdown failed" in response.read().decode()
            assert response.status == 503 and response.getheader("Connection", "").lower() == "close"
            processes.append(int(response.getheader(PROCESS_HEADER)))
            connection.close()
        return processes

    late = await asyncio.to_thread(pinned, cpu, fresh_ones)
    assert time.monotonic() - signalled < DRAIN
    assert set(late) == {cpu % 2}, late  # none passed on

    def answered_then_closed(connection: KeptConnection) -> bool:
        connection.http.request("POST", "/validate", body=json.dumps(review(MODEL, uid="drain")),
                                headers={"Content-Type": "application/json"})
        response = connection.http.getresponse()
        body = json.loads(response.read())
        return (response.status == 200 and body["response"]["uid"] == "drain"
                and response.getheader("Connection", "").lower() == "close")
    assert all(await asyncio.to_thread(lambda: [answered_then_closed(c) for c in kept]))
    assert group.proc.wait(30) == 0
    logs = "".join(group.stderr)
    assert "Traceback" not in logs and '"level":"error"' not in logs, logs


async def test_a_passed_connection_keeps_the_idle_timeout_and_the_header_deadline(tmp_path):
    """Scaled down (idle 4 s, headers 1 s): a connection passed to the sibling is reused after
    2 s idle, and a slowloris on it is cut at the header deadline, as on any connection."""
    import ssl

    idle, headers = 4.0, 1.0
    group = Group(tmp_path, "--idle-timeout", str(idle), "--header-timeout", str(headers))
    try:
        await ready_group(group)

        def passed_one() -> tuple[int, float, float]:
            first = KeptConnection(group)
            steered = first.process()  # the process this CPU's SYNs go to
            try:
                for _ in range(3):  # the second goes to the other unless a probe's closing was still counted
                    raw = group.ssl.wrap_socket(socket.create_connection(("127.0.0.1", group.port), timeout=30),
                                                server_hostname="localhost")
                    status, process = ask(raw, b"GET /readyz?scope=process HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    if process != steered:
                        break  # passed on: from this CPU, only a passed connection reaches the other
                    raw.close()
                else:
                    raise AssertionError("no connection passed to the other process")
                idle_from = time.monotonic()
                raw.settimeout(2 * headers)
                with pytest.raises(TimeoutError):
                    raw.recv(1)  # idle beyond the header deadline: still open
                assert ask(raw, b"GET /readyz?scope=process HTTP/1.1\r\nHost: localhost\r\n\r\n") == (200, process)
                kept_for = time.monotonic() - idle_from
                raw.settimeout(idle + 10)
                raw.sendall(b"GET /readyz HTTP/1.1\r\nHost: loc")  # and no more
                began = time.monotonic()
                try:
                    assert raw.recv(1) == b""
                except (ssl.SSLError, ConnectionResetError):
                    raise AssertionError("reset rather than closed") from None
                return process, kept_for, time.monotonic() - began
            finally:
                first.close()

        process, kept_for, cut_after = await asyncio.to_thread(pinned, two_cpus()[0], passed_one)
        assert kept_for >= 2 * headers
        assert headers - 0.05 <= cut_after < headers + 1, cut_after
    finally:
        group.stop()


def ask(raw, request: bytes) -> tuple[int, int]:
    """A request on a raw TLS socket: the answer's status and the process that answered."""
    import http.client

    raw.sendall(request)
    response = http.client.HTTPResponse(raw)
    response.begin()
    response.read()
    return response.status, int(response.getheader(PROCESS_HEADER))


async def test_a_server_process_that_dies_stops_the_group_with_a_failure(group):
    async with group.session() as session:
        async def ready():
            status, _, _ = await answered_by(session, group.base + "/readyz")
            return status == 200
        await until(ready, 60, "the group ready")
    children = [int(pid) for task in Path(f"/proc/{group.proc.pid}/task").iterdir()
                for pid in (task / "children").read_text().split()]
    assert len(children) == 2
    os.kill(children[1], signal.SIGKILL)
    assert group.proc.wait(DRAIN + 30) == 1  # the other drained and stopped: the kubelet restarts the container
    logs = "".join(group.stderr)
    assert '"msg":"server process exited; stopping the others"' in logs, logs


async def test_only_the_first_process_of_a_group_writes_certificates(tmp_path, capsys):
    """The others serve what it writes: one that finds none stops rather than make its own."""
    from webhook.server import serve
    from webhook.server.processes import ProcessGroup
    from webhook.server.settings import Settings

    from .conftest import ScriptedAdmitter

    settings = Settings(host="127.0.0.1", port=0, cert_dir=tmp_path / "certs")
    second = ProcessGroup(index=1, count=2, socket_dir=tmp_path)
    stopped = asyncio.Event()
    stopped.set()  # were it to serve (certificates of its own), it would stop at once, with 0
    assert await serve(settings, load=lambda s: (ScriptedAdmitter(), {}), group=second, stop_event=stopped,
                       handle_signals=False) == 2
    assert "no certificates to serve" in capsys.readouterr().err
    assert not (tmp_path / "certs").exists() or not list((tmp_path / "certs").iterdir())


def test_a_port_in_use_fails_before_forking_with_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        done = subprocess.run([sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port),
                               "--processes", "2", "--cert-dir", str(tmp_path / "certs")],
                              env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"infergate: error: cannot listen on 127.0.0.1:{port}: address already in use "
                                        "(another process listens there; pick another with --port)"]
    assert not (tmp_path / "certs").exists()  # no server process started


def test_steering_is_attached_to_a_reuseport_group_and_a_refusal_is_one_warning(caplog):
    """The kernel's own answer: a listener sharing its port takes the program; a socket that
    shares nothing is refused (EINVAL), which leaves the hash and says so once."""
    import logging

    from webhook.server.balance import listening_socket, steer_by_cpu

    with listening_socket("127.0.0.1", 0) as shared:
        assert steer_by_cpu(shared, 2)
    with caplog.at_level(logging.WARNING, logger="infergate"), socket.socket() as alone:
        assert not steer_by_cpu(alone, 2)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "connections not steered by CPU: the kernel hashes them over the processes"]


def test_the_steering_program_picks_a_listener_by_the_cpus_place_in_the_allowed_set():
    """In the kernel, on two reuseport listeners (listener i: the i-th to listen): a SYN
    handled by CPU c goes to listener (c's place among the allowed CPUs) mod 2. So a cpuset
    such as {1} or {3, 7} (a pod's exclusive CPUs) still spreads, where ``c mod 2`` would send
    every connection to listener 1. Steering is not chance: one connection per case tells."""
    import socket as sockets

    from webhook.server.balance import listening_socket, steer_by_cpu

    cpu = two_cpus()[1]
    for allowed, expected in (([cpu], 0), (list(range(cpu + 1)), cpu % 2)):
        first = listening_socket("127.0.0.1", 0)
        port = first.getsockname()[1]
        second = listening_socket("127.0.0.1", port)
        try:
            assert steer_by_cpu(first, 2, allowed)
            client = pinned(cpu, lambda: sockets.create_connection(("127.0.0.1", port), timeout=10))
            try:
                ready, _, _ = select.select([first, second], [], [], 10)
                assert [[first, second].index(s) for s in ready] == [expected], (allowed, ready)
            finally:
                client.close()
        finally:
            first.close()
            second.close()
