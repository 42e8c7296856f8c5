/* SPDX-License-Identifier: MIT */
/* A third backend, for tests only: the smallest that keeps the device
 * interface (src/backend/backend.h), so that the contract tests prove the
 * core names no backend of its own. Each stream has a thread that runs its
 * commands one by one, in order (submit returns before they run, as the
 * contract requires); a kernel's blocks run one after another on it, from
 * its RILL_KERNEL_IMAGE_CPU_FN image, and the built-in ops from the CPU
 * device's bodies. Memory is the process's (mmap and malloc): host memory,
 * unless a test says otherwise (null_backend_use). It registers itself
 * before main (rill__backend_add_for_test), with the devices that
 * RILL_NULL_DEVICES asks for (none by default). */
#include "null_backend.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "backend/backend.h"
#include "platform/thread.h"
#include "util/alloc.h"
#include "util/status.h"

/* The CPU device's bodies of the built-in ops (src/backend/cpu), which
 * this backend borrows rather than have ops of its own. */
rill_cpu_kernel_fn rill__cpu_op_body(rill__op op);

#define NULL_KIND ((rill_device_kind)100)
#define GRANULE   ((size_t)4096)

static int num_devices;

/* A command as its stream's thread runs it: the core's, with the
 * arguments copied. */
typedef struct null_cmd {
    struct null_cmd *next;
    rill__cmd c;
    uint64_t seq;
} null_cmd;

typedef struct null_stream {
    rill__stream *self;
    pthread_t thread;
    /* guarded by lock */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    null_cmd *head, *tail;
    bool stop;
    int met; /* the wait or extern work the thread sleeps for is over */
    /* the thread's only */
    bool skipping; /* after a failure, until a CLEAR */
    rill__launch_state ls;
    rill__waiter waiter;
    const char *ext_failure;
    char ext_why[RILL__CAUSE_BYTES];
} null_stream;

static null_stream *stream_of(rill__stream *s) {
    return rill__queue_of(s)->state;
}

/* ---- waiting on the stream's thread ---- */

static void wake(null_stream *ns) {
    pthread_mutex_lock(&ns->lock);
    ns->met = 1;
    pthread_cond_broadcast(&ns->cond);
    pthread_mutex_unlock(&ns->lock);
}

static void sleep_until_met(null_stream *ns) {
    pthread_mutex_lock(&ns->lock);
    while (!ns->met)
        pthread_cond_wait(&ns->cond, &ns->lock);
    ns->met = 0;
    pthread_mutex_unlock(&ns->lock);
}

static void on_wait_met(rill__waiter *w) {
    wake((null_stream *)((char *)w - offsetof(null_stream, waiter)));
}

/* Blocks until t completed seq. */
static void wait_for(null_stream *ns, rill__stream *t, uint64_t seq) {
    if (atomic_load_explicit(&rill__queue_of(t)->done_seq, memory_order_acquire) >= seq)
        return;
    ns->waiter = (rill__waiter){.seq = seq, .fn = on_wait_met};
    if (rill__stream_add_waiter(t, &ns->waiter))
        sleep_until_met(ns);
}

static void fail(null_stream *ns, uint64_t seq, const char *what, const char *detail) {
    char name[80], msg[RILL__CAUSE_BYTES];
    ns->skipping = true;
    rill__stream_name(ns->self, name, sizeof name);
    snprintf(msg, sizeof msg, "%s on stream %s failed: %s", what, name,
             detail[0] != '\0' ? detail : "(no message)");
    rill__stream_fail(ns->self, seq, msg);
}

/* ---- running commands ---- */

