/* SPDX-License-Identifier: MIT */
/* Randomized memory stress: threads allocate, use on other streams and free
 * blocks of random sizes, with a pattern per write that every later read
 * checks, so a block handed to another allocation too early is caught; live
 * blocks are checked for overlap and the pool's structure every 20 ms
 * (rill__pool_check). A second phase runs under rill_mem_set_limit
 * (RILL_STRESS_MEM_LIMIT, default 32 MiB), with the peaks reset at its start
 * so that the peak reserved it prints and checks is its own. Seed from
 * RILL_STRESS_SEED; scripts/soak.sh loops it. */
#include "core/runtime.h"
#include "fixture.h"
#include "mem/memory.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEC_NS       1000000000ull
#define MiB          ((size_t)1 << 20)
#define DEFAULT_SEED 0x6d656d5eedull
#define LIMIT_BYTES  (32 * MiB) /* the second phase's rill_mem_set_limit, by default */

enum {
    NUM_STREAMS = 12,
    NUM_THREADS = 4,
    SLOTS = 12,      /* live blocks per thread at most */
    MAX_READERS = 3, /* reads of one block since its last write */
    ITERATIONS = 400000,
    MAX_IN_FLIGHT = 256, /* launches not yet run: bounds the queues and the final drain */
    STRIDE_WORDS = 32,   /* patterns are checked every 128 bytes and at the last word */
};

typedef enum write_kind { WRITE_KERNEL, WRITE_MEMSET } write_kind;

/* What a use of a block knows about it: enough to recompute the pattern of its last write and
 * to say, on a mismatch, which allocation and which write it expected. */
typedef struct use_args {
    uint32_t *ptr;
    size_t bytes;
    uint64_t tag;  /* the allocation: thread << 32 | its allocation count */
    uint64_t seed; /* the pattern of the last write */
    write_kind kind;
    unsigned version; /* the write's number within the allocation */
    int writer;       /* the stream that wrote it */
    int user;         /* the stream of this use */
    unsigned slow_us; /* reads: check, spin this long, check again */
} use_args;

typedef struct slot {
    use_args block; /* block.ptr NULL: empty */
    int alloc_stream;
    rill_event *written; /* recorded after the allocation, then after each write */
    rill_event *read[MAX_READERS];
    int num_reads; /* reads since the last write, each with its event in read[] */
} slot;

typedef struct thread_state {
    int index;
    uint64_t rng;
    slot slots[SLOTS];
    rill_event *spare; /* for random cross-stream record/wait pairs */
    uint64_t allocations, frees, oom_failures, uses, iterations;
} thread_state;

typedef struct phase {
    const char *name;
    uint64_t seed;
    uint64_t submit_ns; /* stop submitting after this long */
    size_t limit;       /* 0: none */
    unsigned min_shift; /* sizes from 256 << min_shift */
} phase;

static rill_stream *streams[NUM_STREAMS];
static thread_state threads[NUM_THREADS];
static rill_kernel *fill_kernel, *check_kernel;
static const phase *current_phase;
static uint64_t submit_deadline_ns;
static pthread_barrier_t start_barrier;
static atomic_int in_flight; /* launched kernel blocks and host functions not yet run */

/* The live blocks, for the overlap check: removed before the free, added after the allocation
 * returns, so a block is in the set only while the pool must not hand it out. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t live_lo[NUM_THREADS * SLOTS], live_hi[NUM_THREADS * SLOTS];

static rt_failures failures;

static void call_failed(const char *call, rill_status st) {
    rt_failure(&failures, "%s returned %s: %s", call, rill_status_name(st), rill_last_error());
}

static unsigned pick(thread_state *t, unsigned n) {
    return (unsigned)(rt_next_random(&t->rng) % n);
}

static uint64_t mix64(uint64_t x) {
    /* splitmix64's finalizer */
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* ---- patterns ---- */

static size_t words_of(const use_args *a) {
    return a->bytes / sizeof(uint32_t);
}

/* The checked words: every STRIDE_WORDS-th and the last. Blocks start on 512-byte boundaries,
 * so any two blocks that overlap share checked offsets. */
