//! The sending side: replicate a flow over several TCP connections whose five-tuples differ,
//! return at the first copy that is acknowledged (or answered), cancel the others.
//!
//! Layers, lowest first (each file imports only files above it in this list):
//! - `types`: settings, routes, reports, counters, pool keys, flow ids;
//! - `pool`: a persistent connection's frame queue and pending replies (pooled mode);
//! - `base`: `Client`, its shared state, its core methods;
//! - `connect`: opening a copy's connection and writing its frame; per-flow copies;
//! - `routes`: path probes and SmartRep's port choice for each copy;
//! - `pooled`: sending a copy on a persistent connection, its writer and reader tasks;
//! - `transfer`: one flow end to end (`send`, `call`), driving the copy race (`crate::race`).

mod base;
mod connect;
mod pool;
mod pooled;
mod routes;
mod transfer;
mod types;

pub use base::Client;
pub use types::{AutoTable, ClientConfig, ClientCounters, ConnMode, FlowReport, Route};