/* Runs every block of a kernel; returns whether it failed (ls says why). */
static bool run_grid(const rill__kernel_call *k, rill__launch_state *ls) {
    rill_cpu_kernel_fn fn = ((const rill_kernel_image *)k->loaded)->fn;
    atomic_store(&ls->failed, 0);
    ls->message[0] = '\0';
    rill_block_ctx ctx = {.grid_dim = k->grid, .worker = 0, .state = ls};
    for (uint32_t z = 0; z < k->grid.z; z++)
        for (uint32_t y = 0; y < k->grid.y; y++)
            for (uint32_t x = 0; x < k->grid.x; x++) {
                ctx.block_idx = (rill_dim3){x, y, z};
                fn(&ctx, k->args);
            }
    return atomic_load(&ls->failed) != 0;
}

static void ext_done(void *arg, const char *failure) {
    null_stream *ns = arg;
    ns->ext_failure = NULL;
    if (failure != NULL) {
        snprintf(ns->ext_why, sizeof ns->ext_why, "%s", failure);
        ns->ext_failure = ns->ext_why;
    }
    wake(ns);
}

/* Runs a launch's nodes in their (topological) order; after a failure the
 * rest are skipped, as a stream skips. */
static void run_graph(null_stream *ns, const null_cmd *c) {
    const rill__graph_launch *v = c->c.u.graph.launch;
    char what[96] = "";
    rill__launch_state ls = {0};
    bool failed = false;
    for (uint32_t i = 0; i < v->prog->num_nodes; i++) {
        const rill__xnode *n = &v->nodes[i];
        if (n->p.kind == RILL__GNODE_EXTERN) {
            void *token = c->c.u.graph.ext[n->ext_slot];
            c->c.u.graph.ext[n->ext_slot] = NULL; /* started: the release leaves it */
            n->p.u.ext.ops->start(token, failed, ext_done, ns);
            sleep_until_met(ns);
            if (!failed && ns->ext_failure != NULL) {
                failed = true;
                snprintf(what, sizeof what, "collective (graph node %u)", n->graph_index);
                snprintf(ls.message, sizeof ls.message, "%s", ns->ext_failure);
            }
            continue;
        }
        if (failed)
            continue;
        switch (n->p.kind) {
        case RILL__GNODE_KERNEL:
            if ((failed = run_grid(&n->p.u.kernel, &ls)))
                snprintf(what, sizeof what, "kernel '%.60s' (graph node %u)",
                         rill__kernel_image_of(n->p.u.kernel.kernel)->name, n->graph_index);
            break;
        case RILL__GNODE_HOST:
            if ((failed = rill__host_run(n->p.u.host.fn, n->p.u.host.user_data, &ls)))
                snprintf(what, sizeof what, "host function (graph node %u)", n->graph_index);
            break;
        case RILL__GNODE_COPY:
            memmove(n->p.u.copy.dst, n->p.u.copy.src, n->p.u.copy.bytes);
            break;
        case RILL__GNODE_SET:
            memset(n->p.u.set.dst, n->p.u.set.value, n->p.u.set.bytes);
            break;
        case RILL__GNODE_RECORD:
            if (n->p.u.event.timing)
                rill__event_stamp(n->p.u.event.event,
                                  atomic_load_explicit(&v->record_gen[i], memory_order_relaxed),
                                  rill__now_ns(), 0);
            break;
        default: /* empty and wait nodes: the wait happened before the launch */
            break;
        }
    }
    if (failed)
        fail(ns, c->seq, what, ls.message);
}

