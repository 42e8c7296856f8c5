/* SPDX-License-Identifier: MIT */
/* The CUDA runtime side of bench_cuda_baseline: each row's operation as a
 * CUDA program writes it with cudart and cuBLAS, on device 0, with
 * non-blocking streams (as rill's streams are). This is the baseline, not
 * the library: it links the CUDA runtime and cuBLAS, which rill never does.
 * Every sample ends with the work it submitted completed, so no sample
 * inherits a queue from the one before. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#ifdef BENCH_CUDA_HAVE_CUBLAS
#include <cublas_v2.h>
#endif

#include "harness.h"
#include "kernels.h"
#include "sides.h"

typedef struct cuda_state {
    const cb_config *cfg;     /* borrowed: outlives the side */
    cudaStream_t s1, s2;      /* owned */
    cudaEvent_t e1, e2;       /* owned */
    cudaGraphExec_t exec;     /* owned; the prepared CB_GRAPH_* op's */
    cudaMemPool_t pool;       /* borrowed: device 0's default pool */
    void *mm_a, *mm_b, *mm_c; /* owned; the prepared CB_MATMUL_* op's */
    size_t mm_n;
#ifdef BENCH_CUDA_HAVE_CUBLAS
    cublasHandle_t blas; /* owned */
#endif
    atomic_long host_calls; /* CB_HOST_FUNC's functions that ran */
} cuda_state;

static const dim3 one = {1, 1, 1};

/* True, after printing the call and the runtime's error, when e failed. */
static bool cuda_failed(cudaError_t e, const char *call) {
    if (e == cudaSuccess)
        return false;
    fprintf(stderr, "bench: %s: %s: %s\n", call, cudaGetErrorName(e), cudaGetErrorString(e));
    return true;
}

static bool launch_failed(cudaStream_t s, const void *kernel, void **args) {
    return cuda_failed(cudaLaunchKernel(kernel, one, one, args, 0, s), "cudaLaunchKernel");
}

static bool sync_failed(cudaStream_t s) {
    return cuda_failed(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

/* ---- launches, events, host functions ---- */

static int sample_launch(cuda_state *st, double *us) {
    const void *k = bench_cuda_kernel(BENCH_CUDA_EMPTY);
    uint64_t timed = 0;
    for (int b = 0; b < st->cfg->launch_batches; b++) {
        uint64_t t0 = bench_now_ns();
        for (int i = 0; i < st->cfg->launch_batch; i++)
            if (launch_failed(st->s1, k, NULL))
                return -1;
        timed += bench_now_ns() - t0;
        if (sync_failed(st->s1))
            return -1;
    }
    *us = (double)timed / 1e3 / ((double)st->cfg->launch_batches * st->cfg->launch_batch);
    return 0;
}

static int sample_launch_sync(cuda_state *st, double *us) {
    const void *k = bench_cuda_kernel(BENCH_CUDA_EMPTY);
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < st->cfg->sync_rounds; i++)
        if (launch_failed(st->s1, k, NULL) || sync_failed(st->s1))
            return -1;
    *us = (double)(bench_now_ns() - t0) / 1e3 / st->cfg->sync_rounds;
    return 0;
}

/* Hop 2i: a kernel on s1, handed to s2 through e1; hop 2i+1 the same back
 * through e2. A re-record affects only waits submitted after it, so two
 * events serve every hop. */
static int sample_event_hop(cuda_state *st, double *us) {
    const void *k = bench_cuda_kernel(BENCH_CUDA_EMPTY);
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < st->cfg->hops; i += 2) {
        if (launch_failed(st->s1, k, NULL) ||
            cuda_failed(cudaEventRecord(st->e1, st->s1), "cudaEventRecord") ||
            cuda_failed(cudaStreamWaitEvent(st->s2, st->e1, 0), "cudaStreamWaitEvent") ||
            launch_failed(st->s2, k, NULL) ||
            cuda_failed(cudaEventRecord(st->e2, st->s2), "cudaEventRecord") ||
            cuda_failed(cudaStreamWaitEvent(st->s1, st->e2, 0), "cudaStreamWaitEvent"))
            return -1;
    }
    if (sync_failed(st->s1) || sync_failed(st->s2))
        return -1;
    *us = (double)(bench_now_ns() - t0) / 1e3 / st->cfg->hops;
    return 0;
}

