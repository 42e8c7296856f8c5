/* SPDX-License-Identifier: MIT */
/* The CUDA backend against what the real driver does, on the stand-in
 * driver (fake_cuda.c), which this test drives through the functions it
 * exports: a current context per thread that the caller owns, an event
 * clock that has run for hours, memset of pageable host memory refused,
 * contained errors and faults that end the context, a GPU without POSIX
 * file descriptors as a memory handle type, and the driver's own teardown
 * at exit. Two stand-in GPUs (RILL_FAKE_CUDA_DEVICES=2). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "backend/cuda/cuda_driver.h"
#include "fixture.h"

/* ---------------------------------------------- the stand-in's controls */

typedef CUresult (*get_proc_fn)(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                CUdriverProcAddressQueryResult *status);

static struct {
    void *so;
    CUresult (*set_current)(CUcontext);
    CUresult (*get_current)(CUcontext *);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*release)(CUdevice);
    int (*stream_gpu)(CUstream);
    void (*fault_code)(int, int);
    void (*advance_clock)(uint64_t);
    void (*refuse_fd_handles)(int);
    unsigned (*last_grid_x)(void);
    void (*refuse_writes)(int);
} fake;

static void *sym(const char *name) {
    void *p = dlsym(fake.so, name);
    if (p == NULL)
        fail_msg("the stand-in driver has no %s", name);
    return p;
}

static void *entry(get_proc_fn get, const char *name) {
    void *p = NULL;
    if (get(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, NULL) != CUDA_SUCCESS)
        fail_msg("the stand-in driver has no %s", name);
    return p;
}

/* The library that RILL_CUDA_DRIVER names: the one rill loads too. */
static int load_fake(void **state) {
    (void)state;
    const char *path = getenv("RILL_CUDA_DRIVER");
    if (path == NULL || (fake.so = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL)
        return -1;
    get_proc_fn get;
    *(void **)&get = sym("cuGetProcAddress_v2");
    *(void **)&fake.set_current = entry(get, "cuCtxSetCurrent");
    *(void **)&fake.get_current = entry(get, "cuCtxGetCurrent");
    *(void **)&fake.retain = entry(get, "cuDevicePrimaryCtxRetain");
    *(void **)&fake.release = entry(get, "cuDevicePrimaryCtxRelease");
    *(void **)&fake.stream_gpu = sym("fake_cuda_stream_gpu");
    *(void **)&fake.fault_code = sym("fake_cuda_fault_code");
    *(void **)&fake.advance_clock = sym("fake_cuda_advance_clock");
    *(void **)&fake.refuse_fd_handles = sym("fake_cuda_refuse_fd_handles");
    *(void **)&fake.last_grid_x = sym("fake_cuda_last_grid_x");
    *(void **)&fake.refuse_writes = sym("fake_cuda_refuse_writes");
    return 0;
}

static CUcontext current(void) {
    CUcontext ctx = NULL;
    assert_int_equal(fake.get_current(&ctx), CUDA_SUCCESS);
    return ctx;
}

static rill_device *gpu(int i) {
    rill_device *dev = NULL;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CUDA, i, &dev));
    return dev;
}

/* ------------------------------------------------------------ a kernel */

/* Sleeps args' microseconds on the GPU's stream (the stand-in runs it as
 * the function exported under the entry's name followed by "_host"). */
typedef struct sleep_args {
    uint32_t us;
} sleep_args;

__attribute__((visibility("default"))) void backend_sleep_host(const rill_block_ctx *ctx,
                                                               const void *args);
void backend_sleep_host(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    const sleep_args *a = args;
    rt_sleep_us(a->us);
}

static rill_kernel *sleeper; /* of the runtime now, or NULL */

static rill_kernel *sleep_kernel(void) {
    rill_kernel *k = sleeper;
    if (k == NULL) {
        /* The stand-in does not read PTX. */
        rill_kernel_desc desc = {"backend_sleep", backend_sleep_host, "// stand-in",
                                 "backend_sleep"};
        RT_OK(rill_kernel_create(&desc, &k));
        sleeper = k;
    }
    return k;
}

/* rill_shutdown, which ends the kernel too. */
static rill_status shutdown(void) {
    sleeper = NULL;
    return rill_shutdown();
}