static void run(null_stream *ns, null_cmd *c) {
    switch (c->c.kind) {
    case RILL__CMD_KERNEL:
        if (!ns->skipping && run_grid(&c->c.u.kernel, &ns->ls)) {
            char what[96];
            snprintf(what, sizeof what, "kernel '%.60s'",
                     rill__kernel_image_of(c->c.u.kernel.kernel)->name);
            fail(ns, c->seq, what, ns->ls.message);
        }
        break;
    case RILL__CMD_HOST:
        if (ns->skipping)
            rill__host_skipped(&c->c.u.host, c->c.flags, &ns->ls);
        else if (rill__host_run(c->c.u.host.fn, c->c.u.host.user_data, &ns->ls))
            fail(ns, c->seq, "host function", ns->ls.message);
        break;
    case RILL__CMD_WAIT: /* even while skipping: later work relies on the order */
        wait_for(ns, c->c.u.wait.stream, c->c.u.wait.seq);
        if (!ns->skipping && !(c->c.flags & RILL__CMD_ORDER_ONLY) &&
            rill__stream_carry_failure(ns->self, c->seq, c->c.u.wait.stream, c->c.u.wait.seq))
            ns->skipping = true;
        break;
    case RILL__CMD_RECORD:
        rill__event_stamp(c->c.u.record.event, c->c.u.record.gen, rill__now_ns(), ns->skipping);
        break;
    case RILL__CMD_CLEAR:
        ns->skipping = false;
        rill__stream_clear_failure(ns->self, c->seq);
        break;
    case RILL__CMD_COPY:
        if (!ns->skipping)
            memmove(c->c.u.copy.dst, c->c.u.copy.src, c->c.u.copy.bytes);
        break;
    case RILL__CMD_SET:
        if (!ns->skipping)
            memset(c->c.u.set.dst, c->c.u.set.value, c->c.u.set.bytes);
        break;
    case RILL__CMD_GRAPH:
        if (c->c.u.graph.after_stream != NULL)
            wait_for(ns, c->c.u.graph.after_stream, c->c.u.graph.after_seq);
        if (!ns->skipping)
            run_graph(ns, c);
        break;
    }
}

static void *stream_thread(void *arg) {
    null_stream *ns = arg;
    rill__thread_set_worker(1);
    for (;;) {
        pthread_mutex_lock(&ns->lock);
        while (ns->head == NULL && !ns->stop)
            pthread_cond_wait(&ns->cond, &ns->lock);
        null_cmd *c = ns->head;
        if (c != NULL && (ns->head = c->next) == NULL)
            ns->tail = NULL;
        pthread_mutex_unlock(&ns->lock);
        if (c == NULL)
            return NULL; /* stopped, and nothing is left */
        run(ns, c);
        rill__cmd_release(ns->self, &c->c);
        rill__stream_complete(ns->self, c->seq);
        rill__free(c);
    }
}

/* Appends cmd with its own copy of a kernel's arguments (after the
 * command), and wakes the thread. */
static rill_status null_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq) {
    null_stream *ns = stream_of(s);
    size_t extra = cmd->kind == RILL__CMD_KERNEL ? cmd->u.kernel.args_size : 0;
    null_cmd *c = rill__malloc(sizeof *c + extra);
    if (c == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory queueing a command");
    c->next = NULL;
    c->c = *cmd;
    if (cmd->kind == RILL__CMD_KERNEL) {
        if (extra > 0)
            memcpy(c + 1, cmd->u.kernel.args, extra);
        c->c.u.kernel.args = extra > 0 ? (const void *)(c + 1) : NULL;
        c->c.u.kernel.accesses = NULL; /* borrowed, and not needed to run */
        c->c.u.kernel.num_accesses = 0;
    }
    rill__queue *q = rill__queue_of(s);
    pthread_mutex_lock(&ns->lock);
    c->seq = atomic_load_explicit(&q->sub_seq, memory_order_relaxed) + 1;
    if (cmd->flags & RILL__CMD_OPAQUE)
        atomic_store_explicit(&q->opaque_seq, c->seq, memory_order_relaxed);
    /* release: whoever reads sub_seq sees opaque_seq up to it. */
    atomic_store_explicit(&q->sub_seq, c->seq, memory_order_release);
    if (ns->tail != NULL)
        ns->tail->next = c;
    else
        ns->head = c;
    ns->tail = c;
    *seq = c->seq; /* before the unlock: the thread may run and free c at once */
    pthread_cond_broadcast(&ns->cond);
    pthread_mutex_unlock(&ns->lock);
    return RILL_OK;
}

static rill_status null_stream_init(rill__stream *s) {
    null_stream *ns = stream_of(s);
    memset(ns, 0, sizeof *ns);
    ns->self = s;
    pthread_mutex_init(&ns->lock, NULL);
    pthread_cond_init(&ns->cond, NULL);
    if (pthread_create(&ns->thread, NULL, stream_thread, ns) != 0) {
        pthread_cond_destroy(&ns->cond);
        pthread_mutex_destroy(&ns->lock);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "no thread for a stream of the null device");
    }
    return RILL_OK;
}

