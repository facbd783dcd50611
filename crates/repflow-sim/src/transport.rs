//! transport (in progress).