static rill_status gpu_sleep(rill_stream *s, uint32_t us) {
    sleep_args a = {us};
    rill_launch l = {{1, 1, 1}, {1, 1, 1}, &a, sizeof a, NULL, 0};
    return rill_launch_kernel(s, sleep_kernel(), &l);
}

/* --------------------------------------------------------------- tests */

#define EXPANDED_NAME(fn) #fn
#define NAME_OF_ABI(fn)   EXPANDED_NAME(fn)

/* Each entry point is asked of cuGetProcAddress by the base name of the
 * function its field is typed as (cuda.h's macro expansion, less a _vN
 * suffix, which CUDA_VERSION selects). Where cuda.h maps a name to another
 * function (cuGraphInstantiate to cuGraphInstantiateWithFlags), the driver
 * answers for the old name with the old ABI, whose extra arguments a call
 * through the field would leave as garbage. */
static void test_entry_points_are_asked_for_by_their_abis_names(void **state) {
    (void)state;
    static const struct {
        const char *asked, *abi;
    } names[] = {
#define NAMES(fn) {#fn, NAME_OF_ABI(fn)},
        RILL__CUDA_DRIVER_FUNCS(NAMES)
#undef NAMES
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i].asked);
        bool same = strncmp(names[i].abi, names[i].asked, n) == 0;
        const char *suffix = same ? names[i].abi + n : "";
        bool versioned = suffix[0] == '_' && suffix[1] == 'v' && suffix[2] != '\0' &&
                         strspn(suffix + 2, "0123456789") == strlen(suffix + 2);
        if (!same || (suffix[0] != '\0' && !versioned))
            fail_msg("rill asks the driver for %s, but cuda.h declares it as %s: name %s in "
                     "cuda_driver.h",
                     names[i].asked, names[i].abi, names[i].abi);
    }
}

/* A GPU that offers no POSIX file descriptor for its memory is used: the
 * pool asks for no shareable handle type, as nothing exports its memory. */
static void test_gpu_without_fd_handles(void **state) {
    (void)state;
    enum { N = 1000 };
    fake.refuse_fd_handles(1);
    rill_stream *s;
    float *x, back[N];
    RT_OK(rill_stream_create(gpu(0), 0, &s));
    RT_OK(rill_malloc_async(N * sizeof *x, s, (void **)&x));
    RT_OK(rill_op_fill_f32(s, x, 2.5f, N));
    RT_OK(rill_memcpy_async(back, x, sizeof back, s));
    RT_OK(rill_stream_synchronize(s));
    assert_true(back[0] == 2.5f && back[N - 1] == 2.5f);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(shutdown());
    fake.refuse_fd_handles(0);
}

/* Work on cuda:0 from a thread whose current context is GPU 1's (as
 * PyTorch leaves it after torch.cuda.set_device(1)), or none: each call
 * runs in GPU 0's context and leaves the caller's current. */
static void test_the_callers_context_is_kept(void **state) {
    (void)state;
    enum { N = 4096 };
    CUcontext other = NULL;
    assert_int_equal(fake.retain(&other, 1), CUDA_SUCCESS);
    assert_int_equal(fake.set_current(other), CUDA_SUCCESS);
    rill_device *dev = gpu(0);
    assert_ptr_equal(current(), other);
    rill_stream *s, *t;
    float *x, back[N];
    RT_OK(rill_stream_create(dev, 0, &s));
    assert_ptr_equal(current(), other);
    RT_OK(rill_malloc_async(N * sizeof *x, s, (void **)&x));
    RT_OK(rill_op_fill_f32(s, x, 1.0f, N));
    RT_OK(rill_stream_synchronize(s));
    assert_ptr_equal(current(), other);
    /* The caller switches again: a new stream still belongs to GPU 0. */
    assert_int_equal(fake.set_current(other), CUDA_SUCCESS);
    RT_OK(rill_stream_create(dev, 0, &t));
    void *native = NULL;
    RT_OK(rill_stream_native(t, &native));
    assert_int_equal(fake.stream_gpu(native), 0);
    RT_OK(rill_stream_native(s, &native));
    assert_int_equal(fake.stream_gpu(native), 0);
    /* No context current: rill's calls still run, and leave none. */
    assert_int_equal(fake.set_current(NULL), CUDA_SUCCESS);
    RT_OK(rill_op_add_scalar_f32(t, x, x, 2.0f, N));
    RT_OK(rill_memcpy_async(back, x, sizeof back, t));
    RT_OK(rill_stream_synchronize(t));
    assert_null(current());
    assert_true(back[0] == 3.0f && back[N - 1] == 3.0f);
    RT_OK(rill_free_async(x, t));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_stream_destroy(t));
    RT_OK(shutdown());
    assert_null(current());
    assert_int_equal(fake.release(1), CUDA_SUCCESS);
}

