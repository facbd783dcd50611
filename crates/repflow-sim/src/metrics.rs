//! Per-flow records, run counters and the summary computed from records.

use serde::{Deserialize, Serialize};

/// Flows of at most this many bytes are "short" in every summary (the papers' 100 KB).
pub const SHORT_FLOW_BYTES: u64 = 100_000;
/// Upper edge of the "medium" bin.
pub const MEDIUM_FLOW_BYTES: u64 = 10_000_000;

/// One application flow's outcome. Times are seconds; sizes bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowRecord {
    /// Flow id, in arrival order.
    pub id: u64,
    /// Source host index.
    pub src: u32,
    /// Destination host index.
    pub dst: u32,
    /// Application bytes.
    pub size: u64,
    /// Arrival time.
    pub start: f64,
    /// Completion time (NaN when unfinished).
    pub finish: f64,
    /// `finish − start` (NaN when unfinished).
    pub fct: f64,
    /// FCT of the same flow alone on an idle network along the winning copy's path.
    pub ideal_fct: f64,
    /// `fct / ideal_fct`.
    pub slowdown: f64,
    /// Connections opened for the flow (1 without replication).
    pub copies: u32,
    /// Index of the copy that completed first (−1 when unfinished).
    pub winner: i32,
    /// Bytes the flow's connections put on the wire, both directions (data, SYN and SYN-ACK,
    /// ACKs, retransmissions; headers included).
    pub bytes_sent: u64,
    /// Data segments retransmitted, all copies.
    pub retransmissions: u64,
    /// Retransmission timeouts, all copies (`data_timeouts + syn_timeouts`).
    pub timeouts: u64,
    /// Retransmissions by loss recovery on duplicate ACKs (fast retransmit, and NewReno's or
    /// SACK's further holes), all copies.
    pub fast_retransmits: u64,
    /// Retransmissions after a timeout (the first unacknowledged segment and the go-back-N
    /// resends behind it), all copies.
    pub timeout_retransmits: u64,
    /// Timeouts with data outstanding, all copies.
    pub data_timeouts: u64,
    /// Timeouts of the handshake (SYN or SYN-ACK resent), all copies.
    pub syn_timeouts: u64,
    /// Data segments that reached a receiver that already held them: retransmissions that
    /// were not needed (what DSACK would tell a sender), all copies.
    pub spurious_retransmissions: u64,
    /// MPTCP-L: retransmissions of segments the receiver reported lost by a Packet Sequence
    /// gap ("fast detection"), all subflows (0 for other schemes).
    pub detect_retransmits: u64,
    /// MPTCP-L: retransmissions by the aggressive timer, all subflows (0 for other schemes).
    pub atimer_retransmits: u64,
}

/// The type of one record column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    /// Signed 64-bit integers (ids, host indices, sizes, counts; −1 for "none").
    Int64,
    /// 64-bit floats (times in seconds and ratios; NaN when unfinished).
    Float64,
}

/// One column of per-flow records.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    /// An integer column.
    Int64(Vec<i64>),
    /// A float column.
    Float64(Vec<f64>),
}

impl Column {
    /// The column's type.
    pub fn column_type(&self) -> ColumnType {
        match self {
            Column::Int64(_) => ColumnType::Int64,
            Column::Float64(_) => ColumnType::Float64,
        }
    }
}

