/* SPDX-License-Identifier: MIT */
#include "rill_bench.h"

#include <stdio.h>

#include "harness.h"

bool bench_failed(rill_status st, const char *call) {
    if (st == RILL_OK)
        return false;
    fprintf(stderr, "bench: %s: %s: %s\n", call, rill_status_name(st), rill_last_error());
    return true;
}

int bench_rill_shutdown(void *ctx) {
    (void)ctx;
    bench_watchdog_note("rill_shutdown");
    return bench_failed(rill_shutdown(), "rill_shutdown") ? -1 : 0;
}
