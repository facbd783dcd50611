//! SmartRep, FullRep, RepFlow+HCA and cancellation: answers known by hand or by construction.

use repflow_sim::config::{HashKind, TopologyConfig};
use repflow_sim::engine::Rng;
use repflow_sim::hca::{
    disjoint_paths, max_disjoint_paths, paths_collide, probe_time, repflow_collisions, Hca,
};
use repflow_sim::network::{FiveTuple, Topology};
use repflow_sim::scheme::{rep_num_assign, SizeHistogram};
use repflow_sim::workload::{builtin_text, Cdf};
use repflow_sim::{run, Config, RunOutput};
use std::collections::HashSet;

fn cfg(json: &str) -> Config {
    Config::from_json(json).unwrap_or_else(|e| panic!("bad test config: {e}"))
}

fn sim(c: &Config) -> RunOutput {
    run(c, &mut |_| true).expect("run")
}

fn fat_tree(k: u32, hash: HashKind) -> Topology {
    let c = TopologyConfig {
        k,
        ..TopologyConfig::default()
    };
    Topology::build(&c, hash, 7)
}

#[test]
fn rep_num_assign_small_histograms_by_hand() {
    // One bin: 4 flows of 1 KB, Θ = 100 KB, ε = 0.1 → 10 KB budget, η = 4 KB per replica:
    // two replicas fit (8 KB), a third would make 12 KB.
    assert_eq!(rep_num_assign(&[4.0], 1000, 100e3, 0.1, 0.1, 9), vec![2]);
    // The cap on replicas binds first.
    assert_eq!(rep_num_assign(&[4.0], 1000, 100e3, 0.1, 0.1, 1), vec![1]);
    // Bins 1 KB ×1 and 3 KB ×5: Θ = 1,000 KB, ε = 0.02 → 20 KB; η1 = 1 KB, η3 = 15 KB.
    // Terms (p = 0.5): bin 3 2.5 → replica (15 KB); bin 3 1.25 vs bin 1 0.5 → bin 3 would
    // make 30 > 20: closed; bin 1 0.5 → (16), 0.25 → (17), 0.125 → (18) = max_extra 3.
    // An empty bin 2 never gets any.
    assert_eq!(
        rep_num_assign(&[1.0, 0.0, 5.0], 1000, 1e6, 0.02, 0.5, 3),
        vec![3, 0, 1]
    );
    // Exhaustive check of optimality on a small instance: the greedy reaches the minimum of
    // Σ π_i p^(x_i+1) over all feasible assignments.
    let counts = [6.0, 2.0, 3.0];
    let (theta, eps, p, cap) = (60e3, 0.2, 0.1, 3u32);
    let x = rep_num_assign(&counts, 1000, theta, eps, p, cap);
    let cost = |x: &[u32]| -> f64 {
        counts
            .iter()
            .zip(x)
            .map(|(c, &xi)| c * p.powi(xi as i32 + 1))
            .sum()
    };
    let bytes = |x: &[u32]| -> f64 {
        (0..3)
            .map(|i| (i as f64 + 1.0) * 1000.0 * counts[i] * x[i] as f64)
            .sum()
    };
    let mut best = f64::INFINITY;
    for a in 0..=cap {
        for b in 0..=cap {
            for c in 0..=cap {
                let y = [a, b, c];
                if bytes(&y) <= eps * theta {
                    best = best.min(cost(&y));
                }
            }
        }
    }
    assert!(bytes(&x) <= eps * theta);
    assert!(
        (cost(&x) - best).abs() < 1e-12,
        "{x:?}: {} vs {best}",
        cost(&x)
    );
}