static void null_stream_fini(rill__stream *s) {
    null_stream *ns = stream_of(s);
    pthread_mutex_lock(&ns->lock);
    ns->stop = true;
    pthread_cond_broadcast(&ns->cond);
    pthread_mutex_unlock(&ns->lock);
    pthread_join(ns->thread, NULL);
    pthread_cond_destroy(&ns->cond);
    pthread_mutex_destroy(&ns->lock);
}

/* ---- devices, kernels, graphs, memory ---- */

static int null_probe(char *why, size_t size) {
    if (num_devices == 0)
        snprintf(why, size, "the null backend makes devices only where RILL_NULL_DEVICES=N");
    return num_devices;
}

/* A device's state: its index, which numbers its count of committed
 * memory. The counts live apart, since the pool frees its segments after
 * device_shutdown. */
#define MAX_NULL_DEVICES 8
typedef struct null_device {
    int index;
} null_device;
static _Atomic size_t committed_bytes[MAX_NULL_DEVICES]; /* <= info.memory_bytes */

/* A segment: its address space, its device's count and what of it is
 * committed. */
typedef struct null_segment {
    char *base;
    _Atomic size_t *device_committed;
    _Atomic size_t committed_bytes;
} null_segment;

static rill_status null_device_init(rill__device *dev, int index) {
    rill__device_base *b = rill__device_base_of(dev);
    snprintf(b->info.name, sizeof b->info.name, "null device %d", index);
    b->info.kind = NULL_KIND;
    b->info.compute_units = 1;
    b->info.memory_bytes = (size_t)1 << 30;
    if (index >= MAX_NULL_DEVICES)
        return rill__fail(RILL_ERROR_NO_DEVICE, "the null backend makes at most %d devices",
                          MAX_NULL_DEVICES);
    null_device *d = rill__calloc(1, sizeof *d);
    if (d == NULL)
        return rill__fail(RILL_ERROR_NO_DEVICE, "out of host memory");
    d->index = index;
    b->state = d;
    return RILL_OK;
}

static void null_device_shutdown(rill__device *dev) {
    rill__free(rill__device_base_of(dev)->state);
}

static uint64_t null_timestamp_ns(rill__device *dev) {
    (void)dev;
    return rill__now_ns();
}

/* What a launch carries: the image whose fn runs (the kernel's, or one
 * made for a built-in op, freed by null_kernel_unload). */
static rill_status null_kernel_load(rill__device *dev, const rill__kernel_image *k,
                                    const rill_kernel_image *image, void **loaded) {
    (void)dev;
    if (image != NULL) {
        *loaded = (void *)image;
        return RILL_OK;
    }
    rill_kernel_image *op = rill__malloc(sizeof *op);
    if (op == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory loading op '%s'", k->name);
    *op = (rill_kernel_image){.format = RILL_KERNEL_IMAGE_CPU_FN, .fn = rill__cpu_op_body(k->op)};
    *loaded = op;
    return RILL_OK;
}

static void null_kernel_unload(rill__device *dev, const rill__kernel_image *k, void *loaded) {
    (void)dev;
    if (k->op != RILL__OP_NONE)
        rill__free(loaded);
}

static rill_status null_graph_prepare(rill__device *dev, const rill__gprog *prog,
                                      const rill__xnode *nodes, void **state) {
    (void)dev;
    (void)prog;
    (void)nodes;
    *state = rill__malloc(1); /* launches run from the command alone: a token */
    return *state != NULL ? RILL_OK : rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory");
}

static void null_graph_release(rill__device *dev, void *state) {
    (void)dev;
    rill__free(state);
}

/* Segments are reserved address space; pages come when first touched,
 * and commits count them against the device's memory_bytes. */
static rill_status null_mem_alloc(rill__device *dev, size_t bytes, void **out, void **handle) {
    null_device *d = rill__device_base_of(dev)->state;
    null_segment *seg = rill__calloc(1, sizeof *seg);
    if (seg == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory");
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        rill__free(seg);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "no address space for %zu bytes", bytes);
    }
    seg->base = p;
    seg->device_committed = &committed_bytes[d->index];
    *out = p;
    *handle = seg;
    return RILL_OK;
}

