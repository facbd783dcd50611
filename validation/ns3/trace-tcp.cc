// RepFlow's trace driver for ns-3 (nsnam/ns-3-dev): replays a list of flows with ns-3's TCP on
// a star (one switch, every host on its own point-to-point link) and writes one CSV row per
// flow. Written for RepFlow's differential validation (docs/validation.md); it is built as an
// ns-3 scratch program against an ns-3 checkout outside this repository
// (validation/ns3/build.sh) and contains no ns-3 code.
//
//   trace-tcp --hosts=N --trace=FILE --out=FILE [--gbps=10] [--linkUs=1] [--queuePkts=100]
//             [--minRtoMs=250] [--seed=1]
//
// FILE: one flow per line, "src dst size_bytes start_ps" (hosts numbered 0..N-1).
// TCP: NewReno congestion control with classic (RFC 6582) recovery, no SACK, no timestamps,
// no limited transmit, an ACK per segment, 1,460-byte segments, initial window 10, slow-start
// threshold 100 segments, minimum RTO as given, 1 µs timer granularity, 3 s handshake timeout.
// Queues: 100-packet DropTail device queues at the switch (packets counted, ACKs included),
// 100,000 packets at hosts, no traffic-control qdiscs.
#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include "repflow-ns3.h"

#include <fstream>
#include <vector>

using namespace ns3;
using repflow::g_dropCounts;

struct Flow
{
    uint32_t src, dst;
    uint64_t size;
    uint64_t startPs;
    uint64_t received = 0;
    double finish = -1;
    uint32_t timeouts = 0;
    uint32_t fastRecoveries = 0;
};

static std::vector<Flow> g_flows;
static uint64_t g_drops = 0;
static std::vector<Ptr<Queue<Packet>>> g_switchQueues;
static std::vector<Ptr<NetDevice>> g_allDevices;

static void
OnRx(uint32_t i, Ptr<const Packet> p, const Address&)
{
    Flow& f = g_flows[i];
    f.received += p->GetSize();
    if (f.finish < 0 && f.received >= f.size)
    {
        f.finish = Simulator::Now().GetSeconds();
    }
}

static void
OnDrop(Ptr<const Packet>)
{
    g_drops++;
}

