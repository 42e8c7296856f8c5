/* SPDX-License-Identifier: MIT */
/* `rill demo`: a small-batch inference pipeline run eagerly on one stream,
 * on several streams and as a captured graph replayed (demo.c). */
#ifndef RILL_TOOLS_DEMO_H
#define RILL_TOOLS_DEMO_H

#include "rill.h"

/* Runs the demo, prints the three times and the two speedups, and writes a
 * trace of one run of each to trace_path (none when NULL). Returns 0, or 1
 * after the failing call's sentence on stderr. */
int rill_tool_demo(const char *trace_path);

#endif
