"""Topologies of the testbed: which nodes exist, how they are wired and addressed, and the
equal-cost next hops every switch uses towards every host.

Pure data — no system calls — so it is testable without root. Two topologies exist:

* :func:`fat_tree` — the k-pod fat-tree of Al-Fares et al. (k = 4: 16 hosts, 20 switches),
  addressed as in that paper: host ``10.pod.edge.(i+2)``, edge switch ``10.pod.edge.1``,
  aggregation switch ``10.pod.(k/2+a).1``, core switch ``10.k.(j+1).(i+1)``.
* :func:`toy` — RepFlow's Fig. 3: edge switches S1, S2, middle switches S3, S4, hosts H1, H2
  under S1 and H3, H4 under S2 (two equal-cost paths between the edges).

Every switch owns one address, put on all of its ports (as ``/32``), so any ICMP error it sends
(TTL probes) names the switch unambiguously.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from repflow.errors import UserError

#: Longest node name: port names are ``to-<neighbour>`` and Linux allows 15 characters.
MAX_NODE_NAME = 12


@dataclass(frozen=True)
class Node:
    """A host or a switch (each becomes one network namespace)."""

    name: str
    kind: str  # "host" or "switch"
    addr: str
    role: str  # host, edge, agg, core, middle
    pod: int | None = None


@dataclass(frozen=True)
class Link:
    """A full-duplex link between two nodes (one veth pair)."""

    a: str
    b: str


def port_name(neighbour: str) -> str:
    """Name of the interface that leads to ``neighbour`` (inside the owner's namespace)."""
    return f"to-{neighbour}"


@dataclass
class Topology:
    """Nodes, links and the derived ECMP routing of one testbed."""

    name: str
    nodes: dict[str, Node]
    links: list[Link]
    params: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._adj: dict[str, list[str]] = {n: [] for n in self.nodes}
        for link in self.links:
            for x, y in ((link.a, link.b), (link.b, link.a)):
                if x not in self.nodes or y not in self.nodes:
                    raise ValueError(f"link {link} names an unknown node")
                self._adj[x].append(y)
        for n in self.nodes:
            if len(n) > MAX_NODE_NAME:
                raise ValueError(f"node name {n!r} longer than {MAX_NODE_NAME} characters")

    # -- queries -----------------------------------------------------------------------
    @property
    def hosts(self) -> list[Node]:
        """Hosts in index order (the index is the host's number in flow records)."""
        return [n for n in self.nodes.values() if n.kind == "host"]

    @property
    def switches(self) -> list[Node]:
        """Switches in creation order."""
        return [n for n in self.nodes.values() if n.kind == "switch"]

    def neighbours(self, name: str) -> list[str]:
        """Neighbours of ``name`` in link order."""
        return list(self._adj[name])

    def node_by_addr(self) -> dict[str, str]:
        """Map address → node name."""
        return {n.addr: n.name for n in self.nodes.values()}

    def uplinks(self, name: str) -> list[str]:
        """Neighbours of a switch that are one tier up (edge → agg/middle, agg → core)."""
        order = {"host": 0, "edge": 1, "agg": 2, "middle": 2, "core": 3}
        me = order[self.nodes[name].role]
        return [n for n in self._adj[name] if order[self.nodes[n].role] > me]

    def distances_to(self, dst: str) -> dict[str, int]:
        """Hop counts from every node to ``dst`` (hosts do not forward)."""
        dist = {dst: 0}
        queue = deque([dst])
        while queue:
            cur = queue.popleft()
            if cur != dst and self.nodes[cur].kind == "host":
                continue
            for nb in self._adj[cur]:
                if nb not in dist:
                    dist[nb] = dist[cur] + 1
                    queue.append(nb)
        return dist

    def routes(self) -> dict[str, dict[str, tuple[str, ...]]]:
        """For every switch and every host: the neighbours on shortest paths to that host.

        ``routes()[switch][host]`` is a tuple in link order; more than one entry is an ECMP group.
        """
        out: dict[str, dict[str, tuple[str, ...]]] = {s.name: {} for s in self.switches}
        for h in self.hosts:
            dist = self.distances_to(h.name)
            for s in self.switches:
                if s.name not in dist:
                    raise ValueError(f"host {h.name} is unreachable from {s.name}")
                d = dist[s.name]
                hops = tuple(
                    nb
                    for nb in self._adj[s.name]
                    if dist.get(nb) == d - 1 and (nb == h.name or self.nodes[nb].kind == "switch")
                )
                out[s.name][h.name] = hops
        return out

    def to_dict(self) -> dict:
        """JSON-friendly description (stored in the state file)."""
        return {
            "name": self.name,
            "params": dict(self.params),
            "nodes": [
                {"name": n.name, "kind": n.kind, "addr": n.addr, "role": n.role, "pod": n.pod}
                for n in self.nodes.values()
            ],
            "links": [[lk.a, lk.b] for lk in self.links],
        }

    @classmethod
    def from_dict(cls, d: dict) -> Topology:
        """Inverse of :meth:`to_dict`."""
        nodes = {n["name"]: Node(**n) for n in d["nodes"]}
        return cls(d["name"], nodes, [Link(a, b) for a, b in d["links"]], dict(d["params"]))


def fat_tree(k: int) -> Topology:
    """The k-pod fat-tree: k³/4 hosts, k²/2 edge, k²/2 aggregation and k²/4 core switches."""
    if k < 2 or k % 2 or k > 16:
        raise UserError(f"--k must be an even number between 2 and 16, got {k}")
    half = k // 2
    nodes: dict[str, Node] = {}
    links: list[Link] = []
    for p in range(k):
        for e in range(half):
            for i in range(half):
                idx = (p * half + e) * half + i
                nodes[f"h{idx}"] = Node(f"h{idx}", "host", f"10.{p}.{e}.{i + 2}", "host", p)
    for p in range(k):
        for e in range(half):
            name = f"e{p * half + e}"
            nodes[name] = Node(name, "switch", f"10.{p}.{e}.1", "edge", p)
            for i in range(half):
                links.append(Link(f"h{(p * half + e) * half + i}", name))
    for p in range(k):
        for a in range(half):
            name = f"a{p * half + a}"
            nodes[name] = Node(name, "switch", f"10.{p}.{half + a}.1", "agg", p)
            for e in range(half):
                links.append(Link(f"e{p * half + e}", name))
    for j in range(half):
        for i in range(half):
            c = j * half + i
            name = f"c{c}"
            nodes[name] = Node(name, "switch", f"10.{k}.{j + 1}.{i + 1}", "core", None)
            for p in range(k):
                # core (j, i) connects to aggregation switch j of every pod
                links.append(Link(f"a{p * half + j}", name))
    return Topology("fat-tree", nodes, links, {"k": k})


def toy() -> Topology:
    """RepFlow's Fig. 3: H1, H2 under S1; H3, H4 under S2; S1 and S2 both linked to S3 and S4."""
    nodes = {
        "h1": Node("h1", "host", "10.0.0.2", "host", 0),
        "h2": Node("h2", "host", "10.0.0.3", "host", 0),
        "h3": Node("h3", "host", "10.0.1.2", "host", 0),
        "h4": Node("h4", "host", "10.0.1.3", "host", 0),
        "s1": Node("s1", "switch", "10.0.0.1", "edge", 0),
        "s2": Node("s2", "switch", "10.0.1.1", "edge", 0),
        "s3": Node("s3", "switch", "10.0.2.1", "middle", 0),
        "s4": Node("s4", "switch", "10.0.3.1", "middle", 0),
    }
    links = [
        Link("h1", "s1"),
        Link("h2", "s1"),
        Link("h3", "s2"),
        Link("h4", "s2"),
        Link("s1", "s3"),
        Link("s1", "s4"),
        Link("s2", "s3"),
        Link("s2", "s4"),
    ]
    return Topology("toy", nodes, links, {})
