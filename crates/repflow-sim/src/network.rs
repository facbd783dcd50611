//! Topologies, links and ECMP routing (output ports are in [`crate::port`]).
//!
//! Nodes `0..n_hosts` are hosts; switches follow. Every physical link is two directed links;
//! each directed link is the output port of its `from` node, so "port" and "directed link"
//! are the same object here.

use crate::config::sections::{HashKind, TopologyConfig, TopologyKind};
use crate::engine::{splitmix64, Time};
use crate::units::{Rate, PS_PER_SEC};
use std::collections::VecDeque;

/// Longest path (in links) any supported topology produces.
pub const MAX_HOPS: usize = 8;
// A hop count never reaches the packet's own flag bit.
const _: () = assert!(MAX_HOPS < crate::packet::HOP_WIRE_SCHEDULED as usize);

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// An end host.
    Host,
    /// A switch, with its tier: 1 = edge/leaf/ToR, 2 = aggregation/spine/middle, 3 = core.
    Switch(u8),
}

/// A directed link.
#[derive(Clone, Debug)]
pub struct Link {
    /// Sending node.
    pub from: u32,
    /// Receiving node.
    pub to: u32,
    /// Line rate.
    pub rate: Rate,
    /// Propagation delay, picoseconds.
    pub delay: Time,
}

/// A network: nodes, directed links, and per-destination distances for shortest-path ECMP.
#[derive(Clone, Debug)]
pub struct Topology {
    /// Number of hosts (nodes `0..n_hosts`).
    pub n_hosts: usize,
    /// Kind of every node.
    pub nodes: Vec<NodeKind>,
    /// Directed links.
    pub links: Vec<Link>,
    /// Outgoing links of every node, in construction order.
    pub out_links: Vec<Vec<u32>>,
    /// Group of every host for "inter-pod" pairs (pod, leaf or edge switch).
    pub host_group: Vec<u32>,
    /// The ToR (first switch) of every host.
    pub host_tor: Vec<u32>,
    /// Distance rows: `dist[row * n_nodes + node]`, one row per destination ToR when every
    /// host hangs off one switch (`rows_per_tor`: the row holds the hop count to that ToR),
    /// else one row per destination host.
    dist: Vec<u8>,
    /// The distance row of every host.
    dst_row: Vec<u32>,
    /// Rows are per destination ToR (distance to a host = distance to its ToR + 1).
    rows_per_tor: bool,
    /// Per-switch salt of the ECMP hash.
    salt: Vec<u64>,
    /// Hash used by ECMP.
    pub hash: HashKind,
}

/// Bit-level identity of a transport connection, as ECMP sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    /// Source host (its address).
    pub src: u32,
    /// Destination host.
    pub dst: u32,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// IP protocol (6 = TCP).
    pub proto: u8,
}

impl FiveTuple {
    /// The tuple of the reverse direction.
    pub fn reversed(self) -> FiveTuple {
        FiveTuple {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            proto: self.proto,
        }
    }

    /// Wire bytes as a switch would hash them: addresses 10.x.y.z derived from the host index,
    /// protocol, ports (13 bytes).
    pub fn bytes(self) -> [u8; 13] {
        let a = host_ip(self.src).to_be_bytes();
        let b = host_ip(self.dst).to_be_bytes();
        let s = self.sport.to_be_bytes();
        let d = self.dport.to_be_bytes();
        [
            a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3], self.proto, s[0], s[1], d[0], d[1],
        ]
    }
}

/// The IPv4 address given to host `h` (10.0.0.0/8, host index + 2).
pub fn host_ip(h: u32) -> u32 {
    0x0A00_0000 | (h + 2)
}

/// CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF).
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0xFFFF;
    for &b in data {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// CRC-32 (IEEE 802.3, reflected, poly 0xEDB88320).
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc: u32 = 0xFFFF_FFFF;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

impl Topology {
    /// Builds the topology described by `cfg`; `seed` salts the per-switch hashes.
    pub fn build(cfg: &TopologyConfig, hash: HashKind, seed: u64) -> Topology {
        let mut b = Builder::default();
        let up = cfg.uplink_rate.unwrap_or(cfg.link_rate);
        let host_rate = cfg.link_rate;
        let d = cfg.link_delay.ps();
        match cfg.kind {
            TopologyKind::FatTree => {
                let k = cfg.k as usize;
                let half = k / 2;
                let hpe = cfg.fat_tree_hosts_per_edge() as usize;
                let n_hosts = k * half * hpe;
                b.hosts(n_hosts);
                let edge0 = b.switches(k * half, 1);
                let agg0 = b.switches(k * half, 2);
                let core0 = b.switches(half * half, 3);
                for p in 0..k {
                    for e in 0..half {
                        let edge = edge0 + p * half + e;
                        for h in 0..hpe {
                            let host = (p * half + e) * hpe + h;
                            b.link(host, edge, host_rate, d);
                            b.host_group[host] = p as u32;
                            b.host_tor[host] = edge as u32;
                        }
                        for a in 0..half {
                            b.link(edge, agg0 + p * half + a, up, d);
                        }
                    }
                    for a in 0..half {
                        let agg = agg0 + p * half + a;
                        for c in 0..half {
                            b.link(agg, core0 + a * half + c, up, d);
                        }
                    }
                }
            }
            TopologyKind::LeafSpine => {
                let (l, s, hpl) = (
                    cfg.leaves as usize,
                    cfg.spines as usize,
                    cfg.hosts_per_leaf as usize,
                );
                b.hosts(l * hpl);
                let leaf0 = b.switches(l, 1);
                let spine0 = b.switches(s, 2);
                for leaf in 0..l {
                    for h in 0..hpl {
                        let host = leaf * hpl + h;
                        b.link(host, leaf0 + leaf, host_rate, d);
                        b.host_group[host] = leaf as u32;
                        b.host_tor[host] = (leaf0 + leaf) as u32;
                    }
                    for sp in 0..s {
                        b.link(leaf0 + leaf, spine0 + sp, up, d);
                    }
                }
            }
            TopologyKind::Star => {
                let n = cfg.hosts as usize;
                b.hosts(n);
                let sw = b.switches(1, 1);
                for h in 0..n {
                    b.link(h, sw, host_rate, d);
                    b.host_group[h] = h as u32;
                    b.host_tor[h] = sw as u32;
                }
            }
            TopologyKind::Toy => {
                // H1..H4 are hosts 0..3; S1, S2 edges; S3, S4 middles.
                b.hosts(4);
                let s1 = b.switches(1, 1);
                let s2 = b.switches(1, 1);
                let s3 = b.switches(1, 2);
                let s4 = b.switches(1, 2);
                for (h, e) in [(0, s1), (1, s1), (2, s2), (3, s2)] {
                    b.link(h, e, host_rate, d);
                    b.host_group[h] = if e == s1 { 0 } else { 1 };
                    b.host_tor[h] = e as u32;
                }
                for (e, m) in [(s1, s3), (s1, s4), (s2, s3), (s2, s4)] {
                    b.link(e, m, up, d);
                }
            }
        }
        b.finish(hash, seed)
    }

    /// Number of nodes.
    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Hop count from `node` to host `dst`.
    pub fn distance(&self, node: u32, dst: u32) -> u8 {
        let d = self.dist[self.dst_row[dst as usize] as usize * self.nodes.len() + node as usize];
        if !self.rows_per_tor {
            d
        } else if node == dst {
            0
        } else {
            d.saturating_add(1)
        }
    }

    /// The equal-cost next-hop links from `node` towards host `dst`, in port order.
    pub fn ecmp_group(&self, node: u32, dst: u32) -> impl Iterator<Item = u32> + '_ {
        let here = self.distance(node, dst);
        self.out_links[node as usize]
            .iter()
            .copied()
            .filter(move |&l| self.distance(self.links[l as usize].to, dst) + 1 == here)
    }

    /// ECMP hash of `t` at switch `node`, as a fraction of the hash space in [0, 1) scaled to
    /// 64 bits (hash-threshold selection multiplies it by the group size).
    pub fn ecmp_hash(&self, node: u32, t: FiveTuple) -> u64 {
        let salt = self.salt[node as usize];
        match self.hash {
            HashKind::Default => {
                let bytes = t.bytes();
                let mut x = salt;
                let lo = u64::from_le_bytes([
                    bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                ]);
                let hi = u64::from_le_bytes([
                    bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], 0, 0, 0,
                ]);
                x = splitmix64(x ^ lo);
                x = splitmix64(x ^ hi);
                x
            }
            // A CRC is linear: every switch computing the same CRC of the same header would
            // make the same decision at every tier (ECMP polarization). As switch ASICs do
            // with their "hash offset" settings, each tier feeds the selection from its own
            // window of CRC bits (a rotation by 8·tier plus a per-switch 0–3) and XORs a
            // per-switch seed: one switch keeps the CRC's structure (how two similar
            // five-tuples relate), while the tiers see disjoint bits.
            HashKind::Crc16 => {
                let rot = (self.tier(node) * 8 + (salt % 4) as u32) % 16;
                let h = crc16(&t.bytes()).rotate_left(rot) ^ ((salt >> 16) as u16);
                (h as u64) << 48
            }
            HashKind::Crc32 => {
                let rot = (self.tier(node) * 8 + (salt % 4) as u32) % 32;
                let h = crc32(&t.bytes()).rotate_left(rot) ^ ((salt >> 32) as u32);
                (h as u64) << 32
            }
        }
    }

    /// Tier of a switch (1 = edge/leaf, 2 = aggregation/spine, 3 = core); 0 for hosts.
    pub fn tier(&self, node: u32) -> u32 {
        match self.nodes[node as usize] {
            NodeKind::Host => 0,
            NodeKind::Switch(t) => t as u32,
        }
    }

    /// The directed links a packet with five-tuple `t` crosses from its source host to its
    /// destination host under per-flow ECMP (hash-threshold at every switch).
    pub fn path(&self, t: FiveTuple) -> Path {
        let mut p = Path::default();
        let mut node = t.src;
        let mut group: [u32; 64] = [0; 64];
        while node != t.dst {
            let mut n = 0usize;
            for l in self.ecmp_group(node, t.dst) {
                group[n] = l;
                n += 1;
            }
            assert!(n > 0, "no route from node {node} to host {}", t.dst);
            let choice = if n == 1 {
                group[0]
            } else {
                let h = self.ecmp_hash(node, t);
                group[((h as u128 * n as u128) >> 64) as usize]
            };
            p.push(choice);
            node = self.links[choice as usize].to;
        }
        p
    }
}

