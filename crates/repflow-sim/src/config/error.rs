//! The error of an unusable configuration.

use thiserror::Error;

/// A configuration that cannot be used, with the dotted path of the offending field.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// Dotted path of the field, e.g. `topology.k`.
    pub field: String,
    /// What is wrong and what would be accepted.
    pub message: String,
}

impl ConfigError {
    /// Builds an error for `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            message: message.into(),
        }
    }
}
