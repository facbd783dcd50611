//! Delivery: what the application receives ([`Incoming`]), exactly once per flow, and the
//! handle that answers a call ([`Responder`]).

use super::counters::inc;
use super::shared::{DedupKey, Out, Shared};
use crate::frame::{flags, Header};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tracing::debug;

/// Whether an [`Incoming`] is a one-way flow or a request that wants a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncomingKind {
    /// A one-way flow (already acknowledged to the sender).
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
    /// The payload.
    pub data: Vec<u8>,
    pub(crate) responder: Option<Responder>,
}

impl Incoming {
    /// Answers a call: the response goes back on every connection that carried a copy of the
    /// request (and to copies that arrive later, while the flow id is remembered). Does
    /// nothing for a flow. Dropping a call's `Incoming` without responding sends an empty
    /// response.
    pub fn respond(mut self, data: Vec<u8>) {
        if let Some(r) = self.responder.take() {
            r.respond(data);
        }
    }

    /// Takes the responder out, to answer later or from elsewhere.
    pub fn take_responder(&mut self) -> Option<Responder> {
        self.responder.take()
    }
}

/// The handle that answers one call (see [`Incoming::respond`]).
#[derive(Debug)]
pub struct Responder {
    pub(crate) key: DedupKey,
    pub(crate) shared: Arc<Shared>,
    pub(crate) done: bool,
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
            d.complete(self.key, body.clone(), Instant::now())
        };
        for (tx, h) in waiters {
            let head = Header {
                flags: flags::REPLY,
                ..h
            }
            .encode(self.shared.cfg.key.as_deref(), &body);
            if tx
                .try_send(Out {
                    head,
                    body: Some(body.clone()),
                })
                .is_err()
            {
                // The connection's response queue is full (or it closed): counted.
                inc(&self.shared.counters.responses_dropped, 1);
                debug!(flow_id = h.flow_id, copy = h.copy, "response not queued");
            }
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.finish(Vec::new());
    }
}
