//! `Payload`: a flow's bytes, shared by every copy without copying.

use std::sync::Arc;

/// A payload shared by every copy of a flow without copying: a prefix of a shared buffer.
#[derive(Clone, Debug)]
pub struct Payload {
    buf: Arc<[u8]>,
    len: usize,
}

impl Payload {
    /// The first `len` bytes of `buf` (all of it if shorter).
    pub fn prefix(buf: Arc<[u8]>, len: usize) -> Self {
        let len = len.min(buf.len());
        Payload { buf, len }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl From<Vec<u8>> for Payload {
    fn from(v: Vec<u8>) -> Self {
        let len = v.len();
        Payload { buf: v.into(), len }
    }
}

impl From<&[u8]> for Payload {
    fn from(v: &[u8]) -> Self {
        Payload {
            buf: v.into(),
            len: v.len(),
        }
    }
}
