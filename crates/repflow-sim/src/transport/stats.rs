//! A sender's connection state and its counters.

/// Sender connection states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderState {
    /// Not started.
    Idle,
    /// SYN sent, waiting for SYN-ACK.
    SynSent,
    /// Sending data.
    Established,
    /// Every segment acknowledged.
    Done,
    /// Stopped by the replication layer (another copy won).
    Cancelled,
}

/// Counters of one sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Wire bytes sent (SYN, data, retransmissions).
    pub wire_bytes: u64,
    /// Payload bytes sent, retransmissions included.
    pub payload_bytes: u64,
    /// Data segments retransmitted (`fast_retransmits + timeout_retransmits +
    /// detect_retransmits + atimer_retransmits`).
    pub retransmissions: u64,
    /// Retransmissions of loss recovery: fast retransmit on duplicate ACKs and NewReno's
    /// retransmission of the next hole on a partial ACK.
    pub fast_retransmits: u64,
    /// Retransmissions after a timeout: the first unacknowledged segment and the go-back-N
    /// resends of segments sent before that follow it.
    pub timeout_retransmits: u64,
    /// Retransmission timeouts (`syn_timeouts` included).
    pub timeouts: u64,
    /// Timeouts of the handshake (SYN resent).
    pub syn_timeouts: u64,
    /// MPTCP-L: retransmissions of segments the receiver reported lost by a gap in the
    /// Packet Sequence numbers ("fast detection").
    pub detect_retransmits: u64,
    /// MPTCP-L: retransmissions by the aggressive timer (no window cut).
    pub atimer_retransmits: u64,
}
