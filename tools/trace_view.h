/* SPDX-License-Identifier: MIT */
/* `rill trace-summary` and `rill trace-svg`: views of a trace that rill
 * wrote (rill_trace_start, RILL_TRACE), read back from its JSON. */
#ifndef RILL_TOOLS_TRACE_VIEW_H
#define RILL_TOOLS_TRACE_VIEW_H

#include <stdio.h>

/* Prints per-track busy time, the overlap between streams, the longest
 * idle gaps and the critical path of the trace at path to out. Returns 0,
 * or 1 after a sentence on stderr when the file is not a readable trace. */
int rill_tool_trace_summary(const char *path, FILE *out);
/* Draws the timeline of the trace at path as an SVG picture into svg_path.
 * Returns 0, or 1 after a sentence on stderr. */
int rill_tool_trace_svg(const char *path, const char *svg_path);
/* Writes to out_path one trace holding the events of the n traces at
 * paths, each process keeping its own tracks: the traces of the processes
 * that share interprocess events, whose arrows then join records in one
 * process to the waits they released in another. Returns the exit status
 * (0, or 1 after a message on stderr). */
int rill_tool_trace_merge(const char *out_path, char *const *paths, int n);

#endif
