//! A partitioned run (the schedule of a parallel engine, on one thread) gives the sequential
//! engine's results bit for bit: every digest scenario (every scheme), split by pods and
//! node by node, its parts run in either order within each window.

mod common;

use common::{digest, scenarios};
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
