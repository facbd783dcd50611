//! Same seed, same records: every scheme runs a small fat-tree scenario and a digest of its
//! per-flow records, deterministic counters, per-connection records and per-link statistics
//! is compared with the one stored in `tests/fixtures/record-digests.txt`.
//!
//! The stored digests were written by the simulator *before* a refactoring and must not move
//! through one. A change that is meant to alter results (a model fix) regenerates them with
//! `REPFLOW_WRITE_DIGESTS=1 cargo test -p repflow-sim --release --test digests` and says in
//! its commit message which results moved and why.

mod common;

use common::{digest, scenarios, sequential_scenarios};
use repflow_sim::{run, Config};
use std::collections::BTreeMap;
use std::fmt::Write as _;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/record-digests.txt"
);

#[test]
fn records_match_the_stored_digests() {
    let mut got = BTreeMap::new();
    for (name, json) in scenarios().into_iter().chain(sequential_scenarios()) {
        let cfg = Config::from_json(&json).unwrap_or_else(|e| panic!("{name}: {e}"));
        let out = run(&cfg, &mut |_| true).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            out.records.len() > 50,
            "{name}: too few flows to mean anything"
        );
        got.insert(name, digest(&out));
    }
    let mut text = String::new();
    for (k, v) in &got {
        writeln!(text, "{k} {v}").unwrap();
    }
    if std::env::var_os("REPFLOW_WRITE_DIGESTS").is_some() {
        std::fs::write(FIXTURE, &text).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(FIXTURE).expect("stored digests");
    let mut diffs = Vec::new();
    for line in stored
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (k, v) = line.split_once(' ').expect("name digest");
        match got.get(k) {
            Some(g) if g == v => {}
            Some(g) => diffs.push(format!(
                "{k}: stored {v}\n{:width$}  now    {g}",
                "",
                width = k.len()
            )),
            None => diffs.push(format!("{k}: stored but not run")),
        }
    }
    for k in got.keys() {
        if !stored
            .lines()
            .any(|l| l.split_once(' ').is_some_and(|(n, _)| n == k))
        {
            diffs.push(format!("{k}: run but not stored"));
        }
    }
    assert!(diffs.is_empty(), "records moved:\n{}", diffs.join("\n"));
}
