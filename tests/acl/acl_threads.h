/* SPDX-License-Identifier: MIT */
/* What the tests of callbacks and host functions share: records that a
 * function writes from the thread that runs it, in a global order, and
 * the test's processing thread, started and stopped through a flag. */
#ifndef RILL_TEST_ACL_THREADS_H
#define RILL_TEST_ACL_THREADS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "acl_support.h"

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

/* Starts a thread that runs loop, with order at 0 and stop clear. */
static inline pthread_t start_thread(void *(*loop)(void *)) {
    atomic_store(&order, 0);
    atomic_store(&stop, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, loop, NULL), 0);
    return t;
}

/* Tells thread t to stop, and joins it. */
static inline void stop_thread(pthread_t t) {
    atomic_store(&stop, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
}

static inline void sleep_ms(int ms) {
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

#endif /* RILL_TEST_ACL_THREADS_H */