#[test]
fn rep_num_assign_never_exceeds_the_budget() {
    let mut rng = Rng::new(11, 3);
    for _ in 0..300 {
        let n = 1 + rng.below(100) as usize;
        let counts: Vec<f64> = (0..n)
            .map(|_| {
                if rng.next_f64() < 0.3 {
                    0.0
                } else {
                    rng.below(50) as f64
                }
            })
            .collect();
        let short: f64 = (0..n).map(|i| (i + 1) as f64 * 1000.0 * counts[i]).sum();
        let theta = short * (1.0 + 20.0 * rng.next_f64());
        let eps = 0.001 + 0.3 * rng.next_f64();
        let cap = rng.below(8) as u32;
        let x = rep_num_assign(&counts, 1000, theta, eps, 0.1, cap);
        let used: f64 = (0..n)
            .map(|i| (i + 1) as f64 * 1000.0 * counts[i] * x[i] as f64)
            .sum();
        assert!(used <= eps * theta, "used {used} > {}", eps * theta);
        assert!(x.iter().all(|&v| v <= cap));
        // Maximal: no single bin can take one more replica.
        for i in 0..n {
            if counts[i] > 0.0 && x[i] < cap {
                assert!(used + (i + 1) as f64 * 1000.0 * counts[i] > eps * theta);
            }
        }
    }
}

#[test]
fn table_from_the_websearch_cdf_respects_its_budget_and_favours_small_flows() {
    let cdf = Cdf::parse(builtin_text("websearch").unwrap()).unwrap();
    let h = SizeHistogram::from_cdf(&cdf, 1000, 100_000);
    let t = h.table(0.03, 0.1, 4);
    assert!(h.overhead(&t) <= 0.03 + 1e-12);
    assert!(t.extra.iter().any(|&x| x > 0));
    // From observed sizes instead: the same shape, bins agree with replicas_for.
    let sizes: Vec<u64> = (0..20_000)
        .map({
            let mut r = Rng::new(3, 9);
            move |_| cdf.sample(&mut r)
        })
        .collect();
    let hs = SizeHistogram::from_sizes(&sizes, 1000, 100_000);
    let ts = hs.table(0.03, 0.1, 4);
    assert!(hs.overhead(&ts) <= 0.03 + 1e-12);
    assert_eq!(ts.replicas_for(1), ts.extra[0]);
    assert_eq!(ts.replicas_for(1460), ts.extra[1]);
    assert_eq!(ts.replicas_for(100_001), 0);
}

#[test]
fn smartrep_topology_has_five_disjoint_of_twentyfive_equal_cost_paths() {
    let t = fat_tree(10, HashKind::Crc16);
    assert_eq!(t.n_hosts, 250);
    assert_eq!(max_disjoint_paths(&t), 5);
    assert_eq!(disjoint_paths(&t, 0, 1), 1); // same edge switch
    assert_eq!(disjoint_paths(&t, 0, 200), 5);
    let mut distinct = HashSet::new();
    for sport in 0..3000u16 {
        distinct.insert(t.path(FiveTuple {
            src: 0,
            dst: 200,
            sport,
            dport: 5000,
            proto: 6,
        }));
    }
    assert_eq!(distinct.len(), 25);
}

