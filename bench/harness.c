/* SPDX-License-Identifier: MIT */
/* The benchmark harness: clocks, repeats reduced to median/min/max, the
 * cross-core ping-pong probe, the report (aligned table on stdout, JSON on
 * request) and the watchdog that turns a hang into a failure.
 *
 * The probe exists because the 2-core VMs this runs on swing between ~30 ns
 * and ~200 ns per cross-core hop over periods of seconds; every figure that
 * involves two threads moves with it, so each row shows the probe's value
 * measured right before and right after it. */
#include "harness.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- clocks ---- */

uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_spin_ns(uint64_t ns) {
    uint64_t end = bench_now_ns() + ns;
    uint64_t now;
    while ((now = bench_now_ns()) < end) {
    }
    return now;
}

void bench_sleep_us(unsigned us) {
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void bench_idle_ns(uint64_t ns, bool sleep) {
    if (sleep)
        bench_sleep_us((unsigned)(ns / 1000u));
    else
        bench_spin_ns(ns);
}

/* ---- spin waits ---- */

enum { BACKOFF_SPIN_NS = 20000 };

void bench_backoff_yield(bench_backoff *b) {
    uint64_t now = bench_now_ns();
    if (b->start_ns == 0)
        b->start_ns = now;
    else if (now - b->start_ns > BACKOFF_SPIN_NS)
        sched_yield();
}

/* ---- statistics ---- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

bench_stats bench_stats_of(double *values, int n) {
    bench_stats s = {NAN, NAN, NAN, 0};
    if (n <= 0)
        return s;
    qsort(values, (size_t)n, sizeof(values[0]), cmp_double);
    s.min = values[0];
    s.max = values[n - 1];
    s.median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
    s.count = n;
    return s;
}

bench_stats bench_stats_scale(bench_stats s, double factor) {
    s.median *= factor;
    s.min *= factor;
    s.max *= factor;
    return s;
}

int bench_repeat(bench_sample_fn fn, void *ctx, int repeats, bench_stats *out) {
    double *values = malloc((size_t)repeats * sizeof(*values));
    if (!values) {
        fprintf(stderr, "bench: out of memory for %d repeats\n", repeats);
        return -1;
    }
    for (int i = 0; i < repeats; i++) {
        if (fn(ctx, &values[i]) != 0) {
            free(values);
            return -1;
        }
    }
    *out = bench_stats_of(values, repeats);
    free(values);
    return 0;
}

int bench_repeat_pair(bench_sample_fn a, void *a_ctx, bench_stats *a_out, bench_sample_fn b,
                      void *b_ctx, bench_stats *b_out, int repeats) {
    double *values = malloc(2 * (size_t)repeats * sizeof(*values));
    if (!values) {
        fprintf(stderr, "bench: out of memory for %d repeats\n", repeats);
        return -1;
    }
    double *b_values = values + repeats;
    for (int i = 0; i < repeats; i++) {
        if (a(a_ctx, &values[i]) != 0 || b(b_ctx, &b_values[i]) != 0) {
            free(values);
            return -1;
        }
    }
    *a_out = bench_stats_of(values, repeats);
    *b_out = bench_stats_of(b_values, repeats);
    free(values);
    return 0;
}

/* ---- cross-core probe ---- */

enum { PROBE_ROUND_TRIPS = 2000, PROBE_TRIALS = 7 };

/* The initiator writes odd values, the responder answers with the next even
 * value: line == 2*i+1 means round trip i is in flight towards the
 * responder, line == 2*i+2 that it came back. Each trial is
 * PROBE_ROUND_TRIPS round trips, i.e. twice as many one-way hops. */
typedef struct probe {
    alignas(64) atomic_uint line;
    alignas(64) atomic_int responder_ready;
    double hop_ns[PROBE_TRIALS];
} probe_game;

static int probe_cpu_a = -1, probe_cpu_b = -1; /* main thread only */

static void *probe_responder(void *arg) {
    probe_game *p = arg;
    /* Release pairs with the initiator's acquire load of responder_ready. */
    atomic_store_explicit(&p->responder_ready, 1, memory_order_release);
    unsigned total = (unsigned)PROBE_TRIALS * PROBE_ROUND_TRIPS;
    for (unsigned i = 0; i < total; i++) {
        bench_backoff backoff = {0};
        /* Relaxed suffices: the line carries no other data. */
        while (atomic_load_explicit(&p->line, memory_order_relaxed) != 2 * i + 1)
            bench_backoff_pause(&backoff);
        atomic_store_explicit(&p->line, 2 * i + 2, memory_order_relaxed);
    }
    return NULL;
}

static void *probe_initiator(void *arg) {
    probe_game *p = arg;
    bench_backoff ready_backoff = {0};
    while (!atomic_load_explicit(&p->responder_ready, memory_order_acquire))
        bench_backoff_pause(&ready_backoff);
    unsigned i = 0;
    for (int t = 0; t < PROBE_TRIALS; t++) {
        uint64_t t0 = bench_now_ns();
        for (int r = 0; r < PROBE_ROUND_TRIPS; r++, i++) {
            atomic_store_explicit(&p->line, 2 * i + 1, memory_order_relaxed);
            bench_backoff backoff = {0};
            while (atomic_load_explicit(&p->line, memory_order_relaxed) != 2 * i + 2)
                bench_backoff_pause(&backoff);
        }
        p->hop_ns[t] = (double)(bench_now_ns() - t0) / (2.0 * PROBE_ROUND_TRIPS);
    }
    return NULL;
}

/* Picks the first two processors in the process's affinity mask. */
static int probe_choose_cpus(void) {
    if (probe_cpu_a >= 0)
        return 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return -1;
    int found = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; cpu++) {
        if (CPU_ISSET(cpu, &set)) {
            if (found++ == 0)
                probe_cpu_a = cpu;
            else
                probe_cpu_b = cpu;
        }
    }
    if (found < 2) {
        probe_cpu_a = probe_cpu_b = -1;
        return -1;
    }
    return 0;
}

