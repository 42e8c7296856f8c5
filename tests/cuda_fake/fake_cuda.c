/* SPDX-License-Identifier: MIT */
/* A stand-in for the NVIDIA driver (libcuda.so.1), for testing rill's CUDA
 * backend where there is no GPU: RILL_CUDA_DRIVER names this library. It
 * offers the driver entry points the backend asks cuGetProcAddress for,
 * with the driver's ordering rules, on the host: one GPU (or
 * RILL_FAKE_CUDA_DEVICES), a current context per thread that most calls
 * need, each CUstream a thread that runs its operations in order, events
 * that streams record and wait for (timed in float milliseconds), memory
 * from the virtual memory calls as mappings of memory files, and host
 * memory as ordinary memory. A kernel runs as a host function called once
 * per block (a rill_cpu_kernel_fn): for the built-in ops' entries, the
 * op's CPU body (op_twins.c); for others, the function the program exports
 * under the entry's name followed by "_host". PTX is not read. Functions
 * exported under fake_cuda_* let tests fault a GPU, run its clock ahead,
 * refuse a memory handle type, see what was launched and count the calls
 * (fake_counts.c). Like the driver, it refuses a call that needs a current
 * context without one, a launch past the launch bounds, and timing of an
 * event made without it, and a copy to or from pageable host memory
 * returns once done. This file holds the streams, events, kernels and
 * contexts; fake_memory.c the memory, fake_device.c the GPUs' attributes. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/cuda/cuda_driver.h"
#include "fake_cuda.h"
#include "fake_graph.h"
#include "op_twins.h"
#include "rill.h"

/* RILL_FAKE_CUDA_DEVICES GPUs at most (see fake_gpus()). */
#define MAX_GPUS 4
/* A GPU whose context failed (fake_cuda_fault): its streams drop their
 * work, and every call on them returns the fault's code
 * (CUDA_ERROR_ILLEGAL_ADDRESS, ...), as after a fault on a GPU, until the
 * last release of its primary context. 0: no fault. */
static _Atomic int faulted[MAX_GPUS];

/* The calling thread's current context, as the driver keeps one per
 * thread: set by cuCtxSetCurrent (none before), or its stream's on a
 * stream thread; in a key rather than _Thread_local, which
 * ThreadSanitizer mishandles in a library that dlopen loads. Calls that
 * need a context refuse without one (CUDA_ERROR_INVALID_CONTEXT). */
static pthread_key_t gpu_key;
static pthread_once_t gpu_key_once = PTHREAD_ONCE_INIT;

static void make_gpu_key(void) {
    (void)pthread_key_create(&gpu_key, NULL);
}

/* gpu -1: no context. */
static void set_thread_gpu(int gpu) {
    pthread_once(&gpu_key_once, make_gpu_key);
    (void)pthread_setspecific(gpu_key, (void *)(intptr_t)(gpu + 1));
}

/* The GPU of the current context, or -1 when none is current. */
int fake_current_gpu(void) {
    pthread_once(&gpu_key_once, make_gpu_key);
    intptr_t v = (intptr_t)pthread_getspecific(gpu_key);
    return v > 0 ? (int)(v - 1) : -1;
}

static int thread_gpu(void) {
    int gpu = fake_current_gpu();
    return gpu >= 0 ? gpu : 0;
}

/* The driver's teardown at exit (registered at cuInit, so it runs after
 * the exit handlers registered later): from then on a call is a crash, as
 * in libcuda, whose state is gone. The teardown takes a while, as the
 * driver's does, so that a thread still calling in is seen. */
static _Atomic int torn_down;

static void teardown(void) {
    atomic_store(&torn_down, 1);
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
}

void fake_check_alive(const char *fn) {
    fake_count_call(fn);
    if (!atomic_load(&torn_down))
        return;
    fprintf(stderr, "stand-in CUDA driver: %s called after the driver's teardown at exit\n", fn);
    abort();
}

/* Called by a kernel's host body: its GPU faults, as if the kernel wrote
 * where no memory is. */
__attribute__((visibility("default"))) void fake_cuda_fault(void);
void fake_cuda_fault(void) {
    atomic_store(&faulted[thread_gpu()], CUDA_ERROR_ILLEGAL_ADDRESS);
}

/* A kernel's host body trapped (rill__kernel_fail in op_twins.c): its GPU
 * fails as a GPU does at a __trap(), CUDA_ERROR_ILLEGAL_INSTRUCTION. */
