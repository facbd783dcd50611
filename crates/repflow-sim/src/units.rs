//! Physical quantities with units: durations, rates and byte sizes.
//!
//! Configuration files and the command line write quantities as strings with a unit
//! (`"10ms"`, `"1Gbps"`, `"100KB"`). A bare number (`"10"`, or a JSON/TOML number such as
//! `10` or `0`) is refused with a message suggesting a unit: in a field such as a minimum RTO a
//! bare "10" means seconds to some readers and milliseconds to others. Internally time is an
//! integer number of picoseconds.
//!
//! This is the one grammar of quantities in RepFlow: the Python package (sweep specs, the
//! testbed, the library's command line) parses through these functions too.
//!
//! - durations: `s`, `ms`, `us` (or `µs`), `ns`, `ps`, `min`; case matters. A lone `m` is
//!   refused as ambiguous (minutes or milliseconds?).
//! - rates (bits per second): an optional prefix `k`, `M`, `G`, `T` (powers of 1000) followed
//!   by nothing, `bps`, `b/s`, `bit` or `bit/s`; case does not matter, except that a capital
//!   `B` (bytes) is refused.
//! - sizes (bytes): `B`, `KB`, `MB`, `GB`, `TB` (powers of 1000; the `B` may be left out),
//!   `KiB`, `MiB`, `GiB` (powers of 1024); case does not matter.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Picoseconds per second.
pub const PS_PER_SEC: u64 = 1_000_000_000_000;

/// A non-negative duration, stored in integer picoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub u64);

impl Duration {
    /// The duration in picoseconds.
    pub fn ps(self) -> u64 {
        self.0
    }
    /// The duration in seconds.
    pub fn secs(self) -> f64 {
        self.0 as f64 / PS_PER_SEC as f64
    }
    /// Builds a duration from seconds (rounded to the nearest picosecond).
    pub fn from_secs(s: f64) -> Duration {
        Duration((s * PS_PER_SEC as f64).round() as u64)
    }
    /// Parses `"50ms"`, `"1.5us"`, `"2s"`, `"500ns"`, `"10ps"`, `"2min"`. A bare number is
    /// refused (see [`bare_number`]); so is `"2m"` (minutes or milliseconds?).
    pub fn parse(s: &str) -> Result<Duration, String> {
        let t = s.trim();
        let (num, unit) = split_unit(t);
        let v: f64 = num.parse().map_err(|_| {
            format!("'{s}' is not a duration (e.g. \"50ms\", \"1us\", \"2s\", \"2min\")")
        })?;
        let mult = match unit {
            "" => return Err(bare_number(num, v, Kind::Duration)),
            "s" => PS_PER_SEC as f64,
            "ms" => 1e9,
            "us" | "µs" => 1e6,
            "ns" => 1e3,
            "ps" => 1.0,
            "min" => 60.0 * PS_PER_SEC as f64,
            "m" => {
                return Err(format!(
                    "'{s}' is ambiguous: write '{num}min' for minutes or '{num}ms' for milliseconds"
                ))
            }
            _ => {
                return Err(format!(
                    "'{s}' has unknown time unit '{unit}' (accepted: s, ms, us, ns, ps, min)"
                ))
            }
        };
        if !v.is_finite() || v < 0.0 {
            return Err(format!("'{s}' must be a non-negative duration"));
        }
        Ok(Duration((v * mult).round() as u64))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ps = self.0;
        if ps == 0 {
            write!(f, "0s")
        } else if ps.is_multiple_of(PS_PER_SEC) {
            write!(f, "{}s", ps / PS_PER_SEC)
        } else if ps.is_multiple_of(1_000_000_000) {
            write!(f, "{}ms", ps / 1_000_000_000)
        } else if ps.is_multiple_of(1_000_000) {
            write!(f, "{}us", ps / 1_000_000)
        } else if ps.is_multiple_of(1_000) {
            write!(f, "{}ns", ps / 1_000)
        } else {
            write!(f, "{ps}ps")
        }
    }
}