/// A sequence of directed links, stored inline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Path {
    links: [u32; MAX_HOPS],
    len: u8,
}

impl Path {
    /// Appends a link.
    pub fn push(&mut self, l: u32) {
        assert!(
            (self.len as usize) < MAX_HOPS,
            "path longer than {MAX_HOPS} links"
        );
        self.links[self.len as usize] = l;
        self.len += 1;
    }
    /// The links.
    pub fn links(&self) -> &[u32] {
        &self.links[..self.len as usize]
    }
    /// Number of links.
    pub fn len(&self) -> usize {
        self.len as usize
    }
    /// Whether the path is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[derive(Default)]
struct Builder {
    nodes: Vec<NodeKind>,
    links: Vec<Link>,
    host_group: Vec<u32>,
    host_tor: Vec<u32>,
}

impl Builder {
    fn hosts(&mut self, n: usize) {
        self.nodes.extend(std::iter::repeat_n(NodeKind::Host, n));
        self.host_group = vec![0; n];
        self.host_tor = vec![0; n];
    }
    fn switches(&mut self, n: usize, tier: u8) -> usize {
        let first = self.nodes.len();
        self.nodes
            .extend(std::iter::repeat_n(NodeKind::Switch(tier), n));
        first
    }
    fn link(&mut self, a: usize, b: usize, rate: Rate, delay: Time) {
        self.links.push(Link {
            from: a as u32,
            to: b as u32,
            rate,
            delay,
        });
        self.links.push(Link {
            from: b as u32,
            to: a as u32,
            rate,
            delay,
        });
    }
    fn finish(self, hash: HashKind, seed: u64) -> Topology {
        let n = self.nodes.len();
        let n_hosts = self.host_group.len();
        let mut out_links = vec![Vec::new(); n];
        let mut in_links = vec![Vec::new(); n];
        for (i, l) in self.links.iter().enumerate() {
            out_links[l.from as usize].push(i as u32);
            in_links[l.to as usize].push(i as u32);
        }
        // Every shortest path to a single-homed host ends at its ToR: then one distance row
        // per ToR serves all its hosts (k/2 times fewer rows and searches in a fat-tree).
        let single_homed = (0..n_hosts).all(|h| {
            let t = self.host_tor[h];
            out_links[h].len() == 1
                && in_links[h].len() == 1
                && self.links[out_links[h][0] as usize].to == t
                && self.links[in_links[h][0] as usize].from == t
        });
        let (sources, dst_row): (Vec<u32>, Vec<u32>) = if single_homed {
            let mut slot = vec![u32::MAX; n];
            let mut tors = Vec::new();
            let rows = self
                .host_tor
                .iter()
                .map(|&t| {
                    if slot[t as usize] == u32::MAX {
                        slot[t as usize] = tors.len() as u32;
                        tors.push(t);
                    }
                    slot[t as usize]
                })
                .collect();
            (tors, rows)
        } else {
            ((0..n_hosts as u32).collect(), (0..n_hosts as u32).collect())
        };
        // BFS from every row's source (host or ToR) over reversed links.
        let mut dist = vec![u8::MAX; sources.len() * n];
        let mut queue = VecDeque::new();
        for (r, &src) in sources.iter().enumerate() {
            let row = &mut dist[r * n..(r + 1) * n];
            row[src as usize] = 0;
            queue.clear();
            queue.push_back(src);
            while let Some(v) = queue.pop_front() {
                let dv = row[v as usize];
                for &l in &in_links[v as usize] {
                    let u = self.links[l as usize].from as usize;
                    // Hosts do not forward: only the destination host itself is a host on a path.
                    if row[u] == u8::MAX {
                        row[u] = dv + 1;
                        if matches!(self.nodes[u], NodeKind::Switch(_)) {
                            queue.push_back(u as u32);
                        }
                    }
                }
            }
        }
        let salt = (0..n as u64)
            .map(|i| splitmix64(seed ^ splitmix64(0xECB0_0000 + i)))
            .collect();
        Topology {
            n_hosts,
            nodes: self.nodes,
            links: self.links,
            out_links,
            host_group: self.host_group,
            host_tor: self.host_tor,
            dist,
            dst_row,
            rows_per_tor: single_homed,
            salt,
            hash,
        }
    }
}

/// Converts a link rate to picoseconds per byte when exact, for fast serialization times.
#[derive(Clone, Copy, Debug)]
pub struct TxClock {
    ps_per_byte: u64,
    bps: u64,
}

impl TxClock {
    /// Clock of a link of rate `r`.
    pub fn new(r: Rate) -> TxClock {
        let num = 8 * PS_PER_SEC;
        TxClock {
            ps_per_byte: if num.is_multiple_of(r.bps()) {
                num / r.bps()
            } else {
                0
            },
            bps: r.bps(),
        }
    }
    /// Whether a whole number of picoseconds sends a byte: then the transmission times of
    /// several packets add up to that of their total size.
    #[inline]
    pub fn is_exact(&self) -> bool {
        self.ps_per_byte != 0
    }

