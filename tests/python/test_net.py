"""The real-socket library from Python: bindings, wire interop, and `repflow serve/send/load`.

All traffic goes to 127.0.0.1; every loop is bounded in count and time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from repflow.api import RECORD_COLUMNS
from repflow.cli import main
from repflow.errors import UserError

net = pytest.importorskip("repflow.net")
if not hasattr(__import__("repflow._core", fromlist=["_"]), "NetClient"):
    pytest.skip("repflow._core built without the network library", allow_module_level=True)


def free_base(n: int) -> int:
    """A port with n free consecutive ports (copies go to port + i)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n >= 65535:
            continue
        socks = []
        try:
            for i in range(n):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError("no free ports")


@pytest.fixture
def server():
    base = free_base(4)
    srv = net.Server(f"127.0.0.1:{base}", 4)
    yield srv, f"127.0.0.1:{base}"
    srv.close()


# ------------------------------------------------------------------------ wire interop
_M64 = 2**64 - 1
VECTOR_TS = 1_700_000_000_000


def digest(p: bytes) -> int:
    """The payload digest, from its specification in docs/protocol.md."""
    h = 0x6A09E667F3BCC908 ^ len(p)
    for i in range(0, len(p), 8):
        w = int.from_bytes(p[i : i + 8].ljust(8, b"\0"), "little")
        h = ((h ^ w) * 0x9E3779B97F4A7C15) & _M64
        h ^= h >> 29
    h ^= h >> 32
    h = (h * 0xD6E8FEB86659FD93) & _M64
    return h ^ (h >> 32)


def frame(
    flags: int, copy: int, copies: int, flow_id: int, payload: bytes, key=None, ts=None
) -> bytes:
    """A frame built from docs/protocol.md alone (timestamp: now unless given)."""
    if key is not None:
        flags |= 0x01
    ts = int(time.time() * 1000) if ts is None else ts
    head = b"RF" + struct.pack(
        ">BBBBHQIQQ", 2, flags, copy, copies, 0, flow_id, len(payload), ts, digest(payload)
    )
    tag = b"" if key is None else hmac.new(key, head + payload, hashlib.sha256).digest()[:16]
    return head + tag + payload


def read_frame(sock: socket.socket, key=None) -> tuple[tuple, bytes]:
    def exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf

    head = exact(36)
    assert head[:2] == b"RF"
    fields = struct.unpack(">BBBBHQIQQ", head[2:])
    tag = exact(16) if fields[1] & 0x01 else b""
    body = exact(fields[6])
    assert fields[8] == digest(body)
    if key is not None:
        assert tag == hmac.new(key, head + body, hashlib.sha256).digest()[:16]
    return fields[:7], body


def test_documented_vectors_match_the_protocol_doc():
    doc = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()
    flat = doc.replace(" ", "").replace("\n", "")
    v1 = frame(0, 0, 2, 0x0123456789ABCDEF, b"hello", ts=VECTOR_TS).hex()
    v2 = frame(0x0C, 1, 2, 42, b"", ts=VECTOR_TS).hex()
    v3 = frame(0x02, 1, 3, 7, b"ping", key=b"repflow-test-key", ts=VECTOR_TS).hex()
    assert v1 in flat and v2 in flat
    assert v3[:72] in flat
    assert v3[72:104] in flat