void fake_cuda_trap(void) {
    atomic_store(&faulted[thread_gpu()], CUDA_ERROR_ILLEGAL_INSTRUCTION);
}

/* GPU gpu's context fails with code, as a GPU reports a contained error
 * or a fault at the next call. */
__attribute__((visibility("default"))) void fake_cuda_fault_code(int gpu, int code);
void fake_cuda_fault_code(int gpu, int code) {
    if (gpu >= 0 && gpu < MAX_GPUS)
        atomic_store(&faulted[gpu], code);
}

/* The GPUs' clock runs ns ahead from now on, as after a device has been
 * up for that long (event times, cuEventElapsedTime). */
static _Atomic uint64_t clock_ahead_ns;

__attribute__((visibility("default"))) void fake_cuda_advance_clock(uint64_t ns);
void fake_cuda_advance_clock(uint64_t ns) {
    atomic_fetch_add(&clock_ahead_ns, ns);
}

/* ------------------------------------------------------------- streams */

typedef enum op_kind { OP_KERNEL, OP_COPY, OP_SET, OP_WRITE, OP_RECORD, OP_WAIT, OP_CALL } op_kind;

struct CUevent_st {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned flags;    /* of cuEventCreate */
    _Atomic int gpu;   /* of the stream of the last record */
    uint64_t recorded; /* records made (calls) */
    uint64_t reached;  /* records the stream got to */
    uint64_t when_ns;  /* when it got to the last one */
};

/* The GPUs' clock. */
static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + atomic_load(&clock_ahead_ns);
}

typedef struct op {
    struct op *next;
    op_kind kind;
    _Atomic int *done; /* set once the op ran (or was dropped), or NULL */
    union {
        struct {
            rill_cpu_kernel_fn fn;
            unsigned grid[3];
            unsigned char *args;
        } kernel;
        struct {
            void *dst;
            const void *src;
            size_t bytes;
            int value;
        } mem;
        struct {
            _Atomic uint64_t *word;
            uint64_t value;
        } write;
        struct {
            CUevent ev;
            uint64_t gen;
        } event;
        struct {
            void (*fn)(void *);
            void *arg;
        } call;
    } u;
} op;

struct CUstream_st {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    op *head, *tail;
    bool busy, stop;
    pthread_t thread;
    int gpu; /* the context current when it was made */
};

/* Waits on ev's condition for at most a millisecond, so that a loop that
 * waits sees a fault of the GPU. */
static void wait_a_while(CUevent ev) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&ev->cond, &ev->lock, &until);
}

static void run_op(op *o) {
    switch (o->kind) {
    case OP_KERNEL: {
        rill_block_ctx ctx = {
            .grid_dim = {o->u.kernel.grid[0], o->u.kernel.grid[1], o->u.kernel.grid[2]}};
        for (unsigned z = 0; z < ctx.grid_dim.z; z++)
            for (unsigned y = 0; y < ctx.grid_dim.y; y++)
                for (unsigned x = 0; x < ctx.grid_dim.x; x++) {
                    ctx.block_idx = (rill_dim3){x, y, z};
                    o->u.kernel.fn(&ctx, o->u.kernel.args);
                }
        free(o->u.kernel.args);
        break;
    }
    case OP_COPY:
        memmove(o->u.mem.dst, o->u.mem.src, o->u.mem.bytes);
        break;
    case OP_SET:
        memset(o->u.mem.dst, o->u.mem.value, o->u.mem.bytes);
        break;
    case OP_WRITE:
        atomic_store_explicit(o->u.write.word, o->u.write.value, memory_order_release);
        break;
    case OP_RECORD: {
        CUevent ev = o->u.event.ev;
        pthread_mutex_lock(&ev->lock);
        if (ev->reached < o->u.event.gen) {
            ev->reached = o->u.event.gen;
            ev->when_ns = now_ns();
        }
        pthread_cond_broadcast(&ev->cond);
        pthread_mutex_unlock(&ev->lock);
        break;
    }
    case OP_CALL:
        o->u.call.fn(o->u.call.arg);
        break;
    case OP_WAIT: {
        CUevent ev = o->u.event.ev;
        pthread_mutex_lock(&ev->lock);
        while (ev->reached < o->u.event.gen && !atomic_load(&faulted[thread_gpu()]))
            wait_a_while(ev);
        pthread_mutex_unlock(&ev->lock);
        break;
    }
    }
}

