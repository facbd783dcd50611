//! One flow end to end: plan the copies, start them, feed the copy race, account.

use super::base::{BusyGuard, Client};
use super::pool::OutFrame;
use super::types::{inc, ConnMode, FlowReport, PoolKey};
use crate::error::NetError;
use crate::frame::{flags, Header};
use crate::payload::Payload;
use crate::race::{Race, Step};
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tracing::{debug, Instrument};

impl Client {
    /// Sends a one-way flow; returns when the first copy is acknowledged by the receiver.
    ///
    /// Cancel-safety: dropping the future cancels every copy (connections are reset, queued
    /// pooled frames skipped); the receiver may or may not have got the flow, but never
    /// delivers it twice.
    pub async fn send(
        &self,
        dst: SocketAddr,
        data: impl Into<Payload>,
    ) -> Result<FlowReport, NetError> {
        self.transfer(dst, data.into(), false).await.map(|(r, _)| r)
    }

    /// Sends a request and returns the first response. The server handles the request once
    /// however many copies reach it.
    ///
    /// Cancel-safety: as for [`Client::send`]; the request may have been handled.
    pub async fn call(
        &self,
        dst: SocketAddr,
        data: impl Into<Payload>,
    ) -> Result<(Vec<u8>, FlowReport), NetError> {
        self.transfer(dst, data.into(), true)
            .await
            .map(|(r, b)| (b, r))
    }

    pub(super) async fn transfer(
        &self,
        dst: SocketAddr,
        payload: Payload,
        call: bool,
    ) -> Result<(FlowReport, Vec<u8>), NetError> {
        let start = Instant::now();
        let size = payload.len() as u64;
        if u32::try_from(size).is_err() {
            return Err(NetError::TooLarge(size));
        }
        if size == 0 && !call {
            return Err(NetError::EmptyFlow);
        }
        let inner = &self.inner;
        let flow_id = inner.ids.id(inner.next_seq.fetch_add(1, Ordering::Relaxed));
        let span = tracing::debug_span!("flow", flow_id, size, call);
        async move {
            self.observe(size);
            let decision = inner
                .policy
                .lock()
                .expect("policy lock")
                .decide(size, self.now());
            let long = size > inner.cfg.policy.threshold;
            // Short requests of a pooled client with a path pool go on its slots; long flows
            // keep their own connections (a slot's five-tuple is taken).
            let use_pool =
                inner.cfg.mode == ConnMode::Pooled && inner.cfg.path_pool.is_some() && !long;
            let (routes, fallback, held) = if use_pool {
                (self.pool_plan(dst, decision.copies).await, None, Vec::new())
            } else {
                self.plan(dst, decision.copies).await
            };
            let _busy = BusyGuard {
                inner,
                dst,
                ports: held,
            };
            let n = routes.len() as u8;
            let key = inner.cfg.key.as_deref();
            let written: Vec<Arc<AtomicU64>> =
                (0..n).map(|_| Arc::new(AtomicU64::new(0))).collect();
            let cancel = Arc::new(AtomicBool::new(false));
            let mut futs = FuturesUnordered::new();
            // Every copy carries the same timestamp and digest (the receiver checks both).
            let timestamp_ms = crate::frame::now_ms();
            for (i, r) in routes.iter().enumerate() {
                let head = Header {
                    flags: if call { flags::CALL } else { 0 },
                    copy: i as u8,
                    copies: n,
                    flow_id,
                    length: 0,
                    timestamp_ms,
                    digest: 0,
                }
                .encode(key, payload.as_slice());
                let w = written[i].clone();
                let (payload, cancel, route) = (payload.clone(), cancel.clone(), *r);
                futs.push(async move {
                    let res = match inner.cfg.mode {
                        ConnMode::PerFlow => {
                            self.copy_per_flow(route, &head, payload.as_slice(), &w, flow_id)
                                .await
                        }
                        ConnMode::Pooled => {
                            let pk = PoolKey {
                                dst: route.dst,
                                src_port: route.src_port,
                                long,
                            };
                            let frame = OutFrame {
                                head,
                                payload,
                                cancel,
                                written: w,
                                key: (flow_id, i as u8),
                            };
                            let r = self.copy_pooled(pk, frame, flow_id, i as u8).await;
                            if use_pool && r.is_err() {
                                self.pool_copy_failed(pk);
                            }
                            r
                        }
                    };
                    (i as u8, res)
                });
            }
            inc(&inner.counters.copies_sent, u64::from(n));
            // The tokio layer only feeds the race (crate::race) with the copies' results.
            let mut race = Race::new(n, start);
            let outcome = tokio::time::timeout(inner.cfg.flow_timeout, async {
                while let Some((i, r)) = futs.next().await {
                    match r {
                        Ok(reply) => {
                            if let Step::Won { copy, fct } = race.on_reply(i, Instant::now()) {
                                return Some((copy, fct, reply));
                            }
                        }
                        Err(e) => {
                            debug!(copy = i, error = %e, "copy failed");
                            if race.on_failure(i, e) == Step::AllFailed {
                                return None;
                            }
                        }
                    }
                }
                None
            })
            .await;
            cancel.store(true, Ordering::Relaxed);
            let still_running = futs.len() as u8;
            drop(futs);
            let c = &inner.counters;
            let snapshot = |w: &[Arc<AtomicU64>]| -> Vec<u64> {
                w.iter().map(|x| x.load(Ordering::Relaxed)).collect()
            };
            let (winner, fct, reply) = match outcome {
                Ok(Some(x)) => x,
                other => {
                    if other.is_err() {
                        race.on_timeout(inner.cfg.flow_timeout);
                    }
                    let acct = race.settle(&snapshot(&written), 0, still_running);
                    let failed = race.take_failures();
                    inc(&c.copies_failed, failed.len() as u64);
                    inc(&c.flows_failed, 1);
                    inc(&c.bytes_sent, acct.total);
                    inc(&c.bytes_wasted, acct.wasted);
                    inc(&c.copies_cancelled, u64::from(acct.cancelled));
                    return Err(NetError::AllCopiesFailed { flow_id, failed });
                }
            };
            let frame_len = Header {
                flags: u8::from(key.is_some()),
                copy: 0,
                copies: 1,
                flow_id,
                length: 0,
                timestamp_ms: 0,
                digest: 0,
            }
            .wire_len() as u64
                + size;
            let acct = race.settle(&snapshot(&written), frame_len, still_running);
            let failed = race.take_failures();
            inc(&c.copies_failed, failed.len() as u64);
            let (total, wasted) = (acct.total, acct.wasted);
            inc(&c.flows, 1);
            inc(&c.bytes_sent, total);
            inc(&c.bytes_wasted, wasted);
            inc(&c.copies_cancelled, u64::from(acct.cancelled));
            if winner > 0 {
                inc(&c.copies_won_by_replica, 1);
            }
            inner
                .policy
                .lock()
                .expect("policy lock")
                .record(self.now(), total, wasted);
            Ok((
                FlowReport {
                    flow_id,
                    size,
                    copies: n,
                    winner,
                    fct,
                    bytes_sent: total,
                    bytes_wasted: wasted,
                    cancelled: still_running,
                    failed,
                    winner_was_duplicate: reply.dup,
                    decision: decision.reason,
                    fallback,
                    routes,
                },
                reply.body,
            ))
        }
        .instrument(span)
        .await
    }
}
