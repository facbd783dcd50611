//! Compact per-connection routes: the link ids of every connection's data and ACK paths,
//! laid out for the per-hop lookup, and the packet's stamp of its next link.

use crate::engine::prefetch;
use crate::network::{Path, MAX_HOPS};
use crate::packet::Packet;

/// Link ids of every connection's `[data path, ACK path]`, indexed by connection.
///
/// The per-hop lookup is a random access by connection: with u16 link ids both directions
/// fit in 32 bytes (half a cache line) instead of 72, which cuts L1 misses on the hop path.
/// The narrow form holds paths of fewer than `MAX_HOPS` links (the slot after the last link
/// is `NO_LINK`); topologies with `NO_LINK` links or more, or a path of `MAX_HOPS` links,
/// use the wide form.
pub enum Routes {
    /// u16 link ids; the slots past a path's end hold `NO_LINK`.
    Narrow(Vec<[[u16; MAX_HOPS]; 2]>),
    /// u32 link ids with lengths.
    Wide(Vec<[Path; 2]>),
}

/// Marks the slots past a narrow route's end (never a link id there).
pub const NO_LINK: u16 = u16::MAX;

impl Routes {
    /// Empty routes for a network of `links` directed links (narrow when their ids fit).
    pub fn new(links: usize) -> Self {
        if links < NO_LINK as usize {
            Routes::Narrow(Vec::new())
        } else {
            Routes::Wide(Vec::new())
        }
    }

    /// Appends the routes of the next connection (its data path `fwd`, its ACK path `rev`).
    pub fn push(&mut self, fwd: Path, rev: Path) {
        if let Routes::Narrow(v) = self {
            if fwd.len() < MAX_HOPS && rev.len() < MAX_HOPS {
                let mut r = [[NO_LINK; MAX_HOPS]; 2];
                for (dst, p) in r.iter_mut().zip([&fwd, &rev]) {
                    for (d, &l) in dst.iter_mut().zip(p.links()) {
                        *d = l as u16; // below NO_LINK: checked in `new`
                    }
                }
                v.push(r);
                return;
            }
            // A path too long for the narrow form: convert what is stored.
            let wide = v
                .iter()
                .map(|r| {
                    r.map(|links| {
                        let mut p = Path::default();
                        links
                            .iter()
                            .take_while(|&&l| l != NO_LINK)
                            .for_each(|&l| p.push(l as u32));
                        p
                    })
                })
                .collect();
            *self = Routes::Wide(wide);
        }
        if let Routes::Wide(v) = self {
            v.push([fwd, rev]);
        }
    }

    /// Replaces the routes of connection `conn` (already pushed).
    pub fn set(&mut self, conn: u32, fwd: Path, rev: Path) {
        if let Routes::Narrow(v) = self {
            if fwd.len() < MAX_HOPS && rev.len() < MAX_HOPS {
                let mut r = [[NO_LINK; MAX_HOPS]; 2];
                for (dst, p) in r.iter_mut().zip([&fwd, &rev]) {
                    for (d, &l) in dst.iter_mut().zip(p.links()) {
                        *d = l as u16; // below NO_LINK: checked in `new`
                    }
                }
                v[conn as usize] = r;
                return;
            }
        }
        if let Routes::Wide(v) = self {
            v[conn as usize] = [fwd, rev];
            return;
        }
        // A path too long for the narrow form: rebuild through `push`, which converts.
        let n = self.len();
        let mut all: Vec<(Path, Path)> = (0..n as u32).map(|c| self.get(c)).collect();
        all[conn as usize] = (fwd, rev);
        *self = Routes::Narrow(Vec::new());
        for (f, r) in all {
            self.push(f, r);
        }
    }

    /// Connections with routes.
    pub fn len(&self) -> usize {
        match self {
            Routes::Narrow(v) => v.len(),
            Routes::Wide(v) => v.len(),
        }
    }

    /// Whether no connection has routes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The routes of connection `conn` (data path, ACK path).
    pub fn get(&self, conn: u32) -> (Path, Path) {
        match self {
            Routes::Narrow(v) => {
                let [f, r] = v[conn as usize].map(|links| {
                    let mut p = Path::default();
                    links
                        .iter()
                        .take_while(|&&l| l != NO_LINK)
                        .for_each(|&l| p.push(l as u32));
                    p
                });
                (f, r)
            }
            Routes::Wide(v) => (v[conn as usize][0], v[conn as usize][1]),
        }
    }

    /// Puts `pkt` (of connection `pkt.conn`, direction `dir`: 0 data, 1 ACK) on the first
    /// link of its path and returns that link.
    #[inline]
    pub fn first(&self, pkt: &mut Packet, dir: usize) -> u32 {
        pkt.hop = 0;
        match self {
            Routes::Narrow(v) => {
                let links = &v[pkt.conn as usize][dir];
                pkt.next = links[1];
                links[0] as u32
            }
            Routes::Wide(v) => v[pkt.conn as usize][dir].links()[0],
        }
    }

