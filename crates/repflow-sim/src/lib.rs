//! `repflow-sim`: a packet-level discrete-event simulator of data-center transports.
//!
//! The crate models hosts and switches joined by links with a rate and a propagation delay,
//! output queues with pluggable disciplines, ECMP routing with per-switch salted hashes, TCP
//! NewReno as a sans-IO state machine with pluggable congestion control, and a replication
//! layer (RepFlow and its relatives) that turns one application flow into several
//! connections whose five-tuples differ. One [`Config`] in, per-flow [`FlowRecord`]s and
//! [`Counters`] out; the same seed gives bit-identical records.
//!
//! Layers (each a module): [`engine`] (time, events, randomness), [`network`] (topologies,
//! ports, routing), [`transport`] (TCP), [`replication`], [`workload`], [`metrics`],
//! [`config`].

#![warn(missing_docs)]

pub mod cc;
pub mod config;
pub mod engine;
pub mod ideal;
pub mod metrics;
pub mod network;
pub mod pfabric;
pub mod queue;
pub mod replication;
pub mod sim;
pub mod smartrep;
pub mod transport;
pub mod units;
pub mod workload;

pub use config::{Config, ConfigError};
pub use metrics::{Counters, FlowRecord, Summary};
pub use sim::{run, ConnRecord, Progress, RunOutput, SimError};