static size_t num_samples(const use_args *a) {
    return (words_of(a) + STRIDE_WORDS - 1) / STRIDE_WORDS + 1;
}

static size_t sample_word(const use_args *a, size_t k) {
    size_t n = num_samples(a);
    return k + 1 == n ? words_of(a) - 1 : k * STRIDE_WORDS;
}

static uint32_t expected_word(const use_args *a, size_t word) {
    if (a->kind == WRITE_MEMSET)
        return (uint32_t)(a->seed & 0xffu) * 0x01010101u;
    return (uint32_t)mix64(a->seed ^ (uint64_t)word * 0x9E3779B97F4A7C15ull);
}

static int memset_byte(const use_args *a) {
    return (int)(a->seed & 0xffu);
}

/* Checks the samples [lo, hi) of a's block; records the first mismatch. */
static void check_range(const use_args *a, size_t lo, size_t hi, const char *what) {
    for (size_t k = lo; k < hi; k++) {
        size_t w = sample_word(a, k);
        uint32_t got = a->ptr[w], want = expected_word(a, w);
        if (got == want)
            continue;
        rt_failure(&failures,
                   "%s on stream %d: block %p (%zu bytes, allocation %" PRIu64 " of thread %" PRIu64
                   ") word %zu is 0x%08x, expected 0x%08x from write %u "
                   "by stream %d: the block was handed out again while in use",
                   what, a->user, (void *)a->ptr, a->bytes, a->tag & 0xffffffffu, a->tag >> 32, w,
                   got, want, a->version, a->writer);
        return;
    }
}

static void check_block(const use_args *a, const char *what) {
    check_range(a, 0, num_samples(a), what);
    if (a->slow_us != 0) {
        /* A read that stays pending for a while gives a wrongly reused block time to be
         * overwritten by its new owner. */
        rt_spin_us(a->slow_us);
        check_range(a, 0, num_samples(a), what);
    }
}

/* The blocks of a launch split the samples between them. */
static void fill_body(const rill_block_ctx *ctx, const void *args) {
    use_args a;
    memcpy(&a, args, sizeof a);
    size_t n = num_samples(&a), g = ctx->grid_dim.x, b = ctx->block_idx.x;
    for (size_t k = b * n / g; k < (b + 1) * n / g; k++) {
        size_t w = sample_word(&a, k);
        a.ptr[w] = expected_word(&a, w);
    }
    atomic_fetch_sub(&in_flight, 1);
}

static void check_body(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    use_args a;
    memcpy(&a, args, sizeof a);
    check_block(&a, "a kernel read");
    atomic_fetch_sub(&in_flight, 1);
}

static void check_host_fn(void *user_data) {
    use_args *a = user_data;
    check_block(a, "a host function read");
    free(a);
    atomic_fetch_sub(&in_flight, 1);
}

/* ---- the live set ---- */

static void live_add(int index, const use_args *a) {
    uintptr_t lo = (uintptr_t)a->ptr, hi = lo + a->bytes;
    pthread_mutex_lock(&live_lock);
    for (int i = 0; i < NUM_THREADS * SLOTS; i++) {
        if (live_hi[i] != 0 && lo < live_hi[i] && live_lo[i] < hi) {
            /* What the pool holds there now, for whoever reads the failure. */
            char mine[256], theirs[256];
            rill__mem_describe(NULL, (void *)lo, mine, sizeof mine);
            rill__mem_describe(NULL, (void *)live_lo[i], theirs, sizeof theirs);
            rt_failure(&failures,
                       "allocation %p (%zu bytes) overlaps the live block [%p, %p) of "
                       "thread %d; the pool: %s; %s",
                       (void *)lo, a->bytes, (void *)live_lo[i], (void *)live_hi[i], i / SLOTS,
                       mine, theirs);
        }
    }
    live_lo[index] = lo;
    live_hi[index] = hi;
    pthread_mutex_unlock(&live_lock);
}

static void live_remove(int index) {
    pthread_mutex_lock(&live_lock);
    live_lo[index] = live_hi[index] = 0;
    pthread_mutex_unlock(&live_lock);
}

