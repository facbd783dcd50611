//! Scenario tests with answers known in closed form or by construction.

use repflow_sim::network::{FiveTuple, Topology};
use repflow_sim::{run, Config, RunOutput};
use std::collections::HashSet;

fn cfg(json: &str) -> Config {
    Config::from_json(json).unwrap_or_else(|e| panic!("bad test config: {e}"))
}

fn sim(c: &Config) -> RunOutput {
    run(c, &mut |_| true).expect("run")
}

fn one_flow(topology: &str, src: u32, dst: u32, size: u64, extra: &str) -> Config {
    cfg(&format!(
        r#"{{"topology": {topology}, "scheme": {{"name": "tcp"}},
            "workload": {{"trace": [{{"start": "0s", "src": {src}, "dst": {dst}, "size": "{size}B"}}]}}
            {extra}}}"#
    ))
}

const FAT4: &str = r#"{"kind": "fat-tree", "k": 4, "link_rate": "1Gbps", "link_delay": "2us"}"#;
const LEAF: &str = r#"{"kind": "leaf-spine", "leaves": 3, "spines": 2, "hosts_per_leaf": 2,
                       "link_rate": "1Gbps", "uplink_rate": "10Gbps", "link_delay": "1us"}"#;
const LEAF_SLOW_CORE: &str = r#"{"kind": "leaf-spine", "leaves": 2, "spines": 2,
    "hosts_per_leaf": 2, "link_rate": "10Gbps", "uplink_rate": "1Gbps", "link_delay": "1us"}"#;
const TOY: &str = r#"{"kind": "toy", "link_rate": "50Mbps", "link_delay": "1ms"}"#;
const STAR: &str = r#"{"kind": "star", "hosts": 4, "link_rate": "10Gbps", "link_delay": "500ns"}"#;

#[test]
fn a_flow_alone_finishes_exactly_at_its_ideal_fct() {
    // Several sizes (one byte, one segment, the initial window, beyond it, a large flow) on
    // paths of 2, 4 and 6 links, four topologies, with and without handshake / delayed ACKs.
    let cases: &[(&str, u32, u32)] = &[
        (FAT4, 0, 1),  // same edge: 2 links
        (FAT4, 0, 3),  // same pod: 4 links
        (FAT4, 0, 15), // other pod: 6 links
        (LEAF, 0, 5),
        (LEAF_SLOW_CORE, 0, 3), // the NIC is not the bottleneck
        (TOY, 0, 2),
        (STAR, 1, 3),
    ];
    let extras = [
        "",
        r#", "tcp": {"handshake": false}"#,
        r#", "tcp": {"delayed_ack": true, "delayed_ack_timeout": "40us"}"#,
        r#", "tcp": {"max_window": "none", "init_cwnd": 4}"#,
    ];
    for &(topo, src, dst) in cases {
        for size in [1u64, 1460, 17_520, 100_000, 2_000_000, 20_000_001] {
            for extra in extras {
                let out = sim(&one_flow(topo, src, dst, size, extra));
                let r = &out.records[0];
                assert!(r.fct.is_finite(), "unfinished: {topo} {size} {extra}");
                if r.retransmissions + r.timeouts > 0 {
                    // Only an unbounded window into a slower link can overflow a buffer with
                    // no other traffic; the ideal (lossless) FCT is then a strict lower bound.
                    assert!(
                        topo == LEAF_SLOW_CORE && extra.contains("none"),
                        "{topo} {extra}"
                    );
                    assert!(r.fct > r.ideal_fct);
                    continue;
                }
                assert_eq!(
                    r.fct.to_bits(),
                    r.ideal_fct.to_bits(),
                    "{topo} {src}->{dst} size {size} {extra}: fct {} ideal {}",
                    r.fct,
                    r.ideal_fct
                );
                assert_eq!(r.slowdown, 1.0);
            }
        }
    }
}

#[test]
fn one_packet_fct_matches_closed_form() {
    // Star, 10 Gb/s, 500 ns links: SYN (40 B) and SYN-ACK (40 B) cross 2 links each, then the
    // 1000 B payload + 40 B header crosses 2 links.
    let out = sim(&one_flow(STAR, 0, 1, 1000, ""));
    let per_hop = |bytes: f64| bytes * 8.0 / 10e9 + 500e-9;
    let expected = 4.0 * per_hop(40.0) + 2.0 * per_hop(1040.0);
    assert!(
        (out.records[0].fct - expected).abs() < 1e-15,
        "{}",
        out.records[0].fct
    );
}