def test_python_built_frames_interoperate_with_the_server():
    key = b"interop-key"
    base = free_base(2)
    srv = net.Server(f"127.0.0.1:{base}", 2, key=key)
    try:
        # Two copies of one call on two ports: handled once, answered on both connections.
        a = socket.create_connection(("127.0.0.1", base), timeout=5)
        b = socket.create_connection(("127.0.0.1", base + 1), timeout=5)
        a.sendall(frame(0x02, 0, 2, 99, b"question", key=key))
        got = srv.recv(5.0)
        assert got is not None and got.kind == "call" and got.data == b"question"
        b.sendall(frame(0x02, 1, 2, 99, b"question", key=key))
        srv.respond(got, b"answer")
        (ver, flags, copy, copies, _, fid, ln), body = read_frame(a, key)
        assert (flags & 0x04, copy, fid, body) == (0x04, 0, 99, b"answer")
        (_, flags, copy, _, _, fid, _), body = read_frame(b, key)
        assert (copy, fid, body) == (1, 99, b"answer")
        assert srv.recv(0.3) is None, "the duplicate call is not handed to the application"
        # A one-way flow is acknowledged with an empty reply.
        a.sendall(frame(0, 0, 1, 100, b"x" * 1000, key=key))
        (_, flags, _, _, _, fid, ln), _ = read_frame(a, key)
        assert (flags & 0x0C, fid, ln) == (0x04, 100, 0)
        # A frame without a tag closes that connection only.
        a.sendall(frame(0, 0, 1, 101, b"y"))
        assert a.recv(1) == b""
        a.close()
        b.close()
        c = srv.counters()
        assert c["auth_failures"] == 1 and c["calls_delivered"] == 1 and c["duplicates"] == 1
    finally:
        srv.close()


# ---------------------------------------------------------------------------- library
def test_send_reports_add_up(server):
    srv, addr = server
    cli = net.Client("repflow", copies=2)
    reports = [cli.send(addr, size=20_000) for _ in range(50)]
    for r in reports:
        assert r["copies"] == 2 and r["winner"] in (0, 1) and r["fct"] > 0
        assert r["bytes_sent"] - r["bytes_wasted"] == 20_036  # winner: 36 B header + payload
        assert r["cancelled"] + len(r["failed"]) <= 1
    got = []
    while (x := srv.recv(0.2)) is not None:
        got.append(x)
    assert len(got) == 50 and len({g.flow_id for g in got}) == 50
    c = cli.counters()
    assert c["copies_sent"] == 100 and c["flows"] == 50
    assert c["bytes_sent"] == sum(r["bytes_sent"] for r in reports)
    assert c["bytes_wasted"] == sum(r["bytes_wasted"] for r in reports)


def test_calls_pooled_and_asyncio(server):
    import asyncio

    srv, addr = server
    cli = net.Client("repflow", copies=3, mode="pooled")

    async def scenario() -> tuple[bytes, dict]:
        task = asyncio.ensure_future(cli.acall(addr, b"abc"))
        inc = await srv.arecv(5.0)
        assert inc is not None and inc.kind == "call"
        srv.respond(inc, inc.data[::-1])
        return await task

    body, report = asyncio.run(scenario())
    assert body == b"cba" and report["copies"] == 3


def test_unreachable_destination_names_every_copy():
    base = free_base(2)
    cli = net.Client("repflow", copies=2, connect_timeout=1.0)
    with pytest.raises(ConnectionError, match=r"copy 0: .*refused.*copy 1: .*refused"):
        cli.send(f"127.0.0.1:{base}", b"x")


def test_bad_options_are_user_errors():
    with pytest.raises(UserError, match="--scheme"):
        net.Client("bogus")
    with pytest.raises(UserError, match="--mode"):
        net.Client("repflow", mode="udp")
    with pytest.raises(UserError, match="--listen"):
        net.Server("nonsense", 2)


def test_smartrep_table_follows_repnumassign():
    from repflow import _core

    # 1 KB bins; 10 flows of ≤1 KB, 1 of ≤2 KB, Θ = 1 MB, ε = 0.03 (see policy.rs by hand).
    sizes = [1000] * 10 + [2000] + [989_000]
    unit, extra = _core.smartrep_table(sizes, eps=0.03, p=0.1, max_extra=4, unit_bytes=1000)
    assert unit == 1000 and list(extra[:2]) == [2, 4] and not any(extra[2:])


