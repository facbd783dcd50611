"""Small helpers the testbed runs *inside* host namespaces (``python -m repflow.testbed.agent``).

They exist so that checks and the toy experiment need nothing but Python and the kernel:

* ``ping``  — ICMP echo to many addresses at once (raw socket), prints ``{addr: rtt or null}``;
* ``probe`` — TTL-limited TCP SYN path probes (see :mod:`repflow.testbed.probe`);
* ``sink``  — a flow receiver: per connection, an 8-byte length, that many bytes, then a 1-byte
  acknowledgement; serves until SIGTERM;
* ``flows`` — back-to-back flows to a sink, optionally replicated RepFlow-style (copy *i* goes to
  destination port ``port + i``, first acknowledgement wins), prints one JSON record per flow;
* ``bulk``  — many concurrent flows with chosen source ports (to load chosen five-tuples).

``sink`` and ``flows`` take ``--mptcp``: Multipath TCP sockets (``IPPROTO_MPTCP``), whose
subflows the kernel's path manager adds.

Everything prints JSON on standard output.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
from dataclasses import asdict

from repflow.testbed.probe import probe_path

_CHUNK = 1 << 16
#: Linux's protocol number of Multipath TCP sockets
IPPROTO_MPTCP = 262


def _stream_socket(mptcp: bool = False) -> socket.socket:
    """A TCP socket, or a Multipath TCP one."""
    proto = IPPROTO_MPTCP if mptcp else socket.IPPROTO_TCP
    return socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)


_ZEROS = bytes(_CHUNK)


# ------------------------------------------------------------------------------------ ping
def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def ping(targets: list[str], timeout: float, tries: int = 3) -> dict[str, float | None]:
    """Echo request to each target (re-sent up to ``tries`` times); RTT in seconds or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xFFFF
    sent: dict[str, float] = {}
    rtt: dict[str, float | None] = {t: None for t in targets}
    for attempt in range(tries):
        for seq, t in enumerate(targets):
            if rtt[t] is not None:
                continue
            hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"repflow-testbed"
            hdr = hdr[:2] + struct.pack("!H", _checksum(hdr)) + hdr[4:]
            sent[t] = time.perf_counter()
            s.sendto(hdr, (t, 0))
        deadline = time.perf_counter() + timeout / tries
        while any(v is None for v in rtt.values()):
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                pkt, (addr, _) = s.recvfrom(2048)
            except TimeoutError:
                break
            ihl = (pkt[0] & 0x0F) * 4
            itype, _code, _ck, pid, _seq = struct.unpack("!BBHHH", pkt[ihl : ihl + 8])
            if itype == 0 and pid == ident and addr in rtt and rtt[addr] is None:
                rtt[addr] = time.perf_counter() - sent[addr]
        if all(v is not None for v in rtt.values()):
            break
        del attempt
    return rtt


# ------------------------------------------------------------------------------------ sink
def sink(ports: list[int], bind: str = "0.0.0.0", mptcp: bool = False) -> None:
    """Receives framed flows on ``ports`` until SIGTERM/SIGINT (MPTCP sockets with ``mptcp``)."""
    sel = selectors.DefaultSelector()
    for port in ports:
        ls = _stream_socket(mptcp)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((bind, port))
        ls.listen(1024)
        ls.setblocking(False)
        sel.register(ls, selectors.EVENT_READ, None)
    stop = False

    def on_signal(_sig, _frm):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(json.dumps({"ready": ports}), flush=True)
    buf = bytearray(_CHUNK * 4)
    while not stop:
        for key, _ev in sel.select(0.2):
            if key.data is None:
                with contextlib.suppress(OSError):
                    conn, _ = key.fileobj.accept()
                    conn.setblocking(False)
                    sel.register(conn, selectors.EVENT_READ, {"hdr": b"", "left": None})
                continue
            conn, st = key.fileobj, key.data
            try:
                n = conn.recv_into(buf)
            except BlockingIOError:
                continue
            except OSError:
                n = 0
            if n == 0:
                sel.unregister(conn)
                conn.close()
                continue
            data = memoryview(buf)[:n]
            if st["left"] is None:
                need = 8 - len(st["hdr"])
                st["hdr"] += bytes(data[:need])
                data = data[need:]
                if len(st["hdr"]) < 8:
                    continue
                st["left"] = struct.unpack("!Q", st["hdr"])[0]
            st["left"] -= len(data)
            if st["left"] <= 0 and not st.get("acked"):
                st["acked"] = True
                with contextlib.suppress(OSError):
                    conn.send(b"\x01")