#[test]
fn packets_stay_on_the_path_their_five_tuple_hashes_to() {
    for seed in 1..6u64 {
        let c = cfg(&format!(
            r#"{{"seed": {seed}, "topology": {FAT4}, "scheme": {{"name": "tcp"}},
                "workload": {{"trace": [{{"start": "0s", "src": 0, "dst": 13, "size": "300000B"}}]}}}}"#
        ));
        let out = sim(&c);
        let conn = &out.connections[0];
        // Recompute the paths independently from the five-tuple.
        let topo = Topology::build(&c.topology, c.routing.hash, c.seed);
        assert_eq!(topo.path(conn.tuple).links(), &conn.fwd[..]);
        assert_eq!(topo.path(conn.tuple.reversed()).links(), &conn.rev[..]);
        let used: HashSet<u32> = out
            .link_packets
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, _)| i as u32)
            .collect();
        let expected: HashSet<u32> = conn.fwd.iter().chain(&conn.rev).copied().collect();
        assert_eq!(used, expected, "seed {seed}");
    }
}

#[test]
fn ecmp_spreads_flows_evenly_over_uplinks_for_every_hash() {
    let mut rng = repflow_sim::engine::Rng::new(3, 3);
    for hash in ["default", "crc32", "crc16"] {
        let c = cfg(&format!(
            r#"{{"topology": {{"kind": "fat-tree", "k": 8}}, "routing": {{"hash": "{hash}"}}}}"#
        ));
        let topo = Topology::build(&c.topology, c.routing.hash, 7);
        // Flows from host 0 to every host of other pods, many source ports.
        let mut edge_up = [0u64; 4];
        let mut agg_up = [0u64; 4];
        let n_hosts = topo.n_hosts as u32;
        let mut n = 0u64;
        for dst in 16..n_hosts {
            for _ in 0..100 {
                // Ephemeral source ports are random, as a real stack draws them.
                let t = FiveTuple {
                    src: 0,
                    dst,
                    sport: repflow_sim::replication::ephemeral_port(&mut rng),
                    dport: 5000,
                    proto: 6,
                };
                let p = topo.path(t);
                let l = p.links();
                // Index of the uplink within the switch's group (ports are built in order).
                let e = topo.links[l[1] as usize].to as usize;
                let a = topo.links[l[2] as usize].to as usize;
                edge_up[e % 4] += 1;
                agg_up[a % 4] += 1;
                n += 1;
            }
        }
        for counts in [edge_up, agg_up] {
            let exp = n as f64 / 4.0;
            let chi2: f64 = counts.iter().map(|&o| (o as f64 - exp).powi(2) / exp).sum();
            // 3 degrees of freedom, p = 0.001.
            assert!(chi2 < 16.27, "{hash}: {counts:?} chi2 {chi2}");
        }
    }
}

#[test]
fn two_long_flows_share_a_bottleneck_fairly_and_keep_it_busy() {
    // Dumbbell: two senders on 10 Gb/s access links, one 1 Gb/s bottleneck to the receiver.
    // With the default window cap (65,535 B, as ns-3 without window scaling) the two windows
    // fit the 100-packet buffer, so the flows interleave packet by packet.
    let c = cfg(
        r#"{"topology": {"kind": "leaf-spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2,
                         "link_rate": "10Gbps", "uplink_rate": "1Gbps", "link_delay": "5us"},
            "scheme": {"name": "tcp"},
            "workload": {"trace": [
                {"start": "0s", "src": 0, "dst": 2, "size": "20MB"},
                {"start": "0s", "src": 1, "dst": 2, "size": "20MB"}]}}"#,
    );
    let out = sim(&c);
    let (a, b) = (&out.records[0], &out.records[1]);
    let (first, last) = (a.fct.min(b.fct), a.fct.max(b.fct));
    // Fair share: each got about half while both ran, so both end at about the same time.
    assert!(first / last > 0.98, "finish times {} {}", a.fct, b.fct);
    // Busy bottleneck: 40 MB of payload in 1500-byte packets through 1 Gb/s.
    let goodput = 40e6 * 8.0 / last / 1e9;
    assert!(goodput > 0.95 * 1460.0 / 1500.0, "goodput {goodput}");
    assert!(
        out.counters.max_switch_queue > 10,
        "the bottleneck queue builds"
    );
}

