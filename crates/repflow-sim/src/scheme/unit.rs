//! What a scheme is: the [`Scheme`] trait, the [`Context`] it builds from and the [`Parts`] it
//! builds (ports, congestion control, replication, probing, TCP overrides).

use super::multipath::MultipathPlan;
use crate::config::error::ConfigError;
use crate::config::sections::{QueueConfig, TcpConfig};
use crate::hca::Hca;
use crate::network::Topology;
use crate::network::{Link, TxClock};
use crate::packet::Packet;
use crate::port::{DropTail, EcnThreshold, Port, Qdisc};
use crate::replication::{NoReplication, ReplicationPolicy};
use crate::transport::{CongestionControl, NewReno, TcpParams};
use crate::workload::Cdf;

/// What a scheme sees of the run it builds for.
pub struct Context<'a> {
    /// The TCP settings.
    pub tcp: &'a TcpConfig,
    /// The network.
    pub topo: &'a Topology,
    /// The workload's flow-size distribution.
    pub cdf: &'a Cdf,
}

/// Makes the congestion control of a new connection to destination port `dport`.
pub type CcFactory = Box<dyn Fn(u16) -> Box<dyn CongestionControl>>;

/// The priority of a packet at a priority-scheduled port (smaller is more urgent), from the
/// packet, its flow's size and the segment size.
pub type PriorityFn = fn(&Packet, u64, u32) -> u32;

/// How a scheme's output ports queue packets.
#[derive(Clone, Copy, Debug)]
pub enum PortPlan {
    /// FIFO DropTail everywhere (`queue.*` limits at switches, `queue.host_limit_packets`
    /// at hosts).
    DropTail,
    /// FIFO DropTail with ECN threshold marking at switch ports (`queue.ecn_k_*`).
    EcnMarking,
    /// Priority scheduling everywhere: switch ports hold `switch_buffer` bytes, host ports
    /// `queue.host_limit_packets` full packets (0: unlimited).
    Priority {
        /// Buffer of every switch port, bytes.
        switch_buffer: u64,
        /// Priority of each packet.
        priority: PriorityFn,
    },
}

/// Everything a run of a scheme needs, built once at its start.
pub struct Parts {
    /// TCP parameters after the scheme's overrides.
    pub tcp: TcpParams,
    /// Output ports.
    pub ports: PortPlan,
    /// Congestion control of every connection.
    pub cc: CcFactory,
    /// Copies of each flow and their ports.
    pub policy: Box<dyn ReplicationPolicy>,
    /// SmartRep's probe cache, for schemes that choose ports by probing paths.
    pub hca: Option<Hca>,
    /// Multipath schemes: each flow is one connection of several subflows.
    pub multipath: Option<MultipathPlan>,
}

impl Parts {
    /// TCP NewReno over DropTail, one connection per flow: what a scheme changes from.
    pub fn plain(ctx: &Context) -> Parts {
        Parts {
            tcp: TcpParams::from_config(ctx.tcp),
            ports: PortPlan::DropTail,
            cc: Box::new(|_| Box::new(NewReno)),
            policy: Box::new(NoReplication),
            hca: None,
            multipath: None,
        }
    }

    /// The output port of `link`, whose sending node is a host when `host`.
    pub fn port(&self, link: &Link, host: bool, q: &QueueConfig) -> Port {
        let clock = TxClock::new(link.rate);
        let droptail = if host {
            DropTail {
                limit_packets: q.host_limit_packets,
                limit_bytes: 0,
            }
        } else {
            match q.limit_bytes {
                Some(b) => DropTail {
                    limit_packets: 0,
                    limit_bytes: b.0,
                },
                None => DropTail {
                    limit_packets: q.limit_packets,
                    limit_bytes: 0,
                },
            }
        };
        match self.ports {
            PortPlan::Priority { switch_buffer, .. } => {
                let full = (self.tcp.mss + self.tcp.header) as u64;
                let limit = if host {
                    droptail.limit_packets as u64 * full
                } else {
                    switch_buffer
                };
                Port::new_scheduled(clock, link.delay, limit)
            }
            PortPlan::EcnMarking if !host => {
                let (k_packets, k_bytes) = q.ecn_k(link.rate);
                let ecn = EcnThreshold {
                    limit: droptail,
                    k_packets,
                    k_bytes,
                };
                Port::new(clock, link.delay, Qdisc::Ecn(ecn))
            }
            _ => Port::new(clock, link.delay, Qdisc::DropTail(droptail)),
        }
    }

    /// The priority function of priority-scheduled ports, if the scheme has them.
    pub fn priority(&self) -> Option<PriorityFn> {
        match self.ports {
            PortPlan::Priority { priority, .. } => Some(priority),
            _ => None,
        }
    }
}

/// One transport scheme: its parameters' checks and what it builds for a run.
pub trait Scheme {
    /// Checks the parameters (against the TCP settings they depend on); errors name the field
    /// (`scheme.<parameter>`) and what is accepted.
    fn validate(&self, tcp: &TcpConfig) -> Result<(), ConfigError> {
        let _ = tcp;
        Ok(())
    }
    /// Builds the run's parts.
    fn build(&self, ctx: &Context) -> Parts;
}
