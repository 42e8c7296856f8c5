/* SPDX-License-Identifier: MIT */
/* The plain-pthreads and single-threaded OpenBLAS baselines of the runtime
 * benchmark: a worker thread with a mutex+condvar queue of function
 * pointers (a), two threads handing a token through a spinning atomic (b), a
 * condition-variable wake-up (c), compute-bound work on one and two threads
 * (d), cblas_sgemm, alone and under im2col (e), and a task handed to a
 * futex-sleeping thread by a host that sleeps on a futex until it is done
 * (f). They are written as one
 * would write them without a runtime: no batching, no tricks, so that the
 * ratio in each row says what the runtime costs or gains. The token's spin
 * waits yield after ~20 us (bench_backoff), as rill's own waits do. */
#include "baseline.h"

#include <dlfcn.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A broken pthread primitive leaves nothing to measure. */
static void must(int rc, const char *what) {
    if (rc != 0) {
        fprintf(stderr, "bench: %s failed (%d)\n", what, rc);
        abort();
    }
}

/* ---- per-call times collected in batches ---- */

int bench_batches_init(bench_batches *b, int capacity) {
    b->values = malloc((size_t)capacity * sizeof(*b->values));
    b->count = 0;
    b->capacity = b->values ? capacity : 0;
    return b->values ? 0 : -1;
}

void bench_batches_add(bench_batches *b, double ns_per_call) {
    if (b->count < b->capacity)
        b->values[b->count++] = ns_per_call;
}

void bench_batches_free(bench_batches *b) {
    free(b->values);
    b->values = NULL;
    b->count = b->capacity = 0;
}

/* ---- a. a worker thread consuming a mutex+condvar queue ---- */

typedef struct base_task {
    void (*fn)(void *arg);
    void *arg;
} base_task;

/* Invariant: head <= tail <= capacity; ring[head..tail) are the tasks not
 * yet started. A drain resets head = tail = 0 once the queue is empty. */
struct base_queue {
    pthread_mutex_t lock;
    pthread_cond_t nonempty; /* the worker sleeps here */
    pthread_cond_t drained;  /* base_queue_drain sleeps here */
    pthread_t worker;        /* immutable after create */
    /* guarded by lock */
    base_task *ring; /* owned */
    size_t capacity, head, tail;
    bool worker_waiting;
    bool stop;
    bool drain_done;
};

static void *queue_worker(void *arg) {
    base_queue *q = arg;
    must(pthread_mutex_lock(&q->lock), "pthread_mutex_lock");
    for (;;) {
        while (q->head == q->tail && !q->stop) {
            q->worker_waiting = true;
            must(pthread_cond_wait(&q->nonempty, &q->lock), "pthread_cond_wait");
            q->worker_waiting = false;
        }
        if (q->head == q->tail)
            break;
        base_task t = q->ring[q->head++];
        must(pthread_mutex_unlock(&q->lock), "pthread_mutex_unlock");
        t.fn(t.arg);
        must(pthread_mutex_lock(&q->lock), "pthread_mutex_lock");
    }
    must(pthread_mutex_unlock(&q->lock), "pthread_mutex_unlock");
    return NULL;
}

base_queue *base_queue_create(size_t capacity) {
    base_queue *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->ring = malloc(capacity * sizeof(*q->ring));
    if (!q->ring) {
        free(q);
        return NULL;
    }
    q->capacity = capacity;
    must(pthread_mutex_init(&q->lock, NULL), "pthread_mutex_init");
    must(pthread_cond_init(&q->nonempty, NULL), "pthread_cond_init");
    must(pthread_cond_init(&q->drained, NULL), "pthread_cond_init");
    if (pthread_create(&q->worker, NULL, queue_worker, q) != 0) {
        pthread_cond_destroy(&q->drained);
        pthread_cond_destroy(&q->nonempty);
        pthread_mutex_destroy(&q->lock);
        free(q->ring);
        free(q);
        return NULL;
    }
    return q;
}

void base_queue_destroy(base_queue *q) {
    if (!q)
        return;
    must(pthread_mutex_lock(&q->lock), "pthread_mutex_lock");
    q->stop = true;
    must(pthread_cond_signal(&q->nonempty), "pthread_cond_signal");
    must(pthread_mutex_unlock(&q->lock), "pthread_mutex_unlock");
    must(pthread_join(q->worker, NULL), "pthread_join");
    pthread_cond_destroy(&q->drained);
    pthread_cond_destroy(&q->nonempty);
    pthread_mutex_destroy(&q->lock);
    free(q->ring);
    free(q);
}

