// SPDX-License-Identifier: MIT
// The oneTBB flow_graph baseline of bench_graph: see tbb_flow.h.
#include "tbb_flow.h"

#include <chrono>
#include <memory>
#include <vector>

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/task_arena.h>

namespace flow = oneapi::tbb::flow;

struct tbb_graph {
    oneapi::tbb::task_arena arena;
    std::unique_ptr<flow::graph> g;
    std::vector<std::unique_ptr<flow::continue_node<flow::continue_msg>>> nodes;
    explicit tbb_graph(int threads) : arena(threads) {}
};

extern "C" tbb_graph *tbb_graph_create(int nodes, int fan_out, int threads) {
    auto *t = new tbb_graph(threads);
    t->arena.execute([&] {
        t->g = std::make_unique<flow::graph>();
        for (int i = 0; i < nodes; i++)
            t->nodes.push_back(std::make_unique<flow::continue_node<flow::continue_msg>>(
                *t->g, [](const flow::continue_msg &) { return flow::continue_msg(); }));
        if (!fan_out) {
            for (int i = 1; i < nodes; i++)
                flow::make_edge(*t->nodes[i - 1], *t->nodes[i]);
        } else {
            for (int i = 1; i < nodes - 1; i++) {
                flow::make_edge(*t->nodes[0], *t->nodes[i]);
                flow::make_edge(*t->nodes[i], *t->nodes[nodes - 1]);
            }
        }
    });
    return t;
}

extern "C" double tbb_graph_run_ns(tbb_graph *t, int runs) {
    double ns = 0.0;
    t->arena.execute([&] {
        auto start = std::chrono::steady_clock::now();
        for (int r = 0; r < runs; r++) {
            t->nodes[0]->try_put(flow::continue_msg());
            t->g->wait_for_all();
        }
        ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                 .count();
    });
    return ns;
}

extern "C" void tbb_graph_destroy(tbb_graph *t) {
    t->arena.execute([&] {
        t->nodes.clear();
        t->g.reset();
    });
    delete t;
}
