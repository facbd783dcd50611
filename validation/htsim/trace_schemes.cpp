// RepFlow's scheme driver for htsim (Broadcom/csg-htsim): replays a list of flows on htsim's
// k-ary fat-tree with one of four schemes and writes one CSV row per flow. Written for RepFlow's
// differential validation (docs/validation.md, "The RepFlow study under htsim"); it links
// against an htsim checkout built separately and contains no htsim code.
//
//   trace_schemes -k K -gbps G -link_us L -queue_pkts Q -trace FILE -out FILE
//                 -scheme tcp|repflow|dctcp|repflow-dctcp [-seed S] [-pkt B] [-iw N]
//                 [-ssthresh N] [-maxwnd_pkts N] [-min_rto_us U] [-initial_rto_us U]
//                 [-ecn_k_pkts K] [-rep_max BYTES] [-queue droptail|random]
//                 [-hostq fifo|fairprio] [-scan_us U] [-end_ms T] [-ssthresh_flight]
//                 [-edge_hosts H]
//
// -edge_hosts H: H hosts per edge switch (edge_fat_tree.h; e.g. the MPTCP-L study's 320 hosts
// with k = 8, H = 10) instead of htsim's FatTreeTopology; switch ports as for droptail.
//
// FILE: one flow per line, "src dst packets start_ps bytes": the number of packets of -pkt
// bytes on the wire the flow sends (RepFlow's ceil(bytes / mss) segments), its start, and its
// size in RepFlow's payload bytes (which decides replication: bytes <= -rep_max).
//
// Schemes. tcp: one htsim TcpSrc/TcpSink per flow. dctcp: one htsim DCTCPSrc/TcpSink per flow.
// repflow / repflow-dctcp: a flow of at most -rep_max bytes (payload, as RepFlow counts it) is
// sent as two independent connections of the same kind, each on its own equal-cost path drawn
// uniformly at random (independently: the copies may share a path); the flow completes when
// the receiver of the first copy holds all its data (RepFlow's completion, docs/metrics.md).
// Every connection's ACKs take a random reverse path.
//
// Switch ports: htsim's ECNQueue (DropTail by bytes; CE mark on dequeue when more than K bytes
// are queued) with K = -ecn_k_pkts full packets; htsim's TcpSrc ignores the echoes, so for tcp
// and repflow they are DropTail queues. -queue random: htsim's RandomQueue instead (tcp only).
// Host queues: -hostq fifo (default): htsim's plain Queue (FIFO) with an unlimited buffer, as
// RepFlow's host NICs; fairprio: htsim's FairPriorityQueue (ACKs first, flows round-robin).
//
// TCP settings a driver can change in htsim (all public members or setters of TcpSrc): packet
// size (Packet::set_packet_size), initial window (set_cwnd), slow-start threshold
// (set_ssthresh), window cap (_maxcwnd), initial RTO (_rto before the start). htsim's TcpSrc
// floors every RTO computed from an RTT sample at 250 ms (hard-coded in receivePacket); with
// -min_rto_us the driver's subclass recomputes the RTO after htsim's code from the same
// estimator (srtt + 4 mdev) with that floor instead, and re-arms a timer htsim has just armed.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <vector>

#include "config.h"
#include "dctcp.h"
#include "ecnqueue.h"
#include "eventlist.h"
#include "fat_tree_topology.h"
#include "logfile.h"
#include "loggers.h"
#include "network.h"
#include "queue.h"
#include "randomqueue.h"
#include "tcp.h"
#include "edge_fat_tree.h"

EventList eventlist;

struct FlowSpec {
    uint32_t src, dst;
    uint64_t packets;
    simtime_picosec start;
    uint64_t bytes;
};

struct ConnStats {
    simtime_picosec finish = 0;  // when the receiver holds every packet (RepFlow's completion)
    bool done = false;
    bool acked = false;          // the sender has every packet acknowledged (timers stop)
    uint32_t timeouts = 0;
    uint32_t syn_timeouts = 0;  // timeouts before the connection is established
    uint32_t fast_recoveries = 0;
    uint64_t drops = 0;
    uint64_t sent = 0;  // data packets sent, retransmissions included
};

