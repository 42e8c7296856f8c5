/* SPDX-License-Identifier: MIT */
/* Ops whose stream another thread destroys and recreates while they run. One thread calls
 * rill_op_sum_f32 (several blocks: partial sums in stream-ordered scratch memory, then a final
 * launch) and rill_op_add_f32_new (new memory, the op, an event record) on the stream in a slot;
 * the other takes the stream out of the slot, puts a new one in and destroys the old one, with
 * nothing ordering the two. rill.h: a call that races with the destruction of one of its handles
 * either behaves as if it came first (the object stays whole until the call returns) or is refused
 * as given a stale handle. What must hold:
 *   - each op returns RILL_OK or RILL_ERROR_INVALID_ARGUMENT with a sentence;
 *   - every op that returned RILL_OK computed its result (the sum of n ones is n; a + a is 2);
 *     a refused rill_op_add_f32_new leaves *out NULL;
 *   - nothing is allocated by a refused op, nor left allocated by one that succeeded: once the
 *     device is synchronized and the new memory freed, rill_mem_get_stats' allocated_bytes is
 *     what it was before the first op.
 * Bounded by rounds and by seconds. */
#include "fixture.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEC_NS     1000000000ull
#define RUN_NS     (2 * SEC_NS)      /* the op thread stops after this */
#define SUM_N      ((size_t)1 << 17) /* 4 blocks of partial sums at 4 compute units */
#define ADD_N      ((size_t)64)
#define MAX_ROUNDS 40000
#define BATCH      16    /* rounds between device synchronizes, which bound the queues */
#define UNTOUCHED  0xffu /* the bytes of a sum's out before its op: a NaN */

static _Atomic(rill_stream *) slot;
static atomic_int op_thread_done;
static atomic_uint_fast64_t swaps;

/* The other thread: a new stream in the slot, the old one destroyed, until the ops are done. */
static void *swap_streams(void *arg) {
    rt_failures *failures = arg;
    while (!atomic_load(&op_thread_done)) {
        rill_stream *fresh;
        rill_status st = rill_stream_create(NULL, 0, &fresh);
        if (st != RILL_OK) {
            rt_failure(failures, "rill_stream_create returned %s: %s", rill_status_name(st),
                       rill_last_error());
            break;
        }
        rill_stream *old = atomic_exchange(&slot, fresh);
        st = rill_stream_destroy(old);
        if (st != RILL_OK) {
            rt_failure(failures, "rill_stream_destroy returned %s: %s", rill_status_name(st),
                       rill_last_error());
            break;
        }
        atomic_fetch_add(&swaps, 1);
        sched_yield();
    }
    return NULL;
}

static bool refused_with_sentence(rt_failures *failures, const char *call, rill_status st) {
    if (st == RILL_ERROR_INVALID_ARGUMENT && rill_last_error()[0] != '\0')
        return true;
    rt_failure(failures, "%s returned %s, neither RILL_OK nor a stale handle: %s", call,
               rill_status_name(st), rill_last_error());
    return false;
}

/* The new memory of the adds of rounds [from, to): each holds a + a, then is freed. Returns how
 * many hold something else. */
static size_t check_and_free_added(float **added, size_t from, size_t to) {
    size_t wrong = 0;
    for (size_t r = from; r < to; r++) {
        if (added[r] == NULL)
            continue;
        float first_two[2];
        RT_OK(rill_memcpy(first_two, added[r], sizeof first_two));
        if (first_two[0] != 2.0f || first_two[1] != 2.0f)
            wrong++;
        RT_OK(rill_free(added[r]));
        added[r] = NULL;
    }
    return wrong;
}

/* rill.h: "a call that races with the destruction of one of its handles on another thread either
 * behaves as if it came first ... or is refused as given a stale handle", and a failed call
 * changes nothing: ops with scratch memory and ops into new memory neither leak nor half-run. */