/* A thread that never made a context current waits for timing events and
 * reads their time: the completion it does runs in the device's context. */
typedef struct waiter_job {
    rill_stream *s;
    rill_event *a, *b;
    float ms;
    rill_status st;
    CUcontext after;
} waiter_job;

/* pthread, not thrd_create: ThreadSanitizer follows only the first. */
static void *waiter_main(void *arg) {
    waiter_job *j = arg;
    j->st = rill_event_synchronize(j->b);
    if (j->st == RILL_OK)
        j->st = rill_event_elapsed_ms(j->a, j->b, &j->ms);
    (void)fake.get_current(&j->after);
    return NULL;
}

/* Two points 5 ms apart on a GPU whose clock has run for 1,000 hours: the
 * driver's float milliseconds since the device started have a step of
 * 256 ms there, which the stamps must not inherit. */
static void test_elapsed_time_after_hours(void **state) {
    (void)state;
    rill_stream *s;
    rill_event *a, *b;
    RT_OK(rill_stream_create(gpu(0), 0, &s));
    RT_OK(rill_event_create(RILL_EVENT_TIMING, &a));
    RT_OK(rill_event_create(RILL_EVENT_TIMING, &b));
    fake.advance_clock((uint64_t)1000 * 3600 * 1000000000);
    for (int round = 0; round < 3; round++) {
        RT_OK(gpu_sleep(s, 2000)); /* the pump is busy with something first */
        RT_OK(rill_event_record(a, s));
        RT_OK(gpu_sleep(s, 5000));
        RT_OK(rill_event_record(b, s));
        waiter_job j = {s, a, b, 0, RILL_OK, NULL};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, waiter_main, &j), 0);
        assert_int_equal(pthread_join(th, NULL), 0);
        RT_OK(j.st);
        assert_null(j.after);
        /* At least the sleep; well under the driver's step there. */
        if (j.ms < 5.0f || j.ms > 100.0f)
            fail_msg("round %d: %.3f ms between two points 5 ms apart", round, (double)j.ms);
    }
    RT_OK(rill_event_destroy(a));
    RT_OK(rill_event_destroy(b));
    RT_OK(rill_stream_destroy(s));
    RT_OK(shutdown());
}

/* rill_memset_async of pageable host memory on a GPU stream: the driver
 * refuses it, so it happens on the host, in stream order. */
static void test_memset_of_pageable_host_memory(void **state) {
    (void)state;
    enum { N = 3000 };
    unsigned char *host = malloc(N), *out = malloc(N);
    assert_non_null(host);
    assert_non_null(out);
    memset(host, 0, N);
    rill_stream *s;
    void *x;
    RT_OK(rill_stream_create(gpu(0), 0, &s));
    RT_OK(rill_malloc_async(N, s, &x));
    RT_OK(gpu_sleep(s, 2000));
    RT_OK(rill_memset_async(host, 0x11, N, s));
    RT_OK(rill_memcpy_async(x, host, N, s));
    RT_OK(rill_memset_async(host, 0x22, N, s));
    RT_OK(rill_memcpy_async(out, x, N, s));
    RT_OK(rill_stream_synchronize(s));
    for (size_t i = 0; i < N; i++) {
        if (host[i] != 0x22 || out[i] != 0x11)
            fail_msg("byte %zu: host %#x (0x22 expected), copied %#x (0x11 expected)", i, host[i],
                     out[i]);
    }
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(shutdown());
    free(host);
    free(out);
}

/* rill_memset_async of page-locked host memory (rill_malloc_host) on a
 * GPU stream: the driver sets device memory only, so it happens on the
 * host, in stream order, and the stream stays healthy. */