/* ---- uses ---- */

/* Keeps the launched work bounded, so the drain at the end stays short (also under
 * ThreadSanitizer). */
static void throttle(void) {
    uint64_t deadline = rt_now_ns() + 20 * SEC_NS;
    while (atomic_load(&in_flight) > MAX_IN_FLIGHT) {
        if (rt_now_ns() > deadline) {
            rt_failure(&failures, "launched work did not drain within 20 s (%d launches pending)",
                       atomic_load(&in_flight));
            return;
        }
        rt_sleep_us(50);
    }
}

static void wait_event(int si, rill_event *e) {
    rill_status st = rill_stream_wait_event(streams[si], e);
    if (st != RILL_OK)
        call_failed("rill_stream_wait_event", st);
}

static void record(rill_event *e, int si) {
    rill_status st = rill_event_record(e, streams[si]);
    if (st != RILL_OK)
        call_failed("rill_event_record", st);
}

/* A write on stream si: after the last write and every read since, as a real program orders
 * it; a kernel with a declared access (one to three blocks) or rill_memset_async. */
static void write_block(thread_state *t, slot *s, int si) {
    wait_event(si, s->written);
    for (int r = 0; r < s->num_reads; r++)
        wait_event(si, s->read[r]);
    use_args *a = &s->block;
    a->version++;
    a->writer = si;
    a->user = si;
    a->slow_us = 0;
    a->seed = mix64(a->tag * 0x100000001B3ull ^ ((uint64_t)a->version << 8) ^ (uint64_t)si);
    rill_status st;
    if (pick(t, 4) == 0) {
        a->kind = WRITE_MEMSET;
        st = rill_memset_async(a->ptr, memset_byte(a), a->bytes, streams[si]);
        if (st != RILL_OK)
            call_failed("rill_memset_async", st);
    } else {
        a->kind = WRITE_KERNEL;
        uint32_t blocks = 1 + pick(t, 3);
        rill_access acc = {a->ptr, a->bytes, RILL_WRITE};
        rill_launch l = {.grid = {blocks, 1, 1},
                         .block = {1, 1, 1},
                         .args = a,
                         .args_size = sizeof *a,
                         .accesses = &acc,
                         .num_accesses = 1};
        atomic_fetch_add(&in_flight, (int)blocks);
        st = rill_launch_kernel(streams[si], fill_kernel, &l);
        if (st != RILL_OK) {
            atomic_fetch_sub(&in_flight, (int)blocks);
            call_failed("rill_launch_kernel (fill)", st);
        }
    }
    record(s->written, si);
    s->num_reads = 0;
    t->uses++;
}

/* A read on stream si after the last write: a kernel with a declared access, or a host function
 * that the pool cannot see, covered by rill_record_stream. */
static void read_block(thread_state *t, slot *s, int si) {
    wait_event(si, s->written);
    use_args a = s->block;
    a.user = si;
    a.slow_us = pick(t, 8) == 0 ? 20 + pick(t, 200) : 0;
    rill_status st;
    atomic_fetch_add(&in_flight, 1);
    if (pick(t, 3) == 0) {
        use_args *copy = malloc(sizeof *copy);
        if (copy == NULL) {
            atomic_fetch_sub(&in_flight, 1);
            rt_failure(&failures, "out of host memory for a host function's arguments");
            return;
        }
        *copy = a;
        st = rill_launch_host_func(streams[si], check_host_fn, copy);
        if (st != RILL_OK) {
            free(copy);
            atomic_fetch_sub(&in_flight, 1);
            call_failed("rill_launch_host_func", st);
        } else if ((st = rill_record_stream(a.ptr, streams[si])) != RILL_OK) {
            call_failed("rill_record_stream", st);
        }
    } else {
        rill_access acc = {a.ptr, a.bytes, RILL_READ};
        rill_launch l = {.grid = {1, 1, 1},
                         .block = {1, 1, 1},
                         .args = &a,
                         .args_size = sizeof a,
                         .accesses = &acc,
                         .num_accesses = 1};
        st = rill_launch_kernel(streams[si], check_kernel, &l);
        if (st != RILL_OK) {
            atomic_fetch_sub(&in_flight, 1);
            call_failed("rill_launch_kernel (check)", st);
        }
    }
    record(s->read[s->num_reads++], si);
    t->uses++;
}