/// Per-flow records as named columns, in schema order.
///
/// This is the one definition of the record schema: the Python module hands records across
/// as these columns and reads the schema ([`record_schema`]) from here, and every
/// `flows.parquet` (simulated, testbed or library runs) has these columns and types.
pub fn record_columns(records: &[FlowRecord]) -> Vec<(&'static str, Column)> {
    let int = |f: fn(&FlowRecord) -> i64| Column::Int64(records.iter().map(f).collect());
    let float = |f: fn(&FlowRecord) -> f64| Column::Float64(records.iter().map(f).collect());
    vec![
        ("id", int(|r| r.id as i64)),
        ("src", int(|r| i64::from(r.src))),
        ("dst", int(|r| i64::from(r.dst))),
        ("size", int(|r| r.size as i64)),
        ("start", float(|r| r.start)),
        ("finish", float(|r| r.finish)),
        ("fct", float(|r| r.fct)),
        ("ideal_fct", float(|r| r.ideal_fct)),
        ("slowdown", float(|r| r.slowdown)),
        ("copies", int(|r| i64::from(r.copies))),
        ("winner", int(|r| i64::from(r.winner))),
        ("bytes_sent", int(|r| r.bytes_sent as i64)),
        ("retransmissions", int(|r| r.retransmissions as i64)),
        ("timeouts", int(|r| r.timeouts as i64)),
        ("fast_retransmits", int(|r| r.fast_retransmits as i64)),
        ("timeout_retransmits", int(|r| r.timeout_retransmits as i64)),
        ("data_timeouts", int(|r| r.data_timeouts as i64)),
        ("syn_timeouts", int(|r| r.syn_timeouts as i64)),
        (
            "spurious_retransmissions",
            int(|r| r.spurious_retransmissions as i64),
        ),
        ("detect_retransmits", int(|r| r.detect_retransmits as i64)),
        ("atimer_retransmits", int(|r| r.atimer_retransmits as i64)),
    ]
}

/// Names and types of the record columns ([`record_columns`] of no records).
pub fn record_schema() -> Vec<(&'static str, ColumnType)> {
    record_columns(&[])
        .iter()
        .map(|(name, col)| (*name, col.column_type()))
        .collect()
}

/// Counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Flows that arrived.
    pub flows: u64,
    /// Flows that completed.
    pub flows_finished: u64,
    /// Connections opened (copies included).
    pub connections: u64,
    /// Events processed by the engine.
    pub events: u64,
    /// Packets that crossed one link (data, ACK and control).
    pub packet_hops: u64,
    /// Packets put into a host NIC queue by the end hosts (admitted or not).
    pub packets_injected: u64,
    /// Packets that reached the end host they were addressed to.
    pub packets_delivered: u64,
    /// Packets still on a link or in a queue when the run ended.
    pub packets_in_flight: u64,
    /// Packets dropped at full queues.
    pub drops: u64,
    /// Packets dropped at switch ports.
    pub switch_drops: u64,
    /// Packets dropped at host NIC queues.
    pub host_drops: u64,
    /// Largest queue seen at any switch port, in packets.
    pub max_switch_queue: u64,
    /// Application bytes of all flows.
    pub flow_bytes: u64,
    /// Application bytes of the extra copies (replication overhead numerator).
    pub extra_copy_bytes: u64,
    /// Payload bytes the extra copies actually put on the wire.
    pub extra_copy_bytes_sent: u64,
    /// Simulated time at the end of the run, seconds.
    pub sim_time: f64,
    /// Wall-clock time of the run, seconds.
    pub wall_time: f64,
    /// Events per wall-clock second.
    pub events_per_sec: f64,
    /// Packet-hops per wall-clock second.
    pub packet_hops_per_sec: f64,
    /// Offered load measured from the sampled flows (bytes arrived / capacity × duration).
    pub offered_load: f64,
    /// Flows sent on more than one connection.
    pub replicated_flows: u64,
    /// Replicated flows two of whose copies share a switch-to-switch link (hash collision).
    pub copy_collisions: u64,
    /// HCA: path probes sent (probe-cache misses).
    pub hca_probes: u64,
    /// HCA: port lookups answered by the probe cache.
    pub hca_cache_hits: u64,
    /// HCA: cache hits over lookups (NaN without lookups).
    pub hca_cache_hit_rate: f64,
    /// HCA: total time flows waited for probes, seconds.
    pub hca_wait: f64,
    /// HCA: flows that got fewer copies than planned (too few distinct paths found).
    pub hca_fewer_paths: u64,
}

