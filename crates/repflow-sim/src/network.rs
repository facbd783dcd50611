//! network (in progress).
