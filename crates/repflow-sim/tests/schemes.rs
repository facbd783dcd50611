//! Scenario tests of the reference schemes: DCTCP, RepFlow-DCTCP, pFabric, L²DCT, FA-DCTCP.

use repflow_sim::network::Topology;
use repflow_sim::{run, Config, RunOutput};

fn cfg(json: &str) -> Config {
    Config::from_json(json).unwrap_or_else(|e| panic!("bad test config: {e}"))
}

fn sim(c: &Config) -> RunOutput {
    run(c, &mut |_| true).expect("run")
}

/// Dumbbell: hosts 0 and 1 under leaf 0, hosts 2 and 3 under leaf 1, one spine; 10 Gb/s
/// host links and 1 Gb/s leaf–spine links, so leaf 0's uplink is the bottleneck of 0,1 → 2.
const DUMBBELL: &str = r#"{"kind": "leaf-spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2,
    "link_rate": "10Gbps", "uplink_rate": "1Gbps", "link_delay": "5us"}"#;

fn two_long_flows(scheme: &str) -> (Config, RunOutput) {
    let c = cfg(&format!(
        r#"{{"topology": {DUMBBELL}, "scheme": {{"name": "{scheme}"}},
            "tcp": {{"max_window": "none"}},
            "workload": {{"trace": [
                {{"start": "0s", "src": 0, "dst": 2, "size": "15MB"}},
                {{"start": "0s", "src": 1, "dst": 2, "size": "15MB"}}]}}}}"#
    ));
    let out = sim(&c);
    (c, out)
}

/// Index of the switch port with the largest mean backlog (the bottleneck).
fn bottleneck(out: &RunOutput) -> usize {
    let topo: &Topology = &out.topology;
    (0..topo.links.len())
        .filter(|&l| topo.tier(topo.links[l].from) > 0)
        .max_by(|&a, &b| {
            let m = |l: usize| out.link_stats[l].mean_backlog_bytes;
            m(a).total_cmp(&m(b))
        })
        .expect("a switch port")
}

fn mean_backlog_packets(out: &RunOutput) -> f64 {
    out.link_stats[bottleneck(out)].mean_backlog_bytes / 1500.0
}

/// Fraction of the run (until the last completion) the bottleneck spent transmitting.
fn bottleneck_utilization(out: &RunOutput) -> f64 {
    let end = out.records.iter().map(|r| r.finish).fold(0.0, f64::max);
    out.link_stats[bottleneck(out)].busy as f64 / 1e12 / end
}

#[test]
fn dctcp_keeps_the_queue_near_k_while_tcp_fills_the_buffer() {
    // K defaults to 20 packets at 1 Gb/s (DCTCP paper); the buffer holds 100 packets.
    let (_, d) = two_long_flows("dctcp");
    let q = mean_backlog_packets(&d);
    assert!(
        (15.0..=30.0).contains(&q),
        "DCTCP mean queue {q} packets, K = 20"
    );
    assert!(
        bottleneck_utilization(&d) >= 0.95,
        "{}",
        bottleneck_utilization(&d)
    );
    assert_eq!(d.counters.drops, 0);
    assert!(d.counters.max_switch_queue < 100);
    let (_, t) = two_long_flows("tcp");
    let qt = mean_backlog_packets(&t);
    assert!(qt > 50.0, "TCP mean queue {qt} packets");
    assert_eq!(
        t.counters.max_switch_queue, 100,
        "TCP reaches the buffer limit"
    );
    assert!(t.counters.switch_drops > 0);
    assert!(bottleneck_utilization(&t) >= 0.95);
}