/* ---- allocation and free ---- */

/* Log-uniform sizes from 256 << min_shift to 4 MiB, and now and then a size at a boundary of
 * the pool's rounding or of its small and large classes. */
static size_t pick_size(thread_state *t, unsigned min_shift) {
    static const size_t edges[] = {256, 511, 512, 513, 4096, MiB - 1, MiB, MiB + 1, 4 * MiB};
    if (pick(t, 10) == 0) {
        size_t e = edges[pick(t, sizeof edges / sizeof edges[0])];
        return e >= ((size_t)256 << min_shift) ? e : (size_t)256 << min_shift;
    }
    size_t base = (size_t)256 << (min_shift + pick(t, 14 - min_shift));
    return base + pick(t, (unsigned)base);
}

static void check_limit(void) {
    if (current_phase->limit == 0)
        return;
    rill_mem_stats st;
    rill_status status = rill_mem_get_stats(NULL, &st);
    if (status != RILL_OK)
        call_failed("rill_mem_get_stats", status);
    else if (st.reserved_bytes > current_phase->limit)
        rt_failure(&failures, "%zu bytes reserved, over the limit of %zu", st.reserved_bytes,
                   current_phase->limit);
}

/* Allocates into an empty slot on a random stream (rill_malloc_async, or rill_malloc with that
 * stream current) and writes it at once, on that stream or another one that waits for it. */
static void allocate(thread_state *t, int index) {
    slot *s = &t->slots[index];
    int si = (int)pick(t, NUM_STREAMS);
    size_t bytes = pick_size(t, current_phase->min_shift);
    void *p = NULL;
    rill_status st;
    if (pick(t, 5) == 0) {
        rill_stream *prev = rill_set_current_stream(streams[si]);
        st = rill_malloc(NULL, bytes, &p);
        rill_set_current_stream(prev);
    } else {
        st = rill_malloc_async(bytes, streams[si], &p);
    }
    if (st == RILL_ERROR_OUT_OF_MEMORY && current_phase->limit != 0) {
        t->oom_failures++;
        return;
    }
    if (st != RILL_OK) {
        call_failed("rill_malloc_async or rill_malloc", st);
        return;
    }
    t->allocations++;
    check_limit();
    s->block = (use_args){
        .ptr = p, .bytes = bytes, .tag = (uint64_t)t->index << 32 | (t->allocations & 0xffffffffu)};
    s->alloc_stream = si;
    live_add(t->index * SLOTS + index, &s->block);
    record(s->written, si); /* uses elsewhere start after the allocation in stream order */
    s->num_reads = 0;
    write_block(t, s, pick(t, 2) == 0 ? si : (int)pick(t, NUM_STREAMS));
}

/* Frees without waiting for the block's uses: on the allocation stream, on another stream, or
 * on the host. */
static void release(thread_state *t, int index) {
    slot *s = &t->slots[index];
    void *p = s->block.ptr;
    live_remove(t->index * SLOTS + index);
    s->block.ptr = NULL;
    unsigned how = pick(t, 3);
    rill_status st;
    if (how == 0)
        st = rill_free_async(p, streams[s->alloc_stream]);
    else if (how == 1)
        st = rill_free_async(p, streams[pick(t, NUM_STREAMS)]);
    else
        st = rill_free(p);
    if (st != RILL_OK)
        call_failed(how == 2 ? "rill_free" : "rill_free_async", st);
    else
        t->frees++;
}

/* ---- the submitting threads ---- */

