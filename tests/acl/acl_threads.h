/* SPDX-License-Identifier: MIT */
/* What the tests of callbacks and host functions share: records that a
 * function writes from the thread that runs it, in a global order, and a
 * flag that stops the test's processing thread. */
#ifndef RILL_TEST_ACL_THREADS_H
#define RILL_TEST_ACL_THREADS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

static atomic_int order;
static atomic_int stop;

struct record {
    atomic_int at;           /* its place in order, from 1; 0 before it ran */
    atomic_uintptr_t thread; /* the thread that ran it */
};

static inline void note(void *arg) {
    struct record *r = arg;
    atomic_store(&r->thread, (uintptr_t)pthread_self());
    atomic_store(&r->at, atomic_fetch_add(&order, 1) + 1);
}

/* Whether r's function ran on thread t. */
static inline bool ran_on(const struct record *r, pthread_t t) {
    return pthread_equal((pthread_t)atomic_load(&r->thread), t);
}

static inline void sleep_ms(int ms) {
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

#endif /* RILL_TEST_ACL_THREADS_H */
