//! A threaded run (each part of the network on its own thread, exchanging at each lookahead
//! window's end) gives the sequential engine's results bit for bit, on every scheme.

mod common;

use common::{digest, k8_config, scenarios};
use repflow_sim::{run, run_threaded, Config};

#[test]
fn every_scheme_gives_the_sequential_results_on_2_threads_and_3() {
    let mut diffs = Vec::new();
    let mut ran = 0;
    for (name, json) in scenarios() {
        let cfg = Config::from_json(&json).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = digest(&run(&cfg, &mut |_| true).unwrap_or_else(|e| panic!("{name}: {e}")));
        // More threads than this machine's 2 cores wait for each other far longer (parked,
        // woken by the scheduler): 3 threads (an uneven split of k = 4's pods) for one scheme.
        let counts: &[u32] = if name == "tcp" { &[2, 3] } else { &[2] };
        for &threads in counts {
            let out = run_threaded(&cfg, threads, &mut |_| true)
                .unwrap_or_else(|e| panic!("{name} on {threads} threads: {e}"));
            ran += 1;
            let got = digest(&out);
            if got != want {
                diffs.push(format!(
                    "{name} on {threads} threads:\n  sequential {want}\n  threaded   {got}"
                ));
            }
        }
    }
    assert!(ran >= 15, "only {ran} threaded runs");
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

#[test]
fn a_larger_fat_tree_gives_the_sequential_results_on_2_threads() {
    // k = 8 at 10 Gb/s (bench-A's network), 3 ms of web-search arrivals, drained: many
    // simultaneous events at synchronized queues, copies and priorities, and drops.
    // The Linux profile's SACK: a sender reads its receiver's receipt log, kept in another
    // part when the flow crosses parts.
    for (scheme, profile) in [
        ("tcp", "dc"),
        ("repflow", "dc"),
        ("pfabric", "dc"),
        ("smartrep", "dc"),
        ("mptcp", "dc"),
        ("mptcp-l", "dc"),
        ("tcp", "linux"),
        ("mptcp", "linux"),
        ("repflow", "linux"),
    ] {
        let json = k8_config(scheme, profile);
        let cfg = Config::from_json(&json).unwrap_or_else(|e| panic!("{scheme}: {e}"));
        assert_eq!(cfg.tcp.sack, profile == "linux");
        let seq = run(&cfg, &mut |_| true).unwrap_or_else(|e| panic!("{scheme}: {e}"));
        assert!(seq.counters.drops > 0, "{scheme}: a scenario without drops");
        let par = run_threaded(&cfg, 2, &mut |_| true).unwrap_or_else(|e| panic!("{scheme}: {e}"));
        assert_eq!(digest(&par), digest(&seq), "{scheme} {profile}");
        assert!(seq.threads.is_none());
        let t = par.threads.expect("a threaded run reports its threads");
        assert_eq!((t.threads, t.events.len(), t.wait.len()), (2, 2, 2));
        assert_eq!(t.events.iter().sum::<u64>(), seq.counters.events);
        assert!(t.windows > 0 && t.packets_exchanged > 0 && t.window == 1e-6);
    }
}

#[test]
fn a_threaded_run_can_be_cancelled_and_refuses_links_without_delay() {
    let cfg = Config::from_json(
        r#"{"topology": {"kind": "fat-tree", "k": 4, "link_delay": "0us"},
            "workload": {"cdf": "websearch", "load": 0.3, "duration": "1ms"}}"#,
    )
    .expect("a valid config");
    let err = run_threaded(&cfg, 2, &mut |_| true).expect_err("no lookahead");
    assert!(err.to_string().contains("delay above 0"), "{err}");
    let cfg = Config::from_json(r#"{"topology": {"kind": "fat-tree", "k": 4}}"#).expect("valid");
    let err = run_threaded(&cfg, 5, &mut |_| true).expect_err("more threads than pods");
    assert!(err.to_string().contains("only 4 pods"), "{err}");
    let cfg = Config::from_json(
        r#"{"topology": {"kind": "fat-tree", "k": 8, "link_rate": "10Gbps"},
            "workload": {"cdf": "websearch", "load": 0.5, "duration": "200ms"}}"#,
    )
    .expect("a valid config");
    let err = run_threaded(&cfg, 2, &mut |_| false).expect_err("cancelled");
    assert!(err.to_string().contains("cancelled"), "{err}");
}