static void *stream_main(void *arg) {
    CUstream s = arg;
    set_thread_gpu(s->gpu);
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->head == NULL && !s->stop)
            pthread_cond_wait(&s->cond, &s->lock);
        if (s->head == NULL)
            break;
        op *o = s->head;
        s->head = o->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->busy = true;
        pthread_mutex_unlock(&s->lock);
        if (!atomic_load(&faulted[s->gpu])) /* a faulted GPU abandons its work */
            run_op(o);
        else if (o->kind == OP_KERNEL)
            free(o->u.kernel.args);
        if (o->done != NULL)
            atomic_store(o->done, 1); /* seen under s->lock, below */
        free(o);
        pthread_mutex_lock(&s->lock);
        s->busy = false;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static CUresult push(CUstream s, op *o) {
    int fault = s != NULL ? atomic_load(&faulted[s->gpu]) : 0;
    if (s == NULL || fault) {
        if (o->kind == OP_KERNEL)
            free(o->u.kernel.args);
        free(o);
        /* rill never uses the legacy stream */
        return s == NULL ? CUDA_ERROR_INVALID_HANDLE : (CUresult)fault;
    }
    pthread_mutex_lock(&s->lock);
    if (s->tail != NULL)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}

static op *new_op(op_kind kind) {
    op *o = calloc(1, sizeof *o);
    if (o != NULL)
        o->kind = kind;
    return o;
}

/* The GPU whose context made s. */
__attribute__((visibility("default"))) int fake_cuda_stream_gpu(CUstream s);
int fake_cuda_stream_gpu(CUstream s) {
    return s != NULL ? s->gpu : -1;
}

