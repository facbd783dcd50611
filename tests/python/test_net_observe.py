"""`repflow serve` under refused traffic: warnings on stderr (rate-limited), counters in the
periodic --stats line; the server's limits from Python. 127.0.0.1 only, bounded in time."""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import time

import pytest
from repflow.errors import UserError

net = pytest.importorskip("repflow.net")
if not hasattr(__import__("repflow._core", fromlist=["_"]), "NetClient"):
    pytest.skip("repflow._core built without the network library", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int) -> None:
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("repflow serve did not start listening")


def test_serve_logs_refusals_and_prints_stats():
    port = _free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "repflow", "serve", "--listen", f"127.0.0.1:{port}",
         "--ports", "1", "--max-per-source", "3", "--evict-after", "60s", "--stats", "0.5s",
         "--duration", "4s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_listening(port)
        time.sleep(0.2)
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(6)]
        for s in held[:3]:
            s.sendall(b"XX" + b"\0" * 40)  # bad magic: malformed
        time.sleep(1.5)
        for s in held:
            s.close()
        out, err = serve.communicate(timeout=30)
    finally:
        if serve.poll() is None:
            serve.kill()
    assert serve.returncode == 0, err
    assert "rejected frame" in err and "bad magic" in err
    assert "per-source connection share reached" in err
    # Rate-limited per kind: three bad-magic frames within a second give one warning line,
    # then (the kind quiet for a second) one summary line for the two held back.
    garbage = [ln for ln in err.splitlines() if re.search(r'kind="?garbage', ln)]
    assert len(garbage) == 2, err
    assert "2 more refusals" in garbage[1], err
    lines = [ln for ln in out.splitlines() if ln.startswith("repflow serve: ") and "flows" in ln]
    assert len(lines) >= 3  # periodic lines, then the final one
    assert "3 malformed" in lines[-1] and "at the per-source share" in lines[-1]


def test_max_flow_size_default_is_1_mib():
    from repflow import units
    from repflow.cli import net as cli

    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    cli.register(sub)
    args = p.parse_args(["serve", "--listen", "127.0.0.1:1"])
    assert units.parse_size(args.max_flow_size) == 2**20
    assert args.ack_after == "queue"


def test_server_limits_are_configurable_and_counted():
    srv = net.Server(
        "127.0.0.1:0", 1, max_connections=8, max_connections_per_source=2,
        frame_timeout=0.3, write_timeout=1.0, dedup_capacity=16, dedup_ttl=5.0,
        evict_after=60.0,  # refuse past the share rather than evict (the default)
    )  # fmt: skip
    try:
        port = int(srv.addrs[0].rsplit(":", 1)[1])
        conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        # A header announcing 1000 bytes, then nothing: the frame deadline closes it.
        header = (
            b"RF\x02\x00\x00\x01\x00\x00"
            + (5).to_bytes(8, "big")
            + (1000).to_bytes(4, "big")
            + bytes(16)  # timestamp, digest
        )
        conns[0].sendall(header + b"x")
        deadline = time.time() + 5
        while time.time() < deadline:
            c = srv.counters()
            if c["frame_timeouts"] >= 1 and c["connections_rejected_source"] >= 2:
                break
            time.sleep(0.05)
        c = srv.counters()
        assert c["frame_timeouts"] == 1 and c["connections_rejected_source"] == 2
        for s in conns:
            s.close()
    finally:
        srv.close()
    with pytest.raises(UserError, match="write_timeout"):
        net.Server("127.0.0.1:0", 1, write_timeout=0.0)
    with pytest.raises(UserError, match="ack_after"):
        net.Server("127.0.0.1:0", 1, ack_after="later")
