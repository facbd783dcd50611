//! Glue: builds the network from a [`Config`], runs the workload, collects records.

use crate::config::{Config, ConfigError};
use crate::metrics::{Counters, FlowRecord, Summary};
use thiserror::Error;

/// Why a run could not be done.
#[derive(Debug, Error)]
pub enum SimError {
    /// The configuration is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An input (such as a CDF file) is unusable; the message names it.
    #[error("{0}")]
    Input(String),
    /// The run was stopped by its progress callback.
    #[error("the run was cancelled")]
    Cancelled,
}

/// Progress of a running simulation, passed to the caller's callback.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// Simulated time, seconds.
    pub sim_time: f64,
    /// End of the arrival phase, seconds.
    pub duration: f64,
    /// Flows that have arrived.
    pub flows_started: u64,
    /// Flows that have completed.
    pub flows_finished: u64,
    /// Events processed so far.
    pub events: u64,
}

/// Everything a run produces.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// One record per application flow, in id order.
    pub records: Vec<FlowRecord>,
    /// Run counters.
    pub counters: Counters,
    /// Summary computed from the records.
    pub summary: Summary,
    /// The configuration that ran, with every default filled in.
    pub config: Config,
}

/// Runs one simulation. `progress` is called now and then; returning `false` cancels the run.
pub fn run(config: &Config, progress: &mut dyn FnMut(&Progress) -> bool) -> Result<RunOutput, SimError> {
    config.validate()?;
    let _ = progress;
    Err(SimError::Cancelled)
}