    /// The exact clock of `ps_per_byte` picoseconds per byte (not 0), as
    /// [`TxClock::fast_ps_per_byte`] gives it.
    pub fn from_ps_per_byte(ps_per_byte: u32) -> TxClock {
        assert!(
            ps_per_byte != 0,
            "an exact clock has a whole number of ps per byte"
        );
        TxClock {
            ps_per_byte: ps_per_byte as u64,
            bps: 8 * PS_PER_SEC / ps_per_byte as u64,
        }
    }

    /// Picoseconds per byte if the clock is exact and the figure fits in 32 bits (rates of at
    /// least 1,863 b/s), else 0.
    pub fn fast_ps_per_byte(&self) -> u32 {
        u32::try_from(self.ps_per_byte).unwrap_or(0)
    }

    /// Serialization time of `bytes` bytes sent back to back, picoseconds, for an exact
    /// clock ([`TxClock::is_exact`]).
    pub fn tx_exact_total(&self, bytes: u64) -> Time {
        debug_assert!(self.is_exact());
        bytes * self.ps_per_byte
    }

    /// Serialization time of `bytes` bytes, picoseconds (rounded up).
    #[inline]
    pub fn tx(&self, bytes: u32) -> Time {
        if self.ps_per_byte != 0 {
            bytes as u64 * self.ps_per_byte
        } else {
            self.tx_inexact(bytes)
        }
    }

