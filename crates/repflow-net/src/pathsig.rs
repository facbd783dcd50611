//! Path signatures: what a hop-limited probe learns about the path of one five-tuple. The
//! probes (`probe`, I/O) produce them and the path cache (`paths`, sans-IO) compares them; both
//! import them from here, so neither imports the other.

use std::net::IpAddr;

/// What one hop-limited probe learnt.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hop {
    /// An ICMP Time Exceeded came back from this router.
    Router(IpAddr),
    /// The destination itself answered (SYN-ACK or RST): it is within the hop limit.
    Destination,
    /// Nothing answered at this TTL.
    Silent,
}

/// The path signature of one five-tuple: the hop seen at each probed TTL.
pub type PathSig = Vec<Hop>;

/// Whether two signatures are *provably* different paths: at some probed TTL both got an
/// answer and the answers differ. A silent hop proves nothing — a probe dropped in a full
/// queue looks exactly like that — so `[a, silent]` and `[a, b]` may be the same path.
pub fn provably_different(x: &PathSig, y: &PathSig) -> bool {
    x.iter()
        .zip(y)
        .any(|(a, b)| *a != Hop::Silent && *b != Hop::Silent && a != b)
}

/// The outcome of probing one source port at every configured TTL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// A signature (at least one TTL answered).
    Path(PathSig),
    /// No TTL got an answer (no ICMP, e.g. loopback or filtered).
    NoAnswer,
}
