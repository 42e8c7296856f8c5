/* SPDX-License-Identifier: MIT */
/* bench_primitives: what the operating system charges for the primitives
 * rill's scheduler could use between idle and busy (p1, p2 membarrier;
 * p3 a futex wake; p4 a timed futex sleep), each against a cheaper
 * baseline, so that docs/cpu.md can say why it uses which. Linux only. */
#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "harness.h"

typedef struct config {
    int calls;   /* p1, p2: calls per sample */
    int repeats; /* samples per row */
    int naps;    /* p4: sleeps per sample */
} config;

static const config full_config = {200, 31, 100};
static const config quick_config = {50, 9, 20};

typedef struct bench {
    config cfg;
    bench_report *report; /* borrowed: bench_cli_main owns it */
} bench;

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout) {
    return syscall(SYS_futex, (uint32_t *)word, op, val, timeout, NULL, 0);
}

/* ---- p1, p2: membarrier against a fence ---- */

typedef struct barrier_ctx {
    int calls;
} barrier_ctx;

static int sample_membarrier(void *ctx, double *ns) {
    barrier_ctx *c = ctx;
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < c->calls; i++) {
        if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
            fprintf(stderr, "bench_primitives: membarrier: %s\n", strerror(errno));
            return -1;
        }
    }
    *ns = (double)(bench_now_ns() - t0) / c->calls;
    return 0;
}

static int sample_fence(void *ctx, double *ns) {
    barrier_ctx *c = ctx;
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < c->calls; i++)
        atomic_thread_fence(memory_order_seq_cst);
    *ns = (double)(bench_now_ns() - t0) / c->calls;
    return 0;
}

static _Atomic int spinner_stop;

static void *spinner(void *arg) {
    (void)arg;
    while (!atomic_load_explicit(&spinner_stop, memory_order_relaxed)) {
    }
    return NULL;
}

/* False, after saying so, when the kernel has no private expedited
 * membarrier (the rows are skipped then). */
static bool membarrier_ready(void) {
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) ||
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0) {
        printf("    skipped: this kernel has no MEMBARRIER_CMD_PRIVATE_EXPEDITED\n");
        return false;
    }
    return true;
}

static int figure_barrier_asleep(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "p1. membarrier(PRIVATE_EXPEDITED) per call, the process's "
                                    "other threads asleep (baseline: a seq_cst fence)");
    if (!membarrier_ready())
        return 0;
    barrier_ctx c = {b->cfg.calls};
    bench_row asleep = {.id = "p1",
                        .name = "membarrier, other threads asleep",
                        .unit = "ns/call",
                        .baseline_name = "seq_cst fence"};
    return bench_measure_row(b->report, &asleep, sample_membarrier, &c, sample_fence, &c,
                             b->cfg.repeats);
}

static int figure_barrier_running(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "p2. the same while another thread of the process runs "
                                    "(baseline: a seq_cst fence)");
    if (!membarrier_ready())
        return 0;
    barrier_ctx c = {b->cfg.calls};
    pthread_t t;
    atomic_store(&spinner_stop, 0);
    if (pthread_create(&t, NULL, spinner, NULL) != 0) {
        fprintf(stderr, "bench_primitives: cannot start a thread\n");
        return -1;
    }
    bench_row running = {.id = "p2",
                         .name = "membarrier, another thread running",
                         .unit = "ns/call",
                         .baseline_name = "seq_cst fence"};
    int rc = bench_measure_row(b->report, &running, sample_membarrier, &c, sample_fence, &c,
                               b->cfg.repeats);
    atomic_store(&spinner_stop, 1);
    pthread_join(t, NULL);
    return rc;
}

/* ---- p3: waking a sleeping thread ---- */

typedef struct wake_ctx {
    alignas(64) _Atomic uint32_t word;   /* the sleeper's futex */
    alignas(64) _Atomic uint32_t asleep; /* set by the sleeper before each sleep */
    _Atomic int stop;
    _Atomic uint32_t lonely; /* a futex nobody sleeps on */
} wake_ctx;

static void *sleeper(void *arg) {
    wake_ctx *c = arg;
    while (!atomic_load(&c->stop)) {
        uint32_t w = atomic_load(&c->word);
        atomic_store(&c->asleep, 1);
        futex(&c->word, FUTEX_WAIT_PRIVATE, w, NULL);
    }
    return NULL;
}