static void null_mem_free(rill__device *dev, void *ptr, size_t bytes, void *handle) {
    (void)dev; /* perhaps shut down already */
    null_segment *seg = handle;
    atomic_fetch_sub(seg->device_committed, atomic_load(&seg->committed_bytes));
    munmap(ptr, bytes);
    rill__free(seg);
}

static rill_status null_mem_commit(rill__device *dev, void *handle, size_t offset, size_t bytes) {
    (void)offset;
    null_segment *seg = handle;
    size_t limit = rill__device_base_of(dev)->info.memory_bytes;
    if (atomic_fetch_add(seg->device_committed, bytes) + bytes > limit) {
        atomic_fetch_sub(seg->device_committed, bytes);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "the null device's %zu bytes are taken", limit);
    }
    atomic_fetch_add(&seg->committed_bytes, bytes);
    return RILL_OK;
}

static void null_mem_decommit(rill__device *dev, void *handle, size_t offset, size_t bytes) {
    (void)dev;
    null_segment *seg = handle;
    madvise(seg->base + offset, bytes, MADV_DONTNEED);
    atomic_fetch_sub(&seg->committed_bytes, bytes);
    atomic_fetch_sub(seg->device_committed, bytes);
}

static void *null_host_alloc(rill__device *dev, size_t bytes) {
    (void)dev;
    void *p = malloc(bytes);
    if (p == NULL)
        (void)rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory");
    return p;
}

static void null_host_free(rill__device *dev, void *ptr, size_t bytes) {
    (void)dev;
    (void)bytes;
    free(ptr);
}

static const rill__image_format null_image_formats[] = {
    {RILL_KERNEL_IMAGE_CPU_FN, "a CPU function"},
    {0, NULL},
};

static rill__backend_ops null_backend = {
    .name = "null",
    .kind = NULL_KIND,
    .mem_caps = RILL__MEMCAP_HOST,
    .image_formats = null_image_formats,
    .stream_state_bytes = sizeof(null_stream),
    .cmd_bytes = sizeof(null_cmd),
    .probe = null_probe,
    .device_init = null_device_init,
    .device_shutdown = null_device_shutdown,
    .timestamp_ns = null_timestamp_ns,
    .stream_init = null_stream_init,
    .stream_fini = null_stream_fini,
    .submit = null_submit,
    .kernel_load = null_kernel_load,
    .kernel_unload = null_kernel_unload,
    .graph_prepare = null_graph_prepare,
    .graph_release = null_graph_release,
    .mem_alloc = null_mem_alloc,
    .mem_free = null_mem_free,
    .mem_granule = GRANULE,
    .mem_commit = null_mem_commit,
    .mem_decommit = null_mem_decommit,
    .host_alloc = null_host_alloc,
    .host_free = null_host_free,
};

void null_backend_use(int devices, unsigned mem_caps) {
    num_devices = devices;
    null_backend.mem_caps = mem_caps;
}

/* Before main: the backend joins the list, with RILL_NULL_DEVICES devices. */
__attribute__((constructor)) static void null_backend_register(void) {
    const char *env = getenv("RILL_NULL_DEVICES");
    num_devices = env != NULL ? atoi(env) : 0;
    if (!rill__backend_add_for_test(&null_backend))
        abort(); /* a test build with no room for its backend is broken */
}