static int queue_push(base_queue *q, void (*fn)(void *), void *arg) {
    must(pthread_mutex_lock(&q->lock), "pthread_mutex_lock");
    if (q->tail == q->capacity) {
        must(pthread_mutex_unlock(&q->lock), "pthread_mutex_unlock");
        return -1;
    }
    q->ring[q->tail++] = (base_task){fn, arg};
    if (q->worker_waiting)
        must(pthread_cond_signal(&q->nonempty), "pthread_cond_signal");
    must(pthread_mutex_unlock(&q->lock), "pthread_mutex_unlock");
    return 0;
}

static void drain_marker(void *arg) {
    base_queue *q = arg;
    must(pthread_mutex_lock(&q->lock), "pthread_mutex_lock");
    q->drain_done = true;
    must(pthread_cond_signal(&q->drained), "pthread_cond_signal");
    must(pthread_mutex_unlock(&q->lock), "pthread_mutex_unlock");
}

/* Waits until every task pushed so far has run, like a stream synchronize:
 * a marker task at the end of the queue wakes the caller. */
static int queue_drain(base_queue *q) {
    if (queue_push(q, drain_marker, q) != 0)
        return -1;
    must(pthread_mutex_lock(&q->lock), "pthread_mutex_lock");
    while (!q->drain_done)
        must(pthread_cond_wait(&q->drained, &q->lock), "pthread_cond_wait");
    q->drain_done = false;
    q->head = q->tail = 0;
    must(pthread_mutex_unlock(&q->lock), "pthread_mutex_unlock");
    return 0;
}

static void empty_task(void *arg) {
    (void)arg;
}

int base_sample_launch(void *ctx, double *ns_per_task) {
    base_launch_ctx *c = ctx;
    uint64_t t0 = bench_now_ns(), batch_start = t0;
    for (long i = 0; i < c->count; i++) {
        if (queue_push(c->queue, empty_task, NULL) != 0) {
            fprintf(stderr, "bench: baseline queue too small for %ld tasks\n", c->count);
            return -1;
        }
        if ((i + 1) % BENCH_ENQUEUE_BATCH == 0) {
            uint64_t now = bench_now_ns();
            if (c->batches)
                bench_batches_add(c->batches, (double)(now - batch_start) / BENCH_ENQUEUE_BATCH);
            batch_start = now;
        }
    }
    if (queue_drain(c->queue) != 0) {
        fprintf(stderr, "bench: baseline queue too small for %ld tasks\n", c->count);
        return -1;
    }
    *ns_per_task = (double)(bench_now_ns() - t0) / (double)c->count;
    return 0;
}

/* ---- b. two threads handing a token through a spinning atomic ---- */

/* token == v means hop v is the next to be made: side 0 makes the even
 * hops, side 1 the odd ones, each by storing v + 1. The run ends when side
 * 0 sees token == hops. */
typedef struct token_game {
    alignas(64) atomic_long token;
    alignas(64) atomic_long work; /* the tiny work each side does per hop */
    alignas(64) atomic_int side1_ready;
    long hops;           /* even */
    uint64_t elapsed_ns; /* written by side 0, read after join */
} token_game;

/* Waits until the token reaches v; acquire pairs with the other side's
 * release store of the token. */
static void token_wait(token_game *g, long v) {
    bench_backoff backoff = {0};
    while (atomic_load_explicit(&g->token, memory_order_acquire) != v)
        bench_backoff_pause(&backoff);
}

static void *token_side1(void *arg) {
    token_game *g = arg;
    /* Release pairs with side 0's acquire load of side1_ready. */
    atomic_store_explicit(&g->side1_ready, 1, memory_order_release);
    for (long v = 1; v < g->hops; v += 2) {
        token_wait(g, v);
        atomic_fetch_add_explicit(&g->work, 1, memory_order_relaxed);
        atomic_store_explicit(&g->token, v + 1, memory_order_release);
    }
    return NULL;
}

