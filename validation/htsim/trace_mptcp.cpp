// RepFlow's MPTCP trace driver for htsim (Broadcom/csg-htsim): replays a list of flows, each
// as one htsim MultipathTcpSrc of N TcpSrc subflows (LIA = htsim's COUPLED_INC, or UNCOUPLED)
// on its k-ary fat-tree, and writes one CSV row per flow. Written for RepFlow's differential
// validation (docs/validation.md, "MPTCP against htsim"); it links against an htsim checkout
// built separately and contains no htsim code.
//
//   trace_mptcp -k K -gbps G -link_us L -queue_pkts Q -trace FILE -out FILE -subflows N
//               -cc lia|uncoupled [-queue random|droptail] [-seed S] [-scan_us U] [-end_ms T]
//               [-edge_hosts H] [-hostq fairprio|fifo] [-pkt B] [-iw N] [-ssthresh N]
//               [-maxwnd_pkts N] [-initial_rto_us U] [-rto_rtts X] [-fct_at ack|rx]
//               [-ssthresh_flight]
//
// Optional settings (unset: htsim's defaults, as the committed k = 4 fixtures ran):
// -edge_hosts H: H hosts per edge switch (edge_fat_tree.h, e.g. MPTCP-L's 320 hosts with k = 8,
// H = 10) instead of htsim's FatTreeTopology (k/2 per edge switch); DropTail switch ports
// (htsim's ECNQueue, marks ignored);
// -hostq: host NICs are htsim's FairPriorityQueue (the topology's default) or a FIFO Queue,
// both unlimited;
// -pkt: data packet size (Packet::set_packet_size); -iw, -ssthresh (0: unlimited), -maxwnd_pkts:
// every subflow's initial window, slow-start threshold and window cap in packets;
// -initial_rto_us: every subflow's RTO before its first RTT sample (its SYN's timer);
// -fct_at rx: a flow completes when its receiver holds every packet (RepFlow's completion)
// rather than when the sender has every packet acknowledged (the default, as the committed
// k = 4 fixtures ran);
// -rto_rtts X: every subflow's RTO is X smoothed RTTs (no floor: htsim's 250 ms floor removed),
// recomputed after htsim's code on every RTT sample, as RepFlow's scheme.rto_rtts.
// With any of them set, the RTO timers are scanned only for flows not yet complete (same
// instants, same order as htsim's TcpRtxTimerScanner, which scans every subflow ever started).
//
// -queue: switch queues are htsim's RandomQueue (the default: it also drops 10 % of arrivals
// in the last 3 packets of the buffer) or DropTail (htsim's ECNQueue, whose CE marks htsim's
// TcpSrc ignores: a plain DropTail queue for TCP and MPTCP).
// FILE: one flow per line, "src dst size_bytes start_ps"; sizes are whole htsim packets
// (1,500 bytes each). Every subflow takes a path chosen uniformly at random (seeded, with
// replacement, as htsim's own fat-tree MPTCP experiments do) among the equal-cost paths, and
// its ACKs a random reverse path.
//
// Finite flows. htsim's MPTCP couples only congestion control: without MODEL_RECEIVE_WINDOW
// each subflow is a TcpSrc with its own byte stream and no data-level sequence space. This
// driver gives a flow of P packets a shared budget: a subflow may send a new packet (beyond the
// highest it has ever sent) only while the flow's subflows together have sent fewer than P new
// packets, so a packet's data lives on one subflow (which retransmits it itself, as htsim's
// go-back-N TCP does). The flow completes when every subflow has had all it sent acknowledged
// and the budget is spent: the receiver then holds all P packets. Its subflows then stop
// (their ACKs and timers are ignored).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <vector>

#include "config.h"
#include "eventlist.h"
#include "fat_tree_topology.h"
#include "logfile.h"
#include "loggers.h"
#include "mtcp.h"
#include "network.h"
#include "tcp.h"
#include "ecnqueue.h"
#include "edge_fat_tree.h"

EventList eventlist;

struct FlowSpec {
    uint32_t src, dst;
    uint64_t size;
    simtime_picosec start;
};

class Subflow;