# ----------------------------------------------------------------------------------- flows
class _Copy:
    """One TCP connection carrying one copy of a flow."""

    def __init__(
        self,
        flow: int,
        index: int,
        dst: str,
        port: int,
        size: int,
        src: str,
        sport: int,
        mptcp: bool = False,
    ) -> None:
        self.flow, self.index, self.size = flow, index, size
        self.sock = _stream_socket(mptcp)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if sport or src != "0.0.0.0":
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((src, sport))
        self.sock.setblocking(False)
        err = self.sock.connect_ex((dst, port))
        if err not in (0, errno.EINPROGRESS):
            raise OSError(err, f"connect to {dst}:{port}: {errno.errorcode.get(err, err)}")
        self.pending = memoryview(struct.pack("!Q", size))
        self.left = size
        self.bytes_sent = 0
        self.done = False
        self.closed = False

    def on_writable(self) -> bool:
        """Sends what it can; returns True when everything was handed to the kernel."""
        while True:
            if not len(self.pending):
                if self.left <= 0:
                    return True
                n = min(self.left, _CHUNK)
                self.pending = memoryview(_ZEROS)[:n]
                self.left -= n
            try:
                sent = self.sock.send(self.pending)
            except BlockingIOError:
                return False
            self.bytes_sent += sent
            self.pending = self.pending[sent:]

    def abort(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


def flows(
    dst: str,
    port: int,
    size: int,
    count: int,
    copies: int,
    cancel: bool,
    duration: float | None,
    src: str = "0.0.0.0",
    sports: list[int] | None = None,
    parallel: bool = False,
    mptcp: bool = False,
) -> list[dict]:
    """Back-to-back (or, with ``parallel``, simultaneous) flows; one record per flow (over
    Multipath TCP with ``mptcp``)."""
    sel = selectors.DefaultSelector()
    records: list[dict] = []
    t_origin = time.perf_counter()
    open_copies: dict[int, list[_Copy]] = {}
    starts: dict[int, float] = {}
    next_flow = 0

    def start(fid: int) -> None:
        starts[fid] = time.perf_counter()
        cs = []
        for i in range(copies):
            sport = sports[fid % len(sports)] if sports else 0
            c = _Copy(fid, i, dst, port + i, size, src, sport, mptcp)
            sel.register(c.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, c)
            cs.append(c)
        open_copies[fid] = cs

    def finish_copy(c: _Copy) -> None:
        # the receiver has every byte once it acknowledged: close with RST so no TIME_WAIT
        # blocks reusing this five-tuple in the next flow or run
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(c.sock)
        c.abort()

    if parallel:
        for fid in range(count):
            start(fid)
        next_flow = count
    else:
        start(0)
        next_flow = 1
    while open_copies:
        events = sel.select(1.0)
        now = time.perf_counter()
        for key, ev in events:
            c: _Copy = key.data
            if c.closed:
                continue
            if ev & selectors.EVENT_WRITE:
                try:
                    if c.on_writable():
                        sel.modify(c.sock, selectors.EVENT_READ, c)
                except OSError:
                    ev = selectors.EVENT_READ  # connection failed: treat as finished badly
            if not ev & selectors.EVENT_READ:
                continue
            try:
                got = c.sock.recv(16)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                got = b""
            c.done = bool(got)
            finish_copy(c)
            sibs = open_copies.get(c.flow)
            if sibs is None:
                continue  # a late loser finished
            if not c.done and any(not s.closed for s in sibs):
                continue  # this copy failed; another may still win
            del open_copies[c.flow]
            records.append(
                {
                    "id": c.flow,
                    "start": starts[c.flow] - t_origin,
                    "fct": now - starts[c.flow] if c.done else float("nan"),
                    "winner": c.index if c.done else -1,
                    "copies": copies,
                    "bytes_sent": sum(s.bytes_sent for s in sibs),
                }
            )
            if cancel:
                for s in sibs:
                    if not s.closed:
                        with contextlib.suppress(KeyError, ValueError):
                            sel.unregister(s.sock)
                        s.abort()
            over = duration is not None and now - t_origin >= duration
            if not parallel and next_flow < count and not over:
                start(next_flow)
                next_flow += 1
    for key in list(sel.get_map().values()):
        key.data.abort()
    records.sort(key=lambda r: r["id"])
    return records


# ------------------------------------------------------------------------------------- cli
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m repflow.testbed.agent", allow_abbrev=False)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("ping", allow_abbrev=False)
    a.add_argument("--targets", required=True)
    a.add_argument("--timeout", type=float, default=2.0)
    a = sub.add_parser("probe", allow_abbrev=False)
    a.add_argument("--src", default="0.0.0.0")
    a.add_argument("--dst", required=True)
    a.add_argument("--dport", type=int, required=True)
    a.add_argument("--sports", required=True)
    a.add_argument("--min-ttl", type=int, default=1)
    a.add_argument("--max-ttl", type=int, default=8)
    a = sub.add_parser("sink", allow_abbrev=False)
    a.add_argument("--ports", required=True)
    a.add_argument("--mptcp", action="store_true")
    a = sub.add_parser("flows", allow_abbrev=False)
    a.add_argument("--dst", required=True)
    a.add_argument("--port", type=int, required=True)
    a.add_argument("--size", type=int, required=True)
    a.add_argument("--count", type=int, default=1)
    a.add_argument("--copies", type=int, default=1)
    a.add_argument("--cancel", action="store_true")
    a.add_argument("--duration", type=float)
    a.add_argument("--src", default="0.0.0.0")
    a.add_argument("--sports", default="")
    a.add_argument("--parallel", action="store_true")
    a.add_argument("--mptcp", action="store_true")
    args = p.parse_args(argv)
    if args.cmd == "ping":
        out: object = ping(args.targets.split(","), args.timeout)
    elif args.cmd == "probe":
        out = {
            sp: [
                asdict(h)
                for h in probe_path(
                    args.src, int(sp), args.dst, args.dport, args.max_ttl, min_ttl=args.min_ttl
                )
            ]
            for sp in args.sports.split(",")
        }
    elif args.cmd == "sink":
        sink([int(x) for x in args.ports.split(",")], mptcp=args.mptcp)
        return 0
    else:
        sports = [int(x) for x in args.sports.split(",") if x]
        out = flows(
            args.dst,
            args.port,
            args.size,
            args.count,
            args.copies,
            args.cancel,
            args.duration,
            args.src,
            sports,
            args.parallel,
            args.mptcp,
        )
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
