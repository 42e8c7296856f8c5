/* SPDX-License-Identifier: MIT */
/* The benchmark harness: clocks, repeated measurements reduced to median,
 * min and max, a cross-core ping-pong probe that tells how fast the machine's
 * cores talk to each other right now, and a report that prints each figure
 * as an aligned table row on stdout and keeps it for a JSON file. */
#ifndef RILL_BENCH_HARNESS_H
#define RILL_BENCH_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- clocks ---- */

/* Monotonic clock in nanoseconds. */
uint64_t bench_now_ns(void);
/* Busy-waits for ns nanoseconds and returns the clock at the end. */
uint64_t bench_spin_ns(uint64_t ns);
/* Sleeps the calling thread for us microseconds. */
void bench_sleep_us(unsigned us);
/* Lets the calling thread be idle for ns nanoseconds, as a program between
 * two requests: it spins, or (sleep) it sleeps. */
void bench_idle_ns(uint64_t ns, bool sleep);

/* ---- spin waits ---- */

/* A spin wait that turns into a yielding one after about 20 us: when the
 * scheduler puts two spinning threads on one processor (another process
 * took the other), each would otherwise wait for a full time slice per
 * hand-over. A quiet machine hands over in well under a microsecond and
 * never yields. Call bench_backoff_pause once per failed check. */
typedef struct bench_backoff {
    unsigned spins;
    uint64_t start_ns; /* 0 until the first clock read */
} bench_backoff;

void bench_backoff_yield(bench_backoff *b);

static inline void bench_backoff_pause(bench_backoff *b) {
    if ((++b->spins & 255u) == 0)
        bench_backoff_yield(b);
}

/* ---- statistics ---- */

typedef struct bench_stats {
    double median;
    double min;
    double max;
    int count; /* 0: nothing measured; the other fields are NAN */
} bench_stats;

/* Median, min and max of values[0..n); reorders values. */
bench_stats bench_stats_of(double *values, int n);
/* The stats with every value multiplied by factor (factor > 0). */
bench_stats bench_stats_scale(bench_stats s, double factor);

/* One repeat of a measurement: stores the measured value in *value and
 * returns 0, or prints why it failed on stderr and returns -1. */
typedef int (*bench_sample_fn)(void *ctx, double *value);

/* Runs fn repeats times and reduces the values. Returns 0 or -1. */
int bench_repeat(bench_sample_fn fn, void *ctx, int repeats, bench_stats *out);
/* Runs a and b alternately (a, b, a, b, ...) repeats times each, so that a
 * drift of the machine's state during the measurement touches both alike.
 * Returns 0 or -1. */
int bench_repeat_pair(bench_sample_fn a, void *a_ctx, bench_stats *a_out, bench_sample_fn b,
                      void *b_ctx, bench_stats *b_out, int repeats);

/* ---- cross-core probe ---- */

/* Median nanoseconds of one one-way hop of a cache line between two threads
 * pinned to the first two processors this process may run on (cores 0 and 1
 * on the 2-core VMs); NAN when fewer than two processors are available or the
 * threads cannot be pinned. Takes a few milliseconds. */
double bench_probe_hop_ns(void);
/* The processors the probe pins to, after the first probe (-1 before). */
void bench_probe_cpus(int *a, int *b);

/* ---- report ---- */

typedef struct bench_row {
    const char *id;   /* "a1" */
    const char *name; /* what was measured, for people */
    const char *unit; /* "ns/cmd", "us", "GFLOP/s", "x" */
    bool higher_is_better;
    bench_stats value;         /* the measured subject: rill, or PoCL */
    const char *baseline_name; /* NULL when the row has no baseline */
    bench_stats baseline;
    double probe_before_ns; /* bench_probe_hop_ns() before and after */
    double probe_after_ns;
    /* NULL, or why value (baseline) has no figure ("no CUDA device"): shown
     * in its column in place of "-", and kept in the JSON as "value_note"
     * ("baseline_note"). */
    const char *value_note;
    const char *baseline_note;
} bench_row;

typedef struct bench_report bench_report;

/* A report that prints to table (normally stdout) as rows arrive; subject
 * names what the rows measure ("rill", "pocl") in the header and the JSON. A
 * row's name is copied (up to 127 bytes); subject, the rows' other strings,
 * and meta keys and values must outlive the report. NULL when out of memory. */
bench_report *bench_report_create(FILE *table, const char *subject);
void bench_report_destroy(bench_report *report);
/* Adds a key of the report's "meta" object in the JSON file. */
int bench_report_meta_str(bench_report *report, const char *key, const char *value);
int bench_report_meta_num(bench_report *report, const char *key, double value);
/* Prints the table's header line. */
void bench_report_header(bench_report *report);
/* Prints a section line ("a. launch throughput") between rows. */
void bench_report_section(bench_report *report, const char *title);
/* Copies row into the report and prints it. Returns 0, or -1 when out of
 * memory. The ratio printed is value.median / baseline.median. The notes are
 * copied (up to 63 bytes each). */
int bench_report_add(bench_report *report, const bench_row *row);
/* Measures a row and adds it: the probe, then value_fn and base_fn
 * alternately (bench_repeat_pair) repeats times each, then the probe again.
 * Also names the row for the watchdog. Returns 0 or -1. */
int bench_measure_row(bench_report *report, bench_row *row, bench_sample_fn value_fn,
                      void *value_ctx, bench_sample_fn base_fn, void *base_ctx, int repeats);
/* Writes everything added so far as JSON to path. Returns 0 or -1. */
int bench_report_write_json(const bench_report *report, const char *path);

/* ---- watchdog ---- */

/* Starts a thread that ends the process with exit status 124 and a message
 * naming the figure in progress when it is still running after seconds, so
 * that a hang in a CI smoke run is a failure and not a stuck job. */
int bench_watchdog_start(unsigned seconds);
/* Names the figure in progress for the watchdog's message. */
void bench_watchdog_note(const char *what);

#endif