static std::vector<ConnStats> conns;  // one per connection
static std::map<const void*, size_t> conn_of;

class CountingTcpLogger : public TcpLogger {
public:
    void logTcp(TcpSrc& src, TcpEvent ev) override {
        auto it = conn_of.find(&src);
        if (it == conn_of.end()) return;
        if (ev == TCP_TIMEOUT) conns[it->second].timeouts++;
        if (ev == TCP_TIMEOUT && !src._established) conns[it->second].syn_timeouts++;
        if (ev == TCP_RCV_DUP_FASTXMIT) conns[it->second].fast_recoveries++;
    }
};

class DropLogger : public TrafficLogger {
public:
    explicit DropLogger(size_t i) : _i(i) {}
    void logTraffic(Packet& p, Logged&, TrafficEvent ev) override {
        if (ev == PKT_DROP) conns[_i].drops++;
        if (ev == PKT_CREATESEND && p.type() == TCP) conns[_i].sent++;
    }
private:
    size_t _i;
};

static simtime_picosec min_rto = 0;  // 0: htsim's own 250 ms floor
static bool ssthresh_flight = false;  // -ssthresh_flight (a diagnostic switch, tcp only)

// A source (TcpSrc or DCTCPSrc) that notes when its last byte is acknowledged and, with
// -min_rto_us, floors its RTO at min_rto instead of htsim's 250 ms.
template <class Base>
class Traced : public Base {
public:
    Traced(TcpLogger* lg, TrafficLogger* tl, EventList& ev, size_t i) : Base(lg, tl, ev), _i(i) {}
    void receivePacket(Packet& pkt) override {
        TcpAck* ack = (TcpAck*)(&pkt);
        // The conditions under which htsim's receivePacket recomputes _rto (an ACK not older
        // than the last one, with a non-zero RTT sample); read before the packet is freed.
        bool sampled = ack->ackno() >= this->_last_acked && this->eventlist().now() != ack->ts();
        Base::receivePacket(pkt);
        if (min_rto && sampled && this->_rtt > 0) {
            simtime_picosec now = this->eventlist().now();
            simtime_picosec rto = this->_rtt + 4 * this->_mdev;
            if (rto < min_rto) rto = min_rto;
            if (this->_RFC2988_RTO_timeout == now + this->_rto)
                this->_RFC2988_RTO_timeout = now + rto;
            this->_rto = rto;
        }
        if (this->_last_acked >= this->_flow_size) conns[_i].acked = true;
    }
    // With -ssthresh_flight (a diagnostic switch, tcp only): on a loss (timeout or fast
    // retransmit) ssthresh = max(flight size / 2, 2 packets), RFC 5681 (4), where htsim takes
    // max(cwnd / 2, 2 packets).
    void deflate_window() override {
        if (!ssthresh_flight) return Base::deflate_window();
        uint32_t flight = (uint32_t)(this->_highest_sent - this->_last_acked);
        this->_ssthresh = std::max(flight / 2, (uint32_t)(2 * this->_mss));
    }
private:
    size_t _i;
};

// htsim's TcpRtxTimerScanner calls every registered source's rtx_timer_hook each period until
// the run's end time, so its cost grows with every flow ever started times the run's length.
// This scanner does the same for the connections that have not completed (in registration
// order, at the same instants: every period from t = 0) and stops once all have, which lets the
// event list drain and the run end with the last flow.
class ActiveScanner : public EventSource {
public:
    ActiveScanner(simtime_picosec period, EventList& ev)
        : EventSource(ev, "ActiveScanner"), _period(period) {
        ev.sourceIsPendingRel(*this, _period);
    }
    void add(TcpSrc* src, size_t ci) { _srcs.emplace_back(src, ci); }
    void doNextEvent() override {
        simtime_picosec now = eventlist().now();
        size_t j = 0;
        for (size_t i = 0; i < _srcs.size(); i++) {
            if (conns[_srcs[i].second].acked) continue;
            _srcs[i].first->rtx_timer_hook(now, _period);
            _srcs[j++] = _srcs[i];
        }
        _srcs.resize(j);
        if (!_srcs.empty()) eventlist().sourceIsPendingRel(*this, _period);
    }
private:
    simtime_picosec _period;
    std::vector<std::pair<TcpSrc*, size_t>> _srcs;
};

