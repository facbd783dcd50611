//! Flow-size distributions (both CDF formats of the literature), Poisson arrivals at a target
//! load, and host-pair patterns.

use crate::engine::Rng;
use thiserror::Error;

/// Payload bytes of one packet in the ns-2 `packets 1 cdf` format.
pub const CDF_PACKET_BYTES: u64 = 1460;

/// A CDF file that cannot be used.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CdfError {
    /// A line does not have the expected columns.
    #[error("line {line}: {message}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The file has no data.
    #[error("the CDF has no points (expected lines 'size cdf' or 'size 1 cdf')")]
    Empty,
}

/// The unit of a CDF's size column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeUnit {
    /// Sizes in bytes (`bytes cdf` format).
    Bytes,
    /// Sizes in 1460-byte packets (ns-2 `packets 1 cdf` format).
    Packets,
}

/// A piecewise-linear flow-size CDF.
///
/// Sampling draws `u ~ U(0,1)`, interpolates linearly between the points that bracket `u`
/// and rounds the value up to a whole unit (packet or byte); a packet-format size is then
/// multiplied by 1460 bytes. A vertical step (the same size at two cumulative values) is a
/// point mass. Every flow has at least one byte.
#[derive(Clone, Debug, PartialEq)]
pub struct Cdf {
    /// `(size in units, cumulative probability in [0, 1])`, non-decreasing in both.
    pub points: Vec<(f64, f64)>,
    /// Unit of the sizes.
    pub unit: SizeUnit,
}

/// Built-in workloads: name, file name, file text.
pub const BUILTIN: &[(&str, &str, &str)] = &[
    (
        "websearch",
        "websearch_pkts.cdf",
        include_str!("../../../python/repflow/workloads/websearch_pkts.cdf"),
    ),
    (
        "datamining",
        "datamining_pkts.cdf",
        include_str!("../../../python/repflow/workloads/datamining_pkts.cdf"),
    ),
    (
        "websearch-bytes",
        "websearch_bytes.cdf",
        include_str!("../../../python/repflow/workloads/websearch_bytes.cdf"),
    ),
    (
        "datamining-vl2",
        "datamining_vl2_bytes.cdf",
        include_str!("../../../python/repflow/workloads/datamining_vl2_bytes.cdf"),
    ),
    (
        "fb-hadoop",
        "fb_hadoop_bytes.cdf",
        include_str!("../../../python/repflow/workloads/fb_hadoop_bytes.cdf"),
    ),
    (
        "google-rpc",
        "google_rpc_bytes.cdf",
        include_str!("../../../python/repflow/workloads/google_rpc_bytes.cdf"),
    ),
    (
        "ali-storage",
        "ali_storage_bytes.cdf",
        include_str!("../../../python/repflow/workloads/ali_storage_bytes.cdf"),
    ),
];

/// The text of a built-in workload, by name.
pub fn builtin_text(name: &str) -> Option<&'static str> {
    BUILTIN
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, t)| *t)
}

