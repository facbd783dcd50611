//! The entry points of a run on one thread: [`run`] and [`run_partitioned`].

use super::error::{Progress, SimError};
use super::world::World;
use crate::config::Config;
use std::time::Instant;

use super::output::RunOutput;
use super::parts::PartitionPlan;

/// Runs one simulation. `progress` is called now and then; returning `false` cancels the run.
pub fn run(
    config: &Config,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<RunOutput, SimError> {
    config.validate()?;
    let wall = Instant::now();
    let mut world: World<'_, false> = World::new(config)?;
    tracing::info!(
        hosts = world.topo.n_hosts,
        links = world.topo.links.len(),
        "simulation starting"
    );
    world.run(progress)?;
    Ok(world.output(config, wall))
}

/// Runs one simulation as [`run`] does, with the network split into parts that each keep
/// their own event queue and are run one lookahead window (the smallest link delay) at a
/// time, the events one part schedules for another handed over at the window's end: the
/// schedule of a parallel engine, on one thread. The records, counters and statistics are
/// those of [`run`], bit for bit, whatever the plan.
pub fn run_partitioned(
    config: &Config,
    plan: &PartitionPlan,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<RunOutput, SimError> {
    config.validate()?;
    let wall = Instant::now();
    let mut world: World<'_, true> = World::new(config)?;
    world.partition(plan)?;
    tracing::info!(
        hosts = world.topo.n_hosts,
        links = world.topo.links.len(),
        parts = world.part.as_ref().map_or(0, |p| p.n),
        "partitioned simulation starting"
    );
    world.run(progress)?;
    Ok(world.output(config, wall))
}