static void step(thread_state *t) {
    int index = (int)pick(t, SLOTS);
    slot *s = &t->slots[index];
    unsigned op = pick(t, 100);
    if (s->block.ptr == NULL) {
        allocate(t, index);
    } else if (op < 30) {
        if (s->num_reads < MAX_READERS)
            read_block(t, s, (int)pick(t, NUM_STREAMS));
        else
            write_block(t, s, (int)pick(t, NUM_STREAMS));
    } else if (op < 45) {
        write_block(t, s, (int)pick(t, NUM_STREAMS));
    } else if (op < 75) {
        release(t, index);
    } else if (op < 85) {
        int a = (int)pick(t, NUM_STREAMS), b = (int)pick(t, NUM_STREAMS);
        rill_status st = rill_stream_wait_stream(streams[a], streams[b]);
        if (st != RILL_OK)
            call_failed("rill_stream_wait_stream", st);
    } else if (op < 95) {
        record(t->spare, (int)pick(t, NUM_STREAMS));
        wait_event((int)pick(t, NUM_STREAMS), t->spare);
    } else if (op < 98) {
        rill_status st = rill_stream_query(streams[pick(t, NUM_STREAMS)]);
        if (st != RILL_OK && st != RILL_NOT_READY)
            call_failed("rill_stream_query", st);
    } else if (op < 99) {
        rill_status st = rill_mem_empty_cache(NULL);
        if (st != RILL_OK)
            call_failed("rill_mem_empty_cache", st);
    } else {
        rill_status st = rill_stream_synchronize(streams[pick(t, NUM_STREAMS)]);
        if (st != RILL_OK)
            call_failed("rill_stream_synchronize", st);
    }
}

static void *submitter(void *arg) {
    thread_state *t = arg;
    pthread_barrier_wait(&start_barrier);
    for (int i = 0; i < ITERATIONS; i++) {
        if (i % 32 == 0 && rt_now_ns() > submit_deadline_ns)
            break;
        throttle();
        step(t);
        t->iterations++;
    }
    for (int index = 0; index < SLOTS; index++) {
        if (t->slots[index].block.ptr != NULL)
            release(t, index);
    }
    return NULL;
}

/* ---- the phases ---- */

/* The second phase's limit: RILL_STRESS_MEM_LIMIT, else LIMIT_BYTES. */
static size_t limit_bytes(void) {
    const char *env = getenv("RILL_STRESS_MEM_LIMIT");
    if (env != NULL && env[0] != '\0')
        return (size_t)strtoull(env, NULL, 0);
    return LIMIT_BYTES;
}

static void setup_phase(const phase *ph) {
    current_phase = ph;
    atomic_store(&failures.count, 0);
    atomic_store(&failures.claimed, 0);
    atomic_store(&in_flight, 0);
    memset(live_lo, 0, sizeof live_lo);
    memset(live_hi, 0, sizeof live_hi);
    rill_kernel_desc fill = {.name = "stress_fill", .cpu = fill_body};
    rill_kernel_desc check = {.name = "stress_check", .cpu = check_body};
    RT_OK(rill_kernel_create(&fill, &fill_kernel));
    RT_OK(rill_kernel_create(&check, &check_kernel));
    for (int i = 0; i < NUM_STREAMS; i++) {
        RT_OK(rill_stream_create(NULL, -(i % 3), &streams[i]));
        char name[32];
        snprintf(name, sizeof name, "mem-%d", i);
        RT_OK(rill_stream_set_name(streams[i], name));
    }
    for (int t = 0; t < NUM_THREADS; t++) {
        thread_state *ts = &threads[t];
        memset(ts, 0, sizeof *ts);
        ts->index = t;
        ts->rng =
            (ph->seed + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)t + 1) * 0xD1B54A32D192ED03ull;
        if (ts->rng == 0)
            ts->rng = 1;
        RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &ts->spare));
        for (int i = 0; i < SLOTS; i++) {
            RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &ts->slots[i].written));
            for (int r = 0; r < MAX_READERS; r++)
                RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &ts->slots[i].read[r]));
        }
    }
}

static void teardown_phase(void) {
    for (int t = 0; t < NUM_THREADS; t++) {
        thread_state *ts = &threads[t];
        RT_OK(rill_event_destroy(ts->spare));
        for (int i = 0; i < SLOTS; i++) {
            RT_OK(rill_event_destroy(ts->slots[i].written));
            for (int r = 0; r < MAX_READERS; r++)
                RT_OK(rill_event_destroy(ts->slots[i].read[r]));
        }
    }
    for (int i = 0; i < NUM_STREAMS; i++)
        RT_OK(rill_stream_destroy(streams[i]));
    RT_OK(rill_kernel_destroy(fill_kernel));
    RT_OK(rill_kernel_destroy(check_kernel));
}