# ------------------------------------------------------------------ schedule & records
def test_sample_sizes_are_the_simulators_draws():
    from repflow import _core

    # Packets: half the mass on 1 packet, the rest uniform over (1, 11] rounded up to a packet.
    cdf = _core.parse_cdf("1 1 0\n1 1 0.5\n11 1 1\n")
    n = 100_000
    sizes = net.sample_sizes(cdf, n, seed=3)
    assert sizes.dtype == np.int64 and len(sizes) == n
    assert np.array_equal(sizes, net.sample_sizes(cdf, n, seed=3))
    assert not np.array_equal(sizes[:50], net.sample_sizes(cdf, 50, seed=4))
    assert (sizes % 1460 == 0).all() and sizes.min() == 1460 and sizes.max() == 11 * 1460
    share = float((sizes == 1460).mean())
    assert abs(share - 0.5) < 4 * np.sqrt(0.25 / n)
    # the sample mean agrees with the CDF's exact mean (4 standard errors)
    for name in ("websearch", "google-rpc"):
        cdf = _core.parse_cdf(_core.workload_text(name))
        s = net.sample_sizes(cdf, n, seed=11).astype(float)
        assert abs(s.mean() - cdf["mean_bytes"]) < 4 * s.std() / np.sqrt(n), name
    with pytest.raises(UserError, match="cdf"):
        net.sample_sizes({"points": [(5.0, 0.5), (1.0, 1.0)], "unit": "bytes"}, 3, seed=1)


def test_schedule_is_the_simulators_arrival_process():
    """A host's schedule equals the arrivals of a simulated incast onto one host: 4 hosts of
    1 Gb/s at load 0.125 offer the same flow bytes per second as one 1 Gb/s link at 0.5."""
    from repflow import _core, simulate

    seed, duration = 17, 0.02
    res = simulate({"seed": seed,
                    "topology": {"kind": "star", "hosts": 4, "link_rate": "1Gbps"},
                    "workload": {"cdf": "google-rpc", "load": 0.125, "duration": "20ms",
                                 "pairs": "incast"}})  # fmt: skip
    cdf = _core.parse_cdf(_core.workload_text("google-rpc"))
    s = net.make_schedule(cdf, load=0.5, link_rate_bps=1e9, duration=duration, peers=3,
                          seed=seed)  # fmt: skip
    f = res.flows
    assert len(f) > 100 and len(s.at) == len(f)
    assert np.array_equal(s.at, f["start"].to_numpy())
    assert np.array_equal(s.size, f["size"].to_numpy())
    assert np.array_equal(s.peer, f["src"].to_numpy() - 1) and (f["dst"] == 0).all()


def test_schedule_is_seeded_and_at_the_requested_load():
    from repflow import _core

    cdf = _core.parse_cdf(_core.workload_text("websearch"))
    kw = dict(load=0.5, link_rate_bps=1e9, duration=20.0, peers=3)
    a = net.make_schedule(cdf, seed=7, **kw)
    b = net.make_schedule(cdf, seed=7, **kw)
    c = net.make_schedule(cdf, seed=8, **kw)
    assert np.array_equal(a.at, b.at) and np.array_equal(a.size, b.size)
    assert not np.array_equal(a.size[:20], c.size[:20])
    assert np.all(np.diff(a.at) >= 0) and a.at[-1] < 20.0 and set(a.peer) <= {0, 1, 2}
    expected = 0.5 * 1e9 / 8 * 20 / cdf["mean_bytes"]
    assert abs(len(a.at) - expected) < 4 * np.sqrt(expected)


# ------------------------------------------------------------------------------- CLI
def test_cli_send_writes_a_run(server, tmp_path, capsys):
    _, addr = server
    out = tmp_path / "run"
    rc = main(["send", "--to", addr, "--size", "10KB", "--count", "30", "--scheme", "repflow",
               "--out", str(out)])  # fmt: skip
    assert rc == 0
    text = capsys.readouterr().out
    assert "FCT mean" in text and "finished 30/30" in text
    df = pd.read_parquet(out / "flows.parquet")
    assert list(df.columns) == list(RECORD_COLUMNS) and len(df) == 30
    assert (df["copies"] == 2).all() and df["fct"].notna().all()
    meta = json.loads((out / "run.json").read_text())
    assert meta["config"]["scheme"]["name"] == "repflow"
    assert meta["counters"]["copies_sent"] == 60