/// A link rate in bits per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

impl Rate {
    /// Bits per second.
    pub fn bps(self) -> u64 {
        self.0
    }
    /// Picoseconds to serialize `bytes` bytes at this rate (rounded up).
    pub fn tx_time(self, bytes: u64) -> u64 {
        let bits = bytes as u128 * 8 * PS_PER_SEC as u128;
        bits.div_ceil(self.0 as u128) as u64
    }
    /// Parses `"1Gbps"`, `"10Gb/s"`, `"50Mbit"`, `"100kbit/s"`, `"1G"`, `"1500bps"`. A bare
    /// number is refused (see [`bare_number`]); so is a capital `B` (`"1GBps"`, bytes per second).
    pub fn parse(s: &str) -> Result<Rate, String> {
        let t = s.trim();
        let (num, unit) = split_unit(t);
        let v: f64 = num
            .parse()
            .map_err(|_| format!("'{s}' is not a rate (e.g. \"1Gbps\", \"10Gb/s\", \"50Mbit\")"))?;
        if unit.is_empty() {
            return Err(bare_number(num, v, Kind::Rate));
        }
        let unknown = || {
            format!(
                "'{s}' has unknown rate unit '{unit}' (accepted: bps, kbps, Mbps, Gbps, Tbps; \
                 also written b/s, bit or bit/s, e.g. 10Gb/s, 50Mbit, or the prefix alone, e.g. 1G)"
            )
        };
        if unit.contains('B') {
            return Err(format!(
                "'{s}': rates are in bits per second and 'B' means bytes; write e.g. 10Gbps"
            ));
        }
        let lower = unit.to_ascii_lowercase();
        let (prefix, rest) = match lower.chars().next() {
            Some(c @ ('k' | 'm' | 'g' | 't')) => (Some(c), &lower[1..]),
            _ => (None, lower.as_str()),
        };
        if !matches!(rest, "" | "bps" | "b/s" | "bit" | "bit/s") {
            return Err(unknown());
        }
        let mult = match prefix {
            None => 1.0,
            Some('k') => 1e3,
            Some('m') => 1e6,
            Some('g') => 1e9,
            _ => 1e12,
        };
        let bps = v * mult;
        if !bps.is_finite() || bps < 1.0 {
            return Err(format!("'{s}' must be a positive rate (at least 1 bps)"));
        }
        Ok(Rate(bps.round() as u64))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b.is_multiple_of(1_000_000_000) {
            write!(f, "{}Gbps", b / 1_000_000_000)
        } else if b.is_multiple_of(1_000_000) {
            write!(f, "{}Mbps", b / 1_000_000)
        } else if b.is_multiple_of(1_000) {
            write!(f, "{}kbps", b / 1_000)
        } else {
            write!(f, "{b}bps")
        }
    }
}

/// A size in bytes. `KB`, `MB`, `GB` are powers of 1000; `KiB`, `MiB`, `GiB` powers of 1024.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes(pub u64);

impl Bytes {
    /// Parses `"100KB"`, `"36kb"`, `"1MB"`, `"1M"`, `"64KiB"`, `"1460B"`. A bare number is
    /// refused (see [`bare_number`]). Case does not matter: sizes are always bytes.
    pub fn parse(s: &str) -> Result<Bytes, String> {
        let t = s.trim();
        let (num, unit) = split_unit(t);
        let v: f64 = num
            .parse()
            .map_err(|_| format!("'{s}' is not a size (e.g. \"100KB\", \"1MB\", \"1460B\")"))?;
        let mult = match unit.to_ascii_lowercase().as_str() {
            "" => return Err(bare_number(num, v, Kind::Size)),
            "b" => 1.0,
            "kb" | "k" => 1e3,
            "mb" | "m" => 1e6,
            "gb" | "g" => 1e9,
            "tb" | "t" => 1e12,
            "kib" => 1024.0,
            "mib" => 1024.0 * 1024.0,
            "gib" => 1024.0 * 1024.0 * 1024.0,
            _ => {
                return Err(format!(
                    "'{s}' has unknown size unit '{unit}' (accepted: B, KB, MB, GB, TB, KiB, MiB, \
                     GiB; the B may be left out, e.g. 64K)"
                ))
            }
        };
        let b = v * mult;
        if !b.is_finite() || b < 0.0 {
            return Err(format!("'{s}' must be a non-negative size"));
        }
        Ok(Bytes(b.round() as u64))
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= 1_000_000 && b.is_multiple_of(1_000_000) {
            write!(f, "{}MB", b / 1_000_000)
        } else if b >= 1000 && b.is_multiple_of(1000) {
            write!(f, "{}KB", b / 1000)
        } else {
            write!(f, "{b}B")
        }
    }
}