#[test]
fn droptail_never_exceeds_its_limit_and_every_drop_is_counted() {
    // Incast: 9 senders to one receiver through a 20-packet buffer.
    let trace: Vec<String> = (1..10)
        .map(|s| format!(r#"{{"start": "0s", "src": {s}, "dst": 0, "size": "500KB"}}"#))
        .collect();
    let c = cfg(&format!(
        r#"{{"topology": {{"kind": "star", "hosts": 10, "link_rate": "1Gbps", "link_delay": "2us"}},
            "queue": {{"limit_packets": 20}}, "scheme": {{"name": "tcp"}},
            "workload": {{"trace": [{}]}}}}"#,
        trace.join(",")
    ));
    let out = sim(&c);
    let k = &out.counters;
    assert!(k.max_switch_queue <= 20, "{}", k.max_switch_queue);
    assert!(k.switch_drops > 0);
    assert_eq!(k.drops, k.switch_drops + k.host_drops);
    // Conservation: every injected packet was delivered, dropped, or is still in flight.
    assert_eq!(
        k.packets_injected,
        k.packets_delivered + k.drops + k.packets_in_flight
    );
    assert_eq!(out.summary.unfinished, 0);
    let retx: u64 = out.records.iter().map(|r| r.retransmissions).sum();
    assert!(retx > 0);
}

fn repflow_run(seed: u64) -> (Config, RunOutput) {
    let c = cfg(&format!(
        r#"{{"seed": {seed}, "topology": {{"kind": "fat-tree", "k": 4, "link_rate": "1Gbps"}},
            "scheme": {{"name": "repflow"}},
            "workload": {{"cdf": "websearch", "load": 0.6, "duration": "100ms"}}}}"#
    ));
    let out = sim(&c);
    (c, out)
}

#[test]
fn repflow_copies_follow_their_hashes_and_the_first_completion_wins() {
    let (c, out) = repflow_run(3);
    let topo = Topology::build(&c.topology, c.routing.hash, c.seed);
    let mut replicated = 0;
    for r in &out.records {
        let conns: Vec<_> = out.connections.iter().filter(|x| x.flow == r.id).collect();
        assert_eq!(conns.len() as u32, r.copies);
        if r.size <= 100_000 {
            assert_eq!(r.copies, 2);
            replicated += 1;
            assert_eq!(conns[0].tuple.sport, conns[1].tuple.sport);
            assert_eq!(conns[1].tuple.dport, conns[0].tuple.dport + 1);
        } else {
            assert_eq!(r.copies, 1);
        }
        for x in &conns {
            assert_eq!(topo.path(x.tuple).links(), &x.fwd[..]);
        }
        if r.fct.is_finite() {
            let (w, first) = conns
                .iter()
                .enumerate()
                .filter(|(_, x)| x.completed.is_finite())
                .min_by(|a, b| a.1.completed.total_cmp(&b.1.completed))
                .map(|(i, x)| (i, x.completed))
                .expect("a finished flow has a finished copy");
            assert_eq!(r.winner, w as i32);
            assert_eq!(r.finish.to_bits(), first.to_bits());
        }
    }
    assert!(replicated > 10, "only {replicated} short flows");
    assert_eq!(
        out.counters.flows_finished,
        out.records.iter().filter(|r| r.fct.is_finite()).count() as u64
    );
    // Overhead is the extra copies' bytes over all flow bytes.
    let extra: u64 = out
        .records
        .iter()
        .map(|r| r.size * (r.copies as u64 - 1))
        .sum();
    let all: u64 = out.records.iter().map(|r| r.size).sum();
    assert_eq!(out.summary.overhead, extra as f64 / all as f64);
}

#[test]
fn cancellation_stops_losing_copies() {
    let base = r#"{"topology": {"kind": "fat-tree", "k": 4}, "seed": 5,
                  "workload": {"cdf": "websearch", "load": 0.6, "duration": "20ms"},"#;
    let keep = sim(&cfg(&format!(
        r#"{base} "scheme": {{"name": "repflow"}}}}"#
    )));
    let cancel = sim(&cfg(&format!(
        r#"{base} "scheme": {{"name": "repflow", "cancel": true}}}}"#
    )));
    assert!(
        cancel.counters.extra_copy_bytes_sent < keep.counters.extra_copy_bytes_sent,
        "{} vs {}",
        cancel.counters.extra_copy_bytes_sent,
        keep.counters.extra_copy_bytes_sent
    );
}

fn bits(out: &RunOutput) -> Vec<Vec<u64>> {
    out.records
        .iter()
        .map(|r| {
            vec![
                r.id,
                r.src as u64,
                r.dst as u64,
                r.size,
                r.start.to_bits(),
                r.finish.to_bits(),
                r.fct.to_bits(),
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
fn same_seed_same_records_different_seed_different_records() {
    let (_, a) = repflow_run(9);
    let (_, b) = repflow_run(9);
    let (_, c) = repflow_run(10);
    assert_eq!(bits(&a), bits(&b));
    assert_eq!(a.counters.events, b.counters.events);
    assert_ne!(bits(&a), bits(&c));
}