// A TcpSink that notes when it holds the connection's last packet: a flow completes, as in
// RepFlow (docs/metrics.md), when the receiver of one of its copies holds every byte, not when
// the sender hears of it. After N data packets (and the 1-byte SYN) its cumulative ACK is
// 1 + N·pkt.
class TracedSink : public TcpSink {
public:
    TracedSink(size_t i, uint64_t last) : _i(i), _last(last) {}
    void receivePacket(Packet& pkt) override {
        TcpSink::receivePacket(pkt);
        if (!conns[_i].done && _cumulative_ack >= _last) {
            conns[_i].done = true;
            conns[_i].finish = _src->eventlist().now();
        }
    }
private:
    size_t _i;
    uint64_t _last;
};

static void usage(const char* p) {
    std::cerr << "usage: " << p << " -k K -gbps G -link_us L -queue_pkts Q -trace FILE -out FILE"
              << " -scheme tcp|repflow|dctcp|repflow-dctcp [-seed S] [-pkt B] [-iw N]"
              << " [-ssthresh N] [-maxwnd_pkts N] [-min_rto_us U] [-initial_rto_us U]"
              << " [-ecn_k_pkts K] [-rep_max BYTES] [-queue droptail|random]"
              << " [-hostq fifo|fairprio] [-scan_us U] [-end_ms T] [-ssthresh_flight]"
              << " [-edge_hosts H]\n";
    exit(2);
}