static void test_memset_of_page_locked_host_memory(void **state) {
    (void)state;
    enum { N = 3000 };
    rill_stream *s;
    unsigned char *host, *out = malloc(N);
    void *x;
    assert_non_null(out);
    RT_OK(rill_stream_create(gpu(0), 0, &s));
    RT_OK(rill_set_device(gpu(0)));
    RT_OK(rill_malloc_host(N, (void **)&host));
    RT_OK(rill_malloc_async(N, s, &x));
    RT_OK(gpu_sleep(s, 2000));
    RT_OK(rill_memset_async(host, 0x33, N, s));
    RT_OK(rill_memcpy_async(x, host, N, s));
    RT_OK(rill_memcpy_async(out, x, N, s));
    RT_OK(rill_stream_synchronize(s));
    for (size_t i = 0; i < N; i++)
        if (host[i] != 0x33 || out[i] != 0x33)
            fail_msg("byte %zu: host %#x, copied %#x (0x33 expected)", i, host[i], out[i]);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_free_host(host));
    RT_OK(rill_stream_destroy(s));
    RT_OK(shutdown());
    free(out);
}

/* A launch past the GPU's bounds (blocks of more than 1,024 threads, a
 * grid's y beyond 65,535 blocks, more than 32,764 bytes of arguments) is
 * refused by the call, with a sentence, and the stream goes on. */
static void test_launch_past_the_bounds_is_refused(void **state) {
    (void)state;
    static unsigned char big[40000];
    sleep_args a = {1};
    const struct {
        rill_dim3 grid, block;
        const void *args;
        size_t size;
        const char *words;
    } cases[] = {
        {{1, 1, 1}, {2048, 1, 1}, &a, sizeof a, "threads per block"},
        {{1, 1, 1}, {32, 32, 2}, &a, sizeof a, "threads per block"},
        {{1, 1, 1}, {1, 1, 65}, &a, sizeof a, "threads per block"},
        {{1, 70000, 1}, {1, 1, 1}, &a, sizeof a, "grid"},
        {{1, 1, 1}, {1, 1, 1}, big, sizeof big, "bytes of arguments"},
    };
    rill_stream *s;
    RT_OK(rill_stream_create(gpu(0), 0, &s));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rill_launch l = {cases[i].grid, cases[i].block, cases[i].args, cases[i].size, NULL, 0};
        RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_launch_kernel(s, sleep_kernel(), &l));
        if (strstr(rill_last_error(), cases[i].words) == NULL)
            fail_msg("case %zu: '%s' does not say '%s'", i, rill_last_error(), cases[i].words);
    }
    RT_OK(gpu_sleep(s, 10));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(shutdown());
}

static _Atomic int gate;

static void wait_for_gate(void *arg) {
    (void)arg;
    while (!atomic_load(&gate))
        rt_sleep_us(100);
}

/* The driver refuses the write of a done word that the work issued with
 * it (a kernel let through by a host function, then a timing record)
 * waited for: that work completes on the host, and the stream reports the
 * refusal, instead of waiting for a write that never comes. */
static void test_a_refused_done_word_write_fails_the_stream(void **state) {
    (void)state;
    rill_stream *s;
    rill_event *e;
    RT_OK(rill_stream_create(gpu(0), 0, &s));
    RT_OK(rill_event_create(RILL_EVENT_TIMING, &e));
    atomic_store(&gate, 0);
    RT_OK(rill_launch_host_func(s, wait_for_gate, NULL));
    RT_OK(gpu_sleep(s, 10));
    RT_OK(rill_event_record(e, s));
    fake.refuse_writes(1);
    atomic_store(&gate, 1);
    rill_status st = rill_stream_synchronize_for(s, 3000000000u);
    fake.refuse_writes(0);
    if (st != RILL_ERROR_KERNEL_FAILED || strstr(rill_last_error(), "refused") == NULL)
        fail_msg("the stream said %s (%s), not that the driver refused the write",
                 rill_status_name(st), rill_last_error());
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
    RT_OK(shutdown());
}

/* A CPU device's stream waits for a GPU stream's event, and only the CPU
 * stream is synchronized: nobody asks the GPU stream how far it got, yet
 * its completion is reported (the pump writes the done word of a stream
 * quiet with work unreported), and the wait ends. */
