/* SPDX-License-Identifier: MIT */
/* Stand-ins for cuBLAS and cuDNN, in the stand-in driver's library, so that
 * the ops rill runs through them work where there is no GPU: point
 * RILL_CUBLAS_LIBRARY and RILL_CUDNN_LIBRARY at this library too. They
 * offer the entry points rill resolves (src/backend/cuda/cuda_libs.c) with
 * the libraries' semantics: cublasSgemm and cublasGemmEx compute
 * column-major C = alpha op(A) op(B) + beta C, cublasSgemmStridedBatched
 * that for each of a batch of strided matrices, cudnnConvolutionForward an
 * NCHW cross-correlation (or convolution) with padding, strides,
 * dilation and groups, cudnnConvolutionBackwardData and cudnnConvolutionBackwardFilter
 * its gradients for the input and the filter, each queued on the handle's
 * stream. */
#include <cublas_v2.h>
#ifdef RILL_HAVE_CUDNN
#include <cudnn.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/half.h"
#include "backend/cpu/sgemm.h"
#include "fake_cuda.h"

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------- cuBLAS */

struct cublasContext {
    CUstream stream;
};

EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
    *handle = calloc(1, sizeof **handle);
    return *handle != NULL ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
    handle->stream = (CUstream)stream;
    return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *ws, size_t bytes) {
    (void)handle, (void)ws, (void)bytes;
    return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    (void)handle;
    return mode == CUBLAS_DEFAULT_MATH ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

EXPORT cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
    (void)handle;
    return mode == CUBLAS_POINTER_MODE_HOST ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

EXPORT const char *cublasGetStatusName(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS:
        return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
        return "CUBLAS_STATUS_INTERNAL_ERROR";
    }
}

/* One GEMM, its operands as element pointers of either type. */
typedef struct gemm {
    bool half; /* A, B and C hold halves; else floats */
    bool ta, tb;
    int m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const void *a, *b;
    void *c;
} gemm;

/* c = alpha op(a) op(b) + beta c on floats, column-major. */
static void gemm_f32(const gemm *g, const float *a, const float *b, float *c) {
    if (!g->ta && !g->tb && g->alpha == 1.0f) {
        /* Column-major c = a b is row-major c^T = b^T a^T: the CPU ops' own
         * product, which keeps large products quick in sanitized builds. */
        rill__cpu_sgemm((size_t)g->n, (size_t)g->m, (size_t)g->k, b, (size_t)g->ldb, a,
                        (size_t)g->lda, g->beta, c, (size_t)g->ldc);
        return;
    }
    for (int j = 0; j < g->n; j++) {
        float *cj = c + (size_t)j * g->ldc;
        for (int i = 0; i < g->m; i++)
            cj[i] = g->beta != 0.0f ? g->beta * cj[i] : 0.0f;
        for (int l = 0; l < g->k; l++) {
            float blj = g->alpha * (g->tb ? b[(size_t)l * g->ldb + j] : b[(size_t)j * g->ldb + l]);
            if (!g->ta) {
                const float *al = a + (size_t)l * g->lda;
                for (int i = 0; i < g->m; i++)
                    cj[i] += al[i] * blj;
            } else {
                for (int i = 0; i < g->m; i++)
                    cj[i] += a[(size_t)i * g->lda + l] * blj;
            }
        }
    }
}

/* The floats of a column-major matrix of halves, cols columns ld apart
 * (NULL when out of memory). */
static float *widen(const void *p, size_t ld, size_t cols) {
    float *f = malloc((ld * cols > 0 ? ld * cols : 1) * sizeof *f);
    if (f != NULL)
        rill__half_to_float_n(f, p, ld * cols);
    return f;
}

static void run_gemm(void *arg) {
    gemm *g = arg;
    if (!g->half) {
        gemm_f32(g, g->a, g->b, g->c);
    } else {
        float *a = widen(g->a, (size_t)g->lda, (size_t)(g->ta ? g->m : g->k));
        float *b = widen(g->b, (size_t)g->ldb, (size_t)(g->tb ? g->k : g->n));
        float *c = widen(g->c, (size_t)g->ldc, (size_t)g->n);
        if (a == NULL || b == NULL || c == NULL)
            abort(); /* a stand-in GPU has no way to fail a kernel later */
        gemm_f32(g, a, b, c);
        rill__half_from_float_n(g->c, c, (size_t)g->ldc * (size_t)g->n);
        free(a), free(b), free(c);
    }
    free(g);
}