typedef struct totals {
    uint64_t allocations, frees, oom_failures, uses, iterations;
} totals;

/* The pool's own invariants (rill__pool_check: blocks tile their segments, every free block is in
 * its bin, the statistics match the blocks, ...) and the streams' (rill__stream_check), checked
 * while the submitters run and once all is freed: a broken structure is found where it broke.
 * Returns how many checks ran. */
static int check_pool_until(uint64_t deadline_ns) {
    int checks = 0;
    char why[512];
    do {
        if (!rill__mem_check(NULL, why, sizeof why) ||
            !rill__device_check_streams(NULL, why, sizeof why)) {
            rt_failure(&failures, "the pool's invariants do not hold after %d checks: %s", checks,
                       why);
            break;
        }
        checks++;
        rt_sleep_us(20000);
    } while (rt_now_ns() < deadline_ns);
    return checks;
}

/* Runs the threads until the deadline, frees everything, waits for all work and checks that no
 * read saw a foreign pattern, that no call failed and that the pool's invariants held. */
static totals run_phase(const phase *ph) {
    pthread_barrier_init(&start_barrier, NULL, NUM_THREADS);
    submit_deadline_ns = rt_now_ns() + ph->submit_ns;
    pthread_t handles[NUM_THREADS];
    for (int t = 0; t < NUM_THREADS; t++)
        assert_int_equal(pthread_create(&handles[t], NULL, submitter, &threads[t]), 0);
    int checks = check_pool_until(submit_deadline_ns);
    for (int t = 0; t < NUM_THREADS; t++)
        assert_int_equal(pthread_join(handles[t], NULL), 0);
    pthread_barrier_destroy(&start_barrier);
    rill_status synced = rill_device_synchronize(NULL);
    checks += check_pool_until(0);
    totals sum = {0};
    for (int t = 0; t < NUM_THREADS; t++) {
        sum.allocations += threads[t].allocations;
        sum.frees += threads[t].frees;
        sum.oom_failures += threads[t].oom_failures;
        sum.uses += threads[t].uses;
        sum.iterations += threads[t].iterations;
    }
    print_message("%s: %" PRIu64 " iterations, %" PRIu64 " allocations, %" PRIu64 " uses, %" PRIu64
                  " out-of-memory failures, %d checks of the pool\n",
                  ph->name, sum.iterations, sum.allocations, sum.uses, sum.oom_failures, checks);
    if (synced != RILL_OK)
        fail_msg("%s, seed %" PRIu64 ": rill_device_synchronize returned %s: %s", ph->name,
                 ph->seed, rill_status_name(synced), rill_last_error());
    if (atomic_load(&failures.count) != 0)
        fail_msg("%s, seed %" PRIu64 ": %d failures; the first: %s", ph->name, ph->seed,
                 atomic_load(&failures.count), failures.first);
    assert_int_equal(atomic_load(&in_flight), 0);
    assert_true(sum.allocations > 0 && sum.uses > 0);
    return sum;
}

/* The statistics after every block was freed and all work completed: "allocated: handed out
 * and not yet freed" is zero, the counts match the test's own, peaks are at least the current
 * values, and emptying the cache returns every segment. */
static void check_stats_after(const rill_mem_stats *before, const totals *sum, size_t limit) {
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    assert_int_equal(st.allocated_bytes, 0);
    assert_int_equal(st.allocations - before->allocations, sum->allocations);
    assert_int_equal(st.frees - before->frees, sum->frees);
    assert_true(st.cache_hits - before->cache_hits <= sum->allocations);
    assert_true(st.peak_allocated_bytes >= before->peak_allocated_bytes);
    assert_true(st.peak_reserved_bytes >= st.reserved_bytes);
    assert_true(st.peak_reserved_bytes >= st.peak_allocated_bytes);
    if (limit != 0)
        assert_true(st.reserved_bytes <= limit);
    RT_OK(rill_mem_empty_cache(NULL));
    RT_OK(rill_mem_get_stats(NULL, &st));
    assert_int_equal(st.reserved_bytes, 0);
    assert_int_equal(st.allocated_bytes, 0);
}