static void test_ops_racing_destroy_of_their_stream_leak_nothing(void **state) {
    (void)state;
    static rt_failures failures;
    float *a, *add_in, *sums;
    RT_OK(rill_malloc(NULL, SUM_N * sizeof(float), (void **)&a));
    RT_OK(rill_malloc(NULL, ADD_N * sizeof(float), (void **)&add_in));
    RT_OK(rill_malloc(NULL, MAX_ROUNDS * sizeof(float), (void **)&sums));
    RT_OK(rill_op_fill_f32(NULL, a, 1.0f, SUM_N));
    RT_OK(rill_op_fill_f32(NULL, add_in, 1.0f, ADD_N));
    RT_OK(rill_memset_async(sums, (int)UNTOUCHED, MAX_ROUNDS * sizeof(float), NULL));
    rill_event *event;
    RT_OK(rill_event_create(0, &event));
    RT_OK(rill_device_synchronize(NULL));
    rill_mem_stats before;
    RT_OK(rill_mem_get_stats(NULL, &before));

    static float *added[MAX_ROUNDS];
    static bool sum_ok[MAX_ROUNDS];
    memset(added, 0, sizeof added);
    memset(sum_ok, 0, sizeof sum_ok);
    rill_stream *first;
    RT_OK(rill_stream_create(NULL, 0, &first));
    atomic_store(&slot, first);
    atomic_store(&op_thread_done, 0);
    pthread_t swapper;
    assert_int_equal(pthread_create(&swapper, NULL, swap_streams, &failures), 0);

    uint64_t deadline = rt_now_ns() + RUN_NS;
    size_t rounds = 0, sums_ok = 0, adds_ok = 0, wrong = 0;
    for (; rounds < MAX_ROUNDS && rt_now_ns() < deadline; rounds++) {
        if (rounds % BATCH == 0 && rounds > 0) {
            RT_OK(rill_device_synchronize(NULL));
            wrong += check_and_free_added(added, rounds - BATCH, rounds);
        }
        rill_stream *s = atomic_load(&slot);
        rill_status st = rill_op_sum_f32(s, &sums[rounds], a, SUM_N);
        if (st == RILL_OK)
            sum_ok[rounds] = true, sums_ok++;
        else if (!refused_with_sentence(&failures, "rill_op_sum_f32", st))
            break;
        static float not_set;
        float *out = &not_set; /* a refused op must set it to NULL */
        st = rill_op_add_f32_new(atomic_load(&slot), add_in, add_in, 1.0f, ADD_N, event, &out);
        if (st == RILL_OK) {
            added[rounds] = out, adds_ok++;
        } else {
            if (!refused_with_sentence(&failures, "rill_op_add_f32_new", st))
                break;
            if (out != NULL) {
                rt_failure(&failures, "a refused rill_op_add_f32_new left *out %p, not NULL",
                           (void *)out);
                break;
            }
        }
    }
    atomic_store(&op_thread_done, 1);
    assert_int_equal(pthread_join(swapper, NULL), 0);
    RT_OK(rill_stream_destroy(atomic_load(&slot)));
    RT_OK(rill_device_synchronize(NULL));
    rt_failures_assert_none(&failures);

    /* Every accepted op computed its result; every refused sum left its out as it was. */
    wrong += check_and_free_added(added, 0, rounds); /* those not checked in the loop */
    static float host[MAX_ROUNDS];
    RT_OK(rill_memcpy(host, sums, rounds * sizeof(float)));
    size_t touched = 0;
    for (size_t r = 0; r < rounds; r++) {
        uint32_t bits;
        memcpy(&bits, &host[r], sizeof bits);
        if (sum_ok[r] && host[r] != (float)SUM_N)
            wrong++;
        if (!sum_ok[r] && bits != 0xffffffffu)
            touched++;
    }
    RT_OK(rill_device_synchronize(NULL));
    rill_mem_stats after;
    RT_OK(rill_mem_get_stats(NULL, &after));
    printf("%zu rounds, %zu sums and %zu adds accepted, %llu streams swapped; %zu wrong results, "
           "%zu refused sums wrote out; allocated bytes %zu before, %zu after\n",
           rounds, sums_ok, adds_ok, (unsigned long long)atomic_load(&swaps), wrong, touched,
           before.allocated_bytes, after.allocated_bytes);
    assert_int_equal(wrong, 0);
    assert_int_equal(touched, 0);
    assert_int_equal(after.allocated_bytes, before.allocated_bytes);

    RT_OK(rill_event_destroy(event));
    RT_OK(rill_free(sums));
    RT_OK(rill_free(add_in));
    RT_OK(rill_free(a));
}

int main(int argc, char **argv) {
    /* Several compute units, so that a sum of SUM_N floats runs in several blocks and needs its
     * scratch buffer. */
    setenv("RILL_CPU_WORKERS", "4", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_racing_destroy_of_their_stream_leak_nothing),
    };
    return rt_run("stress_op_stream_destroy", tests, sizeof tests / sizeof tests[0], argc, argv);
}