static void CUDART_CB count_call(void *user_data) {
    cuda_state *st = user_data;
    atomic_fetch_add_explicit(&st->host_calls, 1, memory_order_relaxed);
}

static int sample_host_func(cuda_state *st, double *us) {
    atomic_store(&st->host_calls, 0);
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < st->cfg->host_funcs; i++)
        if (cuda_failed(cudaLaunchHostFunc(st->s1, count_call, st), "cudaLaunchHostFunc"))
            return -1;
    if (sync_failed(st->s1))
        return -1;
    *us = (double)(bench_now_ns() - t0) / 1e3 / st->cfg->host_funcs;
    /* The synchronize returned after the last function: every count is in. */
    if (atomic_load(&st->host_calls) != st->cfg->host_funcs) {
        fprintf(stderr, "bench: %ld of %d host functions ran\n", atomic_load(&st->host_calls),
                st->cfg->host_funcs);
        return -1;
    }
    return 0;
}

static int launch_spins(cuda_state *st, bool two_streams) {
    bench_cuda_spin_args a = {st->cfg->spin_ns};
    void *args[] = {&a.ns};
    const void *k = bench_cuda_kernel(BENCH_CUDA_SPIN);
    for (int i = 0; i < st->cfg->spin_kernels; i++)
        if (launch_failed(two_streams && i % 2 ? st->s2 : st->s1, k, args))
            return -1;
    return sync_failed(st->s1) || sync_failed(st->s2) ? -1 : 0;
}

static int sample_two_streams(cuda_state *st, double *speedup) {
    uint64_t t0 = bench_now_ns();
    if (launch_spins(st, false) != 0)
        return -1;
    uint64_t t1 = bench_now_ns();
    if (launch_spins(st, true) != 0)
        return -1;
    *speedup = (double)(t1 - t0) / (double)(bench_now_ns() - t1);
    return 0;
}

static int sample_idle_launch(cuda_state *st, double *us) {
    bench_sleep_us(st->cfg->idle_ms * 1000u);
    uint64_t t0 = bench_now_ns();
    if (launch_failed(st->s1, bench_cuda_kernel(BENCH_CUDA_EMPTY), NULL) || sync_failed(st->s1))
        return -1;
    *us = (double)(bench_now_ns() - t0) / 1e3;
    return 0;
}

/* ---- graphs ---- */

/* The chain (each node after the one before) or the fan (node 0, then
 * nodes 1..n-2 after it, then node n-1 after all of them), instantiated. */
static int build_graph(cuda_state *st, bool fan) {
    int n = st->cfg->graph_nodes;
    cudaGraph_t g = NULL;
    cudaGraphNode_t *nodes = calloc((size_t)n, sizeof(*nodes));
    int rc = -1;
    if (nodes == NULL) {
        fprintf(stderr, "bench: out of memory for %d graph nodes\n", n);
        return -1;
    }
    struct cudaKernelNodeParams p = {
        .func = (void *)bench_cuda_kernel(BENCH_CUDA_EMPTY), .gridDim = one, .blockDim = one};
    if (cuda_failed(cudaGraphCreate(&g, 0), "cudaGraphCreate"))
        goto out;
    for (int i = 0; i < n; i++) {
        const cudaGraphNode_t *deps = NULL;
        size_t num_deps = 0;
        if (i > 0 && !fan) {
            deps = &nodes[i - 1];
            num_deps = 1;
        } else if (i > 0 && i < n - 1) {
            deps = &nodes[0];
            num_deps = 1;
        } else if (i == n - 1) {
            deps = &nodes[1];
            num_deps = (size_t)n - 2;
        }
        if (cuda_failed(cudaGraphAddKernelNode(&nodes[i], g, deps, num_deps, &p),
                        "cudaGraphAddKernelNode"))
            goto out;
    }
    if (cuda_failed(cudaGraphInstantiate(&st->exec, g, 0), "cudaGraphInstantiate") ||
        cuda_failed(cudaGraphUpload(st->exec, st->s1), "cudaGraphUpload"))
        goto out;
    rc = 0;
out:
    if (g != NULL)
        cudaGraphDestroy(g);
    free(nodes);
    return rc;
}