int
main(int argc, char* argv[])
{
    uint32_t hosts = 16;
    std::string trace;
    std::string out;
    double gbps = 10;
    double linkUs = 1;
    uint32_t queuePkts = 100;
    double minRtoMs = 250;
    uint32_t seed = 1;
    CommandLine cmd;
    cmd.AddValue("hosts", "hosts on the star", hosts);
    cmd.AddValue("trace", "flow trace", trace);
    cmd.AddValue("out", "per-flow CSV", out);
    cmd.AddValue("gbps", "link rate", gbps);
    cmd.AddValue("linkUs", "propagation delay per link", linkUs);
    cmd.AddValue("queuePkts", "switch port buffer, packets", queuePkts);
    cmd.AddValue("minRtoMs", "minimum RTO", minRtoMs);
    cmd.AddValue("seed", "run number", seed);
    cmd.Parse(argc, argv);
    RngSeedManager::SetRun(seed);

    repflow::TcpSettings tcp;
    tcp.minRto = MilliSeconds(minRtoMs);
    repflow::SetTcpDefaults(tcp);

    {
        std::ifstream f(trace);
        if (!f)
        {
            std::cerr << trace << ": cannot read\n";
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

    NodeContainer hostNodes;
    hostNodes.Create(hosts);
    Ptr<Node> sw = CreateObject<Node>();
    InternetStackHelper stack;
    stack.Install(hostNodes);
    stack.Install(sw);

    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(uint64_t(gbps * 1e9))));
    p2p.SetChannelAttribute("Delay", TimeValue(NanoSeconds(uint64_t(linkUs * 1000))));
    Ipv4AddressHelper addr;
    std::vector<Ipv4Address> hostAddr(hosts);
    for (uint32_t h = 0; h < hosts; h++)
    {
        NetDeviceContainer d = p2p.Install(hostNodes.Get(h), sw);
        // host side: a deep queue (the simulator's host queues are unlimited); switch side: the
        // 100-packet DropTail buffer.
        d.Get(0)->GetObject<PointToPointNetDevice>()->GetQueue()->SetMaxSize(
            QueueSize("100000p"));
        Ptr<Queue<Packet>> q = d.Get(1)->GetObject<PointToPointNetDevice>()->GetQueue();
        q->SetMaxSize(QueueSize(std::to_string(queuePkts) + "p"));
        q->TraceConnectWithoutContext("Drop", MakeCallback(&OnDrop));
        g_switchQueues.push_back(q);
        g_allDevices.push_back(d.Get(0));
        g_allDevices.push_back(d.Get(1));
        std::ostringstream net;
        net << "10." << (h / 250) << "." << (h % 250) << ".0";
        addr.SetBase(net.str().c_str(), "255.255.255.0");
        Ipv4InterfaceContainer ifc = addr.Assign(d);
        hostAddr[h] = ifc.GetAddress(0);
        TrafficControlHelper::Default().Uninstall(d);
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    repflow::ConnectDropTraces();

    for (uint32_t i = 0; i < g_flows.size(); i++)
    {
        const Flow& f = g_flows[i];
        uint16_t port = 10000 + i;
        PacketSinkHelper sink("ns3::TcpSocketFactory",
                              InetSocketAddress(Ipv4Address::GetAny(), port));
        ApplicationContainer sa = sink.Install(hostNodes.Get(f.dst));
        sa.Start(Seconds(0));
        sa.Get(0)->TraceConnectWithoutContext("Rx", MakeBoundCallback(&OnRx, i));
        BulkSendHelper src("ns3::TcpSocketFactory", InetSocketAddress(hostAddr[f.dst], port));
        src.SetAttribute("MaxBytes", UintegerValue(f.size));
        src.SetAttribute("SendSize", UintegerValue(1460 * 64));
        ApplicationContainer ca = src.Install(hostNodes.Get(f.src));
        Time start = PicoSeconds(f.startPs);
        ca.Start(start);
        Simulator::Schedule(start + NanoSeconds(1),
                            &repflow::HookSocket<Flow>,
                            &g_flows,
                            i,
                            DynamicCast<BulkSendApplication>(ca.Get(0)));
    }
    Simulator::Stop(Seconds(30));
    Simulator::Run();

    uint64_t counted = 0;
    for (auto& q : g_switchQueues)
    {
        counted += q->GetTotalDroppedPackets();
    }
    uint64_t qdisc = 0;
    uint32_t withQdisc = 0;
    for (auto& dev : g_allDevices)
    {
        Ptr<TrafficControlLayer> tc = dev->GetNode()->GetObject<TrafficControlLayer>();
        Ptr<QueueDisc> qd = tc ? tc->GetRootQueueDiscOnDevice(dev) : nullptr;
        if (qd)
        {
            withQdisc++;
            qdisc += qd->GetStats().nTotalDroppedPackets;
        }
        counted += dev->GetObject<PointToPointNetDevice>()->GetQueue()->GetTotalDroppedPackets();
    }
    if (!g_switchQueues.empty())
    {
        auto q0 = g_switchQueues[0];
        std::cerr << "switch port to host 0: max size " << q0->GetMaxSize() << ", received "
                  << q0->GetTotalReceivedPackets() << ", dropped "
                  << q0->GetTotalDroppedPackets() << "\n";
    }
    std::cerr << "drops traced " << g_drops << ", counted by the queues " << counted
              << ", devices with a qdisc " << withQdisc << " (drops " << qdisc << "), ip "
              << g_dropCounts.ip << ", mac " << g_dropCounts.mac << ", traffic control "
              << g_dropCounts.trafficControl
              << "\n";
    std::ofstream o(out);
    if (!o)
    {
        std::cerr << out << ": cannot write\n";
        return 2;
    }
    o << "id,src,dst,size,start,fct,timeouts,fast_recoveries,drops\n";
    o.precision(12);
    for (uint32_t i = 0; i < g_flows.size(); i++)
    {
        const Flow& f = g_flows[i];
        double start = f.startPs * 1e-12;
        double fct = f.finish >= 0 ? f.finish - start : -1;
        o << i << "," << f.src << "," << f.dst << "," << f.size << "," << start << "," << fct
          << "," << f.timeouts << "," << f.fastRecoveries << ","
          << (i == 0
                  ? g_drops + g_dropCounts.trafficControl + g_dropCounts.ip + g_dropCounts.mac
                  : 0)
          << "\n";
    }
    Simulator::Destroy();
    return 0;
}