#[test]
fn the_marking_threshold_is_configurable_in_packets_or_bytes_and_delayed_acks_keep_it() {
    for (extra, k) in [
        (
            r#""queue": {"ecn_k_packets": 10}, "tcp": {"max_window": "none"}"#,
            10.0,
        ),
        (
            r#""queue": {"ecn_k_bytes": "60KB"}, "tcp": {"max_window": "none"}"#,
            40.0,
        ),
        (
            r#""queue": {"ecn_k_packets": 10}, "tcp": {"max_window": "none", "delayed_ack": true}"#,
            10.0,
        ),
    ] {
        let c = cfg(&format!(
            r#"{{"topology": {DUMBBELL}, "scheme": {{"name": "dctcp"}}, {extra},
                "workload": {{"trace": [
                    {{"start": "0s", "src": 0, "dst": 2, "size": "10MB"}},
                    {{"start": "0s", "src": 1, "dst": 2, "size": "10MB"}}]}}}}"#
        ));
        let out = sim(&c);
        let q = mean_backlog_packets(&out);
        assert!(
            (0.75 * k..=1.5 * k).contains(&q),
            "{extra}: mean queue {q}, K = {k}"
        );
        assert!(bottleneck_utilization(&out) >= 0.95, "{extra}");
    }
}

fn star(scheme: &str, flows: &str) -> RunOutput {
    sim(&cfg(&format!(
        r#"{{"topology": {{"kind": "star", "hosts": 5, "link_rate": "1Gbps", "link_delay": "2us"}},
            "scheme": {{"name": "{scheme}"}}, "workload": {{"trace": [{flows}]}}}}"#
    )))
}

#[test]
fn pfabric_finishes_flows_shortest_first_near_the_srpt_schedule() {
    // Three senders to one receiver, started together: pFabric serves them one after the
    // other, smallest first, so each finishes about when SRPT would finish it.
    let flows = r#"{"start": "0s", "src": 1, "dst": 0, "size": "300KB"},
                   {"start": "0s", "src": 2, "dst": 0, "size": "1MB"},
                   {"start": "0s", "src": 3, "dst": 0, "size": "100KB"}"#;
    let p = star("pfabric", flows);
    let fct: Vec<f64> = p.records.iter().map(|r| r.fct).collect();
    assert!(fct[2] < fct[0] && fct[0] < fct[1], "{fct:?}");
    // SRPT on the 1 Gb/s bottleneck: 100 KB, then 300 KB, then 1 MB (1500-byte packets).
    let t = |bytes: f64| bytes / 1460.0 * 1500.0 * 8.0 / 1e9;
    let srpt = [t(400e3), t(1400e3), t(100e3)];
    for (f, s) in fct.iter().zip(srpt) {
        assert!(*f < 1.1 * s + 100e-6, "fct {f} vs SRPT {s}");
    }
    // The smallest flow is not slowed at all.
    let small = &p.records[2];
    assert!(small.slowdown < 1.05, "{}", small.slowdown);
    assert_eq!(small.retransmissions, 0);
    // TCP shares the link instead: the small flow waits behind the others' queue.
    let t = star("tcp", flows);
    assert!(t.records[2].slowdown > 2.0, "{}", t.records[2].slowdown);
}

#[test]
fn pfabric_drops_the_lowest_priority_packets_first() {
    // Four 500 KB senders fill the 36 KB port to host 0; a 30 KB flow joins later. The
    // queue overflows all the time, but only the large flows' packets are dropped.
    let flows = r#"{"start": "0s", "src": 1, "dst": 0, "size": "500KB"},
                   {"start": "0s", "src": 2, "dst": 0, "size": "500KB"},
                   {"start": "0s", "src": 3, "dst": 0, "size": "500KB"},
                   {"start": "0s", "src": 4, "dst": 0, "size": "500KB"},
                   {"start": "3ms", "src": 1, "dst": 0, "size": "30KB"}"#;
    let out = star("pfabric", flows);
    assert!(out.counters.switch_drops > 0);
    assert!(
        out.counters.max_switch_queue <= 24 + 1,
        "36 KB = 24 packets waiting"
    );
    let small = &out.records[4];
    assert_eq!(small.retransmissions, 0, "the small flow lost nothing");
    assert!(small.slowdown < 1.5, "{}", small.slowdown);
    assert_eq!(out.summary.unfinished, 0);
    let k = &out.counters;
    assert_eq!(
        k.packets_injected,
        k.packets_delivered + k.drops + k.packets_in_flight
    );
}

