"""Issue 47's byte bounds as options: ``repflow serve`` / ``repflow proxy server``'s
``--response-cache-bytes``, ``--response-cache-bytes-per-peer``, ``--response-queue-bytes``,
``repflow proxy client``'s ``--max-buffered``, and the Python keywords of the same names.

Loopback only; each test is bounded in time.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
from repflow.cli import main
from repflow.errors import UserError

net = pytest.importorskip("repflow.net")
if not hasattr(__import__("repflow._core", fromlist=["_"]), "ProxySidecar"):
    pytest.skip("repflow._core built without the proxy", allow_module_level=True)


PROXY_SERVER = (
    "proxy server --listen :1 --upstream 127.0.0.1:9 --protocol redis --no-journal".split()
)
PROXY_CLIENT = "proxy client --listen :1 --to 127.0.0.1:9 --protocol redis".split()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _held_after_one_call(**limits: Any) -> int:
    """Bytes a sink server holds in its response cache after answering one 10 KB call."""
    srv = net.Server("127.0.0.1:0", 1, sink=True, **limits)
    try:
        cli = net.Client("repflow", copies=1, mode="pooled")
        body, _ = cli.call(srv.addrs[0], b"x" * 10_000)
        assert body == b"x" * 10_000
        return int(srv.counters()["response_cache_bytes"])
    finally:
        srv.close()


def test_response_cache_keywords_bound_what_the_server_holds() -> None:
    assert _held_after_one_call() >= 10_000
    assert _held_after_one_call(response_cache_bytes=0) == 0
    # Above the per-address bound: answered, not held.
    assert _held_after_one_call(response_cache_bytes_per_peer=4096) == 0


@pytest.mark.parametrize(
    "keyword", ["response_cache_bytes", "response_cache_bytes_per_peer", "response_queue_bytes"]
)
def test_an_out_of_range_byte_keyword_names_itself(keyword: str) -> None:
    with pytest.raises(UserError, match=f"{keyword}: must be between 0B and 1024GiB"):
        net.Server("127.0.0.1:0", 1, sink=True, **{keyword: 2**41})


def test_max_buffered_bounds_the_client_sidecar() -> None:
    """A 1 KiB budget refuses an 8 KiB SET before any call (the server sidecar is not even
    running); the default budget takes it and the call fails for want of a server sidecar."""
    value = "v" * 8192
    request = f"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${len(value)}\r\n{value}\r\n".encode()
    replies = {}
    for budget in (1024, 256 << 20):
        sidecar = net.proxy_sidecar(
            "client",
            listen="127.0.0.1:0",
            to=f"127.0.0.1:{_free_port()}",
            protocol_name="redis",
            flow_timeout=2.0,
            max_buffered=budget,
        )
        try:
            host, port = sidecar.addrs()[0].rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=10) as s:
                s.sendall(request)
                replies[budget] = s.recv(4096)
        finally:
            sidecar.close()
    assert b"max_buffered" in replies[1024], replies
    assert replies[256 << 20].startswith(b"-ERR") and b"max_buffered" not in replies[256 << 20]
    with pytest.raises(UserError, match="--max-buffered: must be between 1KiB and 1024GiB"):
        net.proxy_sidecar(
            "client", listen="127.0.0.1:0", to="127.0.0.1:9", protocol_name="redis",
            max_buffered=512,
        )  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "flag", "message"),
    [
        (["serve", "--listen", "127.0.0.1:0"], "--response-cache-bytes", "5"),
        (["serve", "--listen", "127.0.0.1:0"], "--response-queue-bytes", "2TB"),
        (PROXY_SERVER, "--response-cache-bytes-per-peer", "2TB"),
        (PROXY_CLIENT, "--max-buffered", "512B"),
    ],
)
def test_cli_byte_limits_are_checked_under_their_flag(
    argv: list[str], flag: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, flag, message]) == 2
    err = capsys.readouterr().err
    assert flag in err and err.count("\n") == 1, err
    if message != "5":
        assert "must be between" in err and "and 1024GiB" in err, err


class _Started(Exception):
    pass


def test_cli_byte_limits_reach_the_bindings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, dict[str, Any]] = {}

    def server(*args: Any, **kw: Any) -> None:
        seen["serve"] = kw
        raise _Started

    def sidecar(side: str, **opts: Any) -> None:
        seen[side] = opts
        raise _Started

    monkeypatch.setattr(net, "Server", server)
    monkeypatch.setattr(net, "proxy_sidecar", sidecar)
    limits = "--response-cache-bytes 1MiB --response-cache-bytes-per-peer 0B".split()
    limits += ["--response-queue-bytes", "3KB"]
    want = {
        "response_cache_bytes": 1 << 20,
        "response_cache_bytes_per_peer": 0,
        "response_queue_bytes": 3000,
    }
    with pytest.raises(_Started):
        main(["serve", "--listen", "127.0.0.1:0", *limits])
    assert want.items() <= seen["serve"].items()
    with pytest.raises(_Started):
        main([*PROXY_SERVER, *limits])
    assert want.items() <= seen["server"].items()
    with pytest.raises(_Started):
        main(PROXY_CLIENT)
    assert seen["client"]["max_buffered"] == 256 << 20
    with pytest.raises(_Started):
        main([*PROXY_CLIENT, "--max-buffered", "2MiB"])
    assert seen["client"]["max_buffered"] == 2 << 20