int main(int argc, char** argv) {
    uint32_t k = 8, queue_pkts = 100, seed = 1, pkt = 1500, iw = 10, ssthresh = 0,
             maxwnd_pkts = 0, edge_hosts = 0;
    double gbps = 1, link_us = 2, scan_us = 10, end_ms = 10000, min_rto_us = 0,
           initial_rto_us = 0, ecn_k_pkts = 20;
    uint64_t rep_max = 100000;
    std::string scheme = "tcp", queue = "droptail", hostq = "fifo";
    const char *trace = nullptr, *out = nullptr;
    for (int i = 1; i < argc; i++) {
        auto next = [&]() -> const char* { if (i + 1 >= argc) usage(argv[0]); return argv[++i]; };
        if (!strcmp(argv[i], "-k")) k = atoi(next());
        else if (!strcmp(argv[i], "-gbps")) gbps = atof(next());
        else if (!strcmp(argv[i], "-link_us")) link_us = atof(next());
        else if (!strcmp(argv[i], "-queue_pkts")) queue_pkts = atoi(next());
        else if (!strcmp(argv[i], "-trace")) trace = next();
        else if (!strcmp(argv[i], "-out")) out = next();
        else if (!strcmp(argv[i], "-seed")) seed = atoi(next());
        else if (!strcmp(argv[i], "-scheme")) scheme = next();
        else if (!strcmp(argv[i], "-pkt")) pkt = atoi(next());
        else if (!strcmp(argv[i], "-iw")) iw = atoi(next());
        else if (!strcmp(argv[i], "-ssthresh")) ssthresh = atoi(next());
        else if (!strcmp(argv[i], "-maxwnd_pkts")) maxwnd_pkts = atoi(next());
        else if (!strcmp(argv[i], "-min_rto_us")) min_rto_us = atof(next());
        else if (!strcmp(argv[i], "-initial_rto_us")) initial_rto_us = atof(next());
        else if (!strcmp(argv[i], "-ecn_k_pkts")) ecn_k_pkts = atof(next());
        else if (!strcmp(argv[i], "-rep_max")) rep_max = strtoull(next(), nullptr, 10);
        else if (!strcmp(argv[i], "-queue")) queue = next();
        else if (!strcmp(argv[i], "-hostq")) hostq = next();
        else if (!strcmp(argv[i], "-scan_us")) scan_us = atof(next());
        else if (!strcmp(argv[i], "-end_ms")) end_ms = atof(next());
        else if (!strcmp(argv[i], "-ssthresh_flight")) ssthresh_flight = true;
        else if (!strcmp(argv[i], "-edge_hosts")) edge_hosts = atoi(next());
        else usage(argv[0]);
    }
    if (!trace || !out) usage(argv[0]);
    bool dctcp = scheme == "dctcp" || scheme == "repflow-dctcp";
    bool replicate = scheme == "repflow" || scheme == "repflow-dctcp";
    if (!dctcp && scheme != "tcp" && scheme != "repflow") usage(argv[0]);
    if (queue != "droptail" && queue != "random") usage(argv[0]);
    if (ssthresh_flight && dctcp) usage(argv[0]);
    if (queue == "random" && dctcp) {
        std::cerr << "-queue random has no ECN marking: DCTCP needs droptail (ECNQueue)\n";
        return 2;
    }
    srand(seed);
    srandom(seed);
    Packet::set_packet_size(pkt);
    min_rto = min_rto_us > 0 ? timeFromUs(min_rto_us) : 0;

    std::vector<FlowSpec> flows;
    {
        std::ifstream f(trace);
        if (!f) { std::cerr << trace << ": cannot read\n"; return 2; }
        FlowSpec s;
        unsigned long long packets, start, bytes;
        while (f >> s.src >> s.dst >> packets >> start >> bytes) {
            s.packets = packets;
            s.start = start;
            s.bytes = bytes;
            flows.push_back(s);
        }
    }
    eventlist.setEndtime(timeFromMs(end_ms));

    // Never destroyed: htsim's Logfile post-processes its (unused) log on destruction.
    Logfile* logfile = new Logfile(std::string(out) + ".htsim-log", eventlist);
    QueueLoggerFactory qlf(logfile, QueueLoggerFactory::LOGGER_SAMPLING, eventlist);
    qlf.set_sample_period(timeFromMs(100000));
    uint32_t hosts = k * k * k / 4;
    linkspeed_bps speed = speedFromGbps(gbps);
    mem_b qsize = memFromPkt(queue_pkts);
    if (edge_hosts && (queue != "droptail" || (hostq != "fifo" && hostq != "fairprio")))
        usage(argv[0]);
    EdgeFatTree* etop = nullptr;
    if (edge_hosts)
        etop = new EdgeFatTree(
            k, edge_hosts, timeFromUs(link_us), eventlist,
            [&]() -> BaseQueue* {
                return new ECNQueue(speed, qsize, eventlist, nullptr, memFromPkt(ecn_k_pkts));
            },
            [&]() -> BaseQueue* {
                if (hostq == "fifo") return new Queue(speed, memFromPkt(1e9), eventlist, nullptr);
                return new FairPriorityQueue(speed, memFromPkt(1e9), eventlist, nullptr);
            });
    FatTreeTopology top(edge_hosts ? 16 : hosts, speed, qsize, nullptr, &eventlist, nullptr,
                        queue == "random" ? RANDOM : ECN, timeFromUs(link_us), 0, FAIR_PRIO);
    // Routes are built from the topology's queue tables on demand (get_paths), so queues put
    // into the tables now carry every packet. Switch ports: ECNQueue with our K (the topology's
    // own ECN ports use a fixed K of 15 packets). Host ports: FIFO, unlimited, unless fairprio.
    auto swap_switch = [&](std::vector<std::vector<std::vector<BaseQueue*>>>& t) {
        for (auto& a : t)
            for (auto& b : a)
                for (auto& q : b) {
                    if (!q) continue;
                    q = new ECNQueue(speed, qsize, eventlist, nullptr, memFromPkt(ecn_k_pkts));
                }
    };
    if (queue == "droptail") {
        swap_switch(top.queues_nc_nup);
        swap_switch(top.queues_nup_nc);
        swap_switch(top.queues_nup_nlp);
        swap_switch(top.queues_nlp_nup);
        swap_switch(top.queues_nlp_ns);
    }
    if (hostq == "fifo") {
        for (auto& a : top.queues_ns_nlp)
            for (auto& b : a)
                for (auto& q : b)
                    if (q) q = new Queue(speed, memFromPkt(1e9), eventlist, nullptr);
    } else if (hostq != "fairprio") {
        usage(argv[0]);
    }

    ActiveScanner scanner(timeFromUs(scan_us), eventlist);
    CountingTcpLogger tcplog;
    std::map<std::pair<uint32_t, uint32_t>, std::vector<const Route*>*> paths;
    auto get = [&](uint32_t a, uint32_t b) {
        auto& v = paths[{a, b}];
        if (!v) v = etop ? etop->get_paths(a, b) : top.get_paths(a, b);
        return v;
    };
    std::vector<std::vector<size_t>> copies(flows.size());
    for (size_t i = 0; i < flows.size(); i++) {
        const FlowSpec& s = flows[i];
        int n = (replicate && s.bytes <= rep_max) ? 2 : 1;
        for (int c = 0; c < n; c++) {
            size_t ci = conns.size();
            conns.emplace_back();
            copies[i].push_back(ci);
            TcpSrc* src;
            if (dctcp) src = new Traced<DCTCPSrc>(&tcplog, new DropLogger(ci), eventlist, ci);
            else src = new Traced<TcpSrc>(&tcplog, new DropLogger(ci), eventlist, ci);
            auto* snk = new TracedSink(ci, 1 + s.packets * pkt);
            conn_of[src] = ci;
            // htsim's TcpSrc adds a packet to the size it is given (set_flowsize: size + mss),
            // completes when its cumulative ACK reaches that size, and sends data while the
            // highest byte sent is at most size + 1 (its SYN takes sequence number 1). Given
            // N·pkt − pkt − 1 bytes (unsigned arithmetic: for N = 1 the sum wraps to pkt − 1), it
            // sends exactly N data packets and completes when all N are acknowledged.
            src->set_flowsize(s.packets * pkt - pkt - 1);
            src->set_cwnd((uint64_t)iw * pkt);
            src->set_ssthresh(ssthresh ? (uint64_t)ssthresh * pkt : (uint64_t)1 << 30);
            if (maxwnd_pkts) src->_maxcwnd = maxwnd_pkts * pkt;
            if (initial_rto_us > 0) src->_rto = timeFromUs(initial_rto_us);
            scanner.add(src, ci);
            auto* fwd = get(s.src, s.dst);
            auto* rev = get(s.dst, s.src);
            Route* out_route = new Route(*fwd->at(random() % fwd->size()));
            out_route->push_back(snk);
            Route* back = new Route(*rev->at(random() % rev->size()));
            back->push_back(src);
            src->connect(*out_route, *back, *snk, s.start);
        }
    }
    while (eventlist.doNextEvent()) {
    }

    FILE* o = fopen(out, "w");
    if (!o) { std::cerr << out << ": cannot write\n"; return 2; }
    fprintf(o, "id,src,dst,packets,bytes,start,fct,copies,winner,timeouts,fast_recoveries,drops,"
               "sent_packets,fct0,fct1,syn_timeouts\n");
    for (size_t i = 0; i < flows.size(); i++) {
        const FlowSpec& s = flows[i];
        double best = -1, f[2] = {-1, -1};
        int winner = -1;
        ConnStats sum;
        for (size_t c = 0; c < copies[i].size(); c++) {
            const ConnStats& cs = conns[copies[i][c]];
            if (cs.done) {
                f[c] = (double)(cs.finish - s.start) * 1e-12;
                if (best < 0 || f[c] < best) { best = f[c]; winner = (int)c; }
            }
            sum.timeouts += cs.timeouts;
            sum.syn_timeouts += cs.syn_timeouts;
            sum.fast_recoveries += cs.fast_recoveries;
            sum.drops += cs.drops;
            sum.sent += cs.sent;
        }
        fprintf(o, "%zu,%u,%u,%llu,%llu,%.12g,%.12g,%zu,%d,%u,%u,%llu,%llu,%.12g,%.12g,%u\n", i, s.src,
                s.dst, (unsigned long long)s.packets, (unsigned long long)s.bytes, (double)s.start * 1e-12, best,
                copies[i].size(), winner, sum.timeouts, sum.fast_recoveries,
                (unsigned long long)sum.drops, (unsigned long long)sum.sent, f[0], f[1], sum.syn_timeouts);
    }
    fclose(o);
    std::remove((std::string(out) + ".htsim-log").c_str());
    return 0;
}