fn fat_tree_run(scheme: &str, seed: u64, load: f64, duration: &str) -> RunOutput {
    sim(&cfg(&format!(
        r#"{{"seed": {seed}, "topology": {{"kind": "fat-tree", "k": 4, "link_rate": "1Gbps"}},
            "scheme": {{"name": "{scheme}"}},
            "workload": {{"cdf": "websearch", "load": {load}, "duration": "{duration}"}}}}"#
    )))
}

fn short_mean_slowdown(out: &RunOutput) -> f64 {
    let v: Vec<f64> = out
        .records
        .iter()
        .filter(|r| r.size <= 100_000 && r.fct.is_finite())
        .map(|r| r.slowdown)
        .collect();
    assert!(v.len() > 30, "only {} short flows", v.len());
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn pfabric_short_flows_are_close_to_ideal_at_load_half() {
    let p = short_mean_slowdown(&fat_tree_run("pfabric", 4, 0.5, "200ms"));
    let t = short_mean_slowdown(&fat_tree_run("tcp", 4, 0.5, "200ms"));
    assert!(p < 1.5, "pFabric short-flow mean slowdown {p}");
    assert!(p < 0.7 * t, "pFabric {p} vs TCP {t}");
}

fn bits(out: &RunOutput) -> Vec<[u64; 8]> {
    out.records
        .iter()
        .map(|r| {
            [
                r.id,
                r.size,
                r.finish.to_bits(),
                r.ideal_fct.to_bits(),
                r.winner as u64,
                r.bytes_sent,
                r.retransmissions,
                r.timeouts,
            ]
        })
        .collect()
}

#[test]
fn every_new_scheme_keeps_the_core_invariants() {
    for scheme in ["dctcp", "repflow-dctcp", "pfabric", "l2dct", "fa-dctcp"] {
        let out = fat_tree_run(scheme, 7, 0.6, "40ms");
        let k = &out.counters;
        assert_eq!(out.summary.unfinished, 0, "{scheme}");
        assert_eq!(
            k.packets_injected,
            k.packets_delivered + k.drops + k.packets_in_flight,
            "{scheme}: packet conservation"
        );
        assert_eq!(k.drops, k.switch_drops + k.host_drops);
        assert_eq!(
            k.flows_finished,
            out.records.iter().filter(|r| r.fct.is_finite()).count() as u64
        );
        for r in &out.records {
            // Every copy's payload went out at least once, with a header per packet.
            let segs = r.size.div_ceil(1460);
            assert!(
                r.bytes_sent >= r.size + 40 * segs,
                "{scheme}: flow {}",
                r.id
            );
            assert!(
                r.fct >= r.ideal_fct * (1.0 - 1e-12),
                "{scheme}: faster than ideal"
            );
        }
        // Each connection completes at most once and its flow finishes at the first.
        for r in &out.records {
            let first = out
                .connections
                .iter()
                .filter(|c| c.flow == r.id && c.completed.is_finite())
                .map(|c| c.completed)
                .fold(f64::INFINITY, f64::min);
            assert_eq!(r.finish.to_bits(), first.to_bits(), "{scheme}");
        }
        let again = fat_tree_run(scheme, 7, 0.6, "40ms");
        assert_eq!(bits(&out), bits(&again), "{scheme}: determinism");
        assert_eq!(out.counters.events, again.counters.events);
    }
}

#[test]
fn repflow_dctcp_replicates_like_repflow_and_keeps_queues_short() {
    let rd = fat_tree_run("repflow-dctcp", 3, 0.6, "60ms");
    let r = fat_tree_run("repflow", 3, 0.6, "60ms");
    // Same arrivals, same replication decisions and ports: the plans are identical.
    let plan = |o: &RunOutput| -> Vec<(u64, u32, u16, u16)> {
        o.connections
            .iter()
            .map(|c| (c.flow, c.copy, c.tuple.sport, c.tuple.dport))
            .collect()
    };
    assert_eq!(plan(&rd), plan(&r));
    for f in &rd.records {
        assert_eq!(f.copies, if f.size <= 100_000 { 2 } else { 1 });
    }
    assert!(rd.summary.overhead > 0.0);
    assert_eq!(rd.summary.overhead, r.summary.overhead);
    // ECN keeps the switch queues well below the DropTail limit RepFlow-over-TCP reaches.
    assert!(
        rd.counters.max_switch_queue < r.counters.max_switch_queue,
        "{} vs {}",
        rd.counters.max_switch_queue,
        r.counters.max_switch_queue
    );
    assert_eq!(rd.counters.switch_drops, 0);
}

fn short_mean_fct(out: &RunOutput, max: u64) -> f64 {
    let v: Vec<f64> = out
        .records
        .iter()
        .filter(|r| r.size <= max)
        .map(|r| r.fct)
        .collect();
    assert!(v.iter().all(|f| f.is_finite()));
    v.iter().sum::<f64>() / v.len() as f64
}

fn long_goodput(out: &RunOutput, min: u64) -> f64 {
    let v: Vec<f64> = out
        .records
        .iter()
        .filter(|r| r.size >= min)
        .map(|r| r.size as f64 * 8.0 / r.fct)
        .collect();
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn fa_dctcp_scenario_short_flows_finish_sooner_than_with_dctcp() {
    // experiments/fa-dctcp.toml, 250 KB short flows, one seed.
    let run = |scheme: &str| {
        sim(&cfg(&format!(
            r#"{{"seed": 1, "topology": {{"kind": "star", "hosts": 11, "link_rate": "100Mbps",
                   "link_delay": "225us"}},
                "queue": {{"limit_bytes": "4MB", "ecn_k_packets": 5}},
                "tcp": {{"init_cwnd": 10, "max_window": "none"}},
                "scheme": {{"name": "{scheme}"}},
                "workload": {{"cdf": "short", "cdf_text": "250000 0\n250000 1", "load": 0.02,
                   "pairs": "incast", "duration": "12s", "drain": "30s", "max_flows": 32,
                   "background": [{{"start": "0s", "src": 1, "dst": 0, "size": "80MB"}},
                                  {{"start": "0s", "src": 2, "dst": 0, "size": "80MB"}}]}}}}"#
        )))
    };
    let (d, f) = (run("dctcp"), run("fa-dctcp"));
    let (sd, sf) = (short_mean_fct(&d, 1_000_000), short_mean_fct(&f, 1_000_000));
    assert!(sf < 0.9 * sd, "FA-DCTCP {sf} vs DCTCP {sd}");
    let (ld, lf) = (long_goodput(&d, 10_000_000), long_goodput(&f, 10_000_000));
    assert!(
        (lf / ld - 1.0).abs() < 0.1,
        "long-flow goodput {lf} vs {ld}"
    );
}