    /// `tx` at a rate that does not send a byte in a whole number of picoseconds: a wide
    /// division, kept out of line so that the usual case inlines small.
    #[cold]
    #[inline(never)]
    fn tx_inexact(&self, bytes: u32) -> Time {
        Rate(self.bps).tx_time(bytes as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologyConfig;

    fn fat_tree(k: u32) -> Topology {
        let cfg = TopologyConfig {
            k,
            ..TopologyConfig::default()
        };
        Topology::build(&cfg, HashKind::Default, 1)
    }

    #[test]
    fn fat_tree_sizes() {
        for k in [4u32, 8, 16] {
            let t = fat_tree(k);
            let k = k as usize;
            assert_eq!(t.n_hosts, k * k * k / 4);
            assert_eq!(t.n_nodes() - t.n_hosts, k * k + k * k / 4);
            // Each switch has k ports.
            for (i, kind) in t.nodes.iter().enumerate() {
                if let NodeKind::Switch(_) = kind {
                    assert_eq!(t.out_links[i].len(), k, "switch {i}");
                }
            }
        }
        assert_eq!(fat_tree(16).n_hosts, 1024);
    }

    #[test]
    fn fat_tree_paths_have_the_right_lengths_and_diversity() {
        let t = fat_tree(8);
        // Same edge: 2 links; same pod: 4; other pod: 6. Inter-pod: (k/2)^2 = 16 paths.
        let tup = |s, d, sp| FiveTuple {
            src: s,
            dst: d,
            sport: sp,
            dport: 80,
            proto: 6,
        };
        assert_eq!(t.path(tup(0, 1, 1)).len(), 2);
        assert_eq!(t.path(tup(0, 5, 1)).len(), 4);
        assert_eq!(t.path(tup(0, 100, 1)).len(), 6);
        let mut distinct = std::collections::HashSet::new();
        for sp in 0..2000 {
            let p = t.path(tup(0, 100, sp));
            assert_eq!(p, t.path(tup(0, 100, sp)), "deterministic");
            distinct.insert(p);
        }
        assert_eq!(distinct.len(), 16);
    }

    #[test]
    fn crc_check_values() {
        assert_eq!(crc16(b"123456789"), 0x29B1);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn toy_and_leaf_spine_route() {
        let cfg = TopologyConfig {
            kind: TopologyKind::Toy,
            ..TopologyConfig::default()
        };
        let t = Topology::build(&cfg, HashKind::Crc16, 3);
        assert_eq!(t.n_hosts, 4);
        let mut mids = std::collections::HashSet::new();
        for sp in 0..100 {
            let p = t.path(FiveTuple {
                src: 0,
                dst: 2,
                sport: sp,
                dport: 5001,
                proto: 6,
            });
            assert_eq!(p.len(), 4);
            mids.insert(t.links[p.links()[1] as usize].to);
        }
        assert_eq!(mids.len(), 2);
        let cfg = TopologyConfig {
            kind: TopologyKind::LeafSpine,
            leaves: 3,
            spines: 2,
            hosts_per_leaf: 2,
            ..TopologyConfig::default()
        };
        let t = Topology::build(&cfg, HashKind::Crc32, 3);
        assert_eq!(t.n_hosts, 6);
        assert_eq!(t.ecmp_group(t.host_tor[0], 5).count(), 2);
    }

    /// Hop counts by a search from the destination host itself (what the per-ToR rows must
    /// reproduce): hosts other than the destination do not forward.
    fn naive_distance(t: &Topology, dst: u32) -> Vec<u8> {
        let mut d = vec![u8::MAX; t.n_nodes()];
        d[dst as usize] = 0;
        let mut q = VecDeque::from([dst]);
        while let Some(v) = q.pop_front() {
            for l in &t.links {
                if l.to == v && d[l.from as usize] == u8::MAX {
                    d[l.from as usize] = d[v as usize] + 1;
                    if t.tier(l.from) > 0 {
                        q.push_back(l.from);
                    }
                }
            }
        }
        d
    }

    #[test]
    fn per_tor_distance_rows_equal_a_search_from_every_host() {
        let kinds = [
            TopologyConfig {
                k: 4,
                ..TopologyConfig::default()
            },
            TopologyConfig {
                kind: TopologyKind::Toy,
                ..TopologyConfig::default()
            },
            TopologyConfig {
                kind: TopologyKind::LeafSpine,
                leaves: 3,
                spines: 2,
                hosts_per_leaf: 2,
                ..TopologyConfig::default()
            },
            TopologyConfig {
                kind: TopologyKind::Star,
                hosts: 5,
                ..TopologyConfig::default()
            },
        ];
        for cfg in kinds {
            let t = Topology::build(&cfg, HashKind::Default, 1);
            assert!(t.rows_per_tor, "{:?}", cfg.kind);
            for dst in 0..t.n_hosts as u32 {
                let want = naive_distance(&t, dst);
                for node in 0..t.n_nodes() as u32 {
                    assert_eq!(t.distance(node, dst), want[node as usize], "{:?}", cfg.kind);
                }
            }
        }
    }

    #[test]
    fn oversubscribed_fat_tree_has_hosts_per_edge_hosts_under_each_edge() {
        let cfg = TopologyConfig {
            k: 8,
            hosts_per_edge: Some(10),
            ..TopologyConfig::default()
        };
        let t = Topology::build(&cfg, HashKind::Default, 1);
        assert_eq!(t.n_hosts, 8 * 4 * 10);
        assert_eq!(cfg.host_count() as usize, t.n_hosts);
        // ten hosts share each edge switch, and the edges keep k/2 uplinks
        let per_tor = t.host_tor.iter().filter(|&&e| e == t.host_tor[0]).count();
        assert_eq!(per_tor, 10);
        assert_eq!(t.ecmp_group(t.host_tor[0], 319).count(), 4);
        // every host reaches every other one
        for dst in [1u32, 9, 10, 39, 40, 319] {
            let p = t.path(FiveTuple {
                src: 0,
                dst,
                sport: 7,
                dport: 5001,
                proto: 6,
            });
            assert_eq!(t.links[*p.links().last().unwrap() as usize].to, dst);
        }
    }
}