static int sample_graph(cuda_state *st, double *ns_per_node) {
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < st->cfg->graph_runs; r++)
        if (cuda_failed(cudaGraphLaunch(st->exec, st->s1), "cudaGraphLaunch") ||
            sync_failed(st->s1))
            return -1;
    *ns_per_node =
        (double)(bench_now_ns() - t0) / ((double)st->cfg->graph_runs * st->cfg->graph_nodes);
    return 0;
}

/* ---- stream-ordered memory ---- */

static int sample_alloc_pair(cuda_state *st, double *ns_per_pair) {
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < st->cfg->alloc_pairs; i++) {
        void *p;
        if (cuda_failed(cudaMallocAsync(&p, cb_pair_sizes[i % cb_num_pair_sizes], st->s1),
                        "cudaMallocAsync") ||
            cuda_failed(cudaFreeAsync(p, st->s1), "cudaFreeAsync"))
            return -1;
    }
    *ns_per_pair = (double)(bench_now_ns() - t0) / st->cfg->alloc_pairs;
    return sync_failed(st->s1) ? -1 : 0;
}

/* The pool keeps what it reserved across synchronizations, as a caching
 * allocator (rill's pool, PyTorch's) does; by default it would give its
 * memory back to the driver at every synchronize. */
static int keep_pool_memory(cuda_state *st, bool keep) {
    unsigned long long threshold = keep ? ~0ull : 0;
    return cuda_failed(
               cudaMemPoolSetAttribute(st->pool, cudaMemPoolAttrReleaseThreshold, &threshold),
               "cudaMemPoolSetAttribute")
               ? -1
               : 0;
}

/* ---- matrix products ---- */

static int fill(cuda_state *st, bench_cuda_kernel_id kernel, void *x, size_t n, uint64_t seed) {
    bench_cuda_fill_args a = {x, n, seed};
    void *args[] = {&a.x, &a.n, &a.seed};
    dim3 grid = {1024, 1, 1}, block = {BENCH_CUDA_FILL_THREADS, 1, 1};
    return cuda_failed(cudaLaunchKernel(bench_cuda_kernel(kernel), grid, block, args, 0, st->s1),
                       "cudaLaunchKernel")
               ? -1
               : 0;
}

static int prepare_matmul(cuda_state *st, cb_op op, char *note, size_t note_size) {
#ifdef BENCH_CUDA_HAVE_CUBLAS
    (void)note;
    (void)note_size;
    bool f16 = op == CB_MATMUL_F16;
    size_t n = f16 ? st->cfg->mm_f16_n : st->cfg->mm_f32_n;
    size_t bytes = n * n * (f16 ? 2 : 4);
    bench_cuda_kernel_id k = f16 ? BENCH_CUDA_FILL_F16 : BENCH_CUDA_FILL_F32;
    st->mm_n = n;
    if (cuda_failed(cudaMalloc(&st->mm_a, bytes), "cudaMalloc") ||
        cuda_failed(cudaMalloc(&st->mm_b, bytes), "cudaMalloc") ||
        cuda_failed(cudaMalloc(&st->mm_c, bytes), "cudaMalloc") ||
        fill(st, k, st->mm_a, n * n, 1) != 0 || fill(st, k, st->mm_b, n * n, 2) != 0 ||
        sync_failed(st->s1))
        return -1;
    return 0;
#else
    (void)st;
    (void)op;
    snprintf(note, note_size, "no cuBLAS at build time");
    return 1;
#endif
}

#ifdef BENCH_CUDA_HAVE_CUBLAS
static bool blas_failed(cublasStatus_t s, const char *call) {
    if (s == CUBLAS_STATUS_SUCCESS)
        return false;
    fprintf(stderr, "bench: %s: %s: %s\n", call, cublasGetStatusName(s), cublasGetStatusString(s));
    return true;
}