static void *token_side0(void *arg) {
    token_game *g = arg;
    bench_backoff backoff = {0};
    while (!atomic_load_explicit(&g->side1_ready, memory_order_acquire))
        bench_backoff_pause(&backoff);
    uint64_t t0 = bench_now_ns();
    for (long v = 0; v < g->hops; v += 2) {
        token_wait(g, v);
        atomic_fetch_add_explicit(&g->work, 1, memory_order_relaxed);
        atomic_store_explicit(&g->token, v + 1, memory_order_release);
    }
    token_wait(g, g->hops);
    g->elapsed_ns = bench_now_ns() - t0;
    return NULL;
}

int base_sample_token(void *ctx, double *ns_per_hop) {
    base_token_ctx *c = ctx;
    token_game *g = aligned_alloc(64, sizeof(*g));
    if (!g) {
        fprintf(stderr, "bench: out of memory\n");
        return -1;
    }
    memset(g, 0, sizeof(*g));
    atomic_init(&g->token, 0);
    atomic_init(&g->work, 0);
    atomic_init(&g->side1_ready, 0);
    g->hops = c->hops + c->hops % 2;
    pthread_t t0, t1;
    must(pthread_create(&t1, NULL, token_side1, g), "pthread_create");
    must(pthread_create(&t0, NULL, token_side0, g), "pthread_create");
    must(pthread_join(t0, NULL), "pthread_join");
    must(pthread_join(t1, NULL), "pthread_join");
    int rc = 0;
    if (atomic_load(&g->work) != g->hops) {
        fprintf(stderr, "bench: token baseline did %ld hops of %ld\n", atomic_load(&g->work),
                g->hops);
        rc = -1;
    }
    *ns_per_hop = (double)g->elapsed_ns / (double)g->hops;
    free(g);
    return rc;
}

/* ---- c. condition-variable wake-up ---- */

struct base_wake {
    pthread_mutex_t lock;
    pthread_cond_t go_cv;   /* the worker sleeps here between samples */
    pthread_cond_t done_cv; /* the sampler sleeps here */
    pthread_t thread;       /* immutable after create */
    uint64_t spin_ns;       /* immutable after create */
    alignas(64) _Atomic uint64_t stamp_ns;
    /* guarded by lock */
    bool go, done, stop;
};

static void *wake_worker(void *arg) {
    base_wake *w = arg;
    must(pthread_mutex_lock(&w->lock), "pthread_mutex_lock");
    for (;;) {
        while (!w->go && !w->stop)
            must(pthread_cond_wait(&w->go_cv, &w->lock), "pthread_cond_wait");
        if (w->stop)
            break;
        w->go = false;
        must(pthread_mutex_unlock(&w->lock), "pthread_mutex_unlock");
        bench_spin_ns(w->spin_ns);
        /* Relaxed: the mutex below orders it before the sampler's read. */
        atomic_store_explicit(&w->stamp_ns, bench_now_ns(), memory_order_relaxed);
        must(pthread_mutex_lock(&w->lock), "pthread_mutex_lock");
        w->done = true;
        must(pthread_cond_signal(&w->done_cv), "pthread_cond_signal");
    }
    must(pthread_mutex_unlock(&w->lock), "pthread_mutex_unlock");
    return NULL;
}

base_wake *base_wake_create(uint64_t spin_ns) {
    base_wake *w = aligned_alloc(64, sizeof(*w));
    if (!w)
        return NULL;
    memset(w, 0, sizeof(*w));
    atomic_init(&w->stamp_ns, 0);
    w->spin_ns = spin_ns;
    must(pthread_mutex_init(&w->lock, NULL), "pthread_mutex_init");
    must(pthread_cond_init(&w->go_cv, NULL), "pthread_cond_init");
    must(pthread_cond_init(&w->done_cv, NULL), "pthread_cond_init");
    if (pthread_create(&w->thread, NULL, wake_worker, w) != 0) {
        pthread_cond_destroy(&w->done_cv);
        pthread_cond_destroy(&w->go_cv);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
    }
    return w;
}

