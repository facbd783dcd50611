//! `repflow-sim`: a packet-level discrete-event simulator of data-center transports.
//!
//! The crate models hosts and switches joined by links with a rate and a propagation delay,
//! output queues with pluggable disciplines, ECMP routing with per-switch salted hashes, TCP
//! NewReno as a sans-IO state machine with pluggable congestion control, and a replication
//! layer (RepFlow and its relatives) that turns one application flow into several
//! connections whose five-tuples differ. One [`Config`] in, per-flow [`FlowRecord`]s and
//! [`Counters`] out; the same seed gives bit-identical records.
//!
//! Layers, lowest first; a file imports only files of its own or lower layers, never one that
//! imports it back (`tests/python/test_layers.py` checks it; docs/architecture.md draws it):
//! 1. [`units`], [`engine`] (time, the event queue, randomness, the cache `prefetch` hint),
//!    [`metrics`] (records, counters, summaries);
//! 2. [`packet`]; the configuration's sections as plain data ([`config::sections`],
//!    [`config::error`]);
//! 3. [`network`] (topologies, ECMP paths), [`routes`] (per-connection paths laid out for the
//!    hop), [`port`] (output queues and their disciplines);
//! 4. [`transport`] (TCP as a sans-IO state machine), [`cc`] (congestion-control algorithms),
//!    [`replication`] (flows into copies), [`workload`] (flow-size CDFs, Poisson arrivals),
//!    [`hca`] (SmartRep's path probing), [`ideal`] (ideal FCTs);
//! 5. [`scheme`]: each transport scheme as one unit that builds the pieces above for a run,
//!    and [`scheme::SchemeConfig`], their registry;
//! 6. [`Config`] (a whole run's configuration, in `config/mod.rs`, above the schemes whose
//!    parameters it holds) and [`arrivals`] (a run's flow stream);
//! 7. [`sim`]: the event loop that joins it all, and the run's entry points.

#![warn(missing_docs)]

// In layer order (see above).
pub mod arrivals;
pub mod cc;
pub mod config;
pub mod engine;
pub mod hca;
pub mod ideal;
pub mod metrics;
pub mod network;
pub mod packet;
pub mod parquet;
pub mod port;
pub mod replication;
pub mod routes;
pub mod scheme;
pub mod sim;
pub mod transport;
pub mod units;
pub mod workload;

pub use config::{Config, ConfigError};
pub use metrics::{Counters, FlowRecord, Summary};
pub use sim::{
    run, run_partitioned, run_threaded, ConnRecord, PartitionPlan, Partitioning, Progress,
    RunOutput, SimError, ThreadReport,
};