/* c = a b, row-major: cuBLAS is column-major, so it computes c^T = b^T a^T
 * (square matrices: the same leading dimensions). f16 accumulates in f32,
 * as rill_op_matmul_f16 and torch.mm on halves do. */
static int gemm(cuda_state *st, bool f16) {
    int n = (int)st->mm_n;
    const float alpha = 1.0f, beta = 0.0f;
    if (!f16)
        return blas_failed(cublasSgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha,
                                       st->mm_b, n, st->mm_a, n, &beta, st->mm_c, n),
                           "cublasSgemm")
                   ? -1
                   : 0;
    return blas_failed(cublasGemmEx(st->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, st->mm_b,
                                    CUDA_R_16F, n, st->mm_a, CUDA_R_16F, n, &beta, st->mm_c,
                                    CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx")
               ? -1
               : 0;
}

static int sample_matmul(cuda_state *st, bool f16, double *tflops) {
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < st->cfg->mm_runs; r++)
        if (gemm(st, f16) != 0)
            return -1;
    if (sync_failed(st->s1))
        return -1;
    double flop = 2.0 * (double)st->mm_n * (double)st->mm_n * (double)st->mm_n * st->cfg->mm_runs;
    *tflops = flop / (double)(bench_now_ns() - t0) / 1e3;
    return 0;
}
#endif

/* ---- the side's three functions ---- */

static int cuda_sample(void *state, cb_op op, double *value) {
    cuda_state *st = state;
    switch (op) {
    case CB_LAUNCH:
        return sample_launch(st, value);
    case CB_LAUNCH_SYNC:
        return sample_launch_sync(st, value);
    case CB_EVENT_HOP:
        return sample_event_hop(st, value);
    case CB_GRAPH_CHAIN:
    case CB_GRAPH_FAN:
        return sample_graph(st, value);
    case CB_ALLOC_PAIR:
        return sample_alloc_pair(st, value);
    case CB_HOST_FUNC:
        return sample_host_func(st, value);
    case CB_TWO_STREAMS:
        return sample_two_streams(st, value);
    case CB_IDLE_LAUNCH:
        return sample_idle_launch(st, value);
    case CB_MATMUL_F32:
    case CB_MATMUL_F16:
#ifdef BENCH_CUDA_HAVE_CUBLAS
        return sample_matmul(st, op == CB_MATMUL_F16, value);
#else
        break;
#endif
    case CB_NUM_OPS:
        break;
    }
    fprintf(stderr, "bench: the CUDA runtime side cannot measure op %d\n", (int)op);
    return -1;
}

static int cuda_prepare(void *state, cb_op op, char *note, size_t note_size) {
    cuda_state *st = state;
    int rc = 0;
    if (op == CB_GRAPH_CHAIN || op == CB_GRAPH_FAN)
        rc = build_graph(st, op == CB_GRAPH_FAN);
    else if (op == CB_ALLOC_PAIR)
        rc = keep_pool_memory(st, true);
    else if (op == CB_MATMUL_F32 || op == CB_MATMUL_F16)
        rc = prepare_matmul(st, op, note, note_size);
    if (rc != 0 || op == CB_IDLE_LAUNCH)
        return rc;
    double ignored;
    return cuda_sample(st, op, &ignored);
}

static void cuda_release(void *state, cb_op op) {
    cuda_state *st = state;
    (void)op;
    if (st->exec != NULL)
        cuda_failed(cudaGraphExecDestroy(st->exec), "cudaGraphExecDestroy");
    st->exec = NULL;
    if (op == CB_ALLOC_PAIR)
        keep_pool_memory(st, false);
    void **bufs[] = {&st->mm_a, &st->mm_b, &st->mm_c};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (*bufs[i] != NULL)
            cuda_failed(cudaFree(*bufs[i]), "cudaFree");
        *bufs[i] = NULL;
    }
}

/* ---- open and close ---- */