CUresult fake_stream_call(CUstream s, void (*fn)(void *), void *arg) {
    op *o = new_op(OP_CALL);
    if (o == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    o->u.call.fn = fn;
    o->u.call.arg = arg;
    CUresult r = push(s, o);
    if (r != CUDA_SUCCESS)
        free(o);
    return r;
}

static CUresult stream_create(CUstream *out) {
    CUstream s = calloc(1, sizeof *s);
    if (s == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->gpu = thread_gpu();
    if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = s;
    return CUDA_SUCCESS;
}

static CUresult fake_cuStreamCreate(CUstream *out, unsigned int flags) {
    (void)flags;
    NEED_CONTEXT();
    return stream_create(out);
}

static CUresult fake_cuStreamCreateWithPriority(CUstream *out, unsigned int flags, int priority) {
    (void)flags;
    NEED_CONTEXT();
    if (priority > 0 || priority < -5)
        return CUDA_ERROR_INVALID_VALUE;
    return stream_create(out);
}

static CUresult fake_cuStreamSynchronize(CUstream s) {
    NEED_CONTEXT();
    pthread_mutex_lock(&s->lock);
    while (s->head != NULL || s->busy)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return (CUresult)atomic_load(&faulted[s->gpu]);
}

static CUresult fake_cuStreamQuery(CUstream s) {
    NEED_CONTEXT();
    pthread_mutex_lock(&s->lock);
    bool idle = s->head == NULL && !s->busy;
    pthread_mutex_unlock(&s->lock);
    if (atomic_load(&faulted[s->gpu]))
        return (CUresult)atomic_load(&faulted[s->gpu]);
    return idle ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult fake_cuStreamDestroy(CUstream s) {
    NEED_CONTEXT();
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
    return CUDA_SUCCESS;
}

/* The next this many stream writes are refused (CUDA_ERROR_INVALID_VALUE),
 * as a driver refuses memory operations it cannot take. */
static _Atomic int refuse_writes;

__attribute__((visibility("default"))) void fake_cuda_refuse_writes(int count);
void fake_cuda_refuse_writes(int count) {
    atomic_store(&refuse_writes, count);
}

static CUresult fake_cuStreamWriteValue64(CUstream s, CUdeviceptr addr, cuuint64_t value,
                                          unsigned int flags) {
    (void)flags;
    NEED_CONTEXT();
    if (atomic_fetch_sub(&refuse_writes, 1) > 0)
        return CUDA_ERROR_INVALID_VALUE;
    atomic_fetch_add(&refuse_writes, 1); /* none to refuse: back to where it was */
    op *o = new_op(OP_WRITE);
    if (o == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    o->u.write.word = (_Atomic uint64_t *)(uintptr_t)addr;
    o->u.write.value = value;
    fake_count_memops(1);
    return push(s, o);
}

/* -------------------------------------------------------------- events */

static CUresult fake_cuEventCreate(CUevent *out, unsigned int flags) {
    NEED_CONTEXT();
    if (flags &
        ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS))
        return CUDA_ERROR_INVALID_VALUE;
    CUevent ev = calloc(1, sizeof *ev);
    if (ev == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ev->flags = flags;
    pthread_mutex_init(&ev->lock, NULL);
    pthread_cond_init(&ev->cond, NULL);
    *out = ev;
    return CUDA_SUCCESS;
}

static CUresult fake_cuEventDestroy(CUevent ev) {
    NEED_CONTEXT();
    /* The driver defers the release until the event's work is done;
     * rill destroys an event only once its wait completed. */
    pthread_mutex_destroy(&ev->lock);
    pthread_cond_destroy(&ev->cond);
    free(ev);
    return CUDA_SUCCESS;
}

static CUresult fake_cuEventRecord(CUevent ev, CUstream s) {
    NEED_CONTEXT();
    op *o = new_op(OP_RECORD);
    if (o == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&ev->lock);
    o->u.event.gen = ++ev->recorded;
    pthread_mutex_unlock(&ev->lock);
    o->u.event.ev = ev;
    if (s != NULL)
        atomic_store(&ev->gpu, s->gpu);
    return push(s, o);
}

static CUresult fake_cuStreamWaitEvent(CUstream s, CUevent ev, unsigned int flags) {
    (void)flags;
    NEED_CONTEXT();
    op *o = new_op(OP_WAIT);
    if (o == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&ev->lock);
    o->u.event.gen = ev->recorded; /* the latest record at the call */
    pthread_mutex_unlock(&ev->lock);
    o->u.event.ev = ev;
    return push(s, o);
}

/* CUDA_SUCCESS once the stream reached the event's latest record (or it
 * was never recorded), else CUDA_ERROR_NOT_READY. The backend does not
 * call it; tests do, on the events rill_event_native gives. */
static CUresult fake_cuEventQuery(CUevent ev) {
    NEED_CONTEXT();
    pthread_mutex_lock(&ev->lock);
    bool done = ev->reached >= ev->recorded;
    pthread_mutex_unlock(&ev->lock);
    int fault = atomic_load(&faulted[atomic_load(&ev->gpu)]);
    return fault != 0 ? (CUresult)fault : done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult fake_cuEventSynchronize(CUevent ev) {
    NEED_CONTEXT();
    pthread_mutex_lock(&ev->lock);
    while (ev->reached < ev->recorded && !atomic_load(&faulted[ev->gpu]))
        wait_a_while(ev);
    pthread_mutex_unlock(&ev->lock);
    return (CUresult)atomic_load(&faulted[ev->gpu]);
}

/* In float milliseconds, as the driver gives it. */
static CUresult fake_cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
    NEED_CONTEXT();
    uint64_t t[2];
    CUevent evs[2] = {start, end};
    /* The driver keeps no time for an event made without it. */
    if ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&evs[i]->lock);
        bool done = evs[i]->recorded > 0 && evs[i]->reached == evs[i]->recorded;
        t[i] = evs[i]->when_ns;
        pthread_mutex_unlock(&evs[i]->lock);
        if (!done)
            return CUDA_ERROR_NOT_READY;
    }
    *ms = (float)((double)((int64_t)(t[1] - t[0])) / 1e6);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------- kernels */

struct CUmod_st {
    int unused;
};

static CUresult fake_cuModuleLoadData(CUmodule *out, const void *image) {
    NEED_CONTEXT();
    if (image == NULL)
        return CUDA_ERROR_INVALID_IMAGE;
    *out = calloc(1, sizeof **out);
    return *out != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult fake_cuModuleUnload(CUmodule m) {
    NEED_CONTEXT();
    free(m);
    return CUDA_SUCCESS;
}

static CUresult fake_cuModuleGetFunction(CUfunction *out, CUmodule m, const char *name) {
    (void)m;
    NEED_CONTEXT();
    rill_cpu_kernel_fn twin = fake_op_twin(name);
    if (twin != NULL) {
        memcpy(out, &twin, sizeof twin);
        return CUDA_SUCCESS;
    }
    char symbol[160];
    snprintf(symbol, sizeof symbol, "%s_host", name);
    void *fn = dlsym(RTLD_DEFAULT, symbol);
    if (fn == NULL)
        return CUDA_ERROR_NOT_FOUND;
    *out = (CUfunction)fn;
    return CUDA_SUCCESS;
}

/* What the driver launches on the GPUs it stands for (compute capability
 * 7.0 and later): blocks of at most 1,024 threads (1,024 x 1,024 x 64),
 * grids of at most 2^31 - 1 x 65,535 x 65,535 blocks, 48 KiB of static
 * shared memory, and 32,764 bytes of parameters (CUDA 12.1 and later). */
#define MAX_PARAM_BYTES 32764u

static bool within_launch_bounds(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared, void **extra) {
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
        return false;
    if (gx > 0x7fffffffu || gy > 65535u || gz > 65535u)
        return false;
    if (bx > 1024u || by > 1024u || bz > 64u || (uint64_t)bx * by * bz > MAX_BLOCK_THREADS)
        return false;
    if (shared > 48u * 1024u)
        return false;
    for (void **e = extra; e != NULL && *e != CU_LAUNCH_PARAM_END; e += 2)
        if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE && *(size_t *)e[1] > MAX_PARAM_BYTES)
            return false;
    return true;
}

/* The x extent of the last grid launched, for tests of grid sizes. */
static _Atomic unsigned last_grid_x;

__attribute__((visibility("default"))) unsigned fake_cuda_last_grid_x(void);
unsigned fake_cuda_last_grid_x(void) {
    return atomic_load(&last_grid_x);
}

static CUresult fake_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                    CUstream s, void **params, void **extra) {
    NEED_CONTEXT();
    if (params != NULL || !within_launch_bounds(gx, gy, gz, bx, by, bz, shared, extra))
        return CUDA_ERROR_INVALID_VALUE;
    const void *buf = NULL;
    size_t size = 0;
    for (void **e = extra; e != NULL && *e != CU_LAUNCH_PARAM_END; e += 2) {
        if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buf = e[1];
        else if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            size = *(size_t *)e[1];
    }
    op *o = new_op(OP_KERNEL);
    if (o == NULL || (o->u.kernel.args = malloc(size > 0 ? size : 1)) == NULL) {
        free(o);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (size > 0)
        memcpy(o->u.kernel.args, buf, size);
    memcpy(&o->u.kernel.fn, &f, sizeof o->u.kernel.fn);
    o->u.kernel.grid[0] = gx;
    o->u.kernel.grid[1] = gy;
    o->u.kernel.grid[2] = gz;
    atomic_store(&last_grid_x, gx);
    return push(s, o);
}

/* -------------------------------------------------------------- memory */

/* A copy to or from pageable host memory (neither page-locked by
 * cuMemHostAlloc nor mapped device memory) is synchronous with respect to
 * the host, as the driver makes it: the call returns once the stream ran
 * everything before it and the copy itself. */
static CUresult fake_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s) {
    NEED_CONTEXT();
    fake_range known;
    bool pageable = bytes > 0 && (!fake_ranges_find((uintptr_t)dst, &known) ||
                                  !fake_ranges_find((uintptr_t)src, &known));
    op *o = new_op(OP_COPY);
    if (o == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    o->u.mem.dst = (void *)(uintptr_t)dst;
    o->u.mem.src = (const void *)(uintptr_t)src;
    o->u.mem.bytes = bytes;
    _Atomic int done = 0;
    if (pageable)
        o->done = &done;
    CUresult r = push(s, o);
    if (r != CUDA_SUCCESS || !pageable)
        return r;
    pthread_mutex_lock(&s->lock);
    while (!atomic_load(&done))
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return (CUresult)atomic_load(&faulted[s->gpu]);
}

/* Of device memory only: the driver refuses host memory, pageable or
 * page-locked. */
static CUresult fake_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream s) {
    NEED_CONTEXT();
    fake_range known;
    if (!fake_ranges_find((uintptr_t)dst, &known) || known.device < 0 ||
        !fake_ranges_cover((uintptr_t)dst, n, true))
        return CUDA_ERROR_INVALID_VALUE;
    op *o = new_op(OP_SET);
    if (o == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    o->u.mem.dst = (void *)(uintptr_t)dst;
    o->u.mem.value = value;
    o->u.mem.bytes = n;
    return push(s, o);
}

/* ------------------------------------------- for CUDA graphs (fake_graph.c) */

int fake_stream_fault(CUstream s) {
    return atomic_load(&faulted[s->gpu]);
}

uint64_t fake_event_arm(CUevent ev, CUstream s) {
    pthread_mutex_lock(&ev->lock);
    uint64_t gen = ++ev->recorded;
    pthread_mutex_unlock(&ev->lock);
    atomic_store(&ev->gpu, s->gpu);
    return gen;
}

void fake_event_reach(CUevent ev, uint64_t gen) {
    op o = {.kind = OP_RECORD, .u.event = {.ev = ev, .gen = gen}};
    run_op(&o);
}

/* ------------------------------------------------ the device and driver */

/* RILL_FAKE_CUDA_DEVICES GPUs (1 to MAX_GPUS, default 1), each with a
 * primary context. */
struct CUctx_st {
    int device;
};
static struct CUctx_st contexts[MAX_GPUS] = {{0}, {1}, {2}, {3}};

int fake_gpus(void) {
    const char *env = getenv("RILL_FAKE_CUDA_DEVICES");
    int n = env != NULL ? atoi(env) : 1;
    return n < 1 ? 1 : n > MAX_GPUS ? MAX_GPUS : n;
}

static pthread_once_t teardown_once = PTHREAD_ONCE_INIT;

static void register_teardown(void) {
    atexit(teardown);
}

static CUresult fake_cuInit(unsigned int flags) {
    CALLED();
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&teardown_once, register_teardown);
    return CUDA_SUCCESS;
}

static _Atomic int primary_refs[MAX_GPUS];

static CUresult fake_cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
    CALLED();
    if (d < 0 || d >= fake_gpus())
        return CUDA_ERROR_INVALID_DEVICE;
    atomic_fetch_add(&primary_refs[d], 1);
    *ctx = &contexts[d];
    return CUDA_SUCCESS;
}

/* The last release ends the primary context: the next one is new, and a
 * fault of the old one is gone with it. */
static CUresult fake_cuDevicePrimaryCtxRelease(CUdevice d) {
    CALLED();
    if (d < 0 || d >= MAX_GPUS)
        return CUDA_ERROR_INVALID_DEVICE;
    if (atomic_fetch_sub(&primary_refs[d], 1) == 1)
        atomic_store(&faulted[d], 0);
    return CUDA_SUCCESS;
}

/* NULL unbinds the thread's context, as in the driver. */
static CUresult fake_cuCtxSetCurrent(CUcontext ctx) {
    fake_check_alive(__func__);
    if (ctx == NULL) {
        set_thread_gpu(-1);
        return CUDA_SUCCESS;
    }
    if (ctx < contexts || ctx >= contexts + fake_gpus())
        return CUDA_ERROR_INVALID_CONTEXT;
    set_thread_gpu(ctx->device);
    return CUDA_SUCCESS;
}

static CUresult fake_cuCtxGetCurrent(CUcontext *ctx) {
    CALLED();
    int gpu = fake_current_gpu();
    *ctx = gpu >= 0 ? &contexts[gpu] : NULL;
    return CUDA_SUCCESS;
}

static CUresult fake_cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    NEED_CONTEXT();
    *least = 0;
    *greatest = -5;
    return CUDA_SUCCESS;
}

/* Each entry point, checked against cuda.h's declaration. */
#define ENTRY(name)                                                                                \
    {#name,                                                                                        \
     (void *)(uintptr_t)(__typeof__(&name))fake_##name}, /* a mismatch with cuda.h fails here */
#define CHECK(name)                                                                                \
    static __typeof__(&name) const check_##name __attribute__((unused)) = fake_##name;

RILL__CUDA_DRIVER_FUNCS(CHECK)
CHECK(cuEventQuery)

/* Every entry point the backend asks for (cuda_driver.h), and those that
 * only tests call. */
static const struct {
    const char *name;
    void *fn;
} entries[] = {RILL__CUDA_DRIVER_FUNCS(ENTRY) ENTRY(cuEventQuery)};

__attribute__((visibility("default"))) CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *status);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
    (void)version;
    (void)flags;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        if (strcmp(entries[i].name, symbol) == 0) {
            *pfn = entries[i].fn;
            if (status != NULL)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    }
    *pfn = NULL;
    if (status != NULL)
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}
