//! replication (in progress).
