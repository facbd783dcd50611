//! `repflow proxy`: RepFlow in front of an unmodified service, as two sidecars.
//!
//! The client sidecar ([`ProxyClient`]) accepts the application's ordinary TCP connections,
//! cuts their byte stream into requests with a protocol codec ([`resp`] for Redis, [`http`]
//! for HTTP/1.x, or a whole connection for `conn`), and sends each request (a run of pipelined
//! Redis commands travels together, in order) as one replicated [`Client::call`](crate::Client::call);
//! the first response wins and goes back to the application in request order. The server
//! sidecar ([`ProxyServer`]) receives each request once through a [`Server`](crate::Server)
//! (dedup, keys, limits), records its flow id in a journal before handing it to the real
//! server over a bounded pool of plain TCP connections, delimits the upstream's response with
//! the same codec and answers the call.
//!
//! Layers, lowest first (each file imports only files above it): `resp`, `http` (codecs,
//! sans-IO), `error`, `hops` (per-hop time histograms), `envelope` (the bytes between the sidecars, [`Protocol`]), `refusals` (counters
//! and rate-limited log), `journal` (executed ids, persisted), `upstream` (the pool and one
//! exchange with the real server), `server`, `client`. See `docs/proxy.md`.

mod client;
mod envelope;
mod error;
pub mod hops;
pub mod http;
mod journal;
mod refusals;
pub mod resp;
mod server;
mod upstream;

pub use client::{ProxyClient, ProxyClientConfig, ProxyClientStats};
pub use envelope::Protocol;
pub use error::ProxyError;
pub use hops::HopSnapshot;
pub use journal::JournalConfig;
pub use refusals::ProxyCounters;
pub use server::{ProxyServer, ProxyServerConfig, ProxyServerStats};
