// RepFlow's k-ary fat-tree with H hosts per edge switch for htsim drivers (e.g. the MPTCP-L
// paper's 8-pod fat-tree with 10 hosts per edge switch: 320 hosts, 2.5:1 at the edge), which
// htsim's FatTreeTopology cannot build (its custom tiers need an integer oversubscription
// ratio). Built from htsim's own queues and pipes; part of RepFlow's validation drivers
// (docs/validation.md), no htsim code.
//
// Layout as RepFlow's `fat-tree` with `hosts_per_edge`: k pods of k/2 edge and k/2 aggregation
// switches, (k/2)^2 core switches; host i sits under edge switch i / H; core switch c links to
// aggregation switch c / (k/2) of every pod. Every link has the same rate and delay. Paths:
// every shortest path (1 under one edge switch, k/2 within a pod, (k/2)^2 between pods), each
// a Route of queue, pipe, queue, pipe, ... as FatTreeTopology::get_bidir_paths builds them.
#ifndef REPFLOW_EDGE_FAT_TREE_H
#define REPFLOW_EDGE_FAT_TREE_H

#include <functional>
#include <vector>

#include "eventlist.h"
#include "network.h"
#include "pipe.h"
#include "queue.h"
#include "route.h"

class EdgeFatTree {
public:
    // make_switch_queue() makes every switch port's queue, make_host_queue() every host NIC's.
    EdgeFatTree(uint32_t k, uint32_t hosts_per_edge, simtime_picosec delay, EventList& ev,
                std::function<BaseQueue*()> make_switch_queue,
                std::function<BaseQueue*()> make_host_queue)
        : _k(k), _h(hosts_per_edge), _half(k / 2) {
        uint32_t edges = k * _half, aggs = k * _half;
        auto link = [&](std::function<BaseQueue*()>& mk) {
            return std::make_pair(mk(), new Pipe(delay, ev));
        };
        for (uint32_t i = 0; i < hosts(); i++) {
            host_up.push_back(link(make_host_queue));
            edge_down.push_back(link(make_switch_queue));
        }
        for (uint32_t e = 0; e < edges; e++)
            for (uint32_t a = 0; a < _half; a++) {
                edge_up.push_back(link(make_switch_queue));   // [e * half + a]: e up to agg a
                agg_down.push_back(link(make_switch_queue));  // [e * half + a]: agg a down to e
            }
        for (uint32_t a = 0; a < aggs; a++)
            for (uint32_t j = 0; j < _half; j++) {
                // [a * half + j]: aggregation switch a (global) up to core (a % half) * half + j,
                // and that core down to a
                agg_up.push_back(link(make_switch_queue));
                core_down.push_back(link(make_switch_queue));
            }
    }

    uint32_t hosts() const { return _k * _half * _h; }

    // Every shortest path from host s to host d (new Routes, to be copied by the caller).
    std::vector<const Route*>* get_paths(uint32_t s, uint32_t d) {
        auto* out = new std::vector<const Route*>();
        uint32_t es = s / _h, ed = d / _h, ps = es / _half, pd = ed / _half;
        auto add = [](Route* r, const std::pair<BaseQueue*, Pipe*>& l) {
            r->push_back(l.first);
            r->push_back(l.second);
        };
        if (es == ed) {
            Route* r = new Route();
            add(r, host_up[s]);
            add(r, edge_down[d]);
            out->push_back(r);
            return out;
        }
        for (uint32_t a = 0; a < _half; a++) {
            if (ps == pd) {
                Route* r = new Route();
                add(r, host_up[s]);
                add(r, edge_up[es * _half + a]);
                add(r, agg_down[ed * _half + a]);
                add(r, edge_down[d]);
                out->push_back(r);
                continue;
            }
            for (uint32_t j = 0; j < _half; j++) {
                uint32_t agg_s = ps * _half + a, agg_d = pd * _half + a;
                Route* r = new Route();
                add(r, host_up[s]);
                add(r, edge_up[es * _half + a]);
                add(r, agg_up[agg_s * _half + j]);
                add(r, core_down[agg_d * _half + j]);
                add(r, agg_down[ed * _half + a]);
                add(r, edge_down[d]);
                out->push_back(r);
            }
        }
        return out;
    }

private:
    uint32_t _k, _h, _half;
    std::vector<std::pair<BaseQueue*, Pipe*>> host_up, edge_down, edge_up, agg_down, agg_up,
        core_down;
};

#endif