struct Conn {
    uint64_t packets = 0;   // the flow's size, packets
    uint64_t sent_new = 0;  // new packets its subflows have sent, together
    std::vector<Subflow*> subs;
    bool done = false;
    simtime_picosec finish = 0;
    uint32_t timeouts = 0;
    uint32_t fast_recoveries = 0;
    uint64_t drops = 0;      // data and ACK packets of this flow dropped at a queue
    uint64_t overshoot = 0;  // packets sent beyond the budget (see Subflow::budget)
};

static std::vector<Conn> conns;
static std::map<const void*, size_t> index_of;
static size_t finished = 0;

static double rto_rtts = 0;  // -rto_rtts (0: htsim's RTO)
static bool fct_at_rx = false;
static bool ssthresh_flight = false;  // -ssthresh_flight (a diagnostic switch)  // -fct_at rx: complete when the receiver holds every packet

class CountingTcpLogger : public TcpLogger {
public:
    void logTcp(TcpSrc& src, TcpEvent ev) override {
        auto it = index_of.find(&src);
        if (it == index_of.end()) return;
        if (ev == TCP_TIMEOUT) conns[it->second].timeouts++;
        if (ev == TCP_RCV_DUP_FASTXMIT) conns[it->second].fast_recoveries++;
    }
};

class DropLogger : public TrafficLogger {
public:
    explicit DropLogger(size_t i) : _i(i) {}
    void logTraffic(Packet&, Logged&, TrafficEvent ev) override {
        if (ev == PKT_DROP) conns[_i].drops++;
    }
private:
    size_t _i;
};

// A subflow of a finite MPTCP flow: htsim's TcpSrc held to the flow's shared packet budget.
class Subflow : public TcpSrc {
public:
    Subflow(TcpLogger* lg, TrafficLogger* tl, EventList& ev, size_t i)
        : TcpSrc(lg, tl, ev), _i(i) {}

    // Packets of new data this subflow has sent (its high-water mark).
    uint64_t hw = 0;

    // Lets TcpSrc::send_packets go up to the highest packet this subflow has sent plus what
    // is left of the flow's budget (TcpSrc sends while _highest_sent <= _flow_size + 1, and
    // _highest_sent = 1 + packets · mss after the SYN).
    void budget() {
        Conn& c = conns[_i];
        uint64_t left = c.sent_new < c.packets ? c.packets - c.sent_new : 0;
        uint64_t allow = hw + left;
        // allow = 0 cannot be expressed (a subflow that has sent nothing may then send one
        // packet). Packets beyond the budget are counted in `overshoot`: over all the runs of
        // the fixtures, 4 flows sent one packet more than their 20,000.
        _flow_size = allow ? (allow - 1) * _mss : 0;
    }

    void account() {
        uint64_t j = _highest_sent > 1 ? (_highest_sent - 1) / _mss : 0;
        if (j > hw) {
            Conn& c = conns[_i];
            uint64_t before = c.sent_new;
            c.sent_new += j - hw;
            if (c.sent_new > c.packets)
                c.overshoot += c.sent_new - std::max(before, c.packets);
            hw = j;
            for (Subflow* s : c.subs) s->budget();
        }
    }

    bool all_acked() const { return _last_acked >= 1 + hw * _mss; }
    // The receiver holds every packet this subflow has sent (-fct_at rx).
    bool all_received() const { return _sink->_cumulative_ack >= 1 + hw * _mss; }

    void check_done() {
        Conn& c = conns[_i];
        if (c.done || c.sent_new < c.packets) return;
        for (Subflow* s : c.subs)
            if (fct_at_rx ? !s->all_received() : !s->all_acked()) return;
        c.done = true;
        c.finish = eventlist().now();
        finished++;
        for (Subflow* s : c.subs) s->_RFC2988_RTO_timeout = timeInf;
    }

    void receivePacket(Packet& pkt) override {
        if (conns[_i].done) {
            pkt.free();
            return;
        }
        budget();
        TcpAck* ack = (TcpAck*)(&pkt);
        bool sampled = ack->ackno() >= _last_acked && eventlist().now() != ack->ts();
        TcpSrc::receivePacket(pkt);
        if (rto_rtts > 0 && sampled && _rtt > 0) {
            simtime_picosec now = eventlist().now();
            simtime_picosec rto = (simtime_picosec)(rto_rtts * (double)_rtt);
            if (_RFC2988_RTO_timeout == now + _rto) _RFC2988_RTO_timeout = now + rto;
            _rto = rto;
        }
        account();
        check_done();
    }

