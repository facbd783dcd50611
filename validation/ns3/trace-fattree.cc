// RepFlow's fat-tree driver for ns-3 (nsnam/ns-3-dev): replays a list of flows with ns-3's TCP
// on a k-ary fat-tree whose switches spread flows over equal-cost paths by a hash of the
// five-tuple (per-flow ECMP), optionally sending each short flow as two TCP connections
// (RepFlow). Written for RepFlow's differential validation (docs/validation.md, "The RepFlow
// study under ns-3"); built as an ns-3 scratch program against a checkout outside this
// repository (validation/ns3/build.sh) and contains no ns-3 code.
//
//   trace-fattree --trace=FILE --out=FILE [--k=8] [--gbps=1] [--linkUs=2] [--queuePkts=100]
//                 [--queueBytes=0] [--scheme=tcp|repflow] [--repMax=100000] [--mss=536]
//                 [--iw=12] [--ssthreshPkts=122] [--maxWindow=65535] [--windowScaling=0]
//                 [--minRtoMs=200]
//                 [--connTimeoutMs=3000] [--delAckCount=2] [--delAckTimeoutMs=200]
//                 [--seed=1] [--endS=10.2] [--pathStats=1] [--abc=1] [--traceConn=N]
//                 [--lossStats=1]
//
// FILE: one flow per line, "src dst size_bytes start_ps"; hosts are numbered as in RepFlow's
// simulator: host h sits under edge switch h / (k/2) of pod h / (k*k/4).
//
// Routing (class FlowHashRouting): every node holds, per destination host, the interfaces that
// lie on a shortest path (computed by breadth-first search over the built topology). A switch
// picks one of them by a 64-bit mix of the IPv4 source and destination addresses, the protocol
// and the TCP ports, salted per switch from --seed: all packets of a connection (and all its
// ACKs, which have their own five-tuple) follow one path; two connections are hashed
// independently. ns-3's global routing offers only per-packet random ECMP, which would reorder
// every flow.
//
// Completion: a flow completes when the receiver of its first copy to finish holds all its
// bytes (RepFlow's simulator's definition, docs/metrics.md). Output CSV, one row per flow:
// id,src,dst,size,start,fct,copies,winner,timeouts,fast_recoveries,fct0,fct1,drops (drops: the
// run's total, on the first row only).
#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include "repflow-ns3.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

using namespace ns3;

namespace
{

uint64_t
Mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

} // namespace

