//! `repflow-sim`: a packet-level discrete-event simulator of data-center transports.
//!
//! The crate models hosts and switches joined by links with a rate and a propagation delay,
//! output queues with pluggable disciplines, ECMP routing with per-switch salted hashes, TCP
//! NewReno as a sans-IO state machine with pluggable congestion control, and a replication
//! layer (RepFlow and its relatives) that turns one application flow into several
//! connections whose five-tuples differ. One [`Config`] in, per-flow [`FlowRecord`]s and
//! [`Counters`] out; the same seed gives bit-identical records.
//!
//! Layers, each a module, lowest first:
//! - [`units`], [`engine`] (time, the event queue, randomness), [`packet`];
//! - [`network`] (topologies, ECMP paths), [`port`] (output queues and their disciplines),
//!   [`routes`] (per-connection paths laid out for the hop);
//! - [`transport`] (TCP as a sans-IO state machine) with [`cc`] (congestion-control
//!   algorithms), [`replication`] (flows into copies) and [`hca`] (SmartRep's path probing);
//! - [`scheme`]: each transport scheme as one unit that builds the pieces above for a run;
//! - [`workload`] (flow-size CDFs, Poisson arrivals) and [`arrivals`] (a run's flow stream);
//! - [`config`] (the run's configuration), [`sim`] (the event loop that joins it all),
//!   [`ideal`] (ideal FCTs) and [`metrics`] (records, counters, summaries).

#![warn(missing_docs)]

pub mod arrivals;
pub mod cc;
pub mod config;
pub mod engine;
pub mod hca;
pub mod ideal;
pub mod metrics;
pub mod network;
pub mod packet;
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
