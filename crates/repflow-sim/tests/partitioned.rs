//! A partitioned run (the schedule of a parallel engine, on one thread) gives the sequential
//! engine's results bit for bit: every digest scenario (every scheme), split by pods and
//! node by node, its parts run in either order within each window.

mod common;

use common::{digest, k8_config, scenarios};
use repflow_sim::{run, run_partitioned, Config, PartitionPlan, Partitioning};

const PLANS: [PartitionPlan; 4] = [
    PartitionPlan {
        partitioning: Partitioning::Pods(1),
        reverse: false,
    },
    PartitionPlan {
        partitioning: Partitioning::Pods(2),
        reverse: false,
    },
    PartitionPlan {
        partitioning: Partitioning::Pods(4),
        reverse: true,
    },
    PartitionPlan {
        partitioning: Partitioning::Nodes,
        reverse: true,
    },
];

#[test]
fn every_scheme_gives_the_sequential_results_whatever_the_partition() {
    let mut diffs = Vec::new();
    for (name, json) in scenarios() {
        let cfg = Config::from_json(&json).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = digest(&run(&cfg, &mut |_| true).unwrap_or_else(|e| panic!("{name}: {e}")));
        for plan in PLANS {
            let out = run_partitioned(&cfg, &plan, &mut |_| true)
                .unwrap_or_else(|e| panic!("{name} {plan:?}: {e}"));
            let got = digest(&out);
            if got != want {
                diffs.push(format!(
                    "{name} {plan:?}:\n  sequential  {want}\n  partitioned {got}"
                ));
            }
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

#[test]
fn a_partitioned_run_refuses_links_without_delay() {
    let cfg = Config::from_json(
        r#"{"topology": {"kind": "fat-tree", "k": 4, "link_delay": "0us"},
            "workload": {"cdf": "websearch", "load": 0.3, "duration": "1ms"}}"#,
    )
    .expect("a valid config");
    let plan = PartitionPlan {
        partitioning: Partitioning::Pods(2),
        reverse: false,
    };
    let err = run_partitioned(&cfg, &plan, &mut |_| true).expect_err("no lookahead");
    assert!(err.to_string().contains("delay above 0"), "{err}");
}

#[test]
fn larger_fat_trees_give_the_sequential_results_split_by_pod() {
    // k = 8 at 10 Gb/s (bench-A's network), 3 ms of web-search arrivals, drained: many
    // simultaneous events at synchronized queues, copies, priorities and subflows.
    for scheme in ["tcp", "repflow", "pfabric", "mptcp"] {
        let json = k8_config(scheme, "dc");
        let cfg = Config::from_json(&json).unwrap_or_else(|e| panic!("{scheme}: {e}"));
        let seq = run(&cfg, &mut |_| true).unwrap_or_else(|e| panic!("{scheme}: {e}"));
        assert!(seq.counters.drops > 0, "{scheme}: a scenario without drops");
        let plan = PartitionPlan {
            partitioning: Partitioning::Pods(8),
            reverse: true,
        };
        let part =
            run_partitioned(&cfg, &plan, &mut |_| true).unwrap_or_else(|e| panic!("{scheme}: {e}"));
        assert_eq!(digest(&part), digest(&seq), "{scheme}");
    }
}

#[test]
fn other_topologies_give_the_sequential_results_node_by_node() {
    // A leaf-spine with unequal uplinks and a synchronized incast on a star (many ties at
    // one switch port), each split node by node and into 3 parts (nodes dealt round-robin).
    let trace: Vec<String> = (1..12)
        .map(|s| format!(r#"{{"src": {s}, "dst": 0, "size": "100KB", "start": "1ms"}}"#))
        .collect();
    let configs = [
        (
            "leaf-spine",
            r#"{"seed": 5,
                "topology": {"kind": "leaf-spine", "leaves": 4, "spines": 3, "hosts_per_leaf": 4,
                             "link_rate": "10Gbps", "uplink_rate": "40Gbps", "link_delay": "1us"},
                "queue": {"limit_packets": 20},
                "workload": {"cdf": "websearch", "load": 0.7, "duration": "5ms"},
                "scheme": {"name": "repflow"}}"#
                .to_string(),
        ),
        (
            "star incast",
            format!(
                r#"{{"topology": {{"kind": "star", "hosts": 12, "link_rate": "1Gbps",
                                   "link_delay": "10us"}},
                     "queue": {{"limit_packets": 20}},
                     "workload": {{"trace": [{}], "drain": "2s"}}}}"#,
                trace.join(",")
            ),
        ),
    ];
    for (name, json) in configs {
        let cfg = Config::from_json(&json).unwrap_or_else(|e| panic!("{name}: {e}"));
        let seq = run(&cfg, &mut |_| true).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(seq.counters.drops > 0, "{name}: a scenario without drops");
        for partitioning in [Partitioning::Nodes, Partitioning::Pods(3)] {
            let plan = PartitionPlan {
                partitioning,
                reverse: true,
            };
            let part = run_partitioned(&cfg, &plan, &mut |_| true)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(digest(&part), digest(&seq), "{name} {partitioning:?}");
        }
    }
}

#[test]
fn pfabric_cut_short_gives_the_sequential_results() {
    // A sequential run decides pFabric's transmit completions late, at the next event that
    // sees the port; the partitioned engine keeps them as events. A run cut short with
    // packets waiting (no drain, or part of one) must still end in the same state: the
    // completions before the end that no event decided are decided at the end.
    for drain in ["0s", "150us"] {
        let json = k8_config("pfabric", "dc").replace(
            r#""duration": "3ms""#,
            &format!(r#""duration": "3ms", "drain": "{drain}""#),
        );
        let cfg = Config::from_json(&json).unwrap_or_else(|e| panic!("{drain}: {e}"));
        let seq = run(&cfg, &mut |_| true).unwrap_or_else(|e| panic!("{drain}: {e}"));
        assert!(
            seq.counters.packets_in_flight > 0 && seq.counters.flows_finished < seq.counters.flows,
            "{drain}: the run should end with packets in the network"
        );
        let plan = PartitionPlan {
            partitioning: Partitioning::Pods(4),
            reverse: false,
        };
        let part =
            run_partitioned(&cfg, &plan, &mut |_| true).unwrap_or_else(|e| panic!("{drain}: {e}"));
        assert_eq!(digest(&part), digest(&seq), "{drain}");
    }
}