static int probe_spawn(pthread_t *thread, int cpu, void *(*fn)(void *), probe_game *p) {
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
    if (rc == 0)
        rc = pthread_create(thread, &attr, fn, p);
    pthread_attr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

double bench_probe_hop_ns(void) {
    if (probe_choose_cpus() != 0)
        return NAN;
    probe_game *p = aligned_alloc(64, sizeof(*p));
    if (!p)
        return NAN;
    memset(p, 0, sizeof(*p));
    atomic_init(&p->line, 0);
    atomic_init(&p->responder_ready, 0);
    /* Let workers that just finished a figure stop spinning and sleep. */
    bench_sleep_us(1000);
    pthread_t responder, initiator;
    if (probe_spawn(&responder, probe_cpu_b, probe_responder, p) != 0) {
        free(p);
        return NAN;
    }
    if (probe_spawn(&initiator, probe_cpu_a, probe_initiator, p) != 0) {
        /* The responder waits for round trips that will never come: end it
         * by playing the initiator's part from here, unpinned. */
        atomic_store(&p->responder_ready, 1);
        probe_initiator(p);
        pthread_join(responder, NULL);
        free(p);
        return NAN;
    }
    pthread_join(initiator, NULL);
    pthread_join(responder, NULL);
    double median = bench_stats_of(p->hop_ns, PROBE_TRIALS).median;
    free(p);
    return median;
}

void bench_probe_cpus(int *a, int *b) {
    *a = probe_cpu_a;
    *b = probe_cpu_b;
}

/* ---- report ---- */

typedef struct meta_entry {
    const char *key; /* borrowed: outlives the report */
    const char *str; /* borrowed; NULL for a number */
    double num;
} meta_entry;

/* A row as kept by the report, with its own copies of the name and the
 * notes, which figures often format into a buffer on their stack. */
typedef struct stored_row {
    bench_row row; /* row.name and the notes are not used: see name and notes */
    char name[128];
    char value_note[64]; /* "" when the row has none */
    char baseline_note[64];
} stored_row;

struct bench_report {
    FILE *table;         /* borrowed */
    const char *subject; /* borrowed: outlives the report */
    stored_row *rows;    /* owned */
    int num_rows, cap_rows;
    meta_entry *meta; /* owned */
    int num_meta, cap_meta;
};

bench_report *bench_report_create(FILE *table, const char *subject) {
    bench_report *r = calloc(1, sizeof(*r));
    if (r) {
        r->table = table;
        r->subject = subject;
    }
    return r;
}

void bench_report_destroy(bench_report *report) {
    if (!report)
        return;
    free(report->rows);
    free(report->meta);
    free(report);
}

static int grow(void **items, int *cap, int needed, size_t item_size) {
    if (needed <= *cap)
        return 0;
    int new_cap = *cap ? 2 * *cap : 16;
    void *p = realloc(*items, (size_t)new_cap * item_size);
    if (!p)
        return -1;
    *items = p;
    *cap = new_cap;
    return 0;
}

static int add_meta(bench_report *r, meta_entry e) {
    void *items = r->meta;
    if (grow(&items, &r->cap_meta, r->num_meta + 1, sizeof(meta_entry)) != 0)
        return -1;
    r->meta = items;
    r->meta[r->num_meta++] = e;
    return 0;
}

int bench_report_meta_str(bench_report *report, const char *key, const char *value) {
    return add_meta(report, (meta_entry){key, value, 0.0});
}

int bench_report_meta_num(bench_report *report, const char *key, double value) {
    return add_meta(report, (meta_entry){key, NULL, value});
}

/* Three significant figures or so, without exponents; "n/a" for NAN. */
static void fmt_num(char *buf, size_t size, double v) {
    double a = fabs(v);
    if (isnan(v))
        snprintf(buf, size, "n/a");
    else if (a >= 100.0)
        snprintf(buf, size, "%.0f", v);
    else if (a >= 10.0)
        snprintf(buf, size, "%.1f", v);
    else if (a >= 1.0)
        snprintf(buf, size, "%.2f", v);
    else
        snprintf(buf, size, "%.3f", v);
}

static void fmt_stats(char *buf, size_t size, bench_stats s, const char *note) {
    if (s.count == 0) {
        snprintf(buf, size, "%s", note && note[0] ? note : "-");
        return;
    }
    char med[32], lo[32], hi[32];
    fmt_num(med, sizeof(med), s.median);
    fmt_num(lo, sizeof(lo), s.min);
    fmt_num(hi, sizeof(hi), s.max);
    if (s.count == 1)
        snprintf(buf, size, "%s", med);
    else
        snprintf(buf, size, "%s (%s..%s)", med, lo, hi);
}

static double row_ratio(const bench_row *row) {
    if (row->value.count == 0 || row->baseline.count == 0 || row->baseline.median == 0.0)
        return NAN;
    return row->value.median / row->baseline.median;
}

#define TABLE_FORMAT "%-3s %-44s %-7s %-22s %-22s %6s %9s\n"

void bench_report_header(bench_report *report) {
    char subject[64];
    snprintf(subject, sizeof(subject), "%s median (min..max)", report->subject);
    fprintf(report->table, TABLE_FORMAT, "id", "figure", "unit", subject, "baseline median",
            "ratio", "hop ns");
    fflush(report->table);
}

void bench_report_section(bench_report *report, const char *title) {
    fprintf(report->table, "\n%s\n", title);
    fflush(report->table);
}

int bench_report_add(bench_report *report, const bench_row *row) {
    void *items = report->rows;
    if (grow(&items, &report->cap_rows, report->num_rows + 1, sizeof(stored_row)) != 0) {
        fprintf(stderr, "bench: out of memory for the report\n");
        return -1;
    }
    report->rows = items;
    stored_row *stored = &report->rows[report->num_rows++];
    stored->row = *row;
    stored->row.name = NULL;
    snprintf(stored->name, sizeof(stored->name), "%s", row->name);
    snprintf(stored->value_note, sizeof(stored->value_note), "%s",
             row->value_note ? row->value_note : "");
    snprintf(stored->baseline_note, sizeof(stored->baseline_note), "%s",
             row->baseline_note ? row->baseline_note : "");
    stored->row.value_note = NULL;
    stored->row.baseline_note = NULL;

    char value[128], base[128], ratio[32], before[32], after[32], probe[72];
    fmt_stats(value, sizeof(value), row->value, row->value_note);
    fmt_stats(base, sizeof(base), row->baseline, row->baseline_note);
    double q = row_ratio(row);
    if (isnan(q))
        snprintf(ratio, sizeof(ratio), "-");
    else
        fmt_num(ratio, sizeof(ratio), q);
    fmt_num(before, sizeof(before), row->probe_before_ns);
    fmt_num(after, sizeof(after), row->probe_after_ns);
    snprintf(probe, sizeof(probe), "%s/%s", before, after);
    fprintf(report->table, TABLE_FORMAT, row->id, row->name, row->unit, value, base, ratio, probe);
    fflush(report->table);
    return 0;
}

int bench_measure_row(bench_report *report, bench_row *row, bench_sample_fn value_fn,
                      void *value_ctx, bench_sample_fn base_fn, void *base_ctx, int repeats) {
    bench_watchdog_note(row->name);
    row->probe_before_ns = bench_probe_hop_ns();
    if (bench_repeat_pair(value_fn, value_ctx, &row->value, base_fn, base_ctx, &row->baseline,
                          repeats) != 0)
        return -1;
    row->probe_after_ns = bench_probe_hop_ns();
    return bench_report_add(report, row);
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_number(FILE *f, double v) {
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

static void json_stats(FILE *f, bench_stats s) {
    if (s.count == 0) {
        fputs("null", f);
        return;
    }
    fputs("{\"median\": ", f);
    json_number(f, s.median);
    fputs(", \"min\": ", f);
    json_number(f, s.min);
    fputs(", \"max\": ", f);
    json_number(f, s.max);
    fprintf(f, ", \"repeats\": %d}", s.count);
}

static void json_row(FILE *f, const char *subject, const stored_row *stored) {
    const bench_row *row = &stored->row;
    fputs("    {\"id\": ", f);
    json_string(f, row->id);
    const char *name = stored->name;
    while (*name == ' ') /* the table's indentation of derived rows */
        name++;
    fputs(", \"name\": ", f);
    json_string(f, name);
    fputs(", \"unit\": ", f);
    json_string(f, row->unit);
    fprintf(f, ", \"better\": \"%s\",\n     ", row->higher_is_better ? "higher" : "lower");
    json_string(f, subject);
    fputs(": ", f);
    json_stats(f, row->value);
    fputs(",\n     \"baseline_name\": ", f);
    if (row->baseline_name)
        json_string(f, row->baseline_name);
    else
        fputs("null", f);
    fputs(", \"baseline\": ", f);
    json_stats(f, row->baseline);
    fputs(",\n     \"ratio\": ", f);
    json_number(f, row_ratio(row));
    fputs(", \"probe_hop_ns\": {\"before\": ", f);
    json_number(f, row->probe_before_ns);
    fputs(", \"after\": ", f);
    json_number(f, row->probe_after_ns);
    fputs("}", f);
    if (stored->value_note[0]) {
        fputs(", \"value_note\": ", f);
        json_string(f, stored->value_note);
    }
    if (stored->baseline_note[0]) {
        fputs(", \"baseline_note\": ", f);
        json_string(f, stored->baseline_note);
    }
    fputs("}", f);
}

int bench_report_write_json(const bench_report *report, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fputs("{\n  \"meta\": {", f);
    for (int i = 0; i < report->num_meta; i++) {
        const meta_entry *e = &report->meta[i];
        fputs(i ? ", " : "", f);
        json_string(f, e->key);
        fputs(": ", f);
        if (e->str)
            json_string(f, e->str);
        else
            json_number(f, e->num);
    }
    fputs("},\n  \"rows\": [\n", f);
    for (int i = 0; i < report->num_rows; i++) {
        json_row(f, report->subject, &report->rows[i]);
        fputs(i + 1 < report->num_rows ? ",\n" : "\n", f);
    }
    fputs("  ]\n}\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- watchdog ---- */

static _Atomic(const char *) watchdog_what = NULL;

static void *watchdog_main(void *arg) {
    unsigned seconds = (unsigned)(uintptr_t)arg;
    uint64_t deadline = bench_now_ns() + (uint64_t)seconds * 1000000000u;
    while (bench_now_ns() < deadline)
        bench_sleep_us(100000);
    const char *what = atomic_load(&watchdog_what);
    fflush(stdout);
    fprintf(stderr, "bench: still running after %u s (in %s); giving up\n", seconds,
            what ? what : "setup");
    _Exit(124);
}

int bench_watchdog_start(unsigned seconds) {
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) != 0)
        return -1;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&thread, &attr, watchdog_main, (void *)(uintptr_t)seconds);
    pthread_attr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

void bench_watchdog_note(const char *what) {
    atomic_store(&watchdog_what, what);
}
