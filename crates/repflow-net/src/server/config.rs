//! What a server is configured with: [`ServerConfig`], every limit a peer runs into.

use std::net::SocketAddr;
use std::time::Duration;

/// Limits and settings of a `Server`.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Addresses to listen on (RepFlow: consecutive ports, so copy `i` can use port + `i`).
    pub addrs: Vec<SocketAddr>,
    /// Pre-shared key: when set, every frame must carry a valid HMAC tag.
    pub key: Option<Vec<u8>>,
    /// Largest accepted payload (bytes). Default 1 MiB: the library is for short flows
    /// (≤ 100 KB replicated), with room for the occasional longer one; raise it for bulk
    /// transfers, knowing a peer may make the server hold that much per connection while a
    /// frame arrives (and, with a key, before its tag can be checked).
    pub max_flow_size: u32,
    /// Largest number of connections served at once; more are closed at once (reset).
    pub max_connections: usize,
    /// Largest number of connections one source address may hold at once (a share of
    /// `max_connections`). When this or `max_connections` is full, a new connection takes
    /// the slot of the connection (of that address, or of anyone) that has gone longest
    /// without completing a frame, if that is at least `evict_after`; otherwise it is reset.
    pub max_connections_per_source: usize,
    /// How long a connection must have gone without completing a frame (since it was
    /// accepted or completed its last one) before a new connection may take its slot when
    /// the server is full (default 0: the longest-stalled connection goes, however young).
    /// A larger value protects young connections but lets an attacker who reconnects faster
    /// than `max_connections / evict_after` keep every slot young, and so full. Connections
    /// waiting for the application are never evicted.
    pub evict_after: Duration,
    /// When a flow is acknowledged to its sender (see [`AckAfter`]).
    pub ack_after: AckAfter,
    /// Time allowed for a new connection's first frame header to arrive.
    pub header_timeout: Duration,
    /// Time allowed between two reads (within a frame, or between frames on a pooled
    /// connection) before the connection is closed.
    pub idle_timeout: Duration,
    /// Time allowed for the rest of a frame (tag and payload) once its header has arrived,
    /// however steadily it trickles in; the connection is closed when it runs out.
    pub frame_timeout: Duration,
    /// Time allowed for every write (acknowledgements, responses) to be accepted by the
    /// socket; a peer that does not read has its connection closed when it runs out.
    pub write_timeout: Duration,
    /// With a key: frames whose timestamp differs from this host's clock by more than this
    /// are refused as possible replays (the duplicate filter then remembers ids at least
    /// twice as long, so that a replay inside the window is always recognised).
    pub replay_window: Duration,
    /// Flow ids remembered at most by the duplicate filter.
    pub dedup_capacity: usize,
    /// How long a flow id is remembered (unless all its copies arrived earlier).
    pub dedup_ttl: Duration,
    /// Bytes of call responses held at most (for all senders) to answer late copies; each
    /// response costs its length + 64. Past it, the sender address holding the most loses
    /// its oldest response; a late copy of a call whose response was dropped is answered
    /// "executed, response no longer held" (flag `GONE`), never executed again.
    pub response_cache_bytes: usize,
    /// Bytes of call responses queued at most for the connections' writers (all connections
    /// together; a response is queued anyway when nothing else is): a peer that does not
    /// read its responses holds no more; past it a response is not queued (counted in
    /// `responses_dropped`; a late copy still gets it from the response cache).
    pub response_queue_bytes: usize,
    /// Bytes of call responses held at most for one sender address (its oldest is dropped
    /// first); a larger response is answered but not held.
    pub response_cache_bytes_per_peer: usize,
    /// Flows delivered but not yet taken by the application before readers wait.
    pub queue: usize,
    /// Listen on Multipath TCP sockets (`IPPROTO_MPTCP`); they also accept plain TCP clients.
    pub mptcp: bool,
    /// A call's response is sent on the connection of the first copy still connected (the
    /// one delivered, unless its connection is gone), and every other copy gets an empty
    /// `ELSEWHERE` reply instead of the response again: the return path carries one response,
    /// not one per copy (which halves a response-bound service's throughput on a saturated
    /// link), at the price of replicating only the request's path. Off: every copy gets the
    /// response (RepFlow's behaviour).
    pub reply_once: bool,
}

/// When the receiver acknowledges a flow (calls are always answered by the application's
/// response). Whatever the mode, the application gets every flow once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AckAfter {
    /// When the flow enters the server's queue (`queue` flows), before the application
    /// takes it: the fastest; flows queued but not taken are lost if the process dies.
    #[default]
    Queue,
    /// When [`Server::next`](crate::Server::next) hands the flow to the application: an
    /// acknowledged flow has been taken by the application. Later copies of a flow not yet
    /// taken wait for it too.
    Consume,
    /// When the application is done with the flow: it drops the [`Incoming`](crate::Incoming)
    /// (or calls `Incoming::ack`) after `Server::next` returned it.
    Handled,
}

impl AckAfter {
    /// Parses `queue`, `consume` or `handled` (the names of `repflow serve --ack-after`).
    pub fn parse(s: &str) -> Option<AckAfter> {
        match s {
            "queue" => Some(AckAfter::Queue),
            "consume" => Some(AckAfter::Consume),
            "handled" => Some(AckAfter::Handled),
            _ => None,
        }
    }
}

impl ServerConfig {
    /// Listens on `addr`'s port and the `ports − 1` following ones, with default limits.
    pub fn ports(addr: SocketAddr, ports: u16) -> Self {
        let addrs = (0..ports.max(1))
            .map(|i| SocketAddr::new(addr.ip(), addr.port().wrapping_add(i)))
            .collect();
        ServerConfig {
            addrs,
            key: None,
            max_flow_size: 1 << 20,
            evict_after: Duration::ZERO,
            ack_after: AckAfter::Queue,
            max_connections: 4096,
            max_connections_per_source: 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            frame_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            replay_window: Duration::from_secs(30),
            dedup_capacity: 1 << 18,
            dedup_ttl: Duration::from_secs(60),
            response_cache_bytes: 64 << 20,
            response_queue_bytes: 64 << 20,
            response_cache_bytes_per_peer: 16 << 20,
            queue: 1024,
            mptcp: false,
            reply_once: false,
        }
    }
}
