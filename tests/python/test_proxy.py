"""``repflow proxy`` with the real Redis: both sidecars through the CLI, real clients.

Runs only where ``redis-server`` and ``redis-cli`` are installed (scripts/test-all.sh installs
them when root); loopback only. Kept under ~20 s.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not (shutil.which("redis-server") and shutil.which("redis-cli")),
    reason="redis-server/redis-cli not installed (apt-get install redis-server redis-tools)",
)


def _free_port(consecutive: int = 1) -> int:
    """``consecutive`` free loopback ports, drawn below Linux's ephemeral range (32768–60999):
    a port the kernel hands out itself can be taken by one of the client sidecar's outgoing
    connections while the server sidecar is down, and its restart then cannot listen."""
    rng = random.Random()
    for _ in range(1000):
        p = rng.randrange(20000, 32000 - consecutive)
        socks: list[socket.socket] = []
        try:
            for i in range(consecutive):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", p + i))
            return p
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise AssertionError("no free loopback port in 20000–32000")


def _wait_port(port: int, proc: subprocess.Popen, limit: float = 20.0) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"process exited: {proc.stderr.read() if proc.stderr else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"port {port} never opened")


def _cmd(*args: str) -> bytes:
    out = f"*{len(args)}\r\n".encode()
    for a in args:
        out += f"${len(a.encode())}\r\n{a}\r\n".encode()
    return out


def _read_replies(s: socket.socket, n: int, timeout: float = 10.0) -> list[bytes]:
    """Reads up to ``n`` simple RESP replies (`+`, `-`, `:`, `$`); fewer if the peer closes."""
    s.settimeout(timeout)
    buf = b""
    out: list[bytes] = []
    while len(out) < n:
        while len(out) < n and b"\r\n" in buf:
            line, rest = buf.split(b"\r\n", 1)
            if line.startswith(b"$") and line != b"$-1":
                size = int(line[1:])
                if len(rest) < size + 2:
                    break
                out.append(rest[:size])
                buf = rest[size + 2 :]
            else:
                out.append(line)
                buf = rest
        if len(out) >= n:
            break
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        buf += chunk
    return out


class Stack:
    """A redis-server and both sidecars on loopback ports."""

    def __init__(self, tmp: Path, copies: int = 2) -> None:
        self.tmp = tmp
        self.copies = copies
        self.redis_port = _free_port()
        self.srv_port = _free_port(2)
        self.cli_port = _free_port()
        self.journal = tmp / "journal"
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(tmp)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        _wait_port(self.redis_port, self.redis)
        self.server: subprocess.Popen | None = None
        self.start_server()
        self.client = self._repflow(
            "proxy", "client", "--listen", f"127.0.0.1:{self.cli_port}",
            "--to", f"127.0.0.1:{self.srv_port}", "--protocol", "redis",
            "--copies", str(copies), "--flow-timeout", "3s",
        )  # fmt: skip
        _wait_port(self.cli_port, self.client)

    def _repflow(self, *argv: str) -> subprocess.Popen:
        env = dict(os.environ, RUST_LOG="warn")
        return subprocess.Popen(
            [sys.executable, "-m", "repflow", *argv],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip

    def start_server(self) -> None:
        self.server = self._repflow(
            "proxy", "server", "--listen", f"127.0.0.1:{self.srv_port}", "--ports", "2",
            "--upstream", f"127.0.0.1:{self.redis_port}", "--protocol", "redis",
            "--journal", str(self.journal),
        )  # fmt: skip
        _wait_port(self.srv_port, self.server)

    def kill_server(self) -> None:
        assert self.server is not None
        self.server.send_signal(signal.SIGKILL)
        self.server.wait()

    def direct(self, *args: str) -> str:
        out = subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), *args],
            capture_output=True, text=True, check=True, timeout=10,
        )  # fmt: skip
        return out.stdout.strip()

    def close(self) -> None:
        for p in (self.client, self.server, self.redis):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in (self.client, self.server, self.redis):
            if p is not None:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    try:
        yield s
    finally:
        s.close()


def test_pipeline_in_order_and_incr_once(stack: Stack) -> None:
    with socket.create_connection(("127.0.0.1", stack.cli_port)) as s:
        pipe = _cmd("SET", "k", "v") + _cmd("GET", "k")
        pipe += b"".join(_cmd("INCR", "c") for _ in range(100)) + _cmd("GET", "c")
        s.sendall(pipe)
        r = _read_replies(s, 103)
    assert r[:2] == [b"+OK", b"v"]
    assert r[2:102] == [f":{i}".encode() for i in range(1, 101)]
    assert r[102] == b"100"
    # redis-cli through the proxy, two copies of each request: INCR executes once.
    out = subprocess.run(["redis-cli", "-p", str(stack.cli_port), "INCR", "n"],
                         capture_output=True, text=True, timeout=10)  # fmt: skip
    assert out.stdout.strip() == "1", out
    assert stack.direct("GET", "n") == "1"
    assert stack.direct("GET", "c") == "100"
    # A connection-state command is refused clearly, the connection goes on.
    with socket.create_connection(("127.0.0.1", stack.cli_port)) as s:
        s.sendall(_cmd("MULTI") + _cmd("PING"))
        r = _read_replies(s, 2)
    assert r[0].startswith(b"-ERR repflow proxy: command 'MULTI'") and r[1] == b"+PONG"


def test_kill_server_sidecar_mid_request(stack: Stack) -> None:
    with socket.create_connection(("127.0.0.1", stack.cli_port)) as s:
        s.sendall(_cmd("INCR", "x"))
        assert _read_replies(s, 1) == [b":1"]
        # INCR then a request that blocks 3 s at Redis: the sidecar dies meanwhile.
        s.sendall(_cmd("INCR", "x") + _cmd("BLPOP", "nothing", "3"))
        time.sleep(0.5)
        stack.kill_server()
        r = _read_replies(s, 2)
    assert len(r) == 2 and all(x.startswith(b"-ERR repflow proxy:") for x in r), r
    assert stack.direct("GET", "x") == "2", "the INCR executed once, never twice"
    # Back after a restart on the same journal.
    stack.start_server()
    with socket.create_connection(("127.0.0.1", stack.cli_port)) as s:
        for _ in range(20):  # the client's pooled connections to the dead sidecar are replaced
            s.sendall(_cmd("INCR", "x"))
            r = _read_replies(s, 1)
            if r and r[0].startswith(b":"):
                break
            s.close()
            time.sleep(0.2)
            s = socket.create_connection(("127.0.0.1", stack.cli_port))
        assert r == [b":3"], r


def test_incr_storm_across_kill_and_restart_never_double_executes(stack: Stack) -> None:
    """Single INCRs on fresh connections while the server sidecar is killed and restarted:
    every reply value distinct, and Redis's counter never above the INCRs sent."""
    sent = 0
    values: list[int] = []
    stop = threading.Event()

    def storm() -> None:
        nonlocal sent
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", stack.cli_port), timeout=5) as s:
                    for _ in range(20):
                        s.sendall(_cmd("INCR", "storm"))
                        sent += 1
                        r = _read_replies(s, 1, timeout=5)
                        if not r or not r[0].startswith(b":"):
                            break
                        values.append(int(r[0][1:]))
            except OSError:
                time.sleep(0.05)

    t = threading.Thread(target=storm)
    t.start()
    time.sleep(1.0)
    stack.kill_server()
    time.sleep(0.3)
    stack.start_server()
    time.sleep(1.5)
    stop.set()
    t.join(timeout=20)
    final = int(stack.direct("GET", "storm"))
    assert len(values) == len(set(values)), "a reply value repeated"
    assert len(values) > 10
    assert len(values) <= final <= sent, (len(values), final, sent)


NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


@contextlib.contextmanager
def _nginx_behind_sidecars(tmp_path: Path, server_conf: str, http_conf: str = "") -> Iterator[int]:
    """A real nginx on loopback (``http_conf`` in its ``http`` block, ``server_conf`` in its
    one ``server``, which listens on loopback with root ``tmp_path/www``), a server sidecar
    with a journal in front of it and a client sidecar with two copies through the CLI.
    Yields the client sidecar's port; everything is stopped after."""
    port, srv_port, cli_port = _free_port(), _free_port(2), _free_port()
    (tmp_path / "www").mkdir(exist_ok=True)
    conf = tmp_path / "nginx.conf"
    # As root nginx's workers switch to `nobody`, who cannot read pytest's private tmp dir.
    user = "user root;\n" if os.geteuid() == 0 else ""
    conf.write_text(
        f"{user}pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\n"
        "worker_processes 1;\nevents { worker_connections 64; }\n"
        f"http {{\n client_body_temp_path {tmp_path};\n{http_conf}"
        f" server {{\n  listen 127.0.0.1:{port};\n  root {tmp_path}/www;\n{server_conf} }}\n}}\n"
    )
    procs: list[subprocess.Popen] = []
    try:
        nginx = subprocess.Popen(
            [NGINX or "nginx", "-c", str(conf), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        procs.append(nginx)
        _wait_port(port, nginx)
        env = dict(os.environ, RUST_LOG="warn")
        server = subprocess.Popen(
            [sys.executable, "-m", "repflow", "proxy", "server", "--listen",
             f"127.0.0.1:{srv_port}", "--ports", "2", "--upstream", f"127.0.0.1:{port}",
             "--protocol", "http", "--journal", str(tmp_path / "journal")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        procs.append(server)
        _wait_port(srv_port, server)
        client = subprocess.Popen(
            [sys.executable, "-m", "repflow", "proxy", "client", "--listen",
             f"127.0.0.1:{cli_port}", "--to", f"127.0.0.1:{srv_port}", "--protocol", "http",
             "--copies", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        procs.append(client)
        _wait_port(cli_port, client)
        yield cli_port
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.mark.skipif(NGINX is None, reason="nginx not installed (apt-get install nginx)")
def test_http_through_the_proxy_to_nginx(tmp_path: Path) -> None:
    """HTTP/1.1 keep-alive, HEAD, POST with a length and a chunked body, through the CLI
    sidecars with two copies, to a real nginx on loopback."""
    import http.client

    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "page.html").write_text("hello from nginx\n")
    nginx_conf = ' access_log off;\n  location /post { return 200 "posted\\n"; }\n'
    with _nginx_behind_sidecars(tmp_path, nginx_conf) as cli_port:
        conn = http.client.HTTPConnection("127.0.0.1", cli_port, timeout=10)
        for _ in range(3):  # one keep-alive connection
            conn.request("GET", "/page.html")
            r = conn.getresponse()
            assert (r.status, r.read()) == (200, b"hello from nginx\n")
        conn.request("HEAD", "/page.html")
        r = conn.getresponse()
        assert r.status == 200 and r.read() == b"" and r.getheader("Content-Length") == "17"
        conn.request("POST", "/post", body=b"x=1")
        r = conn.getresponse()
        assert (r.status, r.read()) == (200, b"posted\n")
        conn.request("POST", "/post", body=iter([b"ab", b"cd"]), encode_chunked=True,
                     headers={"Transfer-Encoding": "chunked"})  # fmt: skip
        r = conn.getresponse()
        assert (r.status, r.read()) == (200, b"posted\n")
        conn.request("GET", "/missing")
        r = conn.getresponse()
        assert r.status == 404
        r.read()
        conn.close()
        # Unparsable input: 400 from the sidecar, connection closed, nothing forwarded.
        with socket.create_connection(("127.0.0.1", cli_port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost : x\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
        assert data.startswith(b"HTTP/1.1 400 Bad Request\r\n"), data


def _read_http_responses(
    s: socket.socket, n: int, timeout: float = 20.0
) -> list[tuple[int, bytes, bytes]]:
    """Reads up to ``n`` HTTP/1.1 responses delimited by ``Content-Length``: (status, head,
    body) each; fewer if the peer closes or ``timeout`` passes."""
    s.settimeout(timeout)
    buf = b""
    out: list[tuple[int, bytes, bytes]] = []
    while len(out) < n:
        while len(out) < n and b"\r\n\r\n" in buf:
            head, rest = buf.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(rest) < length:
                break
            out.append((int(head.split(b" ")[1]), head, rest[:length]))
            buf = rest[length:]
        if len(out) == n:
            break
        try:
            chunk = s.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        buf += chunk
    return out


@pytest.mark.skipif(NGINX is None, reason="nginx not installed (apt-get install nginx)")
def test_nginx_keepalive_limit_answers_every_pipelined_post_once(tmp_path: Path) -> None:
    """Issue 47, finding 5, with the upstream the issue used: nginx with
    ``keepalive_requests 3`` closes every pooled upstream connection after its 3rd response.
    400 POSTs and 100 GETs pipelined on one application connection through the CLI sidecars
    (two copies): each is answered 200 in order, nginx's access log shows each POST exactly
    once, no response carries ``Connection: close``, and the application's connection stays
    open (one more request after). Before issue 47 the application got 996 answers of 10,000
    and a closed connection."""
    log = tmp_path / "access.log"
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "page.html").write_text("page\n")
    http_conf = " log_format line '$connection $request_method $request_uri';\n"
    server_conf = (
        f"  access_log {log} line;\n  keepalive_requests 3;\n"
        '  location /post/ { return 200 "$request_uri"; }\n'
    )
    with _nginx_behind_sidecars(tmp_path, server_conf, http_conf) as cli_port:
        reqs = [("GET", "/page.html") if i % 5 == 4 else ("POST", f"/post/{i}") for i in range(500)]
        data = b"".join(
            f"{m} {p} HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx".encode() for m, p in reqs
        )
        with socket.create_connection(("127.0.0.1", cli_port), timeout=10) as s:
            s.sendall(data)
            got = _read_http_responses(s, len(reqs))
            assert len(got) == len(reqs), f"{len(got)} of {len(reqs)} answered"
            for (method, path), (status, head, body) in zip(reqs, got, strict=True):
                assert status == 200, (method, path, head, body)
                assert b"connection: close" not in head.lower(), head
                assert body == (path.encode() if method == "POST" else b"page\n")
            s.sendall(b"GET /page.html HTTP/1.1\r\nHost: a\r\n\r\n")
            assert [g[0] for g in _read_http_responses(s, 1)] == [200], "connection closed"
    lines = [ln.split(" ", 1) for ln in log.read_text().splitlines()]
    posts = [req for _, req in lines if req.startswith("POST ")]
    assert sorted(posts) == sorted(f"POST {p}" for m, p in reqs if m == "POST")
    # nginx closed a connection every 3 requests: the pool's connections were replaced.
    assert len({conn for conn, _ in lines}) >= len(reqs) // 3


def test_the_server_stats_line_counts_requests_sent_again() -> None:
    from repflow.cli.proxy import _stats_line

    p = {k: 0 for k in ("requests", "calls", "connections", "calls_failed", "outcome_unknown")}
    p |= {"timeouts": 0, "upstream_resent": 3, "refused_memory": 1}
    server = _stats_line("server", {"proxy": p})
    assert server.endswith("0 timeouts, 3 sent again after an upstream close"), server
    assert "1 memory" in server
    assert "sent again" not in _stats_line("client", {"proxy": p})


def _stats_at_usr1(proc: subprocess.Popen, limit: float = 10.0) -> dict:
    """Sends SIGUSR1 to a sidecar and returns the counters it prints. Reads the pipe's bytes
    itself: a text reader's ``readline`` may pull the stats line into its own buffer with the
    line before it, where ``select`` no longer sees it (a CI run failed so)."""
    import json
    import select

    from repflow.cli.proxy import STATS_PREFIX

    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    prefix = STATS_PREFIX.encode()
    proc.send_signal(signal.SIGUSR1)
    buf = b""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.startswith(prefix):
                return json.loads(line[len(prefix):])
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            buf += chunk
    raise AssertionError("no stats line after SIGUSR1")


def test_the_sidecars_time_each_hop_and_the_call_spans_the_servers_hops(stack: Stack) -> None:
    """Per-hop histograms (docs/proxy.md, "Where the time goes"): every call is timed once on
    each side; a call (client side) lasts at least what the server sidecar spent on it; two
    snapshots subtract to the calls between them."""
    from repflow._core import hop_quantile

    def calls(n: int) -> None:
        with socket.create_connection(("127.0.0.1", stack.cli_port)) as s:
            for i in range(n):
                s.sendall(_cmd("SET", f"k{i}", "v"))
                assert _read_replies(s, 1) == [b"+OK"]

    calls(30)
    c0, s0 = _stats_at_usr1(stack.client), _stats_at_usr1(stack.server)
    calls(50)
    c1, s1 = _stats_at_usr1(stack.client), _stats_at_usr1(stack.server)
    assert set(c1["hops"]) == {"client_in", "client_call", "client_out"}
    assert set(s1["hops"]) == {"server_queue", "server_in", "server_upstream"}
    for snap, calls_made in ((c0, 30), (c1, 80)):
        assert {h["count"] for h in snap["hops"].values()} == {calls_made}
    for snap, calls_made in ((s0, 30), (s1, 80)):
        assert {h["count"] for h in snap["hops"].values()} == {calls_made}
    assert c1["proxy"]["calls"] == s1["proxy"]["calls"] == 80

    def between(a: dict, b: dict, name: str) -> tuple[int, int, list[list[int]]]:
        ha, hb = a["hops"][name], b["hops"][name]
        before = dict(map(tuple, ha["buckets"]))
        diff = [[i, c - before.get(i, 0)] for i, c in hb["buckets"] if c > before.get(i, 0)]
        return hb["count"] - ha["count"], hb["sum_ns"] - ha["sum_ns"], diff

    n_call, call_ns, call_buckets = between(c0, c1, "client_call")
    server_ns = sum(between(s0, s1, h)[1] for h in s1["hops"])
    assert n_call == 50 and call_ns >= server_ns > 0
    assert sum(c for _i, c in call_buckets) == 50
    p50 = hop_quantile(call_buckets, 0.5)
    assert p50 is not None and 0 < p50 * 1e3 * 50 <= call_ns * 2
    whole = c1["hops"]["client_call"]
    assert hop_quantile(whole["buckets"], 0.5) == whole["p50_us"]
    assert hop_quantile([], 0.5) is None
    with pytest.raises(ValueError, match="bucket index 5000"):
        hop_quantile([[5000, 1]], 0.5)
