"""One grammar of quantities: every Python front end parses through the Rust core."""

from __future__ import annotations

import pytest
from repflow.errors import UserError

_core = pytest.importorskip("repflow._core")


def test_core_parses_each_kind_in_base_units():
    assert _core.parse_duration("50ms") == 0.05
    assert _core.parse_duration("2min") == 120.0
    assert _core.parse_duration("1.5 us") == pytest.approx(1.5e-6, rel=0, abs=1e-18)
    assert _core.parse_duration("0.25s") == 0.25
    assert _core.parse_rate("10Gb/s") == 10_000_000_000
    assert _core.parse_rate("50Mbit") == 50_000_000
    assert _core.parse_rate("1e9bps") == 1_000_000_000
    assert _core.parse_bytes("64KiB") == 65_536
    assert _core.parse_bytes("20kb") == 20_000
    assert _core.parse_bytes("1460B") == 1460


@pytest.mark.parametrize(
    ("fn", "value", "suggested"),
    [
        ("parse_duration", "10", "10ms"),
        ("parse_duration", 10, "10ms"),
        ("parse_duration", 0.25, "0.25s"),
        ("parse_duration", "0", "0s"),
        ("parse_rate", 1_000_000_000, "1000000000bps"),
        ("parse_rate", "1000", "1000Mbps"),
        ("parse_rate", "10", "10Gbps"),
        ("parse_bytes", 1460, "1460B"),
        ("parse_bytes", "100", "100KB"),
    ],
)
def test_a_bare_number_is_refused_with_a_unit_suggested(fn, value, suggested):
    """Issue 52, item 1: a bare number used to be the base unit, silently (`10` as an RTO was
    ten seconds); the core refuses it and suggests a unit from its magnitude."""
    with pytest.raises(ValueError, match=f"has no unit: give one, e.g. {suggested}$"):
        getattr(_core, fn)(value)


@pytest.mark.parametrize(
    ("fn", "value", "says"),
    [
        ("parse_duration", "2m", "2min"),  # minutes or milliseconds? refused, both offered
        ("parse_duration", "10 parsecs", "accepted: s, ms, us, ns, ps, min"),
        ("parse_duration", "-1ms", "non-negative"),
        ("parse_rate", "1GBps", "bits per second"),
        ("parse_rate", "fast", "is not a rate"),
        ("parse_rate", "0Gbps", "positive"),
        ("parse_bytes", "12 furlongs", "accepted: B, KB"),
        ("parse_bytes", True, "is not a size"),
        ("parse_duration", float("nan"), "is not a duration"),
    ],
)
def test_bad_quantities_name_the_value_and_the_accepted_forms(fn, value, says):
    with pytest.raises(ValueError, match=says) as info:
        getattr(_core, fn)(value)
    assert str(value) in str(info.value)


def test_the_same_text_means_the_same_everywhere():
    from repflow.config_io import validate
    from repflow.model.overlay import parse_size as overlay_size
    from repflow.units import (
        bits_per_second,
        parse_duration,
        parse_rate,
        parse_size,
        seconds,
        size_bytes,
    )

    # "10Gb/s" was accepted by `repflow sim` and refused by the sweep code
    cfg = validate({"topology": {"kind": "star", "hosts": 4, "link_rate": "10Gb/s"}})
    assert cfg["topology"]["link_rate"] == "10Gbps"
    assert bits_per_second("10Gb/s") == parse_rate("10Gb/s") == 1e10
    # "2min" is two minutes to the simulator as to the testbed
    assert validate({"workload": {"drain": "2min"}})["workload"]["drain"] == "120s"
    assert seconds("2min") == parse_duration("2min") == 120.0
    assert size_bytes("64KiB") == parse_size("64KiB") == overlay_size("64KiB", "x") == 65_536


def test_ambiguous_minutes_are_refused_by_every_front_end():
    from repflow.config_io import validate
    from repflow.units import parse_duration, seconds

    with pytest.raises(UserError, match=r"workload.drain.*2min.*2ms"):
        validate({"workload": {"drain": "2m"}})
    with pytest.raises(UserError, match=r"^--duration: .*2min"):
        parse_duration("2m")
    with pytest.raises(ValueError, match="2min"):
        seconds("2m")


def test_wrappers_name_the_flag_and_keep_their_bounds():
    from repflow.model.overlay import parse_size as overlay_size
    from repflow.units import parse_duration, parse_rate

    with pytest.raises(UserError, match=r"^--link-rate: .*below 100 kbit/s"):
        parse_rate("50kbps")
    with pytest.raises(UserError, match=r"^--drain: must be positive"):
        parse_duration("0s", "--drain")
    with pytest.raises(UserError, match=r"^scheme.threshold: '1 parsec'"):
        overlay_size("1 parsec", "scheme.threshold")


def test_sweep_estimate_reads_rates_in_every_spelling():
    from repflow.experiments.sweep import offered_gigabytes

    base = {"topology": {"kind": "star", "hosts": 4, "link_rate": "10Gbps"},
            "workload": {"load": 0.5, "duration": "50ms"}}  # fmt: skip
    other = {**base, "topology": {**base["topology"], "link_rate": "10Gb/s"}}
    assert offered_gigabytes(base) > 0
    assert offered_gigabytes(other) == offered_gigabytes(base)


def test_sweep_estimate_follows_packets_not_bytes():
    from repflow.config_io import validate
    from repflow.experiments.sweep import estimate_seconds

    base = {"topology": {"kind": "fat-tree", "k": 4}, "workload": {"load": 0.5}}
    dc = estimate_seconds(validate(base))
    ns3 = estimate_seconds(validate({**base, "tcp": {"profile": "ns3-2014"}}))
    # 536 + 40 bytes per packet against the calibration's 1,460 + 40: 2.6 times the data
    # packets; delayed ACKs: 1.5 hops per data packet's hop against 2
    assert ns3 / dc == pytest.approx(1500 / 576 * 0.75)
    # higher load: more bytes, and each costs a little more
    busy = estimate_seconds(validate({**base, "workload": {"load": 0.9}}))
    assert 1.8 * 1.05 < busy / dc < 1.8 * 1.15
