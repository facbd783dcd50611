//! MPTCP and MPTCP-L: scenario tests with answers known by construction.

use repflow_sim::{run, Config, RunOutput};
use std::collections::HashSet;

fn cfg(json: &str) -> Config {
    Config::from_json(json).unwrap_or_else(|e| panic!("bad test config: {e}"))
}

fn sim(c: &Config) -> RunOutput {
    run(c, &mut |_| true).expect("run")
}

const FAT4: &str = r#"{"kind": "fat-tree", "k": 4, "link_rate": "1Gbps", "link_delay": "2us"}"#;
/// Hosts at 10 Gb/s behind 1 Gb/s uplinks to two spines: the core is the bottleneck.
const SLOW_CORE: &str = r#"{"kind": "leaf-spine", "leaves": 2, "spines": 4,
    "hosts_per_leaf": 2, "link_rate": "10Gbps", "uplink_rate": "1Gbps", "link_delay": "1us"}"#;

fn flow_on(topology: &str, dst: u32, scheme: &str, size: u64) -> RunOutput {
    sim(&cfg(&format!(
        r#"{{"topology": {topology}, "scheme": {scheme},
            "workload": {{"trace": [{{"start": "0s", "src": 0, "dst": {dst}, "size": "{size}B"}}]}}}}"#
    )))
}

fn one_flow(scheme: &str, size: u64) -> RunOutput {
    flow_on(FAT4, 15, scheme, size)
}

fn payloads(out: &RunOutput) -> Vec<u64> {
    out.connections.iter().map(|c| c.payload_bytes).collect()
}