static int sample_wake(void *ctx, double *us) {
    wake_ctx *c = ctx;
    bench_backoff backoff = {0};
    while (!atomic_load(&c->asleep))
        bench_backoff_pause(&backoff);
    bench_spin_ns(200000);
    atomic_store(&c->asleep, 0);
    uint64_t t0 = bench_now_ns();
    atomic_fetch_add(&c->word, 1);
    futex(&c->word, FUTEX_WAKE_PRIVATE, 1, NULL);
    *us = (double)(bench_now_ns() - t0) / 1000.0;
    return 0;
}

static int sample_wake_nobody(void *ctx, double *us) {
    wake_ctx *c = ctx;
    bench_spin_ns(200000);
    uint64_t t0 = bench_now_ns();
    futex(&c->lonely, FUTEX_WAKE_PRIVATE, 1, NULL);
    *us = (double)(bench_now_ns() - t0) / 1000.0;
    return 0;
}

static int figure_wake(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "p3. futex wake of a sleeping thread after 200 us idle, the "
                                    "waker's cost (baseline: a futex wake that finds no sleeper)");
    static wake_ctx c;
    memset(&c, 0, sizeof c);
    pthread_t t;
    if (pthread_create(&t, NULL, sleeper, &c) != 0) {
        fprintf(stderr, "bench_primitives: cannot start a thread\n");
        return -1;
    }
    bench_row row = {.id = "p3",
                     .name = "futex wake of a sleeping thread",
                     .unit = "us",
                     .baseline_name = "futex wake, no sleeper"};
    int rc = bench_measure_row(b->report, &row, sample_wake, &c, sample_wake_nobody, &c,
                               b->cfg.repeats * 4);
    atomic_store(&c.stop, 1);
    atomic_fetch_add(&c.word, 1);
    futex(&c.word, FUTEX_WAKE_PRIVATE, 1, NULL);
    pthread_join(t, NULL);
    return rc;
}

/* ---- p4: what a timed sleep costs the processor ---- */

typedef struct nap_ctx {
    int naps;
    long nap_ns;
} nap_ctx;

static double thread_cpu_us(void) {
    struct rusage r;
    getrusage(RUSAGE_THREAD, &r);
    return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 +
           (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

static int sample_nap(void *ctx, double *us) {
    nap_ctx *c = ctx;
    static _Atomic uint32_t never;
    double t0 = thread_cpu_us();
    for (int i = 0; i < c->naps; i++) {
        struct timespec ts = {0, c->nap_ns};
        futex(&never, FUTEX_WAIT_PRIVATE, 0, &ts);
    }
    *us = (thread_cpu_us() - t0) / c->naps;
    return 0;
}

static int figure_nap(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "p4. processor time of a timed futex sleep (getrusage of "
                                    "the sleeping thread; baseline: 100 us sleeps)");
    nap_ctx ms = {b->cfg.naps, 1000000}, short_nap = {b->cfg.naps, 100000};
    bench_row row = {.id = "p4",
                     .name = "one 1 ms timed futex sleep",
                     .unit = "us cpu",
                     .baseline_name = "one 100 us timed futex sleep"};
    return bench_measure_row(b->report, &row, sample_nap, &ms, sample_nap, &short_nap, 5);
}

/* ---- main ---- */

static int setup(void *ctx, bool quick, bench_report *report, bench_cli_device *device) {
    bench *b = ctx;
    b->cfg = quick ? quick_config : full_config;
    b->report = report;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(device->name, sizeof device->name, "the operating system");
    device->compute_units = cpus > 0 ? (int)cpus : 1;
    return 0;
}

static int teardown(void *ctx) {
    (void)ctx;
    return 0;
}

static const bench_cli_figure figures[] = {
    {'1', figure_barrier_asleep},
    {'2', figure_barrier_running},
    {'3', figure_wake},
    {'4', figure_nap},
};

static const bench_cli cli = {
    .program = "bench_primitives",
    .subject = "primitive",
    .figure_prefix = "p",
    .quick_help = "fewer calls and repeats (a few seconds)",
    .figures_help = "                1 membarrier, others asleep   2 membarrier, another running\n"
                    "                3 futex wake                  4 timed sleep\n",
    .figures = figures,
    .num_figures = sizeof(figures) / sizeof(figures[0]),
    .setup = setup,
    .teardown = teardown,
};

int main(int argc, char **argv) {
    bench b = {0};
    return bench_cli_main(&cli, &b, argc, argv);
}
