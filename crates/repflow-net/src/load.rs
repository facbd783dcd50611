//! Open-loop traffic generation: replay a schedule of flows (start offset, destination,
//! size) against real servers, each flow started on time whatever the others do, and record
//! what happened to every one.

use crate::{Client, FlowReport, Payload};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// One flow of a schedule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScheduledFlow {
    /// Start, relative to the beginning of the run.
    pub at: Duration,
    /// Destination.
    pub dst: SocketAddr,
    /// Payload bytes.
    pub size: u64,
}

/// What happened to one scheduled flow.
#[derive(Clone, Debug)]
pub struct FlowOutcome {
    /// Index in the schedule.
    pub index: usize,
    /// When it actually started, relative to the beginning of the run.
    pub started: Duration,
    /// Its report, or why it failed; `None` if it had not finished when the run stopped.
    pub result: Option<Result<FlowReport, String>>,
}

/// Replays `flows` (sorted by `at`) with `client`. Flows scheduled at or after `duration`
/// are not started, nor any flow once `duration` has passed on the clock (a client that
/// falls behind its schedule stops on time rather than starting late flows); flows still
/// running at `duration + drain` are cancelled and reported unfinished. Every flow that
/// completed before the cancellation is recorded as completed, so the outcomes agree with
/// the client's counters. Returns one outcome per started flow, in schedule order.
///
/// Cancel-safety: dropping the future cancels every flow in progress.
pub async fn run_schedule(
    client: &Client,
    flows: &[ScheduledFlow],
    duration: Duration,
    drain: Duration,
) -> Vec<FlowOutcome> {
    let t0 = Instant::now();
    let max = flows.iter().map(|f| f.size).max().unwrap_or(0) as usize;
    let buf: Arc<[u8]> = vec![0x5a_u8; max].into();
    let mut set = JoinSet::new();
    let mut started: Vec<(usize, Duration)> = Vec::new();
    let stop = t0 + duration + drain;
    let mut done: Vec<Option<Result<FlowReport, String>>> = Vec::new();
    for (index, f) in flows.iter().enumerate() {
        if f.at >= duration {
            break;
        }
        let when = t0 + f.at;
        // Collect finished flows while waiting for the next start.
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(when) => break,
                Some(r) = set.join_next(), if !set.is_empty() => record(&mut done, r),
            }
        }
        let now = t0.elapsed();
        if now >= duration {
            break;
        }
        let k = started.len();
        started.push((index, now));
        done.push(None);
        let (c, payload, dst) = (
            client.clone(),
            Payload::prefix(buf.clone(), f.size as usize),
            f.dst,
        );
        set.spawn(async move { (k, c.send(dst, payload).await.map_err(|e| e.to_string())) });
    }
    let _ = tokio::time::timeout_at(stop, async {
        while let Some(r) = set.join_next().await {
            record(&mut done, r);
        }
    })
    .await;
    set.abort_all();
    // Collect what completed before the abort took effect (aborted tasks end with a
    // cancellation error and stay unfinished).
    while let Some(r) = set.join_next().await {
        record(&mut done, r);
    }
    started
        .into_iter()
        .zip(done)
        .map(|((index, started), result)| FlowOutcome {
            index,
            started,
            result,
        })
        .collect()
}

type Joined = Result<(usize, Result<FlowReport, String>), tokio::task::JoinError>;

fn record(done: &mut [Option<Result<FlowReport, String>>], r: Joined) {
    if let Ok((k, res)) = r {
        done[k] = Some(res);
    }
}