static bool transposed(cublasOperation_t op, bool *t) {
    *t = op != CUBLAS_OP_N;
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

static cublasStatus_t queue_gemm(cublasHandle_t h, gemm g, cublasOperation_t ta,
                                 cublasOperation_t tb) {
    if (!transposed(ta, &g.ta) || !transposed(tb, &g.tb) || g.m < 0 || g.n < 0 || g.k < 0 ||
        g.ldc < (g.m > 1 ? g.m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (g.m == 0 || g.n == 0)
        return CUBLAS_STATUS_SUCCESS;
    gemm *copy = malloc(sizeof *copy);
    if (copy == NULL)
        return CUBLAS_STATUS_ALLOC_FAILED;
    *copy = g;
    if (fake_stream_call(h->stream, run_gemm, copy) != CUDA_SUCCESS) {
        free(copy);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                     int m, int n, int k, const float *alpha, const float *a,
                                     int lda, const float *b, int ldb, const float *beta, float *c,
                                     int ldc) {
    gemm g = {.m = m,
              .n = n,
              .k = k,
              .lda = lda,
              .ldb = ldb,
              .ldc = ldc,
              .alpha = *alpha,
              .beta = *beta,
              .a = a,
              .b = b,
              .c = c};
    return queue_gemm(h, g, ta, tb);
}

/* One queued GEMM per product, in order on the handle's stream. */
EXPORT cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                                cublasOperation_t tb, int m, int n, int k,
                                                const float *alpha, const float *a, int lda,
                                                long long stride_a, const float *b, int ldb,
                                                long long stride_b, const float *beta, float *c,
                                                int ldc, long long stride_c, int count) {
    if (count < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < count; i++) {
        gemm g = {.m = m,
                  .n = n,
                  .k = k,
                  .lda = lda,
                  .ldb = ldb,
                  .ldc = ldc,
                  .alpha = *alpha,
                  .beta = *beta,
                  .a = a + i * stride_a,
                  .b = b + i * stride_b,
                  .c = c + i * stride_c};
        cublasStatus_t st = queue_gemm(h, g, ta, tb);
        if (st != CUBLAS_STATUS_SUCCESS)
            return st;
    }
    return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                   int m, int n, int k, const void *alpha, const void *a,
                                   cudaDataType at, int lda, const void *b, cudaDataType bt,
                                   int ldb, const void *beta, void *c, cudaDataType ct, int ldc,
                                   cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    (void)algo;
    bool half = at == CUDA_R_16F;
    if (at != bt || at != ct || (at != CUDA_R_16F && at != CUDA_R_32F) ||
        compute != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    gemm g = {.half = half,
              .m = m,
              .n = n,
              .k = k,
              .lda = lda,
              .ldb = ldb,
              .ldc = ldc,
              .alpha = *(const float *)alpha,
              .beta = *(const float *)beta,
              .a = a,
              .b = b,
              .c = c};
    return queue_gemm(h, g, ta, tb);
}

/* Where rill was built with cudnn.h (cmake/cuda.cmake). */
#ifdef RILL_HAVE_CUDNN
/* -------------------------------------------------------------- cuDNN */

struct cudnnContext {
    CUstream stream;
};
struct cudnnTensorStruct {
    int n, c, h, w;
};
struct cudnnFilterStruct {
    int k, c, r, s;
};
struct cudnnConvolutionStruct {
    int pad_h, pad_w, u, v, dil_h, dil_w;
    bool flip;  /* CUDNN_CONVOLUTION: the filter is flipped */
    int groups; /* cudnnSetConvolutionGroupCount's; 1 after a 2-D set */
};

EXPORT cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
    *handle = calloc(1, sizeof **handle);
    return *handle != NULL ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}

EXPORT cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
    free(handle);
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
    handle->stream = (CUstream)stream;
    return CUDNN_STATUS_SUCCESS;
}

EXPORT const char *cudnnGetErrorString(cudnnStatus_t status) {
    switch (status) {
    case CUDNN_STATUS_SUCCESS:
        return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_ALLOC_FAILED:
        return "CUDNN_STATUS_ALLOC_FAILED";
    case CUDNN_STATUS_BAD_PARAM:
        return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED:
        return "CUDNN_STATUS_NOT_SUPPORTED";
    default:
        return "CUDNN_STATUS_INTERNAL_ERROR";
    }
}

#define DESCRIPTOR(kind, type)                                                                     \
    EXPORT cudnnStatus_t cudnnCreate##kind##Descriptor(type *out) {                                \
        *out = calloc(1, sizeof **out);                                                            \
        return *out != NULL ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;                    \
    }                                                                                              \
    EXPORT cudnnStatus_t cudnnDestroy##kind##Descriptor(type d) {                                  \
        free(d);                                                                                   \
        return CUDNN_STATUS_SUCCESS;                                                               \
    }
