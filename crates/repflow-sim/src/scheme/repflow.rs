//! RepFlow (Xu and Li, "RepFlow: Minimizing Flow Completion Times with Replicated Flows in
//! Data Centers", INFOCOM 2014): every flow of at most `threshold` bytes is sent on `copies`
//! TCP connections whose five-tuples differ, so that ECMP may hash them onto different paths;
//! the first copy to deliver every byte completes the flow.

use super::shared::check_copies;
use super::unit::{Context, Parts, Scheme};
use crate::config::error::ConfigError;
use crate::config::sections::TcpConfig;
use crate::replication::RepFlow;
use crate::units::Bytes;
use serde::{Deserialize, Serialize};

/// Flows this small or smaller are replicated by default (the paper's 100 KB).
pub(crate) const DEFAULT_THRESHOLD: Bytes = Bytes(100_000);

/// RepFlow's parameters.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RepflowScheme {
    /// Flows of at most this many bytes are replicated.
    pub threshold: Bytes,
    /// Copies of a replicated flow (the original included), 1–64.
    pub copies: u32,
    /// Stop the other copies once one completes (beyond the paper).
    pub cancel: bool,
}

impl Default for RepflowScheme {
    fn default() -> Self {
        RepflowScheme {
            threshold: DEFAULT_THRESHOLD,
            copies: 2,
            cancel: false,
        }
    }
}

impl RepflowScheme {
    /// The replication policy these parameters describe.
    pub fn policy(&self) -> RepFlow {
        RepFlow {
            threshold: self.threshold.0,
            copies: self.copies,
            cancel: self.cancel,
        }
    }
}

impl Scheme for RepflowScheme {
    fn validate(&self, _tcp: &TcpConfig) -> Result<(), ConfigError> {
        check_copies(self.copies)
    }

    fn build(&self, ctx: &Context) -> Parts {
        Parts {
            policy: Box::new(self.policy()),
            ..Parts::plain(ctx)
        }
    }
}