    void doNextEvent() override {
        if (conns[_i].done) return;
        budget();
        TcpSrc::doNextEvent();
        account();
    }

    void check_done_rx() { check_done(); }

    // -ssthresh_flight: on a loss (fast retransmit or timeout) a subflow's ssthresh is
    // max(flight size / 2, 2 packets), RFC 5681 (4), as RepFlow's subflows, where htsim's
    // MultipathTcpSrc::deflate_window takes max(cwnd / 2, 1 packet).
    void deflate_window() override {
        if (!ssthresh_flight) return TcpSrc::deflate_window();
        uint32_t flight = (uint32_t)(_highest_sent - _last_acked);
        _ssthresh = std::max(flight / 2, (uint32_t)(2 * _mss));
    }

    void rtx_timer_hook(simtime_picosec now, simtime_picosec period) override {
        if (conns[_i].done) return;
        TcpSrc::rtx_timer_hook(now, period);
    }

private:
    size_t _i;
};

// Scans the RTO timers of the subflows of flows not yet complete, each period from t = 0, in
// registration order (htsim's TcpRtxTimerScanner scans every subflow ever registered).
class ActiveScanner : public EventSource {
public:
    ActiveScanner(simtime_picosec period, EventList& ev)
        : EventSource(ev, "ActiveScanner"), _period(period) {
        ev.sourceIsPendingRel(*this, _period);
    }
    void add(Subflow* s, size_t i) { _subs.emplace_back(s, i); }
    void doNextEvent() override {
        simtime_picosec now = eventlist().now();
        size_t j = 0;
        for (size_t i = 0; i < _subs.size(); i++) {
            if (conns[_subs[i].second].done) continue;
            _subs[i].first->rtx_timer_hook(now, _period);
            _subs[j++] = _subs[i];
        }
        _subs.resize(j);
        if (!_subs.empty()) eventlist().sourceIsPendingRel(*this, _period);
    }
private:
    simtime_picosec _period;
    std::vector<std::pair<Subflow*, size_t>> _subs;
};

// With -fct_at rx, a subflow's sink checks its flow's completion on every packet it receives.
class RxSink : public TcpSink {
public:
    explicit RxSink(Subflow* sub) : _sub(sub) {}
    void receivePacket(Packet& pkt) override {
        TcpSink::receivePacket(pkt);
        _sub->check_done_rx();
    }
private:
    Subflow* _sub;
};

static void usage(const char* p) {
    std::cerr << "usage: " << p << " -k K -gbps G -link_us L -queue_pkts Q -trace FILE -out FILE"
              << " -subflows N -cc lia|uncoupled [-queue random|droptail] [-seed S]"
              << " [-scan_us U] [-end_ms T] [-edge_hosts H] [-hostq fairprio|fifo] [-pkt B] [-iw N] [-ssthresh N]"
              << " [-maxwnd_pkts N] [-initial_rto_us U] [-rto_rtts X] [-fct_at ack|rx]"
              << " [-ssthresh_flight]\n";
    exit(2);
}