static void test_a_wait_of_another_backend_is_met(void **state) {
    (void)state;
    rill_device *cpu;
    rill_stream *g, *c;
    rill_event *e;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &cpu));
    RT_OK(rill_stream_create(gpu(0), 0, &g));
    RT_OK(rill_stream_create(cpu, 0, &c));
    RT_OK(rill_event_create(0, &e));
    for (int round = 0; round < 20; round++) {
        RT_OK(gpu_sleep(g, 200));
        RT_OK(rill_event_record(e, g));
        RT_OK(rill_stream_wait_event(c, e));
        RT_OK(rill_stream_synchronize_for(c, 5000000000u));
        RT_OK(rill_event_query(e));
    }
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(c));
    RT_OK(rill_stream_destroy(g));
    RT_OK(shutdown());
}

/* Each error that ends a CUDA context, reported at the next launch, loses
 * the device as a whole, as CUDA_ERROR_ILLEGAL_ADDRESS does. */
static void test_sticky_errors_lose_the_device(void **state) {
    (void)state;
    static const struct {
        CUresult code;
        const char *name;
    } codes[] = {
        {CUDA_ERROR_CONTAINED, "CONTAINED"},
        {CUDA_ERROR_ILLEGAL_ADDRESS, "ILLEGAL_ADDRESS"},
        {CUDA_ERROR_HARDWARE_STACK_ERROR, "HARDWARE_STACK_ERROR"},
        {CUDA_ERROR_ILLEGAL_INSTRUCTION, "ILLEGAL_INSTRUCTION"},
        {CUDA_ERROR_MISALIGNED_ADDRESS, "MISALIGNED_ADDRESS"},
        {CUDA_ERROR_INVALID_ADDRESS_SPACE, "INVALID_ADDRESS_SPACE"},
        {CUDA_ERROR_INVALID_PC, "INVALID_PC"},
        {CUDA_ERROR_LAUNCH_FAILED, "LAUNCH_FAILED"},
    };
    enum { N = 256 };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        rill_stream *s;
        float *x;
        RT_OK(rill_stream_create(gpu(0), 0, &s));
        RT_OK(rill_malloc_async(N * sizeof *x, s, (void **)&x));
        RT_OK(rill_stream_synchronize(s));
        fake.fault_code(0, (int)codes[i].code);
        (void)rill_op_fill_f32(s, x, 1.0f, N);
        rill_status st = rill_stream_synchronize(s);
        if (st != RILL_ERROR_DEVICE_LOST)
            fail_msg("CUDA_ERROR_%s: the stream says %s (%s), not RILL_ERROR_DEVICE_LOST",
                     codes[i].name, rill_status_name(st), rill_last_error());
        (void)rill_free_async(x, s); /* refused on a lost device, or done */
        RT_OK(rill_stream_destroy(s));
        RT_OK(shutdown()); /* the context's last release ends the fault */
    }
}

/* "An index below 0 or at least h*w fails the launch ... a CUDA device
 * traps": the max pooling backward's kernel with an index past the image
 * ends the context, and the stream reports the device lost. */
