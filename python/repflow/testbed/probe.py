"""TTL-limited TCP path probes (the mechanism SmartRep's hash-collision avoidance relies on).

A probe is a TCP SYN with the five-tuple of interest and a small IP TTL. The switch where the
TTL runs out answers with ICMP Time Exceeded; with ``IP_RECVERR`` the kernel queues that error
on the socket together with the offender's address, so no raw socket is needed. Because the
switches hash the five-tuple (addresses, protocol, ports), the SYN takes exactly the path a
real connection with the same ports takes, hop by hop.
"""

from __future__ import annotations

import errno
import select
import socket
import struct
import time
from dataclasses import dataclass

IP_RECVERR = 11  # linux/in.h
SO_EE_ORIGIN_ICMP = 2
ICMP_TIME_EXCEEDED = 11


@dataclass(frozen=True)
class Hop:
    """What one TTL-limited SYN learned."""

    ttl: int
    #: address of the switch that answered, or the destination itself when it was reached
    addr: str | None
    #: "time-exceeded", "reached" (RST/SYN-ACK from the destination) or "timeout"
    kind: str


def probe_hop(src: str, sport: int, dst: str, dport: int, ttl: int, timeout: float = 1.0) -> Hop:
    """Sends one SYN ``src:sport → dst:dport`` with IP TTL ``ttl`` and reports who answered."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
        s.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
        s.bind((src, sport))
        s.setblocking(False)
        err = s.connect_ex((dst, dport))
        if err not in (0, errno.EINPROGRESS):
            raise OSError(err, f"probe connect to {dst}:{dport} failed: {errno.errorcode[err]}")
        poller = select.poll()
        poller.register(s, select.POLLOUT | select.POLLERR)
        if not poller.poll(timeout * 1000):
            return Hop(ttl, None, "timeout")
        try:
            _data, anc, _flags, _addr = s.recvmsg(64, 512, socket.MSG_ERRQUEUE)
        except BlockingIOError:
            anc = []
        for level, ctype, payload in anc:
            if level == socket.IPPROTO_IP and ctype == IP_RECVERR and len(payload) >= 24:
                _eno, origin, itype, _code, _pad, _info, _d = struct.unpack(
                    "=IBBBBII", payload[:16]
                )
                offender = socket.inet_ntoa(payload[20:24])
                if origin == SO_EE_ORIGIN_ICMP and itype == ICMP_TIME_EXCEEDED:
                    return Hop(ttl, offender, "time-exceeded")
                return Hop(ttl, offender, f"icmp-{itype}")
        soerr = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if soerr in (0, errno.ECONNREFUSED):
            return Hop(ttl, dst, "reached")
        return Hop(ttl, None, f"error-{errno.errorcode.get(soerr, soerr)}")
    finally:
        s.close()


def probe_path(
    src: str,
    sport: int,
    dst: str,
    dport: int,
    max_ttl: int = 8,
    timeout: float = 1.0,
    pause: float = 0.0,
    min_ttl: int = 1,
) -> list[Hop]:
    """Probes TTL ``min_ttl``, … until the destination answers (or ``max_ttl``)."""
    hops: list[Hop] = []
    for ttl in range(min_ttl, max_ttl + 1):
        hop = probe_hop(src, sport, dst, dport, ttl, timeout)
        hops.append(hop)
        if hop.kind == "reached":
            break
        if pause:
            time.sleep(pause)
    return hops