/// Per-flow ECMP: a static table of equal-cost next hops per destination host, one chosen per
/// packet by a salted hash of its five-tuple.
class FlowHashRouting : public Ipv4RoutingProtocol
{
  public:
    struct NextHop
    {
        uint32_t iface;
        Ipv4Address gateway;
    };

    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("RepflowFlowHashRouting")
                                .SetParent<Ipv4RoutingProtocol>()
                                .SetGroupName("Internet");
        return tid;
    }

    std::unordered_map<uint32_t, std::vector<NextHop>> m_table;
    uint64_t m_salt = 0;
    /// With --pathStats: packets forwarded per interface, and per (destination, five-tuple
    /// hash) the interface chosen first, to check that a connection never changes path.
    bool m_stats = false;
    std::vector<uint64_t> m_forwarded;
    std::unordered_map<uint64_t, uint32_t> m_chosen;
    uint64_t m_pathChanges = 0;

    Ptr<Ipv4Route> MakeRoute(const Ipv4Header& header, const NextHop& nh) const
    {
        Ptr<Ipv4Route> r = Create<Ipv4Route>();
        r->SetDestination(header.GetDestination());
        r->SetGateway(nh.gateway);
        r->SetOutputDevice(m_ipv4->GetNetDevice(nh.iface));
        r->SetSource(m_ipv4->GetAddress(nh.iface, 0).GetLocal());
        return r;
    }

    const NextHop* Pick(Ptr<const Packet> p, const Ipv4Header& header)
    {
        auto it = m_table.find(header.GetDestination().Get());
        if (it == m_table.end() || it->second.empty())
        {
            return nullptr;
        }
        const auto& hops = it->second;
        if (hops.size() == 1)
        {
            return &hops[0];
        }
        uint32_t ports = 0;
        if (p && header.GetProtocol() == 6 && p->GetSize() >= 4)
        {
            uint8_t b[4];
            p->CopyData(b, 4);
            ports = (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) |
                    uint32_t(b[3]);
        }
        uint64_t h = Mix64(m_salt ^ ((uint64_t(header.GetSource().Get()) << 32) |
                                     header.GetDestination().Get()));
        h = Mix64(h ^ ((uint64_t(header.GetProtocol()) << 32) | ports));
        const NextHop* nh = &hops[h % hops.size()];
        if (m_stats)
        {
            // the key: the packet's five-tuple, mixed without the salt
            uint64_t key = Mix64(((uint64_t(header.GetSource().Get()) << 32) |
                                  header.GetDestination().Get()) ^
                                 Mix64((uint64_t(header.GetProtocol()) << 32) | ports));
            auto [it2, fresh] = m_chosen.emplace(key, nh->iface);
            if (!fresh && it2->second != nh->iface)
            {
                m_pathChanges++;
            }
        }
        return nh;
    }

    Ptr<Ipv4Route> RouteOutput(Ptr<Packet> p,
                               const Ipv4Header& header,
                               Ptr<NetDevice>,
                               Socket::SocketErrno& err) override
    {
        const NextHop* nh = Pick(p, header);
        if (!nh)
        {
            err = Socket::ERROR_NOROUTETOHOST;
            return nullptr;
        }
        err = Socket::ERROR_NOTERROR;
        return MakeRoute(header, *nh);
    }

    bool RouteInput(Ptr<const Packet> p,
                    const Ipv4Header& header,
                    Ptr<const NetDevice> idev,
                    const UnicastForwardCallback& ucb,
                    const MulticastForwardCallback&,
                    const LocalDeliverCallback& lcb,
                    const ErrorCallback& ecb) override
    {
        uint32_t iif = m_ipv4->GetInterfaceForDevice(idev);
        if (m_ipv4->IsDestinationAddress(header.GetDestination(), iif))
        {
            if (!lcb.IsNull())
            {
                lcb(p, header, iif);
                return true;
            }
            return false;
        }
        const NextHop* nh = Pick(p, header);
        if (!nh)
        {
            ecb(p, header, Socket::ERROR_NOROUTETOHOST);
            return true;
        }
        if (m_stats)
        {
            if (m_forwarded.size() <= nh->iface)
            {
                m_forwarded.resize(nh->iface + 1);
            }
            m_forwarded[nh->iface]++;
        }
        ucb(MakeRoute(header, *nh), p, header);
        return true;
    }

    void NotifyInterfaceUp(uint32_t) override
    {
    }

    void NotifyInterfaceDown(uint32_t) override
    {
    }

    void NotifyAddAddress(uint32_t, Ipv4InterfaceAddress) override
    {
    }

    void NotifyRemoveAddress(uint32_t, Ipv4InterfaceAddress) override
    {
    }

    void SetIpv4(Ptr<Ipv4> ipv4) override
    {
        m_ipv4 = ipv4;
    }

    void PrintRoutingTable(Ptr<OutputStreamWrapper> stream, Time::Unit) const override
    {
        *stream->GetStream() << m_table.size() << " destinations\n";
    }

  private:
    Ptr<Ipv4> m_ipv4;
};

/// NewReno with appropriate byte counting (RFC 3465, L = 2 segments), as RepFlow's simulator
/// grows its window: slow start adds the segments an ACK covers (at most two, up to ssthresh),
/// congestion avoidance one segment per window of segments acknowledged. ns-3's TcpNewReno adds
/// one segment (slow start) or segment²/cwnd (congestion avoidance) per ACK, whatever it covers,
/// as ns-3.19 did. A diagnostic (--abc=1): it isolates that one difference.
class TcpNewRenoAbc : public TcpNewReno
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("RepflowTcpNewRenoAbc")
                                .SetParent<TcpNewReno>()
                                .SetGroupName("Internet")
                                .AddConstructor<TcpNewRenoAbc>();
        return tid;
    }

    std::string GetName() const override
    {
        return "TcpNewRenoAbc";
    }

    Ptr<TcpCongestionOps> Fork() override
    {
        return CopyObject<TcpNewRenoAbc>(this);
    }

  protected:
    uint32_t SlowStart(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked) override
    {
        if (segmentsAcked == 0 || tcb->m_cWnd >= tcb->m_ssThresh)
        {
            return segmentsAcked;
        }
        uint32_t room = (tcb->m_ssThresh - tcb->m_cWnd + tcb->m_segmentSize - 1) /
                        tcb->m_segmentSize;
        uint32_t used = std::min(segmentsAcked, room);
        tcb->m_cWnd += tcb->m_segmentSize * std::min(used, 2u);
        return segmentsAcked - used;
    }

    void CongestionAvoidance(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked) override
    {
        uint32_t segs = tcb->m_cWnd / tcb->m_segmentSize;
        m_acked += segmentsAcked;
        while (segs > 0 && m_acked >= segs)
        {
            m_acked -= segs;
            tcb->m_cWnd += tcb->m_segmentSize;
            segs = tcb->m_cWnd / tcb->m_segmentSize;
        }
    }

  private:
    uint32_t m_acked = 0;
};

