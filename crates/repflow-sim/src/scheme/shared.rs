//! Checks and estimates that several schemes share: parameter ranges, copy counts, the
//! longest round trip of a topology.

use crate::config::error::ConfigError;
use crate::engine::Time;
use crate::network::{Topology, TxClock};

/// Checks that `v` lies in [0, 1] (in (0, 1] when `lo_open`).
pub(crate) fn check_unit(field: &str, v: f64, lo_open: bool) -> Result<(), ConfigError> {
    let ok = v.is_finite() && v <= 1.0 && if lo_open { v > 0.0 } else { v >= 0.0 };
    if ok {
        return Ok(());
    }
    let range = if lo_open {
        "0 < x ≤ 1"
    } else {
        "0 ≤ x ≤ 1"
    };
    Err(ConfigError::new(
        field,
        format!("must be a number with {range}, got {v}"),
    ))
}

/// Checks a replication scheme's copy count.
pub(crate) fn check_copies(copies: u32) -> Result<(), ConfigError> {
    if copies == 0 || copies > 64 {
        return Err(ConfigError::new(
            "scheme.copies",
            format!("must be between 1 and 64, got {copies}"),
        ));
    }
    Ok(())
}

/// Round trip of a full segment and its ACK over the longest host-to-host path, ps, and the
/// rate of host links, b/s.
pub(crate) fn longest_rtt(topo: &Topology, full: u32, header: u32) -> (Time, u64) {
    use crate::network::{FiveTuple, Path};
    let mut rtt = 0;
    for dst in 1..topo.n_hosts as u32 {
        let t = FiveTuple {
            src: 0,
            dst,
            sport: 40000,
            dport: crate::replication::BASE_PORT,
            proto: 6,
        };
        let one_way = |p: Path, bytes: u32| -> Time {
            p.links()
                .iter()
                .map(|&l| {
                    let link = &topo.links[l as usize];
                    TxClock::new(link.rate).tx(bytes) + link.delay
                })
                .sum()
        };
        rtt = rtt.max(one_way(topo.path(t), full) + one_way(topo.path(t.reversed()), header));
    }
    (rtt, topo.links[topo.out_links[0][0] as usize].rate.bps())
}