#[test]
fn l2dct_scenario_queries_finish_sooner_than_with_dctcp_and_tcp() {
    // experiments/l2dct.toml at 10 % query load, one seed.
    let run = |scheme: &str| {
        sim(&cfg(&format!(
            r#"{{"seed": 1, "topology": {{"kind": "star", "hosts": 10, "link_rate": "1Gbps",
                   "link_delay": "72us"}},
                "queue": {{"limit_bytes": "250KB"}},
                "tcp": {{"init_cwnd": 12, "max_window": "none"}},
                "scheme": {{"name": "{scheme}"}},
                "workload": {{"cdf": "q", "cdf_text": "2000 0\n98000 1", "load": 0.01,
                   "pairs": "incast", "duration": "300ms", "drain": "2s",
                   "background": [{{"start": "0s", "src": 1, "dst": 0, "size": "20MB"}},
                                  {{"start": "0s", "src": 2, "dst": 0, "size": "20MB"}}]}}}}"#
        )))
    };
    let (t, d, l) = (run("tcp"), run("dctcp"), run("l2dct"));
    let (st, sd, sl) = (
        short_mean_fct(&t, 100_000),
        short_mean_fct(&d, 100_000),
        short_mean_fct(&l, 100_000),
    );
    assert!(sl < 0.8 * sd, "L²DCT {sl} vs DCTCP {sd}");
    assert!(sd < 0.5 * st, "DCTCP {sd} vs TCP {st}");
}