#[test]
fn hca_copies_never_collide_and_the_cache_answers_repeat_lookups() {
    for hash in [HashKind::Crc16, HashKind::Crc32, HashKind::Default] {
        let t = fat_tree(8, hash);
        let mut hca = Hca::new(29_000_000, false);
        let mut ports = Vec::new();
        let mut rng = Rng::new(5, 5);
        for _ in 0..300 {
            let src = rng.below(128) as u32;
            let dst = rng.below(128) as u32;
            if t.host_tor[src as usize] == t.host_tor[dst as usize] {
                continue;
            }
            let want = disjoint_paths(&t, src, dst);
            let wait = hca.choose(&t, src, dst, 5000, want, &mut ports).unwrap();
            assert_eq!(
                ports.len() as u32,
                want,
                "{hash:?}: all disjoint paths found"
            );
            let paths: Vec<_> = ports
                .iter()
                .map(|&sport| {
                    t.path(FiveTuple {
                        src,
                        dst,
                        sport,
                        dport: 5000,
                        proto: 6,
                    })
                })
                .collect();
            for i in 0..paths.len() {
                for j in i + 1..paths.len() {
                    assert!(!paths_collide(&t, paths[i].links(), paths[j].links()));
                }
            }
            // The wait is whole probes' worth of round trips.
            let one = probe_time(
                &t,
                FiveTuple {
                    src,
                    dst,
                    sport: ports[0],
                    dport: 5000,
                    proto: 6,
                },
                29_000_000,
            );
            assert_eq!(wait % one, 0);
            for &p in &ports {
                hca.release(FiveTuple {
                    src,
                    dst,
                    sport: p,
                    dport: 5000,
                    proto: 6,
                });
            }
            // Same pair again: answered from the cache, no wait, same ports.
            let again = ports.clone();
            assert_eq!(hca.choose(&t, src, dst, 5000, want, &mut ports), Some(0));
            assert_eq!(ports, again);
            for &p in &ports {
                hca.release(FiveTuple {
                    src,
                    dst,
                    sport: p,
                    dport: 5000,
                    proto: 6,
                });
            }
        }
        assert!(hca.stats.cache_hits > 0 && hca.stats.probes > 0);
    }
}

#[test]
fn a_probe_costs_a_round_trip_to_the_second_switch() {
    // 1 Gb/s, 2 µs links: 64 B take 512 ns; two links each way.
    let t = fat_tree(4, HashKind::Default);
    let tup = FiveTuple {
        src: 0,
        dst: 15,
        sport: 40000,
        dport: 5000,
        proto: 6,
    };
    assert_eq!(probe_time(&t, tup, 0), 4 * (2_000_000 + 512_000));
    assert_eq!(
        probe_time(&t, tup, 29_000_000),
        4 * (2_000_000 + 512_000) + 29_000_000
    );
}

#[test]
fn repflow_collides_often_and_hca_never() {
    let t = fat_tree(8, HashKind::Crc16);
    let mut rng = Rng::new(2, 2);
    let pairs: Vec<(u32, u32)> = (0..2000)
        .map(|_| (rng.below(64) as u32, 64 + rng.below(64) as u32))
        .collect();
    let sports: Vec<u16> = (0..2000).map(|_| 32768 + rng.below(28000) as u16).collect();
    let c = repflow_collisions(&t, &pairs, &sports, 5000);
    assert_eq!(c.inter_tor, 2000);
    // Independent choices among 4 uplinks would collide 1/4 of the time.
    assert!(c.collisions > 200, "{c:?}");
}

fn mixed_run(scheme: &str, extra: &str) -> RunOutput {
    sim(&cfg(&format!(
        r#"{{"seed": 3, "topology": {{"k": 4}}, "routing": {{"hash": "crc16"}},
            "workload": {{"load": 0.4, "duration": "300ms"}},
            "scheme": {{"name": "{scheme}" {extra}}}}}"#
    )))
}

