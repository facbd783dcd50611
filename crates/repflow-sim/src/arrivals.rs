//! The arrivals of a run: where the workload's flows come from (the flow-size CDF the
//! configuration names, Poisson arrivals at the offered load, an explicit trace, background
//! flows) and their merge into one time-ordered stream.

use crate::config::{Config, PairPattern, TraceFlow};
use crate::engine::{Rng, Time};
use crate::network::Topology;
use crate::workload::{builtin_text, Arrival, Cdf, PoissonArrivals};

/// Loads the flow-size CDF a configuration names (built-in name, inline text, or file path).
pub fn load_cdf(cfg: &Config) -> Result<Cdf, String> {
    let w = &cfg.workload;
    let (text, origin): (String, String) = if let Some(t) = &w.cdf_text {
        (t.clone(), format!("workload.cdf ({})", w.cdf))
    } else if let Some(t) = builtin_text(&w.cdf) {
        (
            t.to_string(),
            format!("workload.cdf (built-in '{}')", w.cdf),
        )
    } else {
        let names: Vec<&str> = crate::workload::BUILTIN.iter().map(|b| b.0).collect();
        let t = std::fs::read_to_string(&w.cdf).map_err(|e| {
            format!(
                "workload.cdf: '{}' is neither a built-in workload ({}) nor a readable file ({e})",
                w.cdf,
                names.join(", ")
            )
        })?;
        (t, format!("workload.cdf file '{}'", w.cdf))
    };
    Cdf::parse(&text).map_err(|e| format!("{origin}: {e}"))
}

/// The arrivals of an explicit list of flows.
fn trace_arrivals(flows: &[TraceFlow]) -> Vec<Arrival> {
    flows
        .iter()
        .map(|f| Arrival {
            time: f.start.ps(),
            src: f.src,
            dst: f.dst,
            size: f.size.0,
        })
        .collect()
}

/// The flows of a run in arrival order: Poisson arrivals, an explicit trace, or Poisson
/// arrivals merged with explicit background flows.
pub enum Arrivals {
    /// Poisson arrivals at the offered load.
    Poisson(Box<PoissonArrivals>),
    /// An explicit trace, replacing the Poisson arrivals.
    Trace(std::vec::IntoIter<Arrival>),
    /// Poisson arrivals and explicit background flows.
    Mixed(Box<MixedArrivals>),
}

/// Poisson arrivals merged in time order with explicit background flows (a background flow
/// goes first on a tie).
pub struct MixedArrivals {
    poisson: PoissonArrivals,
    next_poisson: Option<Arrival>,
    poisson_done: bool,
    background: std::iter::Peekable<std::vec::IntoIter<Arrival>>,
}

impl MixedArrivals {
    fn next(&mut self, end: Time) -> Option<Arrival> {
        if self.next_poisson.is_none() && !self.poisson_done {
            let a = self.poisson.next_arrival();
            if a.time < end {
                self.next_poisson = Some(a);
            } else {
                self.poisson_done = true;
            }
        }
        match (self.next_poisson, self.background.peek()) {
            (Some(p), Some(b)) if b.time > p.time => self.next_poisson.take(),
            (_, Some(_)) => self.background.next(),
            (Some(_), None) => self.next_poisson.take(),
            (None, None) => None,
        }
    }
}

impl Arrivals {
    /// The arrivals `cfg` describes on `topo`, with flow sizes from `cdf`, and the end of the
    /// arrival phase (the workload's duration, or just past a trace's last flow if later).
    pub fn new(cfg: &Config, topo: &Topology, cdf: Cdf) -> (Arrivals, Time) {
        let mut end = cfg.workload.duration.ps();
        if let Some(trace) = &cfg.workload.trace {
            let v = trace_arrivals(trace);
            if let Some(last) = v.last() {
                end = end.max(last.time + 1);
            }
            return (Arrivals::Trace(v.into_iter()), end);
        }
        let capacity_bps: f64 = (0..topo.n_hosts)
            .map(|h| topo.links[topo.out_links[h][0] as usize].rate.bps() as f64)
            .sum();
        let pairs = cfg.workload.pairs;
        let poisson = PoissonArrivals::new(
            cdf,
            cfg.workload.load,
            capacity_bps,
            topo.host_group.clone(),
            pairs == PairPattern::InterPod,
            Rng::new(cfg.seed, 1),
        )
        .to_first(pairs == PairPattern::Incast);
        let arrivals = match &cfg.workload.background {
            None => Arrivals::Poisson(Box::new(poisson)),
            Some(bg) => Arrivals::Mixed(Box::new(MixedArrivals {
                poisson,
                next_poisson: None,
                poisson_done: false,
                background: trace_arrivals(bg).into_iter().peekable(),
            })),
        };
        (arrivals, end)
    }

    /// The next flow to arrive before `end` (explicit flows are taken whatever their time).
    pub fn next(&mut self, end: Time) -> Option<Arrival> {
        match self {
            Arrivals::Poisson(p) => Some(p.next_arrival()).filter(|a| a.time < end),
            Arrivals::Trace(it) => it.next(),
            Arrivals::Mixed(m) => m.next(end),
        }
    }
}
