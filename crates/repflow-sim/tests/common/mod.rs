//! Shared by the integration tests: the digest scenarios (every scheme on a small fat-tree)
//! and the digest of a run's records, counters, connections and link statistics.

use repflow_sim::RunOutput;

/// FNV-1a, 64 bits: enough to notice any changed bit (this is not a security property).
pub struct Fnv(u64);

impl Fnv {
    pub fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    pub fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= x as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
}

/// The scenarios: every scheme on a 4-pod fat-tree with web-search flows at load 0.6 (drops,
/// timeouts and replication all occur), plus one run with background flows and delayed ACKs.
pub fn scenarios() -> Vec<(String, String)> {
    let schemes = [
        "tcp",
        "repflow",
        "repflow-hca",
        "smartrep",
        "fullrep",
        "dctcp",
        "repflow-dctcp",
        "pfabric",
        "l2dct",
        "fa-dctcp",
        "mptcp",
        "mptcp-l",
    ];
    let base = |scheme: &str, extra: &str| {
        format!(
            r#"{{"seed": 7,
                "topology": {{"kind": "fat-tree", "k": 4, "link_rate": "1Gbps",
                              "link_delay": "2us"}},
                "queue": {{"limit_packets": 40}},
                "workload": {{"cdf": "websearch", "load": 0.6, "duration": "150ms",
                              "drain": "2s"{extra}}},
                "scheme": {{"name": "{scheme}"}}}}"#
        )
    };
    let mut v: Vec<(String, String)> = schemes
        .iter()
        .map(|s| (s.to_string(), base(s, "")))
        .collect();
    let bg = r#", "background": [{"start": "1ms", "src": 0, "dst": 15, "size": "5MB"},
                                 {"start": "2ms", "src": 4, "dst": 15, "size": "5MB"}]"#;
    let mut delack = base("repflow", bg);
    delack = delack.replace(
        r#""queue": {"limit_packets": 40},"#,
        r#""queue": {"limit_packets": 40}, "tcp": {"delayed_ack": true, "max_window": "none"},"#,
    );
    v.push(("repflow+background+delack".into(), delack));
    // SmartRep's table differs from FullRep's only where more than two disjoint paths exist.
    let k8 = base("smartrep", "")
        .replace(r#""k": 4"#, r#""k": 8"#)
        .replace(r#""duration": "150ms""#, r#""duration": "15ms""#);
    v.push(("smartrep-k8".into(), k8));
    // pFabric with long queues (a 150 KB buffer at load 0.9): the queue's searches over many
    // packets, and many completions decided while packets wait.
    let long = base("pfabric", "")
        .replace(r#""load": 0.6"#, r#""load": 0.9"#)
        .replace(
            r#""name": "pfabric""#,
            r#""name": "pfabric", "buffer": "150KB""#,
        );
    v.push(("pfabric-long-queues".into(), long));
    // DCTCP marking by bytes, and by a packet threshold too large for the port to hold: the
    // marking rule read from the port's boxed state.
    let kbytes = base("dctcp", "").replace(
        r#""queue": {"limit_packets": 40}"#,
        r#""queue": {"limit_packets": 40, "ecn_k_bytes": "15KB"}"#,
    );
    v.push(("dctcp-k-bytes".into(), kbytes));
    let kbig = base("dctcp", "").replace(
        r#""queue": {"limit_packets": 40}"#,
        r#""queue": {"limit_packets": 70000, "ecn_k_packets": 66000}"#,
    );
    v.push(("dctcp-k-large".into(), kbig));
    // The simulators' profiles: their own segments, timers and per-ACK window growth.
    for (name, scheme, profile) in [
        ("tcp@ns3-2014", "tcp", "ns3-2014"),
        ("tcp@ns2", "tcp", "ns2"),
        ("l2dct@ns2", "l2dct", "ns2"),
    ] {
        let s = base(scheme, "").replace(
            r#""queue": {"limit_packets": 40},"#,
            &format!(r#""queue": {{"limit_packets": 40}}, "tcp": {{"profile": "{profile}"}},"#),
        );
        v.push((name.into(), s));
    }
    v
}

/// Scenarios for the sequential engine alone (a partitioned run needs link delays):
/// pFabric on links without delay, whose completions stay events.
#[allow(dead_code)] // not every test file uses every helper
pub fn sequential_scenarios() -> Vec<(String, String)> {
    let (_, pf) = scenarios()
        .into_iter()
        .find(|(n, _)| n == "pfabric")
        .expect("the pfabric scenario");
    vec![(
        "pfabric-zero-delay".into(),
        pf.replace(r#""link_delay": "2us""#, r#""link_delay": "0us""#),
    )]
}

pub fn digest(out: &RunOutput) -> String {
    let mut h = Fnv::new();
    for r in &out.records {
        h.u64(r.id);
        h.u64(r.src as u64);
        h.u64(r.dst as u64);
        h.u64(r.size);
        for x in [r.start, r.finish, r.fct, r.ideal_fct, r.slowdown] {
            h.f64(x);
        }
        h.u64(r.copies as u64);
        h.u64(r.winner as i64 as u64);
        h.u64(r.bytes_sent);
        h.u64(r.retransmissions);
        h.u64(r.timeouts);
    }
    let records = h.0;
    // Counters minus the wall-clock ones.
    let mut c = out.counters.clone();
    c.wall_time = 0.0;
    c.events_per_sec = 0.0;
    c.packet_hops_per_sec = 0.0;
    let mut h = Fnv::new();
    h.bytes(serde_json::to_string(&c).unwrap().as_bytes());
    let counters = h.0;
    let mut h = Fnv::new();
    for cr in &out.connections {
        h.u64(cr.flow);
        h.u64(cr.copy as u64);
        h.u64(cr.tuple.sport as u64);
        h.u64(cr.tuple.dport as u64);
        cr.fwd.iter().chain(&cr.rev).for_each(|&l| h.u64(l as u64));
        h.f64(cr.completed);
        h.u64(cr.wire_bytes);
        h.u64(cr.payload_bytes);
    }
    for (p, s) in out.link_packets.iter().zip(&out.link_stats) {
        h.u64(*p);
        h.u64(s.busy);
        h.f64(s.mean_backlog_bytes);
    }
    let rest = h.0;
    format!(
        "flows={} records={records:016x} counters={counters:016x} conns+links={rest:016x}",
        out.records.len()
    )
}

/// bench-A's network (k = 8 at 10 Gb/s, 1 µs links) with 30-packet queues, 3 ms of web-search
/// arrivals at load 0.6, drained, under `scheme` and TCP profile `profile`: many simultaneous
/// events at synchronized queues, and drops.
#[allow(dead_code)] // not every test file uses every helper
pub fn k8_config(scheme: &str, profile: &str) -> String {
    format!(
        r#"{{"seed": 3, "tcp": {{"profile": "{profile}"}},
            "topology": {{"kind": "fat-tree", "k": 8, "link_rate": "10Gbps",
                          "link_delay": "1us"}},
            "queue": {{"limit_packets": 30}},
            "workload": {{"cdf": "websearch", "load": 0.6, "duration": "3ms"}},
            "scheme": {{"name": "{scheme}"}}}}"#
    )
}