void base_wake_destroy(base_wake *w) {
    if (!w)
        return;
    must(pthread_mutex_lock(&w->lock), "pthread_mutex_lock");
    w->stop = true;
    must(pthread_cond_signal(&w->go_cv), "pthread_cond_signal");
    must(pthread_mutex_unlock(&w->lock), "pthread_mutex_unlock");
    must(pthread_join(w->thread, NULL), "pthread_join");
    pthread_cond_destroy(&w->done_cv);
    pthread_cond_destroy(&w->go_cv);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

int base_sample_wake(void *ctx, double *us) {
    base_wake *w = ctx;
    must(pthread_mutex_lock(&w->lock), "pthread_mutex_lock");
    w->go = true;
    must(pthread_cond_signal(&w->go_cv), "pthread_cond_signal");
    while (!w->done)
        must(pthread_cond_wait(&w->done_cv, &w->lock), "pthread_cond_wait");
    w->done = false;
    must(pthread_mutex_unlock(&w->lock), "pthread_mutex_unlock");
    uint64_t now = bench_now_ns();
    uint64_t stamp = atomic_load_explicit(&w->stamp_ns, memory_order_relaxed);
    *us = (double)(now - stamp) / 1000.0;
    return 0;
}

/* ---- f. a task for a sleeping thread, the host sleeping until it is done ---- */

struct base_sleepers {
    pthread_t thread; /* immutable after create */
    /* bumped by the host per task; the thread sleeps on it */
    alignas(64) _Atomic uint32_t go;
    /* bumped by the thread per task; the host sleeps on it */
    alignas(64) _Atomic uint32_t done;
    _Atomic int stop;
};

static void futex_wait(_Atomic uint32_t *word, uint32_t expected) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *sleepers_thread(void *arg) {
    base_sleepers *b = arg;
    uint32_t seen = 0;
    for (;;) {
        uint32_t go;
        while ((go = atomic_load(&b->go)) == seen)
            futex_wait(&b->go, seen);
        if (atomic_load(&b->stop))
            break;
        seen = go;
        empty_task(NULL);
        atomic_fetch_add(&b->done, 1);
        futex_wake(&b->done);
    }
    return NULL;
}

base_sleepers *base_sleepers_create(void) {
    base_sleepers *b = aligned_alloc(64, sizeof(*b));
    if (!b)
        return NULL;
    memset(b, 0, sizeof(*b));
    if (pthread_create(&b->thread, NULL, sleepers_thread, b) != 0) {
        free(b);
        return NULL;
    }
    return b;
}

void base_sleepers_destroy(base_sleepers *b) {
    if (!b)
        return;
    atomic_store(&b->stop, 1);
    atomic_fetch_add(&b->go, 1);
    futex_wake(&b->go);
    must(pthread_join(b->thread, NULL), "pthread_join");
    free(b);
}

int base_sample_sleepers(void *ctx, double *us) {
    base_sleepers_ctx *c = ctx;
    base_sleepers *b = c->sleepers;
    bench_idle_ns(c->pause_ns, c->sleep);
    uint64_t t0 = bench_now_ns();
    uint32_t done = atomic_load(&b->done);
    atomic_fetch_add(&b->go, 1);
    futex_wake(&b->go);
    while (atomic_load(&b->done) == done)
        futex_wait(&b->done, done);
    *us = (double)(bench_now_ns() - t0) / 1000.0;
    return 0;
}

/* ---- d. compute-bound work on two threads ---- */

/* Read through a volatile at the start of each call: the chain is then not
 * a pure function of iters, so the compiler can neither merge two calls nor
 * move one across the clock reads around it. */
static volatile double spin_seed = 1.0;

double bench_spin_work(uint64_t iters) {
    double x = spin_seed;
    for (uint64_t i = 0; i < iters; i++)
        x = x * 0.9999999 + 1e-7;
    return x;
}

uint64_t bench_spin_calibrate(double ms) {
    const uint64_t probe_iters = 1u << 21;
    volatile double sink = 0.0;
    uint64_t best_ns = UINT64_MAX;
    for (int i = 0; i < 3; i++) {
        uint64_t t0 = bench_now_ns();
        sink += bench_spin_work(probe_iters);
        uint64_t dt = bench_now_ns() - t0;
        if (dt < best_ns)
            best_ns = dt;
    }
    (void)sink;
    if (best_ns == 0)
        best_ns = 1;
    return (uint64_t)((double)probe_iters * ms * 1e6 / (double)best_ns) + 1;
}

typedef struct spin_job {
    uint64_t iters;
    double result;
} spin_job;

static void *spin_thread(void *arg) {
    spin_job *j = arg;
    j->result = bench_spin_work(j->iters);
    return NULL;
}

int base_sample_speedup(void *ctx, double *speedup) {
    base_speedup_ctx *c = ctx;
    volatile double sink = 0.0;
    uint64_t t0 = bench_now_ns();
    sink += bench_spin_work(c->iters);
    sink += bench_spin_work(c->iters);
    uint64_t one_thread_ns = bench_now_ns() - t0;

    spin_job jobs[2] = {{c->iters, 0.0}, {c->iters, 0.0}};
    pthread_t threads[2];
    t0 = bench_now_ns();
    for (int i = 0; i < 2; i++)
        must(pthread_create(&threads[i], NULL, spin_thread, &jobs[i]), "pthread_create");
    for (int i = 0; i < 2; i++)
        must(pthread_join(threads[i], NULL), "pthread_join");
    uint64_t two_threads_ns = bench_now_ns() - t0;
    sink += jobs[0].result + jobs[1].result;
    (void)sink;
    *speedup = (double)one_thread_ns / (double)two_threads_ns;
    return 0;
}

/* ---- e. single-threaded OpenBLAS ---- */

/* CBLAS's values, and OpenBLAS's entry points (32-bit integers, as Debian
 * builds libopenblas0). */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111 };