impl Cdf {
    /// Parses either format. Three columns `size 1 cdf` mean packets; two columns
    /// `size cdf` mean bytes. Cumulative values above 1 are read as percent (0–100).
    /// Blank lines and lines starting with `#` are ignored.
    pub fn parse(text: &str) -> Result<Cdf, CdfError> {
        let mut rows: Vec<(usize, f64, f64)> = Vec::new();
        let mut cols_seen: Option<usize> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            let lineno = i + 1;
            if f.len() != 2 && f.len() != 3 {
                return Err(CdfError::Malformed {
                    line: lineno,
                    message: format!(
                        "expected 2 columns 'size cdf' or 3 columns 'size 1 cdf', found {}",
                        f.len()
                    ),
                });
            }
            if let Some(c) = cols_seen {
                if c != f.len() {
                    return Err(CdfError::Malformed {
                        line: lineno,
                        message: "every line must have the same number of columns".into(),
                    });
                }
            }
            cols_seen = Some(f.len());
            let num = |s: &str, what: &str| -> Result<f64, CdfError> {
                let v: f64 = s.parse().map_err(|_| CdfError::Malformed {
                    line: lineno,
                    message: format!("{what} '{s}' is not a number"),
                })?;
                if !v.is_finite() {
                    return Err(CdfError::Malformed {
                        line: lineno,
                        message: format!("{what} '{s}' is not finite"),
                    });
                }
                Ok(v)
            };
            let size = num(f[0], "size")?;
            let cum = num(f[f.len() - 1], "cumulative probability")?;
            rows.push((lineno, size, cum));
        }
        if rows.is_empty() {
            return Err(CdfError::Empty);
        }
        let unit = if cols_seen == Some(3) {
            SizeUnit::Packets
        } else {
            SizeUnit::Bytes
        };
        let max_cum = rows.iter().map(|r| r.2).fold(f64::MIN, f64::max);
        let percent = max_cum > 1.0 + 1e-9;
        let scale = if percent { 100.0 } else { 1.0 };
        let mut points = Vec::with_capacity(rows.len());
        let mut prev: Option<(f64, f64)> = None;
        for &(lineno, size, cum) in &rows {
            let c = cum / scale;
            if size < 0.0 {
                return Err(CdfError::Malformed {
                    line: lineno,
                    message: format!("size {size} is negative"),
                });
            }
            if !(-1e-12..=1.0 + 1e-9).contains(&c) {
                return Err(CdfError::Malformed {
                    line: lineno,
                    message: format!(
                        "cumulative probability {cum} is outside {}",
                        if percent { "0–100 %" } else { "0–1" }
                    ),
                });
            }
            if percent && cum > 100.0 + 1e-9 {
                return Err(CdfError::Malformed {
                    line: lineno,
                    message: format!("cumulative probability {cum} is beyond 100 %"),
                });
            }
            if let Some((ps, pc)) = prev {
                if size < ps {
                    return Err(CdfError::Malformed {
                        line: lineno,
                        message: format!("sizes must not decrease ({size} after {ps})"),
                    });
                }
                if c < pc - 1e-12 {
                    return Err(CdfError::Malformed {
                        line: lineno,
                        message: format!(
                            "cumulative probability decreases ({cum} after a larger value)"
                        ),
                    });
                }
            }
            prev = Some((size, c));
            points.push((size, c.clamp(0.0, 1.0)));
        }
        let last = points.last().expect("non-empty").1;
        if (last - 1.0).abs() > 1e-6 {
            return Err(CdfError::Malformed {
                line: rows.last().expect("non-empty").0,
                message: format!(
                    "the last cumulative probability must be 1 (or 100 %), found {}",
                    rows.last().expect("non-empty").2
                ),
            });
        }
        points.last_mut().expect("non-empty").1 = 1.0;
        // An implicit start: the first size carries all mass below its cumulative value.
        if points[0].1 > 0.0 {
            let first = points[0].0;
            points.insert(0, (first, 0.0));
        }
        Ok(Cdf { points, unit })
    }

    fn unit_bytes(&self) -> u64 {
        match self.unit {
            SizeUnit::Bytes => 1,
            SizeUnit::Packets => CDF_PACKET_BYTES,
        }
    }

    /// Converts a raw interpolated value to bytes (rounded up to a whole unit, at least 1 B).
    fn to_bytes(&self, v: f64) -> u64 {
        let units = v.ceil().max(1.0) as u64;
        units * self.unit_bytes()
    }

    /// The value (in units) at cumulative probability `u`.
    pub fn quantile_units(&self, u: f64) -> f64 {
        let p = &self.points;
        // First index whose cumulative value is >= u.
        let idx = p.partition_point(|&(_, c)| c < u);
        if idx == 0 {
            return p[0].0;
        }
        if idx >= p.len() {
            return p[p.len() - 1].0;
        }
        let (x0, c0) = p[idx - 1];
        let (x1, c1) = p[idx];
        if c1 <= c0 {
            return x1;
        }
        x0 + (x1 - x0) * (u - c0) / (c1 - c0)
    }

    /// Draws one flow size in bytes.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        self.to_bytes(self.quantile_units(rng.next_f64()))
    }

    /// Exact mean of [`Cdf::sample`] in bytes.
    pub fn mean_bytes(&self) -> f64 {
        self.expect(integral_of_ceil_clamped)
    }

    /// Exact probability that a sample is at most `bytes`.
    pub fn prob_at_most(&self, bytes: u64) -> f64 {
        // sample <= bytes  <=>  max(ceil(v),1) * unit <= bytes  <=>  v <= floor(bytes/unit).
        let limit_units = (bytes / self.unit_bytes()) as f64;
        if limit_units < 1.0 {
            return 0.0;
        }
        let mut p = 0.0;
        for w in self.points.windows(2) {
            let ((x0, c0), (x1, c1)) = (w[0], w[1]);
            let mass = c1 - c0;
            if mass <= 0.0 {
                continue;
            }
            if x1 <= x0 {
                if x1 <= limit_units {
                    p += mass;
                }
            } else {
                let frac = ((limit_units - x0) / (x1 - x0)).clamp(0.0, 1.0);
                p += mass * frac;
            }
        }
        p
    }

    /// Exact probability mass function restricted to sizes: the expectation of a function
    /// of the rounded size, `g(lo, hi)` = ∫ over a segment [lo, hi] of the rounded value.
    fn expect(&self, seg_integral: impl Fn(f64, f64) -> f64) -> f64 {
        let unit = self.unit_bytes() as f64;
        let mut total = 0.0;
        for w in self.points.windows(2) {
            let ((x0, c0), (x1, c1)) = (w[0], w[1]);
            let mass = c1 - c0;
            if mass <= 0.0 {
                continue;
            }
            let mean_units = if x1 <= x0 {
                x0.ceil().max(1.0)
            } else {
                seg_integral(x0, x1) / (x1 - x0)
            };
            total += mass * mean_units * unit;
        }
        total
    }
}