DESCRIPTOR(Tensor, cudnnTensorDescriptor_t)
DESCRIPTOR(Filter, cudnnFilterDescriptor_t)
DESCRIPTOR(Convolution, cudnnConvolutionDescriptor_t)

EXPORT cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d,
                                                cudnnTensorFormat_t format, cudnnDataType_t type,
                                                int n, int c, int h, int w) {
    if (format != CUDNN_TENSOR_NCHW || type != CUDNN_DATA_FLOAT)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
        return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnTensorStruct){n, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                                cudnnTensorFormat_t format, int k, int c, int r,
                                                int s) {
    if (format != CUDNN_TENSOR_NCHW || type != CUDNN_DATA_FLOAT)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (k <= 0 || c <= 0 || r <= 0 || s <= 0)
        return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnFilterStruct){k, c, r, s};
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h,
                                                     int pad_w, int u, int v, int dil_h, int dil_w,
                                                     cudnnConvolutionMode_t mode,
                                                     cudnnDataType_t compute) {
    if (compute != CUDNN_DATA_FLOAT)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dil_h <= 0 || dil_w <= 0)
        return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnConvolutionStruct){
        pad_h, pad_w, u, v, dil_h, dil_w, mode == CUDNN_CONVOLUTION, 1};
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups) {
    if (groups <= 0)
        return CUDNN_STATUS_BAD_PARAM;
    d->groups = groups;
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d,
                                                 cudnnMathType_t math) {
    (void)d;
    return math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH ? CUDNN_STATUS_SUCCESS
                                                                : CUDNN_STATUS_NOT_SUPPORTED;
}

/* The output's size along one dimension, as cuDNN computes it. */
static int out_size(int in, int pad, int filter, int dilation, int stride) {
    return (in + 2 * pad - ((filter - 1) * dilation + 1)) / stride + 1;
}

static bool shapes_fit(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                       cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y) {
    return x->c == w->c * conv->groups && w->k % conv->groups == 0 && y->n == x->n &&
           y->c == w->k && y->h == out_size(x->h, conv->pad_h, w->r, conv->dil_h, conv->u) &&
           y->w == out_size(x->w, conv->pad_w, w->s, conv->dil_w, conv->v) && y->h > 0 && y->w > 0;
}

EXPORT cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y, const int requested,
    int *returned, cudnnConvolutionFwdAlgoPerf_t *perf) {
    (void)handle;
    if (!shapes_fit(x, w, conv, y) || requested < 1)
        return CUDNN_STATUS_BAD_PARAM;
    memset(perf, 0, sizeof *perf);
    perf->algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    perf->status = CUDNN_STATUS_SUCCESS;
    perf->mathType = CUDNN_FMA_MATH;
    *returned = 1;
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y,
    cudnnConvolutionFwdAlgo_t algo, size_t *bytes) {
    (void)handle, (void)algo;
    if (!shapes_fit(x, w, conv, y))
        return CUDNN_STATUS_BAD_PARAM;
    *bytes = 0;
    return CUDNN_STATUS_SUCCESS;
}

typedef struct conv_call {
    struct cudnnTensorStruct x, y;
    struct cudnnFilterStruct w;
    struct cudnnConvolutionStruct conv;
    float alpha, beta;
    const float *in, *weight;
    float *out;
} conv_call;