#[test]
fn an_mptcp_flow_alone_spreads_over_subflows_with_their_own_paths_and_beats_tcp() {
    let size = 1_000_000;
    let out = one_flow(r#"{"name": "mptcp"}"#, size);
    let tcp = one_flow(r#"{"name": "tcp"}"#, size);
    let r = &out.records[0];
    assert!(r.fct.is_finite());
    assert_eq!(r.copies, 8);
    assert_eq!(out.connections.len(), 8);
    assert_eq!(r.retransmissions, 0, "nothing is lost alone");
    // Every byte exactly once, over several subflows.
    assert_eq!(payloads(&out).iter().sum::<u64>(), size);
    assert!(payloads(&out).iter().filter(|&&p| p > 0).count() >= 4);
    // Distinct five-tuples; ECMP puts them on more than one path (k = 4: 4 core paths).
    let tuples: HashSet<_> = out.connections.iter().map(|c| c.tuple).collect();
    assert_eq!(tuples.len(), 8);
    let paths: HashSet<_> = out.connections.iter().map(|c| c.fwd.clone()).collect();
    assert!(paths.len() >= 2, "{paths:?}");
    // Here every link runs at 1 Gb/s: both are limited by the sender's NIC, and finish
    // together.
    assert_eq!(r.fct.to_bits(), tcp.records[0].fct.to_bits());
    // Behind a slower core, subflows on several spines beat one TCP connection by about the
    // number of distinct uplinks they use.
    let mp = flow_on(SLOW_CORE, 3, r#"{"name": "mptcp"}"#, size);
    let one = flow_on(SLOW_CORE, 3, r#"{"name": "tcp"}"#, size);
    let uplinks: HashSet<u32> = mp.connections.iter().map(|c| c.fwd[1]).collect();
    assert!(uplinks.len() >= 2, "{uplinks:?}");
    let (a, b) = (mp.records[0].fct, one.records[0].fct);
    assert!(a < 0.8 * b, "MPTCP {a} vs TCP {b}");
    assert!(
        a > b / uplinks.len() as f64 * 0.9,
        "faster than {} uplinks allow",
        uplinks.len()
    );
}

#[test]
fn join_after_the_first_rtt_keeps_a_short_flow_on_the_first_subflow() {
    // Ten segments fit the first subflow's initial window: the others join too late to carry
    // any; joined at the start, the lowest-RTT scheduler also fills subflow 0 first.
    let size = 10 * 1460;
    for join in ["after-rtt", "start"] {
        let out = one_flow(&format!(r#"{{"name": "mptcp", "join": "{join}"}}"#), size);
        let p = payloads(&out);
        assert_eq!(p[0], size, "{join}: {p:?}");
        assert!(p[1..].iter().all(|&x| x == 0), "{join}: {p:?}");
    }
    // A larger flow: after-rtt takes longer than joining at the start (the joins cost a
    // round trip), and both deliver every byte once.
    let size = 300_000;
    let late = one_flow(r#"{"name": "mptcp", "join": "after-rtt"}"#, size);
    let early = one_flow(r#"{"name": "mptcp", "join": "start"}"#, size);
    assert_eq!(payloads(&late).iter().sum::<u64>(), size);
    assert_eq!(payloads(&early).iter().sum::<u64>(), size);
    assert!(late.records[0].fct > early.records[0].fct);
}

#[test]
fn mptcp_l_sends_a_short_flow_on_two_subflows_and_a_long_one_as_mptcp() {
    // Without the aggressive timer nothing is resent alone: every segment once on each.
    let short = one_flow(r#"{"name": "mptcp-l", "atimer_rtts": 0}"#, 200_000);
    let r = &short.records[0];
    assert_eq!(r.copies, 2);
    assert_eq!(
        payloads(&short),
        vec![200_000, 200_000],
        "every segment on both"
    );
    assert_eq!(r.retransmissions, 0);
    // The two copies share the sender's NIC, the bottleneck here: the flow takes longer than
    // one TCP connection, and no more than twice as long.
    let tcp = one_flow(r#"{"name": "tcp"}"#, 200_000);
    let (a, b) = (r.fct, tcp.records[0].fct);
    assert!(a > b && a < 2.0 * b, "MPTCP-L {a} vs TCP {b}");
    // With it (2 RTTs of a handshake-sized RTT sample, while the shared NIC queues the
    // copies), the timer fires spuriously: the only retransmissions are its own.
    let timed = one_flow(r#"{"name": "mptcp-l"}"#, 200_000);
    let r = &timed.records[0];
    assert_eq!(r.retransmissions, r.atimer_retransmits);
    assert_eq!(r.timeouts, 0);
    let long = one_flow(r#"{"name": "mptcp-l"}"#, 2_000_000);
    assert_eq!(long.records[0].copies, 8);
    assert_eq!(payloads(&long).iter().sum::<u64>(), 2_000_000);
}

fn fat_tree_run(scheme: &str, seed: u64) -> RunOutput {
    sim(&cfg(&format!(
        r#"{{"seed": {seed}, "topology": {{"kind": "fat-tree", "k": 4, "link_rate": "1Gbps"}},
            "scheme": {scheme},
            "workload": {{"cdf": "websearch", "load": 0.6, "duration": "60ms"}}}}"#
    )))
}

#[test]
fn multipath_runs_keep_the_core_invariants_and_are_deterministic() {
    for scheme in [
        r#"{"name": "mptcp"}"#,
        r#"{"name": "mptcp", "coupling": "uncoupled", "join": "after-rtt"}"#,
        r#"{"name": "mptcp", "coupling": "olia", "subflows": 4}"#,
        r#"{"name": "mptcp-l"}"#,
        r#"{"name": "mptcp-l", "rto_rtts": 4.0, "cut_on_detect": false}"#,
    ] {
        let out = fat_tree_run(scheme, 3);
        let k = &out.counters;
        assert_eq!(out.summary.unfinished, 0, "{scheme}");
        assert_eq!(
            k.packets_injected,
            k.packets_delivered + k.drops + k.packets_in_flight,
            "{scheme}: packet conservation"
        );
        assert!(
            k.drops > 0,
            "{scheme}: the scenario has losses to recover from"
        );
        for r in &out.records {
            assert_eq!(
                r.retransmissions,
                r.fast_retransmits
                    + r.timeout_retransmits
                    + r.detect_retransmits
                    + r.atimer_retransmits,
                "{scheme}: every retransmission has one cause"
            );
            assert!(r.fct >= r.ideal_fct * (1.0 - 1e-12), "{scheme}");
            let payload: u64 = out
                .connections
                .iter()
                .filter(|c| c.flow == r.id)
                .map(|c| c.payload_bytes)
                .sum();
            assert!(payload >= r.size, "{scheme}: flow {} sent too little", r.id);
        }
        if scheme.contains("mptcp-l") {
            let sum =
                |f: fn(&repflow_sim::FlowRecord) -> u64| out.records.iter().map(f).sum::<u64>();
            assert!(
                sum(|r| r.detect_retransmits) > 0,
                "{scheme}: fast detection never fired"
            );
            let short = out.records.iter().filter(|r| r.size <= 1_000_000);
            assert!(short.clone().all(|r| r.copies == 2));
            assert!(
                short.map(|r| r.fast_retransmits).sum::<u64>() == 0,
                "MPTCP-L's short flows recover without duplicate-ACK fast retransmit"
            );
        } else {
            let n = if scheme.contains(r#""subflows": 4"#) {
                4
            } else {
                8
            };
            assert!(out
                .records
                .iter()
                .all(|r| r.detect_retransmits == 0 && r.copies == n));
        }
        let again = fat_tree_run(scheme, 3);
        let bits = |o: &RunOutput| -> Vec<(u64, u64, u64)> {
            o.records
                .iter()
                .map(|r| (r.finish.to_bits(), r.bytes_sent, r.retransmissions))
                .collect()
        };
        assert_eq!(bits(&out), bits(&again), "{scheme}: determinism");
    }
}

#[test]
fn bad_multipath_parameters_name_their_field() {
    for (scheme, field) in [
        (r#"{"name": "mptcp", "subflows": 0}"#, "scheme.subflows"),
        (r#"{"name": "mptcp", "subflows": 65}"#, "scheme.subflows"),
        (
            r#"{"name": "mptcp-l", "short_subflows": 0}"#,
            "scheme.short_subflows",
        ),
        (r#"{"name": "mptcp", "rto_rtts": 0}"#, "scheme.rto_rtts"),
        (r#"{"name": "mptcp", "join": "later"}"#, "scheme.join"),
        (
            r#"{"name": "mptcp", "coupling": "olia2"}"#,
            "scheme.coupling",
        ),
        (r#"{"name": "tcp", "subflows": 4}"#, "scheme.subflows"),
        (r#"{"name": "repflow", "subflows": 4}"#, "scheme.subflows"),
    ] {
        let json =
            format!(r#"{{"scheme": {scheme}, "workload": {{"cdf": "websearch", "load": 0.1}}}}"#);
        let err = Config::from_json(&json)
            .and_then(|c| c.validate().map(|_| c))
            .expect_err(scheme);
        assert!(err.to_string().contains(field), "{scheme}: {err}");
    }
}

#[test]
fn coupled_subflows_on_one_bottleneck_are_as_gentle_as_one_tcp_flow() {
    // Two 4-subflow connections share one bottleneck (a star: every path is the same),
    // starting in congestion avoidance. LIA and OLIA make each connection grow about as one
    // TCP flow does; uncoupled, they are eight Reno flows and overflow the buffer far more
    // often (measured: 7, 4 and 179 drops).
    let run_with = |coupling: &str| {
        sim(&cfg(&format!(
            r#"{{"topology": {{"kind": "star", "hosts": 3, "link_rate": "1Gbps",
                               "link_delay": "50us"}},
                "queue": {{"limit_packets": 200}},
                "tcp": {{"max_window": "none", "initial_ssthresh": 4}},
                "scheme": {{"name": "mptcp", "subflows": 4, "coupling": "{coupling}"}},
                "workload": {{"trace": [{{"start": "0s", "src": 1, "dst": 0, "size": "40000000B"}},
                                        {{"start": "0s", "src": 2, "dst": 0, "size": "40000000B"}}]}}}}"#
        )))
    };
    let (lia, olia, unc) = (run_with("lia"), run_with("olia"), run_with("uncoupled"));
    for o in [&lia, &olia, &unc] {
        assert_eq!(o.summary.unfinished, 0);
    }
    let drops = |o: &RunOutput| o.counters.drops;
    assert!(
        5 * drops(&lia) < drops(&unc),
        "LIA {} vs uncoupled {}",
        drops(&lia),
        drops(&unc)
    );
    assert!(
        5 * drops(&olia) < drops(&unc),
        "OLIA {} vs uncoupled {}",
        drops(&olia),
        drops(&unc)
    );
    // All three keep the bottleneck busy: 80 MB through 1 Gb/s take at least 0.64 s.
    for o in [&lia, &olia, &unc] {
        let last = o.records.iter().map(|r| r.finish).fold(0.0, f64::max);
        assert!(last > 0.64 && last < 0.72, "{last}");
    }
}