/// Statistics of one flow-size bin.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BinStats {
    /// Bin label, e.g. `(0, 100KB]`.
    pub bin: String,
    /// Flows in the bin.
    pub count: u64,
    /// Finished flows in the bin (the statistics use only these).
    pub finished: u64,
    /// Mean FCT, seconds.
    pub fct_mean: f64,
    /// Median FCT.
    pub fct_p50: f64,
    /// 99th-percentile FCT.
    pub fct_p99: f64,
    /// 99.9th-percentile FCT.
    pub fct_p999: f64,
    /// Mean slowdown.
    pub slowdown_mean: f64,
    /// Median slowdown.
    pub slowdown_p50: f64,
    /// 99th-percentile slowdown.
    pub slowdown_p99: f64,
    /// 99.9th-percentile slowdown.
    pub slowdown_p999: f64,
}

/// The summary of a run, computed from its records and counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Bins (0, 100KB], (100KB, 10MB], (10MB, ∞) and all.
    pub bins: Vec<BinStats>,
    /// Extra bytes of copies over all flow bytes (application bytes).
    pub overhead: f64,
    /// Flows that did not finish before the drain cap.
    pub unfinished: u64,
}

/// Percentile with linear interpolation between closest ranks (numpy's default).
/// `sorted` must be ascending and non-empty; `q` in [0, 100].
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

