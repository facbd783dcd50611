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
    /// Largest accepted payload (bytes).
    pub max_flow_size: u32,
    /// Largest number of connections served at once; more are closed at once (reset).
    pub max_connections: usize,
    /// Largest number of connections one source address may hold at once (a share of
    /// `max_connections`, so that one host cannot take every slot); more are reset.
    pub max_connections_per_source: usize,
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
    /// Flows delivered but not yet taken by the application before readers wait.
    pub queue: usize,
    /// Listen on Multipath TCP sockets (`IPPROTO_MPTCP`); they also accept plain TCP clients.
    pub mptcp: bool,
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
            max_flow_size: 64 << 20,
            max_connections: 4096,
            max_connections_per_source: 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            frame_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            replay_window: Duration::from_secs(30),
            dedup_capacity: 1 << 18,
            dedup_ttl: Duration::from_secs(60),
            queue: 1024,
            mptcp: false,
        }
    }
}