def test_cli_smartrep_on_loopback_falls_back_and_says_so(server, capsys):
    _, addr = server
    assert main(["send", "--to", addr, "--count", "5", "--scheme", "smartrep"]) == 0
    assert "fell back to RepFlow ports" in capsys.readouterr().out


def test_cli_warm_is_for_smartrep_and_falls_back_on_loopback(server, capsys):
    _, addr = server
    assert main(["send", "--to", addr, "--count", "2", "--warm"]) == 2
    assert "--warm" in capsys.readouterr().err
    rc = main(["send", "--to", addr, "--count", "2", "--scheme", "smartrep", "--warm"])
    out = capsys.readouterr().out
    # loopback never decrements the TTL: no path is learnt, flows still go out
    assert rc == 0 and "warm-up: 0 distinct paths known" in out, out


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["load", "--peers", "nothing", "--load", "0.3", "--out", str(tmp_path / "x")]) == 2
    assert "--peers" in capsys.readouterr().err
    rc = main(["load", "--peers", "127.0.0.1:9", "--load", "3", "--out", str(tmp_path / "x")])
    assert rc == 2 and "--load" in capsys.readouterr().err
    rc = main(["load", "--peers", "127.0.0.1:9", "--load", "0.2", "--workload", "nope",
               "--out", str(tmp_path / "x")])  # fmt: skip
    assert rc == 2 and "--workload" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_cli_serve_and_load_end_to_end(tmp_path):
    """`repflow serve` in a subprocess, `repflow load` against it; SIGTERM stops serve."""
    base = free_base(4)
    serve = subprocess.Popen(
        # websearch's long flows (up to 30 MB) are above serve's default --max-flow-size.
        [
            sys.executable,
            "-m",
            "repflow",
            "serve",
            "--listen",
            f"127.0.0.1:{base}",
            "--max-flow-size",
            "64MiB",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", base + 3), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        outs = []
        for scheme in ("tcp", "repflow"):
            out = tmp_path / scheme
            t0 = time.time()
            proc = subprocess.run(
                [sys.executable, "-m", "repflow", "load", "--peers", f"127.0.0.1:{base}",
                 "--workload", "websearch", "--load", "0.3", "--link-rate", "400Mbps",
                 "--duration", "2s", "--drain", "5s", "--scheme", scheme, "--seed", "3",
                 "--out", str(out), "--host-index", "2", "--peer-indices", "7"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            assert time.time() - t0 < 30
            outs.append(pd.read_parquet(out / "flows.parquet"))
        tcp, rep = outs
        # Same seed → same flows (sizes, destinations), whatever the scheme.
        assert tcp["size"].tolist() == rep["size"].tolist() and len(tcp) > 5
        assert (tcp["src"] == 2).all() and (tcp["dst"] == 7).all()
        assert (tcp["copies"] == 1).all()
        short = rep["size"] <= 100_000
        assert (rep.loc[short, "copies"] == 2).all() and (rep.loc[~short, "copies"] == 1).all()
        assert rep["fct"].notna().all()
        meta = json.loads((tmp_path / "repflow" / "run.json").read_text())
        assert meta["config"]["workload"] == {"cdf": "websearch", "load": 0.3}
        assert meta["summary"]["unfinished"] == 0
    finally:
        serve.send_signal(signal.SIGTERM)
        text, _ = serve.communicate(timeout=20)
    assert serve.returncode == 0, text
    assert "flows" in text and "duplicate copies discarded" in text


def test_client_learns_the_smartrep_table(server):
    _, addr = server
    cli = net.Client("repflow", copies=1, auto_table=(0.05, 0.1, 3, 10))
    first = [cli.send(addr, size=1000)["copies"] for _ in range(9)]
    cli.send(addr, size=1_000_000)
    assert first == [1] * 9
    # RepNumAssign over 9 × 1 KB + 1 MB with ε = 0.05 gives the 1 KB bin 3 replicas.
    assert cli.send(addr, size=1000)["copies"] == 4
    with pytest.raises(UserError, match="auto_table"):
        net.Client("repflow", auto_table=(2.0, 0.1, 3, 10))
