/* SPDX-License-Identifier: MIT */
/* The check of lock ranks (lock_rank.h), in debug builds: each thread keeps
 * the ranked locks it holds, in the order taken.
 * Invariant: held.n <= MAX_HELD; held.rank[i] is the rank of held.lock[i]. */
#include "platform/lock_rank.h"

#if RILL_LOCK_RANKS

#include <stdio.h>
#include <stdlib.h>

enum { MAX_HELD = 32 };

static _Thread_local struct {
    unsigned n;
    const void *lock[MAX_HELD];
    rill__lock_rank rank[MAX_HELD];
} held;

static const char *rank_name(rill__lock_rank r) {
    static const char *const names[RILL__RANK_COUNT] = {
        [RILL__RANK_NONE] = "unranked",
        [RILL__RANK_INIT] = "the init lock",
        [RILL__RANK_GRAPH] = "graph->lock",
        [RILL__RANK_EXEC] = "exec->lock",
        [RILL__RANK_CAPTURES] = "rill__caps_lock",
        [RILL__RANK_RUNTIME] = "rt->lock",
        [RILL__RANK_EVENT] = "event->lock",
        [RILL__RANK_QUEUE] = "a stream queue's lock",
        [RILL__RANK_STREAM] = "stream->wait_lock or err_lock",
        [RILL__RANK_LAUNCH] = "a device's ready or launch lock",
        [RILL__RANK_POOL] = "a pool's lock",
        [RILL__RANK_DEVICE] = "dev->lock",
        [RILL__RANK_REGISTRY] = "the registry lock",
        [RILL__RANK_HANDLES] = "the handle table lock",
        [RILL__RANK_CALLS] = "the calls' limbo lock"};
    return (unsigned)r < RILL__RANK_COUNT ? names[r] : "?";
}

static _Noreturn void out_of_order(rill__lock_rank taking, const void *lock, unsigned i) {
    fprintf(stderr,
            "rill: lock order broken: taking %s (rank %d, %p) while holding %s (rank %d, %p); "
            "see src/platform/lock_rank.h\n",
            rank_name(taking), (int)taking, lock, rank_name(held.rank[i]), (int)held.rank[i],
            held.lock[i]);
    abort();
}

void rill__lock_rank_acquire(const void *lock, rill__lock_rank rank, bool sibling) {
    if (rank == RILL__RANK_NONE)
        return;
    for (unsigned i = 0; i < held.n; i++)
        if (held.rank[i] > rank || (held.rank[i] == rank && !sibling))
            out_of_order(rank, lock, i);
    if (held.n == MAX_HELD) {
        fprintf(stderr, "rill: a thread holds more than %d ranked locks\n", MAX_HELD);
        abort();
    }
    held.lock[held.n] = lock;
    held.rank[held.n++] = rank;
}

void rill__lock_rank_release(const void *lock, rill__lock_rank rank) {
    if (rank == RILL__RANK_NONE)
        return;
    /* The latest entry of lock: locks may be released in any order. */
    for (unsigned i = held.n; i-- > 0;) {
        if (held.lock[i] == lock) {
            for (unsigned j = i + 1; j < held.n; j++) {
                held.lock[j - 1] = held.lock[j];
                held.rank[j - 1] = held.rank[j];
            }
            held.n--;
            return;
        }
    }
}

#else
typedef int rill__lock_rank_unused; /* ISO C forbids an empty translation unit */
#endif
