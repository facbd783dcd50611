//! What a run reports while it runs ([`Progress`]) and why it fails ([`SimError`]).

use crate::config::error::ConfigError;
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