    /// Asks the CPU for connection `conn`'s routes (any index is accepted).
    #[inline]
    pub fn prefetch(&self, conn: u32) {
        match self {
            Routes::Narrow(v) => prefetch(v.as_ptr().wrapping_add(conn as usize)),
            Routes::Wide(v) => prefetch(v.as_ptr().wrapping_add(conn as usize)),
        }
    }

    /// Moves `pkt` (direction `dir`) past the link it has crossed: returns the next link of
    /// its path, or `None` at the path's end. The narrow form takes the next link from the
    /// packet (`Packet::next`) and stamps the one after it, so the path lookup runs beside
    /// the next port's admission instead of before it.
    #[inline]
    pub fn advance(&self, pkt: &mut Packet, dir: usize) -> Option<u32> {
        pkt.hop += 1;
        match self {
            Routes::Narrow(v) => {
                let l = pkt.next;
                // hop + 1 <= len + 1 <= MAX_HOPS: the mask keeps a useful index (past the
                // end it reads a harmless slot) and drops a bounds check.
                pkt.next = v[pkt.conn as usize][dir][(pkt.hop as usize + 1) & (MAX_HOPS - 1)];
                (l != NO_LINK).then_some(l as u32)
            }
            Routes::Wide(v) => v[pkt.conn as usize][dir]
                .links()
                .get(pkt.hop as usize)
                .copied(),
        }
    }

    /// Link `hop` (at most the path's length) of direction `dir` (0 data, 1 ACK) of
    /// connection `conn`, or `None` at the path's end: the direct lookup the tests check
    /// `first` and `advance` against.
    #[cfg(test)]
    fn link(&self, conn: u32, dir: usize, hop: usize) -> Option<u32> {
        match self {
            Routes::Narrow(v) => {
                // hop <= len < MAX_HOPS, so the mask keeps the index and drops a bounds check.
                let l = v[conn as usize][dir][hop & (MAX_HOPS - 1)];
                (l != NO_LINK).then_some(l as u32)
            }
            Routes::Wide(v) => v[conn as usize][dir].links().get(hop).copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(links: &[u32]) -> Path {
        let mut p = Path::default();
        links.iter().for_each(|&l| p.push(l));
        p
    }

    /// The links a packet of connection `conn` crosses in direction `dir`, moved as the
    /// simulator moves it (`first`, then `advance` to the path's end; the narrow form
    /// through the link each hop stamps on the packet), checked against direct lookups.
    fn walk(r: &Routes, conn: u32, dir: usize) -> Vec<u32> {
        let mut pkt = Packet {
            conn,
            ..Packet::default()
        };
        let mut links = vec![r.first(&mut pkt, dir)];
        while let Some(l) = r.advance(&mut pkt, dir) {
            links.push(l);
        }
        let looked_up: Vec<u32> = (0..).map_while(|h| r.link(conn, dir, h)).collect();
        assert_eq!(links, looked_up);
        links
    }

    #[test]
    fn narrow_and_wide_routes_give_the_same_links() {
        let cases = [
            (path(&[0, 5, 9]), path(&[10, 6, 1])),
            (path(&[3]), path(&[4])),
            (
                path(&[1, 2, 3, 4, 5, 6, 65_534]),
                path(&[7, 8, 9, 10, 11, 12, 13]),
            ),
        ];
        let mut narrow = Routes::new(65_534);
        let mut wide = Routes::new(65_535);
        assert!(matches!(narrow, Routes::Narrow(_)));
        assert!(matches!(wide, Routes::Wide(_)));
        for (f, r) in cases {
            narrow.push(f, r);
            wide.push(f, r);
        }
        assert!(matches!(narrow, Routes::Narrow(_)));
        for (c, (f, r)) in cases.iter().enumerate() {
            for (dir, p) in [(0, f), (1, r)] {
                assert_eq!(walk(&narrow, c as u32, dir), p.links());
                assert_eq!(walk(&wide, c as u32, dir), p.links());
            }
        }
        // A path of MAX_HOPS links does not fit the narrow form: the routes turn wide and
        // keep the stored ones.
        let long = path(&[1, 2, 3, 4, 5, 6, 7, 8]);
        narrow.push(long, path(&[9]));
        assert!(matches!(narrow, Routes::Wide(_)));
        assert_eq!(walk(&narrow, 3, 0), long.links());
        assert_eq!(walk(&narrow, 3, 1), [9]);
        for (c, (f, r)) in cases.iter().enumerate() {
            assert_eq!(walk(&narrow, c as u32, 0), f.links());
            assert_eq!(walk(&narrow, c as u32, 1), r.links());
        }
    }
}