int main(int argc, char** argv) {
    uint32_t k = 4, queue_pkts = 100, seed = 1, subflows = 1;
    double gbps = 10, link_us = 1, scan_us = 10, end_ms = 10000;
    const char *trace = nullptr, *out = nullptr, *cc = "lia", *queue = "random", *hostq = "fairprio";
    uint32_t edge_hosts = 0;
    int pkt = 0, iw = -1, ssthresh = -1, maxwnd_pkts = 0;
    double initial_rto_us = 0;
    for (int i = 1; i < argc; i++) {
        auto next = [&]() -> const char* { if (i + 1 >= argc) usage(argv[0]); return argv[++i]; };
        if (!strcmp(argv[i], "-k")) k = atoi(next());
        else if (!strcmp(argv[i], "-gbps")) gbps = atof(next());
        else if (!strcmp(argv[i], "-link_us")) link_us = atof(next());
        else if (!strcmp(argv[i], "-queue_pkts")) queue_pkts = atoi(next());
        else if (!strcmp(argv[i], "-trace")) trace = next();
        else if (!strcmp(argv[i], "-out")) out = next();
        else if (!strcmp(argv[i], "-subflows")) subflows = atoi(next());
        else if (!strcmp(argv[i], "-cc")) cc = next();
        else if (!strcmp(argv[i], "-queue")) queue = next();
        else if (!strcmp(argv[i], "-seed")) seed = atoi(next());
        else if (!strcmp(argv[i], "-scan_us")) scan_us = atof(next());
        else if (!strcmp(argv[i], "-end_ms")) end_ms = atof(next());
        else if (!strcmp(argv[i], "-edge_hosts")) edge_hosts = atoi(next());
        else if (!strcmp(argv[i], "-hostq")) hostq = next();
        else if (!strcmp(argv[i], "-pkt")) pkt = atoi(next());
        else if (!strcmp(argv[i], "-iw")) iw = atoi(next());
        else if (!strcmp(argv[i], "-ssthresh")) ssthresh = atoi(next());
        else if (!strcmp(argv[i], "-maxwnd_pkts")) maxwnd_pkts = atoi(next());
        else if (!strcmp(argv[i], "-initial_rto_us")) initial_rto_us = atof(next());
        else if (!strcmp(argv[i], "-rto_rtts")) rto_rtts = atof(next());
        else if (!strcmp(argv[i], "-fct_at")) fct_at_rx = !strcmp(next(), "rx");
        else if (!strcmp(argv[i], "-ssthresh_flight")) ssthresh_flight = true;
        else usage(argv[0]);
    }
    if (!trace || !out || subflows < 1) usage(argv[0]);
    int algo;
    if (!strcmp(cc, "lia")) algo = COUPLED_INC;  // RFC 6356's linked increases
    else if (!strcmp(cc, "uncoupled")) algo = UNCOUPLED;
    else usage(argv[0]);
    queue_type qt;
    if (!strcmp(queue, "random")) qt = RANDOM;
    else if (!strcmp(queue, "droptail")) qt = ECN;
    else usage(argv[0]);
    srand(seed);
    srandom(seed);
    if (pkt > 0) Packet::set_packet_size(pkt);
    bool active_scan = edge_hosts || pkt > 0 || iw >= 0 || ssthresh >= 0 || maxwnd_pkts ||
                       initial_rto_us > 0 || rto_rtts > 0;

    std::vector<FlowSpec> flows;
    {
        std::ifstream f(trace);
        if (!f) { std::cerr << trace << ": cannot read\n"; return 2; }
        FlowSpec s;
        unsigned long long size, start;
        while (f >> s.src >> s.dst >> size >> start) {
            s.size = size;
            s.start = start;
            flows.push_back(s);
        }
    }
    conns.resize(flows.size());
    eventlist.setEndtime(timeFromMs(end_ms));

    // Never destroyed: htsim's Logfile post-processes its (unused) log on destruction.
    Logfile* logfile = new Logfile(std::string(out) + ".htsim-log", eventlist);
    QueueLoggerFactory qlf(logfile, QueueLoggerFactory::LOGGER_SAMPLING, eventlist);
    qlf.set_sample_period(timeFromMs(1000));
    uint32_t hosts = k * k * k / 4;
    FatTreeTopology* top = nullptr;
    EdgeFatTree* etop = nullptr;
    if (edge_hosts) {
        if (qt != ECN || (strcmp(hostq, "fifo") && strcmp(hostq, "fairprio"))) usage(argv[0]);
        linkspeed_bps sp = speedFromGbps(gbps);
        mem_b qs = memFromPkt(queue_pkts);
        bool fifo = !strcmp(hostq, "fifo");
        etop = new EdgeFatTree(
            k, edge_hosts, timeFromUs(link_us), eventlist,
            [&]() -> BaseQueue* {
                return new ECNQueue(sp, qs, eventlist, nullptr, memFromPkt(1e9));
            },
            [&]() -> BaseQueue* {
                if (fifo) return new Queue(sp, memFromPkt(1e9), eventlist, nullptr);
                return new FairPriorityQueue(sp, memFromPkt(1e9), eventlist, nullptr);
            });
    } else {
        top = new FatTreeTopology(hosts, speedFromGbps(gbps), memFromPkt(queue_pkts), &qlf,
                                  &eventlist, nullptr, qt, timeFromUs(link_us), 0, FAIR_PRIO);
        // -hostq fifo: htsim's plain Queue (unlimited) at every host NIC instead of the
        // topology's FairPriorityQueue (routes are built from these tables on demand).
        if (!strcmp(hostq, "fifo"))
            for (auto& a : top->queues_ns_nlp)
                for (auto& b : a)
                    for (auto& q : b)
                        if (q) q = new Queue(speedFromGbps(gbps), memFromPkt(1e9), eventlist,
                                             nullptr);
    }

    TcpRtxTimerScanner* scanner = active_scan ? nullptr
                                  : new TcpRtxTimerScanner(timeFromUs(scan_us), eventlist);
    ActiveScanner* ascanner = active_scan ? new ActiveScanner(timeFromUs(scan_us), eventlist)
                                          : nullptr;
    CountingTcpLogger tcplog;
    std::map<std::pair<uint32_t, uint32_t>, std::vector<const Route*>*> paths;
    auto get = [&](uint32_t a, uint32_t b) {
        auto& v = paths[{a, b}];
        if (!v) v = etop ? etop->get_paths(a, b) : top->get_paths(a, b);
        return v;
    };
    for (size_t i = 0; i < flows.size(); i++) {
        const FlowSpec& s = flows[i];
        Conn& c = conns[i];
        uint32_t mss = Packet::data_packet_size();
        c.packets = (s.size + mss - 1) / mss;
        auto* mp = new MultipathTcpSrc(algo, eventlist, nullptr);
        auto* fwd = get(s.src, s.dst);
        auto* rev = get(s.dst, s.src);
        for (uint32_t j = 0; j < subflows; j++) {
            auto* src = new Subflow(&tcplog, new DropLogger(i), eventlist, i);
            TcpSink* snk = fct_at_rx ? new RxSink(src) : new TcpSink();
            index_of[src] = i;
            c.subs.push_back(src);
            if (scanner) scanner->registerTcp(*src);
            else ascanner->add(src, i);
            if (iw >= 0) src->set_cwnd((uint64_t)iw * src->_mss);
            if (ssthresh >= 0)
                src->set_ssthresh(ssthresh ? (uint64_t)ssthresh * src->_mss : (uint64_t)1 << 30);
            if (maxwnd_pkts) src->_maxcwnd = maxwnd_pkts * src->_mss;
            if (initial_rto_us > 0) src->_rto = timeFromUs(initial_rto_us);
            Route* out_route = new Route(*fwd->at(random() % fwd->size()));
            out_route->push_back(snk);
            Route* back = new Route(*rev->at(random() % rev->size()));
            back->push_back(src);
            mp->addSubflow(src);
            src->connect(*out_route, *back, *snk, s.start);
        }
        for (Subflow* sf : c.subs) sf->budget();
    }
    // MultipathTcpSrc and the timer scanner reschedule themselves forever: stop once every
    // flow has finished (or at -end_ms).
    while (finished < flows.size() && eventlist.doNextEvent()) {
    }

    FILE* o = fopen(out, "w");
    if (!o) { std::cerr << out << ": cannot write\n"; return 2; }
    fprintf(o, "id,src,dst,size,start,fct,subflows,timeouts,fast_recoveries,drops,overshoot\n");
    for (size_t i = 0; i < flows.size(); i++) {
        const FlowSpec& s = flows[i];
        const Conn& c = conns[i];
        double fct = c.done ? (double)(c.finish - s.start) * 1e-12 : -1.0;
        fprintf(o, "%zu,%u,%u,%llu,%.12g,%.12g,%u,%u,%u,%llu,%llu\n", i, s.src, s.dst,
                (unsigned long long)s.size, (double)s.start * 1e-12, fct, subflows, c.timeouts,
                c.fast_recoveries, (unsigned long long)c.drops,
                (unsigned long long)c.overshoot);
    }
    fclose(o);
    std::remove((std::string(out) + ".htsim-log").c_str());
    return 0;
}