static void run_conv(void *arg) {
    conv_call *p = arg;
    const struct cudnnTensorStruct *x = &p->x, *y = &p->y;
    const struct cudnnFilterStruct *w = &p->w;
    for (int n = 0; n < y->n; n++)
        for (int k = 0; k < y->c; k++)
            for (int oy = 0; oy < y->h; oy++)
                for (int ox = 0; ox < y->w; ox++) {
                    float acc = 0.0f;
                    int c0 = k / (w->k / p->conv.groups) * w->c; /* k's group's first channel */
                    for (int c = 0; c < w->c; c++)
                        for (int r = 0; r < w->r; r++)
                            for (int s = 0; s < w->s; s++) {
                                int iy = oy * p->conv.u - p->conv.pad_h + r * p->conv.dil_h;
                                int ix = ox * p->conv.v - p->conv.pad_w + s * p->conv.dil_w;
                                if (iy < 0 || iy >= x->h || ix < 0 || ix >= x->w)
                                    continue;
                                int fr = p->conv.flip ? w->r - 1 - r : r;
                                int fs = p->conv.flip ? w->s - 1 - s : s;
                                acc +=
                                    p->in[((size_t)(n * x->c + c0 + c) * x->h + iy) * x->w + ix] *
                                    p->weight[((size_t)(k * w->c + c) * w->r + fr) * w->s + fs];
                            }
                    float *o = &p->out[((size_t)(n * y->c + k) * y->h + oy) * y->w + ox];
                    *o = p->alpha * acc + (p->beta != 0.0f ? p->beta * *o : 0.0f);
                }
    free(p);
}

EXPORT cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t x, const void *in,
                                             const cudnnFilterDescriptor_t w, const void *weight,
                                             const cudnnConvolutionDescriptor_t conv,
                                             cudnnConvolutionFwdAlgo_t algo, void *ws,
                                             size_t ws_bytes, const void *beta,
                                             const cudnnTensorDescriptor_t y, void *out) {
    (void)algo, (void)ws, (void)ws_bytes;
    if (!shapes_fit(x, w, conv, y))
        return CUDNN_STATUS_BAD_PARAM;
    conv_call *p = malloc(sizeof *p);
    if (p == NULL)
        return CUDNN_STATUS_ALLOC_FAILED;
    *p = (conv_call){*x, *y,     *w, *conv, *(const float *)alpha, *(const float *)beta,
                     in, weight, out};
    if (fake_stream_call(handle->stream, run_conv, p) != CUDA_SUCCESS) {
        free(p);
        return CUDNN_STATUS_EXECUTION_FAILED;
    }
    return CUDNN_STATUS_SUCCESS;
}

/* The backward calls: one walk over every (input, filter, output) triple
 * of the forward, adding grad_out times the filter into grad_in or times
 * the input into grad_weight, after alpha/beta scaled the output. */
typedef struct conv_backward_call {
    struct cudnnTensorStruct x, y;
    struct cudnnFilterStruct w;
    struct cudnnConvolutionStruct conv;
    float alpha, beta;
    const float *in, *weight, *dy; /* in for the filter, weight for the data */
    float *dx, *dw;                /* the one written; the other NULL */
} conv_backward_call;

static void run_conv_backward(void *arg) {
    conv_backward_call *p = arg;
    const struct cudnnTensorStruct *x = &p->x, *y = &p->y;
    const struct cudnnFilterStruct *w = &p->w;
    float *out = p->dx != NULL ? p->dx : p->dw;
    size_t count =
        p->dx != NULL ? (size_t)x->n * x->c * x->h * x->w : (size_t)w->k * w->c * w->r * w->s;
    float *acc = calloc(count, sizeof *acc);
    if (acc == NULL)
        abort();
    for (int n = 0; n < y->n; n++)
        for (int k = 0; k < y->c; k++)
            for (int oy = 0; oy < y->h; oy++)
                for (int ox = 0; ox < y->w; ox++) {
                    float g = p->dy[((size_t)(n * y->c + k) * y->h + oy) * y->w + ox];
                    int c0 = k / (w->k / p->conv.groups) * w->c; /* k's group's first channel */
                    for (int c = 0; c < w->c; c++)
                        for (int r = 0; r < w->r; r++)
                            for (int s = 0; s < w->s; s++) {
                                int iy = oy * p->conv.u - p->conv.pad_h + r * p->conv.dil_h;
                                int ix = ox * p->conv.v - p->conv.pad_w + s * p->conv.dil_w;
                                if (iy < 0 || iy >= x->h || ix < 0 || ix >= x->w)
                                    continue;
                                int fr = p->conv.flip ? w->r - 1 - r : r;
                                int fs = p->conv.flip ? w->s - 1 - s : s;
                                size_t xi = ((size_t)(n * x->c + c0 + c) * x->h + iy) * x->w + ix;
                                size_t wi = ((size_t)(k * w->c + c) * w->r + fr) * w->s + fs;
                                if (p->dx != NULL)
                                    acc[xi] += g * p->weight[wi];
                                else
                                    acc[wi] += g * p->in[xi];
                            }
                }
    for (size_t i = 0; i < count; i++)
        out[i] = p->alpha * acc[i] + (p->beta != 0.0f ? p->beta * out[i] : 0.0f);
    free(acc);
    free(p);
}