struct Flow
{
    uint32_t src, dst;
    uint64_t size;
    uint64_t startPs;
    double finish = -1;
    int winner = -1;
    uint32_t copies = 1;
    uint32_t conn0 = 0; // index of the first copy in g_conns
};

struct Conn
{
    uint32_t flow;
    uint32_t copy;
    uint64_t received = 0;
    double finish = -1;
    uint32_t timeouts = 0;
    uint32_t fastRecoveries = 0;
};

static std::vector<Flow> g_flows;
static std::vector<Conn> g_conns;
static uint64_t g_queueDrops = 0;

// --traceConn: one connection's sender, event by event, on stderr (a diagnostic; the output
// file is unchanged). Times in seconds; sequence numbers in segments from the first data byte.
static uint32_t g_traceMss = 536;

void
TraceTx(Ptr<const Packet> p, const TcpHeader& h, Ptr<const TcpSocketBase>)
{
    if (p->GetSize() > 0)
    {
        std::cerr << Simulator::Now().GetSeconds() << " tx seg "
                  << (h.GetSequenceNumber().GetValue() - 1) / g_traceMss << " len " << p->GetSize()
                  << ((h.GetFlags() & TcpHeader::FIN) ? " FIN" : "") << "\n";
    }
}

void
TraceRx(Ptr<const Packet>, const TcpHeader& h, Ptr<const TcpSocketBase>)
{
    if (h.GetFlags() & TcpHeader::ACK)
    {
        std::cerr << Simulator::Now().GetSeconds() << " rx ack "
                  << (h.GetAckNumber().GetValue() - 1) / g_traceMss << "\n";
    }
}

void
TraceState(TcpSocketState::TcpCongState_t from, TcpSocketState::TcpCongState_t to)
{
    std::cerr << Simulator::Now().GetSeconds() << " state "
              << TcpSocketState::TcpCongStateName[from] << " -> "
              << TcpSocketState::TcpCongStateName[to] << "\n";
}

void
TraceCwnd(uint32_t, uint32_t now)
{
    std::cerr << Simulator::Now().GetSeconds() << " cwnd " << now / g_traceMss << "\n";
}

// --lossStats: congestion-state transitions of every connection, counted by the flow's size
// class (short: at most --repMax bytes) and printed on stderr at the end (a diagnostic).
static std::map<std::string, uint64_t> g_transitions;

void
CountState(std::string cls, TcpSocketState::TcpCongState_t from, TcpSocketState::TcpCongState_t to)
{
    g_transitions[cls + " " + TcpSocketState::TcpCongStateName[from] + " -> " +
                  TcpSocketState::TcpCongStateName[to]]++;
}

void
CountSocket(std::string cls, Ptr<BulkSendApplication> app)
{
    Ptr<Socket> s = app->GetSocket();
    if (s)
    {
        s->TraceConnectWithoutContext("CongState", MakeBoundCallback(&CountState, cls));
    }
}

void
TraceSocket(Ptr<BulkSendApplication> app)
{
    Ptr<Socket> s = app->GetSocket();
    if (s)
    {
        s->TraceConnectWithoutContext("Tx", MakeCallback(&TraceTx));
        s->TraceConnectWithoutContext("Rx", MakeCallback(&TraceRx));
        s->TraceConnectWithoutContext("CongState", MakeCallback(&TraceState));
        s->TraceConnectWithoutContext("CongestionWindow", MakeCallback(&TraceCwnd));
    }
}

