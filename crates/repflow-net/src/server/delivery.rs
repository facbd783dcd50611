//! Delivery: what the application receives ([`Incoming`]), exactly once per flow, and the
//! handle that answers a call ([`Responder`]).

use super::counters::inc;
use super::shared::{DedupKey, Out, QueuedCharge, Shared};
use crate::frame::{flags, Header};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tracing::debug;

/// Whether an [`Incoming`] is a one-way flow or a request that wants a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncomingKind {
    /// A one-way flow (acknowledged to the sender when it was queued, taken or handled:
    /// see [`AckAfter`](crate::server::AckAfter)).
    Flow,
    /// A request; answer it with [`Incoming::respond`].
    Call,
}

/// A flow or request, delivered once however many copies arrive.
#[derive(Debug)]
pub struct Incoming {
    /// Flow or call.
    pub kind: IncomingKind,
    /// The sender's flow id.
    pub flow_id: u64,
    /// Address of the connection that delivered the first complete copy.
    pub peer: SocketAddr,
    /// Which copy arrived first.
    pub copy: u8,
    /// The sender's clock when it sent the flow (milliseconds since the Unix epoch; every
    /// copy carries the same), e.g. to refuse requests older than a window of one's own.
    pub timestamp_ms: u64,
    /// The payload.
    pub data: Vec<u8>,
    /// When its first complete copy had been read (this process's clock), e.g. to time how
    /// long it waited before it was handled.
    pub received: std::time::Instant,
    pub(crate) responder: Option<Responder>,
}

impl Incoming {
    /// Answers a call: the response goes back on every connection that carried a copy of the
    /// request (and to copies that arrive later, while the flow id is remembered). Does
    /// nothing for a flow. Dropping a call's `Incoming` without responding sends an empty
    /// response.
    pub fn respond(mut self, data: Vec<u8>) {
        if self.kind == IncomingKind::Call {
            if let Some(r) = self.responder.take() {
                r.respond(data);
            }
        }
    }

    /// Takes a call's responder out, to answer later or from elsewhere (`None` for a flow).
    pub fn take_responder(&mut self) -> Option<Responder> {
        match self.kind {
            IncomingKind::Call => self.responder.take(),
            IncomingKind::Flow => None,
        }
    }

    /// Acknowledges a flow now, under `AckAfter::Handled` (otherwise the acknowledgement
    /// goes when the `Incoming` is dropped; under the other modes it has already gone).
    /// Does nothing for a call.
    pub fn ack(&mut self) {
        if self.kind == IncomingKind::Flow {
            drop(self.responder.take());
        }
    }
}

/// The handle that answers one call (see [`Incoming::respond`]); inside the server it also
/// acknowledges a flow whose acknowledgement waits for the application.
#[derive(Debug)]
pub struct Responder {
    pub(crate) key: DedupKey,
    /// The address the held response is charged to (the sender of the delivered copy).
    pub(crate) peer: std::net::IpAddr,
    pub(crate) shared: Arc<Shared>,
    pub(crate) done: bool,
    /// Whether dropping it answers (a call: always; a flow: once the application has it).
    pub(crate) armed: bool,
}

impl Responder {
    /// Sends the response. Never blocks; a connection whose send queue is full misses it.
    pub fn respond(mut self, data: Vec<u8>) {
        self.finish(data);
    }

    fn finish(&mut self, data: Vec<u8>) {
        if self.done {
            return;
        }
        self.done = true;
        let body: Arc<[u8]> = data.into();
        let waiters = {
            let mut d = self.shared.dedup.lock().expect("dedup lock");
            d.complete(self.key, body.clone(), self.peer, Instant::now())
        };
        answer_waiters(&self.shared, waiters, &body);
    }
}

/// Queues the response (or acknowledgement) `body` for every copy in `waiters`, within
/// `response_queue_bytes` for all connections together (a response is queued anyway when
/// none is).
pub(crate) fn answer_waiters(
    shared: &Arc<Shared>,
    waiters: Vec<(tokio::sync::mpsc::Sender<Out>, Header)>,
    body: &Arc<[u8]>,
) {
    // `reply_once`: a call's response on the first copy still connected, an empty
    // `ELSEWHERE` reply on the others (acknowledgements of flows are empty anyway).
    let once = shared.cfg.reply_once && !body.is_empty();
    let first = if once {
        waiters.iter().position(|(tx, _)| !tx.is_closed())
    } else {
        None
    };
    let empty: Arc<[u8]> = Arc::from(&[][..]);
    for (i, (tx, h)) in waiters.into_iter().enumerate() {
        let elsewhere = once && first != Some(i);
        let (flags, body) = if elsewhere {
            (flags::REPLY | flags::DUP | flags::ELSEWHERE, &empty)
        } else {
            (flags::REPLY, body)
        };
        let head = Header { flags, ..h }.encode(shared.cfg.key.as_deref(), body);
        let bytes = head.len() + body.len();
        let before = shared
            .queued_bytes
            .fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
        let charge = QueuedCharge {
            shared: shared.clone(),
            bytes,
        };
        if before > 0 && before + bytes as u64 > shared.cfg.response_queue_bytes as u64 {
            drop(charge);
            inc(&shared.counters.responses_dropped, 1);
            debug!(
                flow_id = h.flow_id,
                copy = h.copy,
                "response queue bytes full"
            );
            continue;
        }
        let len = body.len() as u64;
        if tx
            .try_send(Out {
                head,
                body: Some(body.clone()),
                _charge: Some(charge),
            })
            .is_err()
        {
            // The connection's response queue is full (or it closed): counted.
            inc(&shared.counters.responses_dropped, 1);
            debug!(flow_id = h.flow_id, copy = h.copy, "response not queued");
        } else if elsewhere {
            inc(&shared.counters.replies_elsewhere, 1);
        } else {
            inc(&shared.counters.response_bytes, len);
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if self.armed {
            self.finish(Vec::new());
        }
    }
}