static cudnnStatus_t queue_backward(cudnnHandle_t handle, conv_backward_call call) {
    conv_backward_call *p = malloc(sizeof *p);
    if (p == NULL)
        return CUDNN_STATUS_ALLOC_FAILED;
    *p = call;
    if (fake_stream_call(handle->stream, run_conv_backward, p) != CUDA_SUCCESS) {
        free(p);
        return CUDNN_STATUS_EXECUTION_FAILED;
    }
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx, const int requested,
    int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf) {
    (void)handle;
    if (!shapes_fit(dx, w, conv, dy) || requested < 1)
        return CUDNN_STATUS_BAD_PARAM;
    memset(perf, 0, sizeof *perf);
    perf->algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    perf->status = CUDNN_STATUS_SUCCESS;
    perf->determinism = CUDNN_DETERMINISTIC;
    perf->mathType = CUDNN_FMA_MATH;
    *returned = 1;
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx,
    cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes) {
    (void)handle, (void)algo;
    if (!shapes_fit(dx, w, conv, dy))
        return CUDNN_STATUS_BAD_PARAM;
    *bytes = 0;
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnConvolutionBackwardData(
    cudnnHandle_t handle, const void *alpha, const cudnnFilterDescriptor_t w, const void *weight,
    const cudnnTensorDescriptor_t dy, const void *grad_out, const cudnnConvolutionDescriptor_t conv,
    cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t ws_bytes, const void *beta,
    const cudnnTensorDescriptor_t dx, void *grad_in) {
    (void)algo, (void)ws, (void)ws_bytes;
    if (!shapes_fit(dx, w, conv, dy))
        return CUDNN_STATUS_BAD_PARAM;
    return queue_backward(handle, (conv_backward_call){*dx, *dy, *w, *conv, *(const float *)alpha,
                                                       *(const float *)beta, NULL, weight, grad_out,
                                                       grad_in, NULL});
}

EXPORT cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw, const int requested,
    int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
    (void)handle;
    if (!shapes_fit(x, dw, conv, dy) || requested < 1)
        return CUDNN_STATUS_BAD_PARAM;
    memset(perf, 0, sizeof *perf);
    perf->algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
    perf->status = CUDNN_STATUS_SUCCESS;
    perf->determinism = CUDNN_DETERMINISTIC;
    perf->mathType = CUDNN_FMA_MATH;
    *returned = 1;
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes) {
    (void)handle, (void)algo;
    if (!shapes_fit(x, dw, conv, dy))
        return CUDNN_STATUS_BAD_PARAM;
    *bytes = 0;
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnConvolutionBackwardFilter(
    cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t x, const void *in,
    const cudnnTensorDescriptor_t dy, const void *grad_out, const cudnnConvolutionDescriptor_t conv,
    cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t ws_bytes, const void *beta,
    const cudnnFilterDescriptor_t dw, void *grad_weight) {
    (void)algo, (void)ws, (void)ws_bytes;
    if (!shapes_fit(x, dw, conv, dy))
        return CUDNN_STATUS_BAD_PARAM;
    return queue_backward(handle, (conv_backward_call){*x, *dy, *dw, *conv, *(const float *)alpha,
                                                       *(const float *)beta, in, NULL, grad_out,
                                                       NULL, grad_weight});
}
#endif
