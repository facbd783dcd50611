//! Glue: builds the network from a [`Config`](crate::Config), runs the workload through the
//! replication layer and TCP, and collects per-flow records.
//!
//! Its files, lowest first: `error` (progress and errors), `exchange` and `barrier` (what a
//! threaded run's threads share), `parts` (a partitioned run's split), `mp_flow` (a
//! multipath flow's connection level), `parallelism` (feature `parallelism-stats`),
//! `world` (a run's state and how it is built); then the event loop's handlers, each an
//! `impl World` of its own: `flows` (a flow's life), `hops` (a packet's hop), `multipath`,
//! `partition`, `event_loop` (dispatch and prefetch); `output` (records and counters out);
//! and the entry points: `serial` ([`run`], [`run_partitioned`]) and `threads`
//! ([`run_threaded`]). This file only gathers them.

mod barrier;
mod error;
mod event_loop;
mod exchange;
mod flows;
mod hops;
mod mp_flow;
mod multipath;
mod output;
#[cfg(feature = "parallelism-stats")]
pub mod parallelism;
mod partition;
mod parts;
mod serial;
mod threads;
mod world;

pub use error::{Progress, SimError};
pub use output::{ConnRecord, RunOutput, ThreadReport};
pub use parts::{PartitionPlan, Partitioning};
pub use serial::{run, run_partitioned};
pub use threads::run_threaded;