static void
OnRx(uint32_t c, Ptr<const Packet> p, const Address&)
{
    Conn& k = g_conns[c];
    Flow& f = g_flows[k.flow];
    k.received += p->GetSize();
    if (k.finish < 0 && k.received >= f.size)
    {
        k.finish = Simulator::Now().GetSeconds();
        if (f.finish < 0)
        {
            f.finish = k.finish;
            f.winner = int(k.copy);
        }
    }
}

static void
OnQueueDrop(Ptr<const Packet>)
{
    g_queueDrops++;
}

struct Link
{
    uint32_t a, b;           // node ids
    uint32_t ifA, ifB;       // interface indices
    Ipv4Address addrA, addrB;
};

int
main(int argc, char* argv[])
{
    uint32_t k = 8;
    std::string trace;
    std::string out;
    double gbps = 1;
    double linkUs = 2;
    uint32_t queuePkts = 100;
    std::string scheme = "tcp";
    uint64_t repMax = 100000;
    uint32_t mss = 536;
    uint32_t iw = 12;
    uint32_t ssthreshPkts = 122;
    uint32_t maxWindow = 65535;
    double minRtoMs = 200;
    double connTimeoutMs = 3000;
    uint32_t delAckCount = 2;
    double delAckTimeoutMs = 200;
    uint32_t seed = 1;
    double endS = 10.2;
    bool pathStats = false;
    bool windowScaling = false;
    uint32_t queueBytes = 0;
    bool abc = false;
    int64_t traceConn = -1;
    bool lossStats = false;
    CommandLine cmd;
    cmd.AddValue("k", "fat-tree arity (k*k*k/4 hosts)", k);
    cmd.AddValue("trace", "flow trace: src dst size_bytes start_ps per line", trace);
    cmd.AddValue("out", "per-flow CSV", out);
    cmd.AddValue("gbps", "link rate, every link", gbps);
    cmd.AddValue("linkUs", "propagation delay per link", linkUs);
    cmd.AddValue("queuePkts", "switch port buffer, packets (ACKs included)", queuePkts);
    cmd.AddValue("queueBytes", "switch port buffer in bytes instead (0: count packets)",
                 queueBytes);
    cmd.AddValue("scheme", "tcp, or repflow (flows <= repMax bytes as two connections)", scheme);
    cmd.AddValue("repMax", "largest flow RepFlow replicates, bytes", repMax);
    cmd.AddValue("mss", "TCP segment size, bytes", mss);
    cmd.AddValue("iw", "initial window, segments", iw);
    cmd.AddValue("ssthreshPkts", "initial slow-start threshold, segments (0: unlimited)",
                 ssthreshPkts);
    cmd.AddValue("maxWindow", "receive buffer (without window scaling: the window cap), bytes",
                 maxWindow);
    cmd.AddValue("windowScaling", "window scaling (RFC 7323); off: a 65,535-byte window cap",
                 windowScaling);
    cmd.AddValue("minRtoMs", "minimum RTO", minRtoMs);
    cmd.AddValue("connTimeoutMs", "SYN retransmission timeout", connTimeoutMs);
    cmd.AddValue("delAckCount", "segments per ACK (1: an ACK per segment)", delAckCount);
    cmd.AddValue("delAckTimeoutMs", "delayed-ACK timer", delAckTimeoutMs);
    cmd.AddValue("seed", "run number; also salts the switches' hashes", seed);
    cmd.AddValue("endS", "simulated time at which the run stops", endS);
    cmd.AddValue("abc",
                 "diagnostic: NewReno with appropriate byte counting (L = 2), as RepFlow's "
                 "simulator, instead of ns-3's per-ACK increase",
                 abc);
    cmd.AddValue("traceConn",
                 "diagnostic: print connection N's sends, ACKs, congestion states and window "
                 "on stderr (connections are numbered in flow order, copies together)",
                 traceConn);
    cmd.AddValue("lossStats",
                 "diagnostic: count every connection's congestion-state transitions by flow "
                 "size (short: at most repMax bytes) and print them on stderr",
                 lossStats);
    cmd.AddValue("pathStats",
                 "print how evenly the switches spread packets over their up-links, and how "
                 "often a five-tuple changed path (must be 0)",
                 pathStats);
    cmd.Parse(argc, argv);
    if (k < 2 || k % 2 != 0)
    {
        std::cerr << "--k: an even number >= 2 is needed, got " << k << "\n";
        return 2;
    }
    if (scheme != "tcp" && scheme != "repflow")
    {
        std::cerr << "--scheme: tcp or repflow, got " << scheme << "\n";
        return 2;
    }
    RngSeedManager::SetRun(seed);

    repflow::TcpSettings tcp;
    tcp.congestion = abc ? TcpNewRenoAbc::GetTypeId() : TcpNewReno::GetTypeId();
    tcp.mss = mss;
    tcp.iw = iw;
    tcp.ssthreshBytes = ssthreshPkts ? ssthreshPkts * mss : 0x7fffffff;
    tcp.delAckCount = delAckCount;
    tcp.delAckTimeout = MilliSeconds(delAckTimeoutMs);
    tcp.connTimeout = MilliSeconds(connTimeoutMs);
    tcp.rcvBuf = maxWindow;
    tcp.windowScaling = windowScaling;
    tcp.minRto = MilliSeconds(minRtoMs);
    repflow::SetTcpDefaults(tcp);

    {
        std::ifstream f(trace);
        if (!f)
        {
            std::cerr << "--trace: cannot read " << trace << "\n";
            return 2;
        }
        Flow fl;
        unsigned long long size;
        unsigned long long start;
        while (f >> fl.src >> fl.dst >> size >> start)
        {
            fl.size = size;
            fl.startPs = start;
            g_flows.push_back(fl);
        }
    }

    const uint32_t half = k / 2;
    const uint32_t nHosts = k * half * half;
    NodeContainer hosts;
    NodeContainer edges;
    NodeContainer aggs;
    NodeContainer cores;
    hosts.Create(nHosts);
    edges.Create(k * half);
    aggs.Create(k * half);
    cores.Create(half * half);
    for (const Flow& f : g_flows)
    {
        if (f.src >= nHosts || f.dst >= nHosts || f.src == f.dst)
        {
            std::cerr << "--trace: flow " << f.src << " -> " << f.dst << " is not between two "
                      << "hosts of 0.." << nHosts - 1 << "\n";
            return 2;
        }
    }
    InternetStackHelper stack;
    stack.Install(hosts);
    stack.Install(edges);
    stack.Install(aggs);
    stack.Install(cores);

    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(uint64_t(gbps * 1e9))));
    p2p.SetChannelAttribute("Delay", TimeValue(NanoSeconds(uint64_t(linkUs * 1000))));
    Ipv4AddressHelper addr("10.0.0.0", "255.255.255.252");
    std::vector<Link> links;
    std::vector<Ipv4Address> hostAddr(nHosts);
    const std::string switchQueue =
        queueBytes ? std::to_string(queueBytes) + "B" : std::to_string(queuePkts) + "p";
    auto connect = [&](Ptr<Node> a, Ptr<Node> b, bool aIsHost) {
        NetDeviceContainer d = p2p.Install(a, b);
        // hosts: a deep queue (the simulator's host queues are unlimited); switches: the
        // DropTail buffer, counted in packets (or bytes).
        d.Get(0)->GetObject<PointToPointNetDevice>()->GetQueue()->SetMaxSize(
            QueueSize(aIsHost ? "100000p" : switchQueue));
        d.Get(1)->GetObject<PointToPointNetDevice>()->GetQueue()->SetMaxSize(
            QueueSize(switchQueue));
        for (uint32_t i = 0; i < 2; i++)
        {
            d.Get(i)->GetObject<PointToPointNetDevice>()->GetQueue()->TraceConnectWithoutContext(
                "Drop", MakeCallback(&OnQueueDrop));
        }
        Ipv4InterfaceContainer ifc = addr.Assign(d);
        addr.NewNetwork();
        TrafficControlHelper::Default().Uninstall(d);
        links.push_back(Link{a->GetId(),
                             b->GetId(),
                             ifc.Get(0).second,
                             ifc.Get(1).second,
                             ifc.GetAddress(0),
                             ifc.GetAddress(1)});
        return ifc.GetAddress(0);
    };
    for (uint32_t p = 0; p < k; p++)
    {
        for (uint32_t e = 0; e < half; e++)
        {
            Ptr<Node> edge = edges.Get(p * half + e);
            for (uint32_t h = 0; h < half; h++)
            {
                uint32_t host = (p * half + e) * half + h;
                hostAddr[host] = connect(hosts.Get(host), edge, true);
            }
            for (uint32_t a = 0; a < half; a++)
            {
                connect(edge, aggs.Get(p * half + a), false);
            }
        }
        for (uint32_t a = 0; a < half; a++)
        {
            for (uint32_t c = 0; c < half; c++)
            {
                connect(aggs.Get(p * half + a), cores.Get(a * half + c), false);
            }
        }
    }

    // Routing: shortest-path next hops per destination host, by breadth-first search.
    const uint32_t nNodes = NodeList::GetNNodes();
    struct Adj
    {
        uint32_t peer;
        uint32_t iface;
        Ipv4Address peerAddr;
    };
    std::vector<std::vector<Adj>> adj(nNodes);
    for (const Link& l : links)
    {
        adj[l.a].push_back(Adj{l.b, l.ifA, l.addrB});
        adj[l.b].push_back(Adj{l.a, l.ifB, l.addrA});
    }
    std::vector<Ptr<FlowHashRouting>> routing(nNodes);
    for (uint32_t n = 0; n < nNodes; n++)
    {
        Ptr<FlowHashRouting> r = CreateObject<FlowHashRouting>();
        r->m_salt = Mix64((uint64_t(seed) << 32) ^ n);
        r->m_stats = pathStats;
        NodeList::GetNode(n)->GetObject<Ipv4>()->SetRoutingProtocol(r);
        routing[n] = r;
    }
    for (uint32_t h = 0; h < nHosts; h++)
    {
        uint32_t root = hosts.Get(h)->GetId();
        std::vector<int> dist(nNodes, -1);
        std::deque<uint32_t> q{root};
        dist[root] = 0;
        while (!q.empty())
        {
            uint32_t n = q.front();
            q.pop_front();
            for (const Adj& a : adj[n])
            {
                if (dist[a.peer] < 0)
                {
                    dist[a.peer] = dist[n] + 1;
                    q.push_back(a.peer);
                }
            }
        }
        for (uint32_t n = 0; n < nNodes; n++)
        {
            if (n == root)
            {
                continue;
            }
            auto& hops = routing[n]->m_table[hostAddr[h].Get()];
            for (const Adj& a : adj[n])
            {
                if (dist[a.peer] == dist[n] - 1)
                {
                    hops.push_back(FlowHashRouting::NextHop{a.iface, a.peerAddr});
                }
            }
        }
    }
    repflow::ConnectDropTraces();

    std::vector<uint32_t> nextPort(nHosts, 10000);
    for (uint32_t i = 0; i < g_flows.size(); i++)
    {
        Flow& f = g_flows[i];
        f.copies = (scheme == "repflow" && f.size <= repMax) ? 2 : 1;
        f.conn0 = g_conns.size();
        for (uint32_t c = 0; c < f.copies; c++)
        {
            uint32_t ci = g_conns.size();
            g_conns.push_back(Conn{i, c});
            uint16_t port = nextPort[f.dst]++;
            if (port == 0)
            {
                std::cerr << "--trace: more than 55,535 connections into host " << f.dst << "\n";
                return 2;
            }
            PacketSinkHelper sink("ns3::TcpSocketFactory",
                                  InetSocketAddress(Ipv4Address::GetAny(), port));
            ApplicationContainer sa = sink.Install(hosts.Get(f.dst));
            sa.Start(Seconds(0));
            sa.Get(0)->TraceConnectWithoutContext("Rx", MakeBoundCallback(&OnRx, ci));
            BulkSendHelper src("ns3::TcpSocketFactory", InetSocketAddress(hostAddr[f.dst], port));
            src.SetAttribute("MaxBytes", UintegerValue(f.size));
            src.SetAttribute("SendSize", UintegerValue(mss * 64));
            ApplicationContainer ca = src.Install(hosts.Get(f.src));
            Time start = PicoSeconds(f.startPs);
            ca.Start(start);
            Simulator::Schedule(start + NanoSeconds(1),
                                &repflow::HookSocket<Conn>,
                                &g_conns,
                                ci,
                                DynamicCast<BulkSendApplication>(ca.Get(0)));
            if (lossStats)
            {
                Simulator::Schedule(start + NanoSeconds(1),
                                    &CountSocket,
                                    std::string(f.size <= repMax ? "short" : "large"),
                                    DynamicCast<BulkSendApplication>(ca.Get(0)));
            }
            if (traceConn == int64_t(ci))
            {
                g_traceMss = mss;
                Simulator::Schedule(start + NanoSeconds(1),
                                    &TraceSocket,
                                    DynamicCast<BulkSendApplication>(ca.Get(0)));
            }
        }
    }
    Simulator::Stop(Seconds(endS));
    Simulator::Run();

    if (pathStats)
    {
        // Up-links: an edge switch's interfaces k/2+1..k, an aggregation switch's k/2+1..k
        // (interface 0 is the loopback; the down-links were connected first).
        uint64_t changes = 0;
        for (uint32_t n = 0; n < nNodes; n++)
        {
            changes += routing[n]->m_pathChanges;
        }
        for (auto [tier, c] : {std::pair<const char*, NodeContainer*>{"edge", &edges},
                               std::pair<const char*, NodeContainer*>{"aggregation", &aggs}})
        {
            double worst = 0;
            double sum = 0;
            uint32_t nsw = 0;
            for (uint32_t i = 0; i < c->GetN(); i++)
            {
                const auto& f = routing[c->Get(i)->GetId()]->m_forwarded;
                std::vector<double> up;
                for (uint32_t j = half + 1; j <= k; j++)
                {
                    up.push_back(j < f.size() ? double(f[j]) : 0.0);
                }
                double mean = 0;
                for (double x : up)
                {
                    mean += x;
                }
                mean /= up.size();
                if (mean > 0)
                {
                    double mx = *std::max_element(up.begin(), up.end());
                    worst = std::max(worst, mx / mean);
                    sum += mx / mean;
                    nsw++;
                }
            }
            std::cerr << tier << " up-links: busiest / mean packets, mean over switches "
                      << (nsw ? sum / nsw : 0) << ", worst " << worst << "\n";
        }
        std::cerr << "five-tuples that changed path at a switch: " << changes << "\n";
    }
    std::cerr << "flows " << g_flows.size() << ", connections " << g_conns.size()
              << ", drops: device queues " << g_queueDrops << ", traffic control "
              << repflow::g_dropCounts.trafficControl << ", ip " << repflow::g_dropCounts.ip
              << "\n";
    for (const auto& [k, v] : g_transitions)
    {
        std::cerr << "transitions " << k << ": " << v << "\n";
    }
    std::ofstream o(out);
    if (!o)
    {
        std::cerr << "--out: cannot write " << out << "\n";
        return 2;
    }
    o << "id,src,dst,size,start,fct,copies,winner,timeouts,fast_recoveries,fct0,fct1,drops\n";
    o.precision(12);
    for (uint32_t i = 0; i < g_flows.size(); i++)
    {
        const Flow& f = g_flows[i];
        double start = f.startPs * 1e-12;
        double fct = f.finish >= 0 ? f.finish - start : -1;
        uint32_t timeouts = 0;
        uint32_t fr = 0;
        double fc[2] = {-1, -1};
        for (uint32_t c = 0; c < f.copies; c++)
        {
            const Conn& k = g_conns[f.conn0 + c];
            timeouts += k.timeouts;
            fr += k.fastRecoveries;
            fc[c] = k.finish >= 0 ? k.finish - start : -1;
        }
        o << i << "," << f.src << "," << f.dst << "," << f.size << "," << start << "," << fct
          << "," << f.copies << "," << f.winner << "," << timeouts << "," << fr << "," << fc[0]
          << "," << fc[1] << ","
          << (i == 0 ? g_queueDrops + repflow::g_dropCounts.trafficControl +
                           repflow::g_dropCounts.ip
                     : 0)
          << "\n";
    }
    Simulator::Destroy();
    return 0;
}
