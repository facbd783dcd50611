//! Runs a simulation from a JSON configuration given on the command line (or the bench-A
//! scenario with `bench-a`) and prints counters and summary; used for profiling.
//! `REPFLOW_PARTITIONS=pods:N` (or `nodes`, with `:rev` to run each window's parts in
//! reverse) runs it partitioned ([`repflow_sim::run_partitioned`]) instead;
//! `REPFLOW_THREADS=N` runs it on N threads ([`repflow_sim::run_threaded`]).

use repflow_sim::{run, run_partitioned, run_threaded, Config, PartitionPlan, Partitioning};

fn main() {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "bench-a".into());
    let json = if arg == "bench-a" {
        r#"{"topology": {"kind": "fat-tree", "k": 8, "link_rate": "10Gbps", "link_delay": "1us"},
            "queue": {"limit_packets": 100}, "scheme": {"name": "tcp"},
            "workload": {"cdf": "websearch", "load": 0.5, "duration": "50ms"}}"#
            .to_string()
    } else {
        arg
    };
    let cfg = Config::from_json(&json).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    let plan = std::env::var("REPFLOW_PARTITIONS")
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| {
            let mut it = v.split(':');
            let partitioning = match (it.next(), it.next()) {
                (Some("nodes"), _) => Partitioning::Nodes,
                (Some("pods"), Some(n)) => Partitioning::Pods(n.parse().unwrap_or_else(|_| {
                    eprintln!("error: REPFLOW_PARTITIONS: pods:N takes a number of parts, not {n}");
                    std::process::exit(2)
                })),
                _ => {
                    eprintln!("error: REPFLOW_PARTITIONS is pods:N or nodes (then :rev), not {v}");
                    std::process::exit(2)
                }
            };
            PartitionPlan {
                partitioning,
                reverse: v.ends_with(":rev"),
            }
        });
    let threads: u32 = match std::env::var("REPFLOW_THREADS") {
        Ok(v) if !v.is_empty() => v.parse().unwrap_or_else(|_| {
            eprintln!("error: REPFLOW_THREADS takes a number of threads, not {v}");
            std::process::exit(2)
        }),
        _ => 1,
    };
    // `REPFLOW_PROGRESS=1` prints the run's progress reports (simulated time, flows open,
    // events and their rate since the last report) as they come.
    let show = std::env::var("REPFLOW_PROGRESS").is_ok_and(|v| v == "1");
    let start = std::time::Instant::now();
    let mut last = (0.0f64, 0u64);
    let mut report = |p: &repflow_sim::Progress| {
        if show {
            let t = start.elapsed().as_secs_f64();
            let rate = (p.events - last.1) as f64 / (t - last.0).max(1e-9) / 1e6;
            last = (t, p.events);
            eprintln!(
                "{t:7.2} s wall  sim {:8.4} s  open flows {:6}  events {:11}  {rate:6.2} M/s",
                p.sim_time,
                p.flows_started - p.flows_finished,
                p.events
            );
        }
        true
    };
    let out = match &plan {
        Some(plan) => run_partitioned(&cfg, plan, &mut report),
        None if threads > 1 => run_threaded(&cfg, threads, &mut report),
        None => run(&cfg, &mut report),
    }
    .unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    println!("{}", serde_json::to_string_pretty(&out.counters).unwrap());
    eprintln!(
        "wall {:.3} s, {:.2} M packet-hops/s",
        out.counters.wall_time,
        out.counters.packet_hops_per_sec / 1e6
    );
    if let Some(t) = &out.threads {
        let per = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        eprintln!(
            "threads {}: {} windows of {:.2} us; events {:?}; busy {} s; waiting {} s \
             ({:.2} us per window on average); {} packets handed between parts",
            t.threads,
            t.windows,
            t.window * 1e6,
            t.events,
            per(&t.busy),
            per(&t.wait),
            t.wait.iter().sum::<f64>() / t.wait.len() as f64 / t.windows.max(1) as f64 * 1e6,
            t.packets_exchanged
        );
    }
    #[cfg(feature = "parallelism-stats")]
    {
        let p = &out.parallelism;
        println!(
            "parallelism: window {} ps, {} windows ({} with arrivals), {} arrivals",
            p.lookahead_ps, p.windows, p.busy_windows, p.arrivals
        );
        #[cfg(feature = "tie-stats")]
        {
            let t = &p.ties;
            let depths: Vec<String> = t
                .depths
                .iter()
                .map(|(d, n)| {
                    format!(
                        "{d}{}: {n}",
                        if *d as usize == t.depths.len() {
                            "+"
                        } else {
                            ""
                        }
                    )
                })
                .collect();
            println!(
                "ties (two events of one node at one time): {} of {} events; decided at depth {}; max depth {}; against an insertion counter's order: {} of depth <= 3, {} deeper",
                t.ties,
                t.events,
                depths.join(", "),
                t.max_depth,
                t.violations,
                t.deep_reordered
            );
        }
        for (name, v) in [("by pod", &p.by_pod), ("fine-grained", &p.fine_grained)] {
            let cells: Vec<String> = v.iter().map(|(t, s)| format!("{t}: {s:.2}")).collect();
            println!(
                "  speedup bound {name} (threads: bound): {}",
                cells.join(", ")
            );
        }
    }
    for b in &out.summary.bins {
        println!(
            "{:>14} n={:>6} fct mean {:.3e} p99 {:.3e} sd mean {:.2} p99 {:.2}",
            b.bin, b.count, b.fct_mean, b.fct_p99, b.slowdown_mean, b.slowdown_p99
        );
    }
    if out.records.len() <= 20 {
        for r in &out.records {
            println!(
                "flow {} {}->{} size {} fct {:.6} ideal {:.6} retx {} rto {} copies {} winner {}",
                r.id,
                r.src,
                r.dst,
                r.size,
                r.fct,
                r.ideal_fct,
                r.retransmissions,
                r.timeouts,
                r.copies,
                r.winner
            );
        }
    }
    println!(
        "overhead {:.4} unfinished {}",
        out.summary.overhead, out.summary.unfinished
    );
    let sum = |f: fn(&repflow_sim::FlowRecord) -> u64| out.records.iter().map(f).sum::<u64>();
    println!(
        "retransmissions {} (fast retransmit {}, timeout {}, fast detection {}, aggressive timer {}), timeouts {}",
        sum(|r| r.retransmissions),
        sum(|r| r.fast_retransmits),
        sum(|r| r.timeout_retransmits),
        sum(|r| r.detect_retransmits),
        sum(|r| r.atimer_retransmits),
        sum(|r| r.timeouts)
    );
}
