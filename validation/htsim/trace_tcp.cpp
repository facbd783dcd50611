// RepFlow's trace driver for htsim (Broadcom/csg-htsim): replays a list of flows with htsim's
// TCP (TcpSrc/TcpSink, NewReno-style, no SACK) on its k-ary fat-tree and writes one CSV row per
// flow. Written for RepFlow's differential validation (docs/validation.md); it links against
// an htsim checkout built separately and contains no htsim code.
//
//   trace_tcp -k K -gbps G -link_us L -queue_pkts Q -trace FILE -out FILE [-seed S]
//             [-scan_us U] [-end_ms T]
//
// FILE: one flow per line, "src dst size_bytes start_ps". Every flow takes a path chosen
// uniformly at random (seeded) among the equal-cost paths, and its ACKs a random reverse path.
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
#include "network.h"
#include "tcp.h"

EventList eventlist;

struct FlowSpec {
    uint32_t src, dst;
    uint64_t size;
    simtime_picosec start;
};

struct Stats {
    simtime_picosec finish = 0;
    bool done = false;
    uint32_t timeouts = 0;
    uint32_t fast_recoveries = 0;
    uint64_t drops = 0;  // data and ACK packets of this flow dropped at a queue
};

static std::vector<Stats> stats;
static std::map<const void*, size_t> index_of;

// Counts timeouts and fast recoveries per source.
class CountingTcpLogger : public TcpLogger {
public:
    void logTcp(TcpSrc& src, TcpEvent ev) override {
        auto it = index_of.find(&src);
        if (it == index_of.end()) return;
        if (ev == TCP_TIMEOUT) stats[it->second].timeouts++;
        if (ev == TCP_RCV_DUP_FASTXMIT) stats[it->second].fast_recoveries++;
    }
};

// Counts drops of each flow's packets (queues report them through the flow's logger).
class DropLogger : public TrafficLogger {
public:
    explicit DropLogger(size_t i) : _i(i) {}
    void logTraffic(Packet&, Logged&, TrafficEvent ev) override {
        if (ev == PKT_DROP) stats[_i].drops++;
    }
private:
    size_t _i;
};

// A TcpSrc that notes when its last byte is acknowledged.
class TracedTcpSrc : public TcpSrc {
public:
    TracedTcpSrc(TcpLogger* lg, TrafficLogger* tl, EventList& ev, size_t i)
        : TcpSrc(lg, tl, ev), _i(i) {}
    void receivePacket(Packet& pkt) override {
        TcpSrc::receivePacket(pkt);
        if (!stats[_i].done && _last_acked >= _flow_size) {
            stats[_i].done = true;
            stats[_i].finish = eventlist().now();
        }
    }
private:
    size_t _i;
};

static void usage(const char* p) {
    std::cerr << "usage: " << p << " -k K -gbps G -link_us L -queue_pkts Q -trace FILE -out FILE"
              << " [-seed S] [-scan_us U] [-end_ms T]\n";
    exit(2);
}

int main(int argc, char** argv) {
    uint32_t k = 4, queue_pkts = 100, seed = 1;
    double gbps = 10, link_us = 1, scan_us = 10, end_ms = 10000;
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
        else if (!strcmp(argv[i], "-scan_us")) scan_us = atof(next());
        else if (!strcmp(argv[i], "-end_ms")) end_ms = atof(next());
        else usage(argv[0]);
    }
    if (!trace || !out) usage(argv[0]);
    srand(seed);
    srandom(seed);

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
    stats.resize(flows.size());
    eventlist.setEndtime(timeFromMs(end_ms));

    // Never destroyed: htsim's Logfile post-processes its (unused) log on destruction.
    Logfile* logfile = new Logfile(std::string(out) + ".htsim-log", eventlist);
    QueueLoggerFactory qlf(logfile, QueueLoggerFactory::LOGGER_SAMPLING, eventlist);
    qlf.set_sample_period(timeFromMs(1000));
    uint32_t hosts = k * k * k / 4;
    FatTreeTopology top(hosts, speedFromGbps(gbps), memFromPkt(queue_pkts), &qlf, &eventlist,
                        nullptr, RANDOM, timeFromUs(link_us), 0, FAIR_PRIO);

    TcpRtxTimerScanner scanner(timeFromUs(scan_us), eventlist);
    CountingTcpLogger tcplog;
    std::map<std::pair<uint32_t, uint32_t>, std::vector<const Route*>*> paths;
    auto get = [&](uint32_t a, uint32_t b) {
        auto& v = paths[{a, b}];
        if (!v) v = top.get_paths(a, b);
        return v;
    };
    for (size_t i = 0; i < flows.size(); i++) {
        const FlowSpec& s = flows[i];
        auto* src = new TracedTcpSrc(&tcplog, new DropLogger(i), eventlist, i);
        auto* snk = new TcpSink();
        index_of[src] = i;
        src->set_flowsize(s.size);
        scanner.registerTcp(*src);
        auto* fwd = get(s.src, s.dst);
        auto* rev = get(s.dst, s.src);
        Route* out_route = new Route(*fwd->at(random() % fwd->size()));
        out_route->push_back(snk);
        Route* back = new Route(*rev->at(random() % rev->size()));
        back->push_back(src);
        src->connect(*out_route, *back, *snk, s.start);
    }
    while (eventlist.doNextEvent()) {
    }

    FILE* o = fopen(out, "w");
    if (!o) { std::cerr << out << ": cannot write\n"; return 2; }
    fprintf(o, "id,src,dst,size,start,fct,timeouts,fast_recoveries,drops\n");
    for (size_t i = 0; i < flows.size(); i++) {
        const FlowSpec& s = flows[i];
        double fct = stats[i].done ? (double)(stats[i].finish - s.start) * 1e-12 : -1.0;
        fprintf(o, "%zu,%u,%u,%llu,%.12g,%.12g,%u,%u,%llu\n", i, s.src, s.dst,
                (unsigned long long)s.size, (double)s.start * 1e-12, fct, stats[i].timeouts,
                stats[i].fast_recoveries, (unsigned long long)stats[i].drops);
    }
    fclose(o);
    std::remove((std::string(out) + ".htsim-log").c_str());
    return 0;
}
