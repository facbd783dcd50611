// What RepFlow's ns-3 drivers (trace-tcp.cc, trace-fattree.cc) share: the TCP they set, the
// per-connection loss counts and the drop counters. This project's code; build.sh copies it
// beside the drivers into the ns-3 checkout's scratch directory.
#ifndef REPFLOW_NS3_H
#define REPFLOW_NS3_H

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"

#include <vector>

namespace repflow
{

using namespace ns3;

/// The TCP both drivers run: NewReno with classic recovery (RFC 6582), no SACK, no
/// timestamps, no limited transmit, a 1 µs timer granularity, and these sizes and timers.
struct TcpSettings
{
    TypeId congestion = TcpNewReno::GetTypeId();
    uint32_t mss = 1460;
    uint32_t iw = 10;
    uint32_t ssthreshBytes = 100 * 1460;
    uint32_t delAckCount = 1;
    Time delAckTimeout = MilliSeconds(200);
    Time connTimeout = Seconds(3);
    uint32_t sndBuf = 1 << 30;
    uint32_t rcvBuf = 1 << 30;
    bool windowScaling = true;
    Time minRto = MilliSeconds(250);
};

inline void
SetTcpDefaults(const TcpSettings& s)
{
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(s.congestion));
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType",
                       TypeIdValue(TcpClassicRecovery::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(s.mss));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(s.iw));
    Config::SetDefault("ns3::TcpSocket::InitialSlowStartThreshold", UintegerValue(s.ssthreshBytes));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(s.delAckCount));
    Config::SetDefault("ns3::TcpSocket::DelAckTimeout", TimeValue(s.delAckTimeout));
    Config::SetDefault("ns3::TcpSocket::ConnTimeout", TimeValue(s.connTimeout));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(s.sndBuf));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(s.rcvBuf));
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(s.windowScaling));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::LimitedTransmit", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(s.minRto));
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(MicroSeconds(1)));
}

/// Retransmission timeouts (entries into CA_LOSS) and fast recoveries of one connection.
struct LossCounts
{
    uint32_t timeouts = 0;
    uint32_t fastRecoveries = 0;
};

/// Counts the congestion-state changes of element ``i`` of ``v`` (anything with LossCounts'
/// fields; indexed, so the vector may still grow before the run starts).
template <typename T>
void
OnCongState(std::vector<T>* v,
            uint32_t i,
            TcpSocketState::TcpCongState_t,
            TcpSocketState::TcpCongState_t now)
{
    if (now == TcpSocketState::CA_LOSS)
    {
        (*v)[i].timeouts++;
    }
    else if (now == TcpSocketState::CA_RECOVERY)
    {
        (*v)[i].fastRecoveries++;
    }
}

/// Hooks the sender's socket of ``app`` (it exists once the application started) to
/// element ``i`` of ``v``.
template <typename T>
void
HookSocket(std::vector<T>* v, uint32_t i, Ptr<BulkSendApplication> app)
{
    Ptr<Socket> s = app->GetSocket();
    if (s)
    {
        s->TraceConnectWithoutContext("CongState", MakeBoundCallback(&OnCongState<T>, v, i));
    }
}

/// Drops seen outside the device queues' own counters.
struct DropCounts
{
    uint64_t trafficControl = 0; ///< a full device queue with no queue disc: dropped here
    uint64_t ip = 0;
    uint64_t mac = 0;
};

inline DropCounts g_dropCounts;

// Without a queue disc, a full device queue stops the device's transmit queue and the traffic
// control layer drops what arrives meanwhile: that is where a full switch port drops.
inline void
OnTcDrop(Ptr<const Packet>)
{
    g_dropCounts.trafficControl++;
}

inline void
OnIpDrop(const Ipv4Header&, Ptr<const Packet>, Ipv4L3Protocol::DropReason, Ptr<Ipv4>, uint32_t)
{
    g_dropCounts.ip++;
}

inline void
OnMacDrop(Ptr<const Packet>)
{
    g_dropCounts.mac++;
}

/// Connects the IP, point-to-point MAC and traffic-control drop traces of every node.
inline void
ConnectDropTraces()
{
    Config::ConnectWithoutContext("/NodeList/*/$ns3::Ipv4L3Protocol/Drop", MakeCallback(&OnIpDrop));
    Config::ConnectWithoutContext("/NodeList/*/DeviceList/*/$ns3::PointToPointNetDevice/MacTxDrop",
                                  MakeCallback(&OnMacDrop));
    Config::ConnectWithoutContext("/NodeList/*/$ns3::TrafficControlLayer/TcDrop",
                                  MakeCallback(&OnTcDrop));
}

} // namespace repflow

#endif
