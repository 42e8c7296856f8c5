/* SPDX-License-Identifier: MIT */
/* CUDA graphs in the stand-in driver (fake_graph.c): its entry points,
 * which fake_cuda.c's table of entries lists with the others, and what
 * fake_cuda.c lends them of its streams and events (its memory is
 * fake_memory.c's, through fake_cuda.h). */
#ifndef RILL_TEST_FAKE_GRAPH_H
#define RILL_TEST_FAKE_GRAPH_H

#include <cuda.h>
#include <stdint.h>

/* The entry points, of the types cuda.h gives them (fake_graph.c). */
__typeof__(cuGraphCreate) fake_cuGraphCreate;
__typeof__(cuGraphDestroy) fake_cuGraphDestroy;
__typeof__(cuGraphAddKernelNode) fake_cuGraphAddKernelNode;
__typeof__(cuGraphAddMemcpyNode) fake_cuGraphAddMemcpyNode;
__typeof__(cuGraphAddMemsetNode) fake_cuGraphAddMemsetNode;
__typeof__(cuGraphAddEmptyNode) fake_cuGraphAddEmptyNode;
__typeof__(cuGraphAddEventRecordNode) fake_cuGraphAddEventRecordNode;
__typeof__(cuGraphInstantiateWithFlags) fake_cuGraphInstantiateWithFlags;
__typeof__(cuGraphExecDestroy) fake_cuGraphExecDestroy;
__typeof__(cuGraphLaunch) fake_cuGraphLaunch;
__typeof__(cuGraphExecKernelNodeSetParams) fake_cuGraphExecKernelNodeSetParams;
__typeof__(cuGraphExecMemcpyNodeSetParams) fake_cuGraphExecMemcpyNodeSetParams;
__typeof__(cuGraphExecMemsetNodeSetParams) fake_cuGraphExecMemsetNodeSetParams;
__typeof__(cuGraphExecEventRecordNodeSetEvent) fake_cuGraphExecEventRecordNodeSetEvent;

/* What fake_cuda.c lends (its "for CUDA graphs" section). */
/* The fault code of s's GPU (0: none). */
int fake_stream_fault(CUstream s);
/* A record of ev that s's work will reach: returns its generation, which
 * fake_event_reach then marks as reached, as cuEventRecord's operation
 * does on the stream. */
uint64_t fake_event_arm(CUevent ev, CUstream s);
void fake_event_reach(CUevent ev, uint64_t gen);

#endif