impl BinStats {
    /// Statistics of the flows whose FCTs and slowdowns these are (NaN for a flow that did
    /// not finish: counted, left out of the statistics).
    pub fn of(label: &str, fct: &[f64], slowdown: &[f64]) -> BinStats {
        let mut fin: Vec<f64> = fct.iter().copied().filter(|v| v.is_finite()).collect();
        let mut sd: Vec<f64> = slowdown.iter().copied().filter(|v| v.is_finite()).collect();
        fin.sort_by(f64::total_cmp);
        sd.sort_by(f64::total_cmp);
        let mean = |v: &[f64]| {
            if v.is_empty() {
                f64::NAN
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        BinStats {
            bin: label.to_string(),
            count: fct.len() as u64,
            finished: fin.len() as u64,
            fct_mean: mean(&fin),
            fct_p50: percentile(&fin, 50.0),
            fct_p99: percentile(&fin, 99.0),
            fct_p999: percentile(&fin, 99.9),
            slowdown_mean: mean(&sd),
            slowdown_p50: percentile(&sd, 50.0),
            slowdown_p99: percentile(&sd, 99.0),
            slowdown_p999: percentile(&sd, 99.9),
        }
    }
}

impl Counters {
    /// Counters holding only `flow_bytes` and `extra_copy_bytes`, counted from flows' sizes
    /// and copies as the simulator counts them (each extra copy carries the flow's bytes).
    pub fn of_copies(size: &[u64], copies: &[u64]) -> Counters {
        Counters {
            flow_bytes: size.iter().sum(),
            extra_copy_bytes: size
                .iter()
                .zip(copies)
                .map(|(s, c)| s * c.saturating_sub(1))
                .sum(),
            ..Counters::default()
        }
    }
}

impl Summary {
    /// Computes the summary of `records`.
    pub fn from_records(records: &[FlowRecord], counters: &Counters) -> Summary {
        let size: Vec<u64> = records.iter().map(|r| r.size).collect();
        let fct: Vec<f64> = records.iter().map(|r| r.fct).collect();
        let slowdown: Vec<f64> = records.iter().map(|r| r.slowdown).collect();
        Summary::from_columns(&size, &fct, &slowdown, counters)
    }

    /// The summary of flows given as columns (sizes in bytes, FCTs and slowdowns with NaN for
    /// unfinished flows), for records that are not [`FlowRecord`]s (real-network runs). The
    /// overhead is `extra_copy_bytes / flow_bytes` of `counters` (0 without flow bytes).
    pub fn from_columns(
        size: &[u64],
        fct: &[f64],
        slowdown: &[f64],
        counters: &Counters,
    ) -> Summary {
        let bin = |label: &str, keep: &dyn Fn(u64) -> bool| {
            let idx: Vec<usize> = (0..size.len()).filter(|&i| keep(size[i])).collect();
            let f: Vec<f64> = idx.iter().map(|&i| fct[i]).collect();
            let s: Vec<f64> = idx.iter().map(|&i| slowdown[i]).collect();
            BinStats::of(label, &f, &s)
        };
        Summary {
            bins: vec![
                bin("(0, 100KB]", &|s| s <= SHORT_FLOW_BYTES),
                bin("(100KB, 10MB]", &|s| {
                    s > SHORT_FLOW_BYTES && s <= MEDIUM_FLOW_BYTES
                }),
                bin("(10MB, inf)", &|s| s > MEDIUM_FLOW_BYTES),
                BinStats::of("all", fct, slowdown),
            ],
            overhead: if counters.flow_bytes > 0 {
                counters.extra_copy_bytes as f64 / counters.flow_bytes as f64
            } else {
                0.0
            },
            unfinished: fct.iter().filter(|v| !v.is_finite()).count() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_columns_follow_the_schema() {
        let r = FlowRecord {
            id: 7,
            src: 1,
            dst: 2,
            size: 1460,
            start: 0.5,
            finish: f64::NAN,
            fct: f64::NAN,
            ideal_fct: 1e-5,
            slowdown: f64::NAN,
            copies: 2,
            winner: -1,
            bytes_sent: 3000,
            retransmissions: 1,
            timeouts: 0,
            fast_retransmits: 1,
            timeout_retransmits: 0,
            data_timeouts: 0,
            syn_timeouts: 0,
            spurious_retransmissions: 0,
            detect_retransmits: 0,
            atimer_retransmits: 0,
        };
        let cols = record_columns(std::slice::from_ref(&r));
        let schema = record_schema();
        assert_eq!(cols.len(), schema.len());
        for ((name, col), (sname, ty)) in cols.iter().zip(&schema) {
            assert_eq!((name, col.column_type()), (sname, *ty));
        }
        let get = |n: &str| cols.iter().find(|(c, _)| *c == n).map(|(_, c)| c.clone());
        assert_eq!(get("winner"), Some(Column::Int64(vec![-1])));
        assert_eq!(get("size"), Some(Column::Int64(vec![1460])));
        assert!(matches!(get("fct"), Some(Column::Float64(v)) if v[0].is_nan()));
    }

    #[test]
    fn summary_of_columns_bins_by_size_and_counts_unfinished() {
        let nan = f64::NAN;
        let size = [10_000, 50_000, 1_000_000, 20_000, 20_000_000];
        let fct = [0.001, 0.003, 0.5, nan, 2.0];
        let slowdown = [2.0, 3.0, 4.0, nan, 1.5];
        let counters = Counters::of_copies(&size, &[2, 2, 1, 0, 1]);
        assert_eq!(counters.flow_bytes, 21_080_000);
        assert_eq!(counters.extra_copy_bytes, 60_000);
        let s = Summary::from_columns(&size, &fct, &slowdown, &counters);
        let labels: Vec<&str> = s.bins.iter().map(|b| b.bin.as_str()).collect();
        assert_eq!(
            labels,
            ["(0, 100KB]", "(100KB, 10MB]", "(10MB, inf)", "all"]
        );
        let short = &s.bins[0];
        assert_eq!((short.count, short.finished), (3, 2));
        assert_eq!(short.fct_mean, 0.002);
        assert_eq!(short.fct_p50, 0.002);
        assert_eq!(short.slowdown_p99, 2.0 + 0.99);
        assert_eq!(
            (s.bins[1].count, s.bins[2].count, s.bins[3].count),
            (1, 1, 5)
        );
        assert_eq!(s.unfinished, 1);
        assert_eq!(s.overhead, 60_000.0 / 21_080_000.0);
        let none = Summary::from_columns(&[], &[], &[], &Counters::default());
        assert!(none.bins[3].fct_mean.is_nan() && none.overhead == 0.0);
    }

    #[test]
    fn percentile_matches_numpy_linear() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), 2.5);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 100.0), 4.0);
        assert!((percentile(&v, 99.0) - 3.97).abs() < 1e-12);
    }
}