/// What a quantity measures, for [`bare_number`]'s suggestion.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Duration,
    Rate,
    Size,
}

/// The message for a quantity written without a unit: `'10' has no unit: give one, e.g. 10ms`.
///
/// The suggested unit is a guess from the magnitude alone (front ends that know the field, such
/// as the Python package, replace it with the unit nearest the field's default): durations of
/// at least 1 are read as milliseconds, smaller ones as seconds; rates of at least 100000 as bits
/// per second, of at least 100 as Mbit/s, smaller ones as Gbit/s; sizes of at least 1000 as bytes,
/// smaller ones as kilobytes. Every front end keeps the phrase `has no unit: give one, e.g. `.
fn bare_number(num: &str, v: f64, kind: Kind) -> String {
    let unit = match kind {
        Kind::Duration if v >= 1.0 => "ms",
        Kind::Duration => "s",
        Kind::Rate if v >= 100_000.0 => "bps",
        Kind::Rate if v >= 100.0 => "Mbps",
        Kind::Rate => "Gbps",
        Kind::Size if v >= 1000.0 => "B",
        Kind::Size => "KB",
    };
    format!("'{num}' has no unit: give one, e.g. {num}{unit}")
}

fn split_unit(t: &str) -> (&str, &str) {
    let idx = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e'))
        .unwrap_or(t.len());
    // "1e3" style exponents are numbers; a trailing 'e' alone is not used by any unit.
    (t[..idx].trim(), t[idx..].trim())
}

macro_rules! serde_quantity {
    ($ty:ident, $what:expr, $from_num:expr) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_string())
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                #[derive(Deserialize)]
                #[serde(untagged)]
                enum Raw {
                    S(String),
                    F(f64),
                }
                match Raw::deserialize(d).map_err(|_| {
                    serde::de::Error::custom(format!(
                        "expected {} as a string with a unit (e.g. \"10ms\", \"1Gbps\", \"100KB\")",
                        $what
                    ))
                })? {
                    Raw::S(s) => $ty::parse(&s).map_err(serde::de::Error::custom),
                    Raw::F(v) => {
                        let f: fn(f64) -> Result<$ty, String> = $from_num;
                        f(v).map_err(serde::de::Error::custom)
                    }
                }
            }
        }
    };
}

// A number (`10`, `0.05`) in a JSON or TOML document is a bare number: refused like `"10"`.
serde_quantity!(Duration, "a duration", |v| Err(number_error(
    v,
    Kind::Duration
)));
serde_quantity!(Rate, "a rate", |v| Err(number_error(v, Kind::Rate)));
serde_quantity!(Bytes, "a size", |v| Err(number_error(v, Kind::Size)));

/// [`bare_number`] for a number read from a document (`10`, `0.05`, `1e9`).
pub(crate) fn number_error(v: f64, kind: Kind) -> String {
    bare_number(&number_text(v), v, kind)
}

