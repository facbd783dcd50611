"""The five seed papers and what ``repflow reproduce`` runs for each of them.

Each paper is one or more *studies* (experiment specs in ``experiments/``), each with a quick
form (minutes) and a full form, and the TCP profile (``tcp.profile``, docs/configuration.md) the
paper's simulator most likely ran with. ``repflow reproduce`` runs every study under that
profile and under the data-center profile ``dc`` and sets the verdicts of every claim side by
side (:mod:`repflow.experiments.reproduce`).

A spec's own ``[tcp]`` fields (the settings a paper states) override either profile: the two
runs differ only in what the paper left to its simulator's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from repflow.errors import UserError

#: The data-center profile every study also runs under.
DC = "dc"


@dataclass(frozen=True)
class Study:
    """One experiment of a paper."""

    #: Built-in spec of the quick form (``experiments/<quick>.toml``).
    quick: str
    #: Built-in spec of the full form.
    full: str
    #: TCP profile the paper's simulator most likely used.
    profile: str
    #: Why that profile (shown in the report).
    why: str
    #: Claim scenario the study measures (:mod:`repflow.experiments.claims`).
    scenario: str


@dataclass(frozen=True)
class Paper:
    """A seed paper: its studies and what decides between the two profiles."""

    id: str
    title: str
    studies: tuple[Study, ...]
    #: The mechanism through which the TCP profile can move this paper's results (shown in
    #: the report beside the fields that actually differ and the verdicts that changed).
    mechanism: str

    def specs(self, quick: bool) -> list[tuple[str, str]]:
        """(spec name, paper profile) of every study."""
        return [(s.quick if quick else s.full, s.profile) for s in self.studies]


PAPERS: tuple[Paper, ...] = (
    Paper(
        "repflow",
        "RepFlow: Minimizing Flow Completion Times with Replicated Flows in Data Centers "
        "(INFOCOM 2014)",
        (
            Study(
                "repflow-paper-quick",
                "repflow-paper",
                "ns3-2014",
                "§V ran ns-3 (2014): ns-3.19's TCP defaults, except the initial window, which "
                "the spec takes from the paper (12 packets in §III, '12KB' in §V)",
                "repflow-ns3",
            ),
            Study(
                "repflow-toy",
                "repflow-toy",
                "linux",
                "Table I ran on Mininet, i.e. the Linux kernel's TCP",
                "repflow-toy",
            ),
        ),
        "A short flow that loses its last packets waits for a retransmission timeout; with a "
        "200 ms minimum RTO one timeout outweighs any queueing delay, so the copy on another "
        "path can win mostly by avoiding timeouts, while with the 10 ms RTO of `dc` queueing "
        "delay weighs more.",
    ),
    Paper(
        "smartrep",
        "SmartRep: Reducing Flow Completion Times with Minimal Replication in Data Centers "
        "(Wang, Qian, Zhang, Dong, Lu)",
        (
            Study(
                "smartrep-quick",
                "smartrep-paper",
                "ns2",
                "§V ran ns-2; the paper does not list TCP settings, so ns-2.35's defaults",
                "smartrep-ns2",
            ),
        ),
        "ns-2's stock 20-packet window caps every flow at 20 KB in flight, so long flows can "
        "fill queues less and short flows may see fewer losses, which would shrink what any "
        "replication can win; its 200 ms minimum RTO makes each remaining loss costlier.",
    ),
    Paper(
        "l2dct",
        "L²DCT: Minimizing Flow Completion Times in Data Centers (Munir, Qazi et al., "
        "INFOCOM 2013)",
        (
            Study(
                "l2dct",
                "l2dct",
                "ns2",
                "ran ns-2 (the DCTCP code base); settings beyond the scenario not stated",
                "l2dct",
            ),
        ),
        "The 20-packet window of ns-2's defaults can limit the long flows' sending rate and "
        "so their pressure on the queue the queries share; ECN marking and L²DCT's weights "
        "act the same under both profiles.",
    ),
    Paper(
        "fa-dctcp",
        "FA-DCTCP: Improving Flow Completion Time for Short Flows in Datacenter Networks "
        "(Joy and Nayak)",
        (
            Study(
                "fa-dctcp",
                "fa-dctcp",
                "linux",
                "§IV ran Mininet, i.e. the Linux kernel's TCP with DCTCP",
                "fa-dctcp",
            ),
        ),
        "Linux delays ACKs and recovers with SACK; with ECN marking at K = 5 packets losses "
        "should be rare, so the profile is expected to move the absolute FCTs (slow start, ACK "
        "clocking) more than the FA-DCTCP/DCTCP ratio.",
    ),
    Paper(
        "mptcp-l",
        "MPTCP-L: Improving Multipath TCP for Latency Sensitive Flows in the Cloud "
        "(Wang, Zhou, Sun)",
        (
            Study(
                "mptcp-l-quick",
                "mptcp-l",
                "dc",
                "§IV-A ran htsim, whose TCP has no minimum-RTO floor of hundreds of milliseconds; "
                "the paper sets the RTO of both MPTCP variants to 4 RTTs itself (the spec's "
                "scheme.rto_rtts), so the data-center profile is the closest",
                "mptcp-l",
            ),
        ),
        "The paper fixes the RTO at 4 RTT for both MPTCP and MPTCP-L, so the profile's RTO "
        "does not apply to the subflows; the window and segment size still do. Why MPTCP-L's "
        "FCT claim fails here, as measured (docs/experiments.md, 'MPTCP-L against MPTCP'): a "
        "short flow's two copies share its host links (36–42 % more bytes than the workload, "
        "whose short flows carry 31 % of the bytes; the paper reports 3–5 %), while MPTCP's 8 "
        "subflows, all opened at the start, send a short flow in its first round trip; MPTCP-L "
        "retransmits less (its loss detection works) but its short flows finish later. Joining "
        "the subflows after one RTT (Linux) or fewer subflows move MPTCP more than any TCP "
        "setting moves either.",
    ),
)


def paper_ids() -> list[str]:
    """Every paper's id, in registry order."""
    return [p.id for p in PAPERS]


def find_paper(pid: str) -> Paper:
    """The paper with id ``pid``; a :class:`UserError` lists the ids otherwise."""
    for p in PAPERS:
        if p.id == pid:
            return p
    raise UserError(f"PAPER: unknown paper '{pid}'; one of {', '.join(paper_ids())}")
