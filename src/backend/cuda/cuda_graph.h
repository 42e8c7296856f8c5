/* SPDX-License-Identifier: MIT */
/* CUDA graphs for rill's execs (cuda_graph.c): what the backend's table
 * and its streams (cuda_stream.c) call. */
#ifndef RILL_CUDA_GRAPH_H
#define RILL_CUDA_GRAPH_H

#include "backend/cuda/cuda.h"

/* The backend's graph_prepare, graph_update and graph_release
 * (backend.h). */
rill_status rill__cuda_graph_prepare(rill__device *dev, const rill__gprog *prog,
                                     const rill__xnode *nodes, void **state);
rill_status rill__cuda_graph_update(rill__device *dev, void *state, const rill__xnode *nodes,
                                    uint64_t version);
void rill__cuda_graph_release(rill__device *dev, void *state);

/* Whether launch l is one CUDA graph and nothing else, which its stream
 * issues as it issues a kernel (rill__cuda_graph_issue); otherwise a
 * runner runs it once it is first in its stream (rill__cuda_graph_run).
 * Any thread; never blocks on other work. */
bool rill__cuda_graph_direct(const rill__graph_launch *l);

/* Issues launch l, one that rill__cuda_graph_direct accepts, on stream:
 * its parameters applied to the CUDA graph, then one cuGraphLaunch. *run
 * receives what the launch's completion needs (rill__cuda_graph_done), or
 * NULL. The previous launch of its exec has been issued. The context is
 * current; the stream's lock may be held. */
CUresult rill__cuda_graph_issue(cuda_device *d, CUstream stream, const rill__graph_launch *l,
                                void **run);

/* Runs launch l, first in cs, on a runner: its CUDA graphs, one per phase,
 * with the nodes that split them (host functions, collectives, library
 * ops) between them, a host node once the stream has drained. ext holds
 * the launch's extern tokens (rill__cmd.u.graph.ext): each one run is
 * taken. *run as for rill__cuda_graph_issue. A failure's "what" and "why"
 * go into the buffers (what[0] stays '\0' when nothing failed). Returns
 * whether nothing of the launch is left on the GPU. The context is
 * current; no lock held. */
bool rill__cuda_graph_run(cuda_device *d, cuda_stream *cs, const rill__graph_launch *l, void **ext,
                          void **run, char *what, size_t what_size, char *why, size_t why_size);

/* The launch l completed (failed: its stream is failing): stamps its
 * timing event record nodes and frees run. The context is current; no
 * lock held. */
void rill__cuda_graph_done(cuda_device *d, const rill__graph_launch *l, void *run, bool failed);

#endif