typedef void (*sgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);
static sgemm_fn blas_sgemm;
static void (*blas_set_threads)(int);

int base_blas_load(char *why, size_t size) {
    static const char *const paths[] = {
        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
        "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
        "libopenblas.so.0",
    };
    void *lib = NULL;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0] && lib == NULL; i++)
        lib = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(why, size, "OpenBLAS not found (Debian: apt-get install libopenblas0-pthread)");
        return -1;
    }
    /* POSIX: a function pointer travels through the object pointer. */
    *(void **)&blas_sgemm = dlsym(lib, "cblas_sgemm");
    *(void **)&blas_set_threads = dlsym(lib, "openblas_set_num_threads");
    if (blas_sgemm == NULL || blas_set_threads == NULL) {
        snprintf(why, size, "the OpenBLAS found lacks cblas_sgemm or openblas_set_num_threads");
        blas_sgemm = NULL;
        return -1;
    }
    blas_set_threads(1);
    return 0;
}

static void sgemm(size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b,
                  size_t ldb, float *c, size_t ldc) {
    blas_sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, (int)m, (int)n, (int)k, 1.0f, a,
               (int)lda, b, (int)ldb, 0.0f, c, (int)ldc);
}

int base_sample_matmul(void *ctx, double *gflops) {
    base_matmul_ctx *c = ctx;
    if (c->threads > 1)
        blas_set_threads(c->threads);
    uint64_t t0 = bench_now_ns();
    sgemm(c->m, c->n, c->k, c->a, c->k, c->b, c->n, c->c, c->n);
    uint64_t dt = bench_now_ns() - t0;
    if (c->threads > 1)
        blas_set_threads(1);
    *gflops = 2.0 * (double)c->m * (double)c->k * (double)c->n / (double)dt;
    return 0;
}

/* cols[(ci*r + ky)*s + kx][oy*ow + ox] = in[ci][oy + ky][ox + kx] */
static void im2col(float *cols, const float *in, size_t c, size_t h, size_t w, size_t r, size_t s) {
    size_t oh = h - r + 1, ow = w - s + 1;
    for (size_t ci = 0; ci < c; ci++)
        for (size_t ky = 0; ky < r; ky++)
            for (size_t kx = 0; kx < s; kx++) {
                float *row = cols + ((ci * r + ky) * s + kx) * oh * ow;
                for (size_t oy = 0; oy < oh; oy++)
                    memcpy(row + oy * ow, in + (ci * h + oy + ky) * w + kx, ow * sizeof(float));
            }
}

int base_sample_conv2d(void *ctx, double *gflops) {
    base_conv2d_ctx *c = ctx;
    size_t oh = c->h - c->r + 1, ow = c->w - c->s + 1, crs = c->c * c->r * c->s;
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < c->n; i++) {
        im2col(c->cols, c->in + i * c->c * c->h * c->w, c->c, c->h, c->w, c->r, c->s);
        sgemm(c->k, oh * ow, crs, c->weight, crs, c->cols, oh * ow, c->out + i * c->k * oh * ow,
              oh * ow);
    }
    uint64_t dt = bench_now_ns() - t0;
    *gflops = 2.0 * (double)(c->n * c->k * crs * oh * ow) / (double)dt;
    return 0;
}
