/* SPDX-License-Identifier: MIT */
/* What the benchmarks of rill share beyond the harness (which knows no
 * rill: bench_pocl uses it too). */
#ifndef RILL_BENCH_RILL_BENCH_H
#define RILL_BENCH_RILL_BENCH_H

#include <stdbool.h>

#include "rill.h"

/* True, after printing the call, the status and rill_last_error() on
 * stderr, when st is not RILL_OK. */
bool bench_failed(rill_status st, const char *call);
/* A bench_cli teardown for programs that keep nothing beyond the runtime:
 * rill_shutdown. */
int bench_rill_shutdown(void *ctx);

#endif