static void test_max_pool2d_backward_index_out_of_range_traps(void **state) {
    (void)state;
    rill_stream *s;
    float *gi, *go;
    int64_t *idx;
    int64_t bad[4] = {0, 3, 16, 1};
    RT_OK(rill_stream_create(gpu(0), 0, &s));
    RT_OK(rill_malloc_async(16 * sizeof *gi, s, (void **)&gi));
    RT_OK(rill_malloc_async(4 * sizeof *go, s, (void **)&go));
    RT_OK(rill_malloc_async(sizeof bad, s, (void **)&idx));
    RT_OK(rill_memset_async(go, 0, 4 * sizeof *go, s));
    RT_OK(rill_memcpy_async(idx, bad, sizeof bad, s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_op_max_pool2d_backward_f32(s, gi, go, idx, 1, 4, 4, 2, 2));
    rill_status st = rill_stream_synchronize(s);
    if (st != RILL_ERROR_DEVICE_LOST)
        fail_msg("the stream says %s (%s), not RILL_ERROR_DEVICE_LOST", rill_status_name(st),
                 rill_last_error());
    (void)rill_free_async(gi, s); /* refused on a lost device, or done */
    (void)rill_free_async(go, s);
    (void)rill_free_async(idx, s);
    RT_OK(rill_stream_destroy(s));
    RT_OK(shutdown());
}

/* The element-wise ops' grids fill a GPU: at least as many blocks of 256
 * threads as its multiprocessors hold at once (2,048 threads each on the
 * stand-in), where the work has that many. */
static void test_op_grids_fill_the_gpu(void **state) {
    (void)state;
    enum { N = 1 << 20 };
    rill_device *dev = gpu(0);
    rill_device_info info;
    RT_OK(rill_device_get_info(dev, &info));
    unsigned wave = (unsigned)info.compute_units * (2048 / 256);
    rill_stream *s;
    float *x;
    RT_OK(rill_stream_create(dev, 0, &s));
    RT_OK(rill_malloc_async(N * sizeof *x, s, (void **)&x));
    RT_OK(rill_op_fill_f32(s, x, 1.0f, N));
    unsigned fill = fake.last_grid_x();
    RT_OK(rill_op_add_f32(s, x, x, x, 1.0f, N));
    unsigned add = fake.last_grid_x();
    RT_OK(rill_stream_synchronize(s));
    if (fill < wave || add < wave)
        fail_msg("grids of %u (fill) and %u (add) blocks for %d floats on %d multiprocessors; "
                 "%u fill them once",
                 fill, add, N, info.compute_units, wave);
    /* Small work: a block per 1,024 elements. */
    RT_OK(rill_op_fill_f32(s, x, 1.0f, 3000));
    assert_int_equal(fake.last_grid_x(), 3);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(shutdown());
}

/* A program that exits with work on the GPU and without rill_shutdown:
 * rill's pump stops before the driver's teardown, which the stand-in
 * makes a crash for any later call (the child's exit status). */
static void test_exit_with_work_in_flight(void **state) {
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* It leaves the runtime up on purpose: no leak report. */
        char asan[512];
        const char *was = getenv("ASAN_OPTIONS");
        snprintf(asan, sizeof asan, "%s%sdetect_leaks=0", was != NULL ? was : "",
                 was != NULL && was[0] != '\0' ? ":" : "");
        setenv("ASAN_OPTIONS", asan, 1);
        char *args[] = {(char *)"test_cuda_backend", (char *)"--exit-with-work", NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the program that exited with work in flight ended with %s %d",
                 WIFSIGNALED(status) ? "signal" : "status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

static int exit_with_work(void) {
    rill_device *dev = NULL;
    rill_stream *s = NULL;
    if (rill_device_get_by_kind(RILL_DEVICE_CUDA, 0, &dev) != RILL_OK ||
        rill_stream_create(dev, 0, &s) != RILL_OK)
        return 3;
    for (int i = 0; i < 4; i++) {
        sleep_args a = {50000};
        rill_launch l = {{1, 1, 1}, {1, 1, 1}, &a, sizeof a, NULL, 0};
        if (rill_launch_kernel(s, sleep_kernel(), &l) != RILL_OK)
            return 4;
    }
    rt_sleep_us(5000); /* the pump polls the work in flight */
    exit(0);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--exit-with-work") == 0)
        return exit_with_work();
    if (argc > 1)
        cmocka_set_test_filter(argv[1]); /* one test, by name */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entry_points_are_asked_for_by_their_abis_names),
        cmocka_unit_test(test_gpu_without_fd_handles),
        cmocka_unit_test(test_the_callers_context_is_kept),
        cmocka_unit_test(test_elapsed_time_after_hours),
        cmocka_unit_test(test_memset_of_pageable_host_memory),
        cmocka_unit_test(test_memset_of_page_locked_host_memory),
        cmocka_unit_test(test_launch_past_the_bounds_is_refused),
        cmocka_unit_test(test_a_refused_done_word_write_fails_the_stream),
        cmocka_unit_test(test_a_wait_of_another_backend_is_met),
        cmocka_unit_test(test_sticky_errors_lose_the_device),
        cmocka_unit_test(test_max_pool2d_backward_index_out_of_range_traps),
        cmocka_unit_test(test_op_grids_fill_the_gpu),
        cmocka_unit_test(test_exit_with_work_in_flight),
    };
    return cmocka_run_group_tests_name("cuda_backend", tests, load_fake, NULL);
}