fn number_text(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        assert_eq!(Duration::parse("50ms").unwrap().ps(), 50_000_000_000);
        assert_eq!(Duration::parse("1us").unwrap().ps(), 1_000_000);
        assert_eq!(Duration::parse("0.5s").unwrap().ps(), PS_PER_SEC / 2);
        let e = Duration::parse("10").unwrap_err();
        assert_eq!(e, "'10' has no unit: give one, e.g. 10ms");
        assert!(Duration::parse("0").is_err());
        assert!(Duration::parse("fast").is_err());
        assert!(Duration::parse("10 parsecs").is_err());
        assert!(Duration::parse("-1ms").is_err());
        assert_eq!(Duration::parse("10ms").unwrap().to_string(), "10ms");
    }

    #[test]
    fn parses_rates_and_sizes() {
        assert_eq!(Rate::parse("1Gbps").unwrap().bps(), 1_000_000_000);
        assert_eq!(Rate::parse("50Mbps").unwrap().bps(), 50_000_000);
        assert!(Rate::parse("0Gbps").is_err());
        assert_eq!(Bytes::parse("100KB").unwrap().0, 100_000);
        assert_eq!(Bytes::parse("64KiB").unwrap().0, 65_536);
        assert!(Bytes::parse("12 furlongs").is_err());
    }

    #[test]
    fn one_grammar_for_every_front_end() {
        // Minutes are `min`; a lone `m` is refused and the message offers both readings.
        assert_eq!(Duration::parse("2min").unwrap().secs(), 120.0);
        let e = Duration::parse("2m").unwrap_err();
        assert!(e.contains("2min") && e.contains("2ms"), "{e}");
        assert_eq!(Duration::parse("1.5 ms").unwrap().ps(), 1_500_000_000);
        // Rates: bits per second in every spelling the testbed and sweep specs used.
        for text in ["10Gbps", "10Gb/s", "10gbit", "10Gbit/s", "10G", "10000Mbps"] {
            assert_eq!(Rate::parse(text).unwrap().bps(), 10_000_000_000, "{text}");
        }
        assert_eq!(Rate::parse("100kbit").unwrap().bps(), 100_000);
        assert_eq!(Rate::parse("1500bps").unwrap().bps(), 1500);
        assert!(Rate::parse("1500").unwrap_err().contains("has no unit"));
        let e = Rate::parse("1GBps").unwrap_err();
        assert!(e.contains("bytes"), "{e}");
        assert!(Rate::parse("10Gbs").is_err());
        assert!(Rate::parse("10 furlongs").is_err());
        // Sizes are bytes whatever the case; KiB and friends are binary.
        assert!(Bytes::parse("20000").unwrap_err().contains("e.g. 20000B"));
        for text in ["20KB", "20kb", "20kB", "20K", "20k", "20000B"] {
            assert_eq!(Bytes::parse(text).unwrap().0, 20_000, "{text}");
        }
        assert_eq!(Bytes::parse("1.5MiB").unwrap().0, 1_572_864);
        assert_eq!(Bytes::parse("1mib").unwrap().0, 1_048_576);
        assert_eq!(Bytes::parse("2TB").unwrap().0, 2_000_000_000_000);
        assert!(Bytes::parse("20Kbit").is_err());
    }

    #[test]
    fn numbers_in_documents_are_refused() {
        let e = serde_json::from_str::<Duration>("10")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'10' has no unit: give one, e.g. 10ms"), "{e}");
        assert!(serde_json::from_str::<Duration>("0").is_err());
        assert!(serde_json::from_str::<Rate>("1000").is_err());
        assert!(serde_json::from_str::<Bytes>("1460").is_err());
        assert_eq!(
            serde_json::from_str::<Duration>("\"10ms\"").unwrap().ps(),
            10_000_000_000
        );
    }

    #[test]
    fn tx_time_is_exact_for_round_rates() {
        // 1500 B at 1 Gb/s = 12 us.
        assert_eq!(Rate(1_000_000_000).tx_time(1500), 12_000_000);
        // 1500 B at 10 Gb/s = 1.2 us.
        assert_eq!(Rate(10_000_000_000).tx_time(1500), 1_200_000);
    }
}