bool cuda_side_has_device(char *why, size_t why_size) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        snprintf(why, why_size, "%s from cudaGetDeviceCount: %s", cudaGetErrorName(e),
                 cudaGetErrorString(e));
        return false;
    }
    if (count == 0) {
        snprintf(why, why_size, "cudaGetDeviceCount: 0 devices");
        return false;
    }
    return true;
}

int cuda_side_open(cb_side *side, const cb_config *cfg, char *name, size_t name_size, int *mps,
                   char *platform, size_t platform_size) {
    cuda_state *st = calloc(1, sizeof(*st));
    *side = (cb_side){.name = "CUDA runtime",
                      .state = st,
                      .prepare = cuda_prepare,
                      .sample = cuda_sample,
                      .release = cuda_release};
    if (st == NULL) {
        fprintf(stderr, "bench: out of memory\n");
        return -1;
    }
    st->cfg = cfg;
    atomic_init(&st->host_calls, 0);
    struct cudaDeviceProp prop;
    int runtime = 0, driver = 0;
    /* cudaFree(NULL) makes the primary context, so that no sample pays for it. */
    if (cuda_failed(cudaSetDevice(0), "cudaSetDevice") || cuda_failed(cudaFree(NULL), "cudaFree") ||
        cuda_failed(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties") ||
        cuda_failed(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion") ||
        cuda_failed(cudaDriverGetVersion(&driver), "cudaDriverGetVersion") ||
        cuda_failed(cudaDeviceGetDefaultMemPool(&st->pool, 0), "cudaDeviceGetDefaultMemPool") ||
        cuda_failed(cudaStreamCreateWithFlags(&st->s1, cudaStreamNonBlocking),
                    "cudaStreamCreateWithFlags") ||
        cuda_failed(cudaStreamCreateWithFlags(&st->s2, cudaStreamNonBlocking),
                    "cudaStreamCreateWithFlags") ||
        cuda_failed(cudaEventCreateWithFlags(&st->e1, cudaEventDisableTiming),
                    "cudaEventCreateWithFlags") ||
        cuda_failed(cudaEventCreateWithFlags(&st->e2, cudaEventDisableTiming),
                    "cudaEventCreateWithFlags"))
        return -1;
    snprintf(name, name_size, "%s", prop.name);
    *mps = prop.multiProcessorCount;
    char blas[64] = "no cuBLAS at build time";
#ifdef BENCH_CUDA_HAVE_CUBLAS
    int blas_version = 0;
    if (blas_failed(cublasCreate(&st->blas), "cublasCreate") ||
        blas_failed(cublasSetStream(st->blas, st->s1), "cublasSetStream") ||
        blas_failed(cublasGetVersion(st->blas, &blas_version), "cublasGetVersion"))
        return -1;
    snprintf(blas, sizeof blas, "cuBLAS %d.%d.%d", blas_version / 10000, blas_version / 100 % 100,
             blas_version % 100);
#endif
    snprintf(platform, platform_size, "CUDA runtime %d.%d, driver %d.%d, %s, compute %d.%d",
             runtime / 1000, runtime % 1000 / 10, driver / 1000, driver % 1000 / 10, blas,
             prop.major, prop.minor);
    return 0;
}

int cuda_side_close(cb_side *side) {
    cuda_state *st = side->state;
    if (st == NULL)
        return 0;
    int rc = 0;
#ifdef BENCH_CUDA_HAVE_CUBLAS
    if (st->blas != NULL && blas_failed(cublasDestroy(st->blas), "cublasDestroy"))
        rc = -1;
#endif
    cudaEvent_t events[] = {st->e1, st->e2};
    for (int i = 0; i < 2; i++)
        if (events[i] != NULL && cuda_failed(cudaEventDestroy(events[i]), "cudaEventDestroy"))
            rc = -1;
    cudaStream_t streams[] = {st->s1, st->s2};
    for (int i = 0; i < 2; i++)
        if (streams[i] != NULL && cuda_failed(cudaStreamDestroy(streams[i]), "cudaStreamDestroy"))
            rc = -1;
    free(st);
    side->state = NULL;
    return rc;
}
