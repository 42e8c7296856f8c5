/* SPDX-License-Identifier: MIT */
/* The oneTBB flow_graph baseline of bench_graph (tbb_flow.cpp): the same
 * chain and fan-out/fan-in graphs of empty nodes, run by TBB's scheduler
 * with a given number of threads. */
#ifndef RILL_BENCH_TBB_FLOW_H
#define RILL_BENCH_TBB_FLOW_H

#ifdef __cplusplus
extern "C" {
#endif

/* A graph of `nodes` empty continue_nodes: a chain, or one root, nodes - 2
 * independent nodes and one sink. */
typedef struct tbb_graph tbb_graph;
tbb_graph *tbb_graph_create(int nodes, int fan_out, int threads);
/* Runs it `runs` times (try_put on the root, wait_for_all) and returns
 * the nanoseconds it took. */
double tbb_graph_run_ns(tbb_graph *g, int runs);
void tbb_graph_destroy(tbb_graph *g);

#ifdef __cplusplus
}
#endif

#endif