/* rill.h: "Memory freed while work on any stream may still use it is reused only after that work
 * completes: launches that declare an access to a block from a stream other than the one it was
 * allocated on are tracked automatically; rill_record_stream covers uses the library cannot
 * see (host functions, undeclared access)." */
static void test_stress_memory_never_reuses_a_block_in_use(void **state) {
    (void)state;
    uint64_t seed = rt_stress_seed(DEFAULT_SEED);
    const phase ph = {"reuse", seed, 2 * SEC_NS, 0, 0};
    RT_OK(rill_device_synchronize(NULL));
    rill_mem_stats before;
    RT_OK(rill_mem_get_stats(NULL, &before));
    assert_int_equal(before.allocated_bytes, 0);
    setup_phase(&ph);
    totals sum = run_phase(&ph);
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    /* Frees raced with pending uses on other streams: the tracking was exercised. */
    assert_true(st.deferred_frees > before.deferred_frees);
    assert_true(st.peak_allocated_bytes > 0);
    check_stats_after(&before, &sum, 0);
    teardown_phase();
}

/* rill_mem_set_limit: reserved memory never exceeds the limit; an allocation that does not fit
 * waits for pending frees (in stream order or on the host) and empties the cache before it
 * fails with RILL_ERROR_OUT_OF_MEMORY; no block in use is handed out on those paths either. */
static void test_stress_memory_under_a_limit_recovers_and_keeps_invariants(void **state) {
    (void)state;
    uint64_t seed = mix64(rt_stress_seed(DEFAULT_SEED) + 1);
    print_message("limit phase seed: %" PRIu64 " (derived from RILL_STRESS_SEED)\n", seed);
    /* Sizes from 64 KiB: the threads' live blocks alone exceed the default limit on average. */
    size_t limit = limit_bytes();
    if (limit < 4 * MiB)
        fail_msg("RILL_STRESS_MEM_LIMIT is %zu bytes; pass at least 4 MiB, the largest block",
                 limit);
    const phase ph = {"limit", seed, 1 * SEC_NS, limit, 8};
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_mem_empty_cache(NULL));
    /* The peaks measure this phase alone: nothing is reserved now. */
    RT_OK(rill_mem_reset_peak_stats(NULL));
    rill_mem_stats before;
    RT_OK(rill_mem_get_stats(NULL, &before));
    assert_int_equal(before.reserved_bytes, 0);
    assert_int_equal(before.peak_reserved_bytes, 0);
    RT_OK(rill_mem_set_limit(NULL, limit));
    setup_phase(&ph);
    totals sum = run_phase(&ph);
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    print_message("limit: %" PRIu64 " out-of-memory recoveries, peak reserved %zu of %zu\n",
                  st.oom_recoveries - before.oom_recoveries, st.peak_reserved_bytes, limit);
    /* The phase's peak, not only the moments check_limit sampled, stays within the limit. */
    if (st.peak_reserved_bytes > limit)
        fail_msg("limit, seed %" PRIu64 ": peak reserved %zu bytes, over the limit of %zu", seed,
                 st.peak_reserved_bytes, limit);
    /* The default limit is hit: an allocation either recovered or failed cleanly. A larger
     * one from RILL_STRESS_MEM_LIMIT may never be. */
    if (limit <= LIMIT_BYTES)
        assert_true(st.oom_recoveries - before.oom_recoveries + sum.oom_failures > 0);
    check_stats_after(&before, &sum, limit);
    RT_OK(rill_mem_set_limit(NULL, 0));
    teardown_phase();
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_memory_never_reuses_a_block_in_use),
        cmocka_unit_test(test_stress_memory_under_a_limit_recovers_and_keeps_invariants),
    };
    return RT_RUN(tests);
}
