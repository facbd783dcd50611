//! The discrete-event engine: integer-picosecond time, a deterministic event queue and seeded
//! random streams. Nothing here knows about networks.
//!
//! Its files, lowest first: [`prefetch`](mod@prefetch) (a cache hint), `event` (time, events
//! and their order), `wheel` (the near events' calendar wheel), `queue` ([`EventQueue`]),
//! `rng` ([`Rng`]). This file only gathers them.

#[cfg(feature = "tie-stats")]
mod ancestry;
mod event;
pub mod prefetch;
mod queue;
mod rng;
mod wheel;

#[cfg(feature = "tie-stats")]
pub use ancestry::{Ancestry, ROOT};
pub use event::{anc_b, Anc, Event, Place, Time, TIMER_RANK};
pub use prefetch::prefetch;
pub use queue::EventQueue;
pub use rng::{splitmix64, Rng};

#[cfg(test)]
mod tests;