#[test]
fn schemes_in_the_simulator_count_copies_and_collisions() {
    let rep = mixed_run("repflow", "");
    assert!(rep.counters.replicated_flows > 0);
    assert!(rep.counters.copy_collisions > 0, "{:?}", rep.counters);
    assert_eq!(rep.counters.hca_probes, 0);
    for name in ["repflow-hca", "smartrep", "fullrep"] {
        let out = mixed_run(name, "");
        let c = &out.counters;
        assert!(c.replicated_flows > 0, "{name}");
        assert_eq!(
            c.copy_collisions, 0,
            "{name}: HCA copies share no fabric link"
        );
        assert!(c.hca_probes > 0 && c.hca_wait > 0.0, "{name}");
        assert!(
            c.hca_cache_hit_rate > 0.0 && c.hca_cache_hit_rate < 1.0,
            "{name}: {c:?}"
        );
        assert_eq!(c.flows, c.flows_finished, "{name}");
        let t = &out.topology;
        for r in &out.records {
            let same_tor = t.host_tor[r.src as usize] == t.host_tor[r.dst as usize];
            let paths = disjoint_paths(t, r.src, r.dst);
            match name {
                "fullrep" if r.size <= 100_000 => assert_eq!(r.copies, paths),
                "smartrep" if same_tor => assert_eq!(r.copies, 1),
                _ => assert!(r.copies <= paths.max(2)),
            }
            if r.size > 100_000 {
                assert_eq!(r.copies, 1);
            }
        }
        // Copies of a flow all use the destination port and distinct source ports.
        for w in out.connections.windows(2) {
            if w[0].flow == w[1].flow && name != "repflow-hca" {
                assert_eq!(w[0].tuple.dport, w[1].tuple.dport);
                assert_ne!(w[0].tuple.sport, w[1].tuple.sport);
            }
        }
    }
}

#[test]
fn cold_probes_delay_flows_warm_ones_do_not_and_runs_are_deterministic() {
    let cold = mixed_run("fullrep", "");
    let warm = mixed_run("fullrep", r#", "probe_cache": "warm""#);
    assert_eq!(warm.counters.hca_wait, 0.0);
    assert_eq!(warm.counters.hca_probes, cold.counters.hca_probes);
    // A replicated flow's first lookup misses: its FCT includes at least one probe.
    let first = cold.records.iter().find(|r| r.copies > 1).unwrap();
    let warm_first = &warm.records[first.id as usize];
    assert!(
        first.fct > warm_first.fct,
        "{} vs {}",
        first.fct,
        warm_first.fct
    );
    let again = mixed_run("fullrep", "");
    let bits = |o: &RunOutput| -> Vec<u64> {
        o.records
            .iter()
            .flat_map(|r| [r.fct.to_bits(), r.bytes_sent, r.copies as u64])
            .collect()
    };
    assert_eq!(bits(&cold), bits(&again));
}

#[test]
fn cancellation_cuts_the_bytes_of_losing_copies() {
    let keep = mixed_run("fullrep", "");
    let cancel = mixed_run("fullrep", r#", "cancel": true"#);
    assert_eq!(
        keep.counters.extra_copy_bytes,
        cancel.counters.extra_copy_bytes
    );
    assert!(
        cancel.counters.extra_copy_bytes_sent < keep.counters.extra_copy_bytes_sent,
        "{} vs {}",
        cancel.counters.extra_copy_bytes_sent,
        keep.counters.extra_copy_bytes_sent
    );
}

#[test]
fn explicit_table_and_history_validation() {
    // An explicit table of zeros: SmartRep sends no copies at all.
    let out = mixed_run("smartrep", r#", "table": [0, 0, 0]"#);
    assert_eq!(out.counters.replicated_flows, 0);
    let e =
        Config::from_json(r#"{"scheme": {"name": "smartrep", "history": "runs/x"}}"#).unwrap_err();
    assert_eq!(e.field, "scheme.history");
    let e = Config::from_json(r#"{"scheme": {"name": "smartrep", "eps": 1.5}}"#).unwrap_err();
    assert_eq!(e.field, "scheme.eps");
    let e = Config::from_json(r#"{"scheme": {"name": "smartrep", "p": 0}}"#).unwrap_err();
    assert_eq!(e.field, "scheme.p");
    let e = Config::from_json(r#"{"scheme": {"name": "fullrep", "probe_cache": "lukewarm"}}"#)
        .unwrap_err();
    assert_eq!(e.field, "scheme.probe_cache");
    // RepNumAssign's parameters belong to SmartRep alone.
    let e = Config::from_json(r#"{"scheme": {"name": "repflow-hca", "eps": 0.1}}"#).unwrap_err();
    assert_eq!(e.field, "scheme.eps");
}
