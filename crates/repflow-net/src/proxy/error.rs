//! Why a sidecar cannot start.

/// Why a sidecar cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The listening socket cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address asked.
        addr: std::net::SocketAddr,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The repflow-net server cannot start.
    #[error(transparent)]
    Net(#[from] crate::NetError),
    /// The journal cannot be opened, read or written.
    #[error("journal {path}: {source}")]
    Journal {
        /// Its path.
        path: std::path::PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// Another I/O error (e.g. a runtime or socket that cannot be created).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