/// ∫_lo^hi max(ceil(v), 1) dv for 0 ≤ lo < hi.
fn integral_of_ceil_clamped(lo: f64, hi: f64) -> f64 {
    // Below 1 the rounded value is 1.
    let mut total = 0.0;
    let mut a = lo;
    if a < 1.0 {
        let b = hi.min(1.0);
        total += b - a;
        a = b;
        if a >= hi {
            return total;
        }
    }
    let m = a.ceil();
    let n = hi.floor();
    if m > n {
        return total + (hi - a) * m;
    }
    // [a, m] -> m ; integer intervals (j, j+1] for j in m..n -> j+1 ; (n, hi] -> n+1.
    total += (m - a) * m;
    total += (n * (n + 1.0) - m * (m + 1.0)) / 2.0;
    total += (hi - n) * (n + 1.0);
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_formats() {
        let ws = Cdf::parse(builtin_text("websearch").unwrap()).unwrap();
        assert_eq!(ws.unit, SizeUnit::Packets);
        let wb = Cdf::parse(builtin_text("websearch-bytes").unwrap()).unwrap();
        assert_eq!(wb.unit, SizeUnit::Bytes);
        assert_eq!(wb.points.last().unwrap().1, 1.0);
        for (name, _, text) in BUILTIN {
            Cdf::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn means_match_the_published_figures() {
        // The data-mining CDF's provenance (python/repflow/workloads): pFabric data mining mean ≈ 7.47 MB (5117 packets).
        let dm = Cdf::parse(builtin_text("datamining").unwrap()).unwrap();
        let m = dm.mean_bytes();
        assert!((m / 1460.0 - 5117.0).abs() < 5.0, "data mining mean {m}");
        let ws = Cdf::parse(builtin_text("websearch").unwrap()).unwrap();
        let m = ws.mean_bytes();
        assert!(m > 1.60e6 && m < 1.75e6, "web search mean {m}");
        // 54 % of web-search flows are at most 100 KB... in packets: floor(100000/1460)=68.
        let p = ws.prob_at_most(100_000);
        assert!((p - 0.54).abs() < 0.02, "P(<=100KB) = {p}");
    }

    #[test]
    fn ceil_integral_is_exact() {
        // ∫_0.5^3 max(ceil v,1) = 0.5*1 + 1*2 + 1*3 = 5.5
        assert!((integral_of_ceil_clamped(0.5, 3.0) - 5.5).abs() < 1e-12);
        // ∫_2.2^2.7 ceil = 0.5*3
        assert!((integral_of_ceil_clamped(2.2, 2.7) - 1.5).abs() < 1e-12);
        // ∫_1^4 ceil = 2 + 3 + 4
        assert!((integral_of_ceil_clamped(1.0, 4.0) - 9.0).abs() < 1e-12);
    }

    #[test]
    fn rejects_bad_files() {
        assert!(matches!(Cdf::parse(""), Err(CdfError::Empty)));
        assert!(Cdf::parse("10 0.5\n5 1\n").is_err()); // size decreases
        assert!(Cdf::parse("10 0.5\n20 0.4\n30 1\n").is_err()); // cdf decreases
        assert!(Cdf::parse("10 50\n20 120\n").is_err()); // beyond 100 %
        assert!(Cdf::parse("10 0.2\n20 0.9\n").is_err()); // never reaches 1
        assert!(Cdf::parse("10 x\n").is_err());
        assert!(Cdf::parse("10\n").is_err());
    }
}

/// One flow arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Arrival time, ps.
    pub time: u64,
    /// Source host.
    pub src: u32,
    /// Destination host.
    pub dst: u32,
    /// Application bytes.
    pub size: u64,
}

/// Poisson flow arrivals between random host pairs at a target load.
///
/// The load ρ is the flow-byte arrival rate over the aggregate capacity of the host links:
/// λ = ρ · Σ host link rates / (8 · E\[size\]). Each arrival draws, in this order, its gap
/// (exponential), its source (uniform), its destination (uniform among the other hosts, or
/// among hosts of another group for inter-pod traffic) and its size (from the CDF).
pub struct PoissonArrivals {
    cdf: Cdf,
    rng: Rng,
    mean_gap_s: f64,
    t_s: f64,
    groups: Vec<u32>,
    inter_group: bool,
    to_first: bool,
}

impl PoissonArrivals {
    /// Sends every flow to host 0 from a source uniform over the other hosts (incast).
    pub fn to_first(mut self, on: bool) -> PoissonArrivals {
        self.to_first = on;
        self
    }

    /// Arrivals at `load` over hosts whose links sum to `capacity_bps`; `groups[h]` is host
    /// `h`'s pod (used when `inter_group`).
    pub fn new(
        cdf: Cdf,
        load: f64,
        capacity_bps: f64,
        groups: Vec<u32>,
        inter_group: bool,
        rng: Rng,
    ) -> PoissonArrivals {
        let lambda = load * capacity_bps / (8.0 * cdf.mean_bytes());
        PoissonArrivals {
            cdf,
            rng,
            mean_gap_s: 1.0 / lambda,
            t_s: 0.0,
            groups,
            inter_group,
            to_first: false,
        }
    }

    /// The next arrival.
    pub fn next_arrival(&mut self) -> Arrival {
        self.t_s += self.rng.exp(self.mean_gap_s);
        let n = self.groups.len() as u64;
        if self.to_first {
            let src = 1 + self.rng.below(n - 1) as u32;
            let size = self.cdf.sample(&mut self.rng);
            return Arrival {
                time: (self.t_s * crate::units::PS_PER_SEC as f64).round() as u64,
                src,
                dst: 0,
                size,
            };
        }
        let src = self.rng.below(n) as u32;
        let dst = loop {
            let d = self.rng.below(n) as u32;
            if d == src {
                continue;
            }
            if self.inter_group && self.groups[d as usize] == self.groups[src as usize] {
                continue;
            }
            break d;
        };
        let size = self.cdf.sample(&mut self.rng);
        Arrival {
            time: (self.t_s * crate::units::PS_PER_SEC as f64).round() as u64,
            src,
            dst,
            size,
        }
    }
}

#[cfg(test)]
mod arrival_tests {
    use super::*;

    #[test]
    fn sampled_sizes_match_the_cdf_kolmogorov_smirnov() {
        for name in ["websearch", "datamining", "websearch-bytes", "fb-hadoop"] {
            let cdf = Cdf::parse(builtin_text(name).unwrap()).unwrap();
            let mut rng = Rng::new(11, 0);
            let n = 50_000;
            let mut v: Vec<u64> = (0..n).map(|_| cdf.sample(&mut rng)).collect();
            v.sort_unstable();
            // D = sup |F_n(x) − F(x)| over the sample points (F evaluated exactly).
            let mut d: f64 = 0.0;
            let mut i = 0;
            while i < n {
                let x = v[i];
                let mut j = i;
                while j < n && v[j] == x {
                    j += 1;
                }
                let f = cdf.prob_at_most(x);
                let below = if x == 0 { 0.0 } else { cdf.prob_at_most(x - 1) };
                d = d.max((j as f64 / n as f64 - f).abs());
                d = d.max((i as f64 / n as f64 - below).abs());
                i = j;
            }
            // 99.9 % critical value of the one-sample KS statistic: 1.95 / sqrt(n).
            let crit = 1.95 / (n as f64).sqrt();
            assert!(d < crit, "{name}: KS D = {d} ≥ {crit}");
        }
    }

    #[test]
    fn offered_load_matches_the_target_within_two_percent() {
        let cdf = Cdf::parse(builtin_text("websearch").unwrap()).unwrap();
        let hosts = 128usize;
        let cap = hosts as f64 * 10e9;
        for load in [0.2, 0.5, 0.8] {
            let mut a = PoissonArrivals::new(
                cdf.clone(),
                load,
                cap,
                (0..hosts as u32).map(|h| h / 16).collect(),
                false,
                Rng::new(5, 1),
            );
            let horizon = 1_000_000_000_000u64; // 1 s
            let mut bytes = 0u64;
            loop {
                let x = a.next_arrival();
                if x.time >= horizon {
                    break;
                }
                assert_ne!(x.src, x.dst);
                bytes += x.size;
            }
            let measured = bytes as f64 * 8.0 / cap;
            assert!(
                (measured / load - 1.0).abs() < 0.02,
                "load {load}: measured {measured}"
            );
        }
    }

    #[test]
    fn inter_group_pairs_cross_groups() {
        let cdf = Cdf::parse(builtin_text("datamining").unwrap()).unwrap();
        let groups: Vec<u32> = (0..16).map(|h| h / 4).collect();
        let mut a = PoissonArrivals::new(cdf, 0.5, 16e9, groups.clone(), true, Rng::new(1, 1));
        for _ in 0..1000 {
            let x = a.next_arrival();
            assert_ne!(groups[x.src as usize], groups[x.dst as usize]);
        }
    }
}

/// The random stream (of the run's seed) that draws the simulator's Poisson arrivals.
pub const ARRIVAL_STREAM: u64 = 1;

/// The flows one host sends in an open-loop load generator (`repflow load`): Poisson arrivals
/// at `load` × `link_rate_bps` of flow bytes, sizes from `cdf`, each to a peer drawn uniformly
/// from `0..peers`, until `until_ps`. Each [`Arrival`] has `src` 0 (this host) and `dst` the
/// peer's index. `None` when there is no peer.
///
/// This is the simulator's own arrival process, not a second one: [`PoissonArrivals`] over
/// `peers + 1` hosts whose links add up to `link_rate_bps`, with every flow going to host 0
/// (the incast pattern) and the random stream [`ARRIVAL_STREAM`] of `seed`, read in the other
/// direction (the source `s` it draws among hosts `1..=peers` is the peer `s − 1`). A simulated
/// incast with the same seed, CDF and flow-byte rate has the same arrival times and sizes.
pub fn host_schedule(
    cdf: &Cdf,
    load: f64,
    link_rate_bps: f64,
    peers: u32,
    until_ps: u64,
    seed: u64,
) -> Option<Vec<Arrival>> {
    if peers == 0 {
        return None;
    }
    let hosts = vec![0; peers as usize + 1];
    let mut arrivals = PoissonArrivals::new(
        cdf.clone(),
        load,
        link_rate_bps,
        hosts,
        false,
        Rng::new(seed, ARRIVAL_STREAM),
    )
    .to_first(true);
    let mut out = Vec::new();
    loop {
        let a = arrivals.next_arrival();
        if a.time >= until_ps {
            return Some(out);
        }
        out.push(Arrival {
            time: a.time,
            src: 0,
            dst: a.src - 1,
            size: a.size,
        });
    }
}

#[cfg(test)]
mod schedule_tests {
    use super::*;

    #[test]
    fn a_host_schedule_is_the_incast_process_reversed() {
        let cdf = Cdf::parse(builtin_text("google-rpc").unwrap()).unwrap();
        let until = 20_000_000_000; // 20 ms
        let s = host_schedule(&cdf, 0.5, 1e9, 3, until, 9).unwrap();
        // the simulator's process: 4 hosts of 250 Mb/s each, every flow to host 0
        let mut sim = PoissonArrivals::new(
            cdf.clone(),
            0.5,
            1e9,
            vec![0; 4],
            false,
            Rng::new(9, ARRIVAL_STREAM),
        )
        .to_first(true);
        assert!(s.len() > 20, "{} flows", s.len());
        for a in &s {
            let b = sim.next_arrival();
            assert_eq!(
                (a.time, a.size, a.dst + 1, a.src),
                (b.time, b.size, b.src, 0)
            );
        }
        assert!(sim.next_arrival().time >= until);
        assert!(s.iter().all(|a| a.dst < 3 && a.time < until));
        assert!(host_schedule(&cdf, 0.5, 1e9, 0, until, 9).is_none());
    }
}
