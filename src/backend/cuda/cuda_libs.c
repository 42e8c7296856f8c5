/* SPDX-License-Identifier: MIT */
/* cuBLAS and cuDNN, loaded with dlopen, and the built-in ops that run
 * through them. Layer: CUDA backend. The toolkit's headers give the types
 * and the entry points' signatures only (__typeof__ names a function
 * without referring to its symbol), so the library links neither. Each
 * library is loaded at most once per rill__cuda_libs, under its lock; its
 * table of entry points is immutable from then on. Invariants: every
 * handle of the pool was created with the device's context current, and a
 * handle is either on an idle list (guarded by the lock) or held by
 * exactly one call. See cuda_libs.h for the threading and capture rules. */
#include "backend/cuda/cuda_libs.h"

#include <cublas_v2.h>
#ifdef RILL_HAVE_CUDNN
#include <cudnn.h>
#endif
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

/* ---- sentences ---- */

/* Writes the sentence into why, cut to why_size bytes (nothing when
 * why_size is 0). */
static void say(char *why, size_t why_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t why_size, const char *fmt, ...) {
    if (why == NULL || why_size == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
}

/* ---- entry points ---- */

struct rill__cuda_blas {
    const char *file; /* the name it was loaded from (borrowed from the list) */
    __typeof__(&cublasCreate_v2) create;
    __typeof__(&cublasDestroy_v2) destroy;
    __typeof__(&cublasSetStream_v2) set_stream;
    __typeof__(&cublasSetWorkspace_v2) set_workspace;
    __typeof__(&cublasSetMathMode) set_math_mode;
    __typeof__(&cublasSetPointerMode_v2) set_pointer_mode;
    __typeof__(&cublasSgemm_v2) sgemm;
    __typeof__(&cublasSgemmStridedBatched) sgemm_strided_batched;
    __typeof__(&cublasGemmEx) gemm_ex;
    __typeof__(&cublasGetStatusName) status_name;
};

#ifdef RILL_HAVE_CUDNN
struct rill__cuda_dnn {
    const char *file;
    __typeof__(&cudnnCreate) create;
    __typeof__(&cudnnDestroy) destroy;
    __typeof__(&cudnnSetStream) set_stream;
    __typeof__(&cudnnGetErrorString) error_string;
    __typeof__(&cudnnCreateTensorDescriptor) create_tensor;
    __typeof__(&cudnnDestroyTensorDescriptor) destroy_tensor;
    __typeof__(&cudnnSetTensor4dDescriptor) set_tensor;
    __typeof__(&cudnnCreateFilterDescriptor) create_filter;
    __typeof__(&cudnnDestroyFilterDescriptor) destroy_filter;
    __typeof__(&cudnnSetFilter4dDescriptor) set_filter;
    __typeof__(&cudnnCreateConvolutionDescriptor) create_conv;
    __typeof__(&cudnnDestroyConvolutionDescriptor) destroy_conv;
    __typeof__(&cudnnSetConvolution2dDescriptor) set_conv;
    __typeof__(&cudnnSetConvolutionMathType) set_conv_math;
    __typeof__(&cudnnSetConvolutionGroupCount) set_conv_groups;
    __typeof__(&cudnnGetConvolutionForwardAlgorithm_v7) forward_algorithms;
    __typeof__(&cudnnGetConvolutionForwardWorkspaceSize) forward_workspace;
    __typeof__(&cudnnConvolutionForward) forward;
    __typeof__(&cudnnGetConvolutionBackwardDataAlgorithm_v7) data_algorithms;
    __typeof__(&cudnnGetConvolutionBackwardDataWorkspaceSize) data_workspace;
    __typeof__(&cudnnConvolutionBackwardData) backward_data;
    __typeof__(&cudnnGetConvolutionBackwardFilterAlgorithm_v7) filter_algorithms;
    __typeof__(&cudnnGetConvolutionBackwardFilterWorkspaceSize) filter_workspace;
    __typeof__(&cudnnConvolutionBackwardFilter) backward_filter;
};
#endif

/* One entry point to resolve: its exported name and where it goes. */
typedef struct symbol {
    const char *name;
    void **slot;
} symbol;

/* Opens the first of names that loads into *so (and *file); else says why
 * (naming `what`, the library, and `needed_by`, the ops that need it). */
static bool open_first(const char *const *names, const char *what, const char *needed_by, void **so,
                       const char **file, char *why, size_t why_size) {
    char tried[160] = "";
    const char *error = "no file names to try";
    for (size_t i = 0; names[i] != NULL; i++) {
        *so = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (*so != NULL) {
            *file = names[i];
            return true;
        }
        const char *e = dlerror();
        error = e != NULL ? e : "dlopen failed";
        size_t used = strlen(tried);
        snprintf(tried + used, sizeof tried - used, "%s%s", i == 0 ? "" : " or ", names[i]);
    }
    say(why, why_size,
        "%s is not available: %s could not be loaded (%s); CUDA devices run %s through %s: "
        "install it where the dynamic loader finds it (LD_LIBRARY_PATH or ldconfig)",
        what, tried, error, needed_by, what);
    return false;
}

/* Resolves every symbol of syms from so; else says which is missing. */
static bool resolve(void *so, const char *file, const symbol *syms, size_t count, const char *what,
                    char *why, size_t why_size) {
    for (size_t i = 0; i < count; i++) {
        void *p = dlsym(so, syms[i].name);
        if (p == NULL) {
            say(why, why_size,
                "%s is not usable: %s has no %s; install a newer %s (cuBLAS 12 or later, "
                "cuDNN 9)",
                what, file, syms[i].name, what);
            return false;
        }
        *syms[i].slot = p;
    }
    return true;
}

/* A function pointer's slot as dlsym fills it: POSIX requires that a
 * dlsym result converts to a function pointer, which these slots hold. */
#define SLOT(field) ((void **)(void *)&(field))

static struct rill__cuda_blas *load_blas(const char *const *names, char *why, size_t why_size) {
    void *so;
    const char *file;
    if (!open_first(names, "cuBLAS", "matmul", &so, &file, why, why_size))
        return NULL;
    struct rill__cuda_blas *t = rill__calloc(1, sizeof *t);
    if (t == NULL) {
        say(why, why_size, "cuBLAS is not available: out of host memory for its entry points");
        return NULL;
    }
    t->file = file;
    const symbol syms[] = {
        {"cublasCreate_v2", SLOT(t->create)},
        {"cublasDestroy_v2", SLOT(t->destroy)},
        {"cublasSetStream_v2", SLOT(t->set_stream)},
        {"cublasSetWorkspace_v2", SLOT(t->set_workspace)},
        {"cublasSetMathMode", SLOT(t->set_math_mode)},
        {"cublasSetPointerMode_v2", SLOT(t->set_pointer_mode)},
        {"cublasSgemm_v2", SLOT(t->sgemm)},
        {"cublasSgemmStridedBatched", SLOT(t->sgemm_strided_batched)},
        {"cublasGemmEx", SLOT(t->gemm_ex)},
        {"cublasGetStatusName", SLOT(t->status_name)},
    };
    if (!resolve(so, file, syms, sizeof syms / sizeof syms[0], "cuBLAS", why, why_size)) {
        rill__free(t);
        return NULL;
    }
    return t;
}

#ifdef RILL_HAVE_CUDNN
static struct rill__cuda_dnn *load_dnn(const char *const *names, char *why, size_t why_size) {
    void *so;
    const char *file;
    if (!open_first(names, "cuDNN", "conv2d_f32 and conv2d's backward", &so, &file, why, why_size))
        return NULL;
    struct rill__cuda_dnn *t = rill__calloc(1, sizeof *t);
    if (t == NULL) {
        say(why, why_size, "cuDNN is not available: out of host memory for its entry points");
        return NULL;
    }
    t->file = file;
    const symbol syms[] = {
        {"cudnnCreate", SLOT(t->create)},
        {"cudnnDestroy", SLOT(t->destroy)},
        {"cudnnSetStream", SLOT(t->set_stream)},
        {"cudnnGetErrorString", SLOT(t->error_string)},
        {"cudnnCreateTensorDescriptor", SLOT(t->create_tensor)},
        {"cudnnDestroyTensorDescriptor", SLOT(t->destroy_tensor)},
        {"cudnnSetTensor4dDescriptor", SLOT(t->set_tensor)},
        {"cudnnCreateFilterDescriptor", SLOT(t->create_filter)},
        {"cudnnDestroyFilterDescriptor", SLOT(t->destroy_filter)},
        {"cudnnSetFilter4dDescriptor", SLOT(t->set_filter)},
        {"cudnnCreateConvolutionDescriptor", SLOT(t->create_conv)},
        {"cudnnDestroyConvolutionDescriptor", SLOT(t->destroy_conv)},
        {"cudnnSetConvolution2dDescriptor", SLOT(t->set_conv)},
        {"cudnnSetConvolutionMathType", SLOT(t->set_conv_math)},
        {"cudnnSetConvolutionGroupCount", SLOT(t->set_conv_groups)},
        {"cudnnGetConvolutionForwardAlgorithm_v7", SLOT(t->forward_algorithms)},
        {"cudnnGetConvolutionForwardWorkspaceSize", SLOT(t->forward_workspace)},
        {"cudnnConvolutionForward", SLOT(t->forward)},
        {"cudnnGetConvolutionBackwardDataAlgorithm_v7", SLOT(t->data_algorithms)},
        {"cudnnGetConvolutionBackwardDataWorkspaceSize", SLOT(t->data_workspace)},
        {"cudnnConvolutionBackwardData", SLOT(t->backward_data)},
        {"cudnnGetConvolutionBackwardFilterAlgorithm_v7", SLOT(t->filter_algorithms)},
        {"cudnnGetConvolutionBackwardFilterWorkspaceSize", SLOT(t->filter_workspace)},
        {"cudnnConvolutionBackwardFilter", SLOT(t->backward_filter)},
    };
    if (!resolve(so, file, syms, sizeof syms / sizeof syms[0], "cuDNN", why, why_size)) {
        rill__free(t);
        return NULL;
    }
    return t;
}
#endif

/* ---- init, fini, loading ---- */

static const char *const default_blas_names[] = {"libcublas.so.13", "libcublas.so.12", NULL};
static const char *const default_dnn_names[] = {"libcudnn.so.9", NULL};

void rill__cuda_libs_init_names(rill__cuda_libs *libs, const char *const *blas_names,
                                const char *const *dnn_names) {
    memset(libs, 0, sizeof *libs);
    libs->blas_names = blas_names;
    libs->dnn_names = dnn_names;
    rill__mutex_init(&libs->lock);
}

void rill__cuda_libs_init(rill__cuda_libs *libs) {
    rill__cuda_libs_init_names(libs, default_blas_names, default_dnn_names);
    const char *blas = getenv("RILL_CUBLAS_LIBRARY"), *dnn = getenv("RILL_CUDNN_LIBRARY");
    if (blas != NULL && blas[0] != '\0') {
        libs->blas_env[0] = blas;
        libs->blas_names = libs->blas_env;
    }
    if (dnn != NULL && dnn[0] != '\0') {
        libs->dnn_env[0] = dnn;
        libs->dnn_names = libs->dnn_env;
    }
}

typedef enum lib_kind { LIB_BLAS, LIB_DNN } lib_kind;

/* Loads the library of kind, the first time; true when it is there. */
static bool load_locked(rill__cuda_libs *libs, lib_kind kind, char *why, size_t why_size) {
    if (kind == LIB_BLAS) {
        if (!libs->blas_tried) {
            libs->blas_tried = true;
            libs->blas = load_blas(libs->blas_names, libs->blas_why, sizeof libs->blas_why);
        }
        if (libs->blas == NULL)
            say(why, why_size, "%s", libs->blas_why);
        return libs->blas != NULL;
    }
    if (!libs->dnn_tried) {
        libs->dnn_tried = true;
#ifdef RILL_HAVE_CUDNN
        libs->dnn = load_dnn(libs->dnn_names, libs->dnn_why, sizeof libs->dnn_why);
#else
        say(libs->dnn_why, sizeof libs->dnn_why,
            "this build of rill has no cuDNN, which conv2d_f32 and conv2d's backward need on a "
            "CUDA device (cudnn.h "
            "was not found when it was built): install cuDNN (or PyTorch's nvidia-cudnn "
            "package) and rebuild rill, or run the op on a CPU device's stream");
#endif
    }
    if (libs->dnn == NULL)
        say(why, why_size, "%s", libs->dnn_why);
    return libs->dnn != NULL;
}

static rill_status load(rill__cuda_libs *libs, lib_kind kind, char *why, size_t why_size) {
    rill__mutex_lock(&libs->lock);
    bool ok = load_locked(libs, kind, why, why_size);
    rill__mutex_unlock(&libs->lock);
    return ok ? RILL_OK : RILL_ERROR_NOT_SUPPORTED;
}

rill_status rill__cuda_libs_load_blas(rill__cuda_libs *libs, char *why, size_t why_size) {
    return load(libs, LIB_BLAS, why, why_size);
}

rill_status rill__cuda_libs_load_dnn(rill__cuda_libs *libs, char *why, size_t why_size) {
    return load(libs, LIB_DNN, why, why_size);
}

/* ---- the handle pool ---- */

/* A cuBLAS handle, or a cuDNN handle with the descriptors of a
 * convolution (set afresh by every call). */
struct rill__cuda_handle {
    struct rill__cuda_handle *next; /* guarded by libs->lock while idle */
    cublasHandle_t blas;
#ifdef RILL_HAVE_CUDNN
    cudnnHandle_t dnn;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
#endif
};

/* The status of a library failure: what the op's caller can act on. */
static rill_status blas_status(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_ALLOC_FAILED:
        return RILL_ERROR_OUT_OF_MEMORY;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return RILL_ERROR_NOT_SUPPORTED;
    default:
        return RILL_ERROR_KERNEL_FAILED;
    }
}

#ifdef RILL_HAVE_CUDNN
static rill_status dnn_status(cudnnStatus_t s) {
    if (s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
        s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        return RILL_ERROR_OUT_OF_MEMORY;
    if ((s >= CUDNN_STATUS_NOT_SUPPORTED && s < CUDNN_STATUS_INTERNAL_ERROR) ||
        s == CUDNN_STATUS_NOT_INITIALIZED || s == CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
        return RILL_ERROR_NOT_SUPPORTED;
    return RILL_ERROR_KERNEL_FAILED;
}
#endif

static rill_status blas_fail(const struct rill__cuda_blas *t, const char *call, cublasStatus_t s,
                             char *why, size_t why_size) {
    say(why, why_size, "%s: %s", call, t->status_name(s));
    return blas_status(s);
}

#ifdef RILL_HAVE_CUDNN
static rill_status dnn_fail(const struct rill__cuda_dnn *t, const char *call, cudnnStatus_t s,
                            char *why, size_t why_size) {
    say(why, why_size, "%s: %s", call, t->error_string(s));
    return dnn_status(s);
}
#endif

static void destroy_handle(const rill__cuda_libs *libs, struct rill__cuda_handle *h) {
    if (h->blas != NULL)
        libs->blas->destroy(h->blas);
#ifdef RILL_HAVE_CUDNN
    if (h->dnn != NULL) {
        const struct rill__cuda_dnn *t = libs->dnn;
        if (h->conv != NULL)
            t->destroy_conv(h->conv);
        if (h->w != NULL)
            t->destroy_filter(h->w);
        if (h->y != NULL)
            t->destroy_tensor(h->y);
        if (h->x != NULL)
            t->destroy_tensor(h->x);
        t->destroy(h->dnn);
    }
#endif
    rill__free(h);
}

/* A new handle of kind on the current context, with cuBLAS's settings
 * that never change: host scalars, no tensor-core rounding of floats. */
static rill_status create_handle(const rill__cuda_libs *libs, lib_kind kind,
                                 struct rill__cuda_handle **out, char *why, size_t why_size) {
    struct rill__cuda_handle *h = rill__calloc(1, sizeof *h);
    if (h == NULL) {
        say(why, why_size, "out of host memory for a %s handle",
            kind == LIB_BLAS ? "cuBLAS" : "cuDNN");
        return RILL_ERROR_OUT_OF_MEMORY;
    }
    rill_status st = RILL_OK;
    if (kind == LIB_BLAS) {
        const struct rill__cuda_blas *t = libs->blas;
        cublasStatus_t s = t->create(&h->blas);
        if (s != CUBLAS_STATUS_SUCCESS) {
            h->blas = NULL;
            st = blas_fail(t, "cublasCreate_v2", s, why, why_size);
        } else if ((s = t->set_pointer_mode(h->blas, CUBLAS_POINTER_MODE_HOST)) !=
                   CUBLAS_STATUS_SUCCESS) {
            st = blas_fail(t, "cublasSetPointerMode_v2", s, why, why_size);
        } else if ((s = t->set_math_mode(h->blas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS) {
            st = blas_fail(t, "cublasSetMathMode", s, why, why_size);
        }
    } else {
#ifdef RILL_HAVE_CUDNN
        const struct rill__cuda_dnn *t = libs->dnn;
        cudnnStatus_t s = t->create(&h->dnn);
        if (s != CUDNN_STATUS_SUCCESS) {
            h->dnn = NULL;
            st = dnn_fail(t, "cudnnCreate", s, why, why_size);
        } else if ((s = t->create_tensor(&h->x)) != CUDNN_STATUS_SUCCESS ||
                   (s = t->create_tensor(&h->y)) != CUDNN_STATUS_SUCCESS ||
                   (s = t->create_filter(&h->w)) != CUDNN_STATUS_SUCCESS ||
                   (s = t->create_conv(&h->conv)) != CUDNN_STATUS_SUCCESS) {
            st = dnn_fail(t, "cudnnCreate*Descriptor", s, why, why_size);
        }
#else
        st = RILL_ERROR_NOT_SUPPORTED; /* never: load_locked refuses first */
#endif
    }
    if (st != RILL_OK) {
        destroy_handle(libs, h);
        return st;
    }
    *out = h;
    return RILL_OK;
}

static struct rill__cuda_handle **idle_list(rill__cuda_libs *libs, lib_kind kind) {
    return kind == LIB_BLAS ? &libs->idle_blas : &libs->idle_dnn;
}

/* Loads the library of kind if needed and takes an idle handle of it, or
 * creates one (with the lock released: creation is slow). */
static rill_status take_handle(rill__cuda_libs *libs, lib_kind kind, struct rill__cuda_handle **out,
                               char *why, size_t why_size) {
    rill__mutex_lock(&libs->lock);
    if (!load_locked(libs, kind, why, why_size)) {
        rill__mutex_unlock(&libs->lock);
        return RILL_ERROR_NOT_SUPPORTED;
    }
    struct rill__cuda_handle **idle = idle_list(libs, kind);
    struct rill__cuda_handle *h = *idle;
    if (h != NULL)
        *idle = h->next;
    rill__mutex_unlock(&libs->lock);
    if (h != NULL) {
        *out = h;
        return RILL_OK;
    }
    return create_handle(libs, kind, out, why, why_size);
}

static void give_handle(rill__cuda_libs *libs, lib_kind kind, struct rill__cuda_handle *h) {
    rill__mutex_lock(&libs->lock);
    struct rill__cuda_handle **idle = idle_list(libs, kind);
    h->next = *idle;
    *idle = h;
    rill__mutex_unlock(&libs->lock);
}

void rill__cuda_libs_fini(rill__cuda_libs *libs) {
    lib_kind kinds[2] = {LIB_BLAS, LIB_DNN};
    for (int i = 0; i < 2; i++) {
        struct rill__cuda_handle **idle = idle_list(libs, kinds[i]);
        while (*idle != NULL) {
            struct rill__cuda_handle *h = *idle;
            *idle = h->next;
            destroy_handle(libs, h);
        }
    }
    rill__free(libs->blas);
    rill__free(libs->dnn);
    rill__mutex_destroy(&libs->lock);
    memset(libs, 0, sizeof *libs);
}

/* ---- matmul ---- */

/* Points h at stream with no workspace: cublasSetStream restores the
 * default workspace, which a handle shares between the streams it serves. */
static rill_status blas_bind(const struct rill__cuda_blas *t, cublasHandle_t h, CUstream stream,
                             char *why, size_t why_size) {
    cublasStatus_t s = t->set_stream(h, stream);
    if (s != CUBLAS_STATUS_SUCCESS)
        return blas_fail(t, "cublasSetStream_v2", s, why, why_size);
    if ((s = t->set_workspace(h, NULL, 0)) != CUBLAS_STATUS_SUCCESS)
        return blas_fail(t, "cublasSetWorkspace_v2", s, why, why_size);
    return RILL_OK;
}

/* Row-major c[m,n] = a[m,k] b[k,n] is column-major c^T = b^T a^T: the
 * operands swap (a transposed one, RILL_MATMUL_A_T or _B_T, is then
 * transposed by cuBLAS). Every dimension is at most
 * RILL__OP_MAX_DIM = INT_MAX (checked by the op layer), so the casts to
 * int are exact. */
static rill_status matmul(const struct rill__cuda_blas *t, cublasHandle_t h, rill__op op,
                          const void *args, char *why, size_t why_size) {
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s;
    const char *call;
    if (op == RILL__OP_MATMUL_F32) {
        const rill__op_matmul_args *p = args;
        call = "cublasSgemm_v2";
        /* A transposed operand is the column-major matrix itself, which
         * cuBLAS transposes: b [n,k] with leading dimension k, a [k,m]
         * with m. */
        bool at = (p->trans & RILL_MATMUL_A_T) != 0, bt = (p->trans & RILL_MATMUL_B_T) != 0;
        s = t->sgemm(h, bt ? CUBLAS_OP_T : CUBLAS_OP_N, at ? CUBLAS_OP_T : CUBLAS_OP_N, (int)p->n,
                     (int)p->m, (int)p->k, &one, p->b, bt ? (int)p->k : (int)p->n, p->a,
                     at ? (int)p->m : (int)p->k, &zero, p->c, (int)p->n);
    } else if (op == RILL__OP_MATMUL_BATCHED_F32) {
        const rill__op_matmul_batched_args *p = args;
        call = "cublasSgemmStridedBatched";
        /* As above, product by product, with each operand's own row stride
         * and batch stride (at most the span the op layer checked, so it
         * fits a long long); c is contiguous. */
        bool at = (p->trans & RILL_MATMUL_A_T) != 0, bt = (p->trans & RILL_MATMUL_B_T) != 0;
        s = t->sgemm_strided_batched(h, bt ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     at ? CUBLAS_OP_T : CUBLAS_OP_N, (int)p->n, (int)p->m,
                                     (int)p->k, &one, p->b, (int)p->ldb, (long long)p->stride_b,
                                     p->a, (int)p->lda, (long long)p->stride_a, &zero, p->c,
                                     (int)p->n, (long long)(p->m * p->n), (int)p->batch);
    } else {
        const rill__op_matmul_f16_args *p = args;
        call = "cublasGemmEx";
        s = t->gemm_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)p->n, (int)p->m, (int)p->k, &one, p->b,
                       CUDA_R_16F, (int)p->n, p->a, CUDA_R_16F, (int)p->k, &zero, p->c, CUDA_R_16F,
                       (int)p->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    if (s != CUBLAS_STATUS_SUCCESS)
        return blas_fail(t, call, s, why, why_size);
    return RILL_OK;
}

static rill_status run_blas(rill__cuda_libs *libs, rill__op op, CUstream stream, const void *args,
                            char *why, size_t why_size) {
    struct rill__cuda_handle *h;
    rill_status st = take_handle(libs, LIB_BLAS, &h, why, why_size);
    if (st != RILL_OK)
        return st;
    const struct rill__cuda_blas *t = libs->blas;
    st = blas_bind(t, h->blas, stream, why, why_size);
    if (st == RILL_OK)
        st = matmul(t, h->blas, op, args, why, why_size);
    give_handle(libs, LIB_BLAS, h);
    return st;
}

/* ---- conv2d ---- */

#ifdef RILL_HAVE_CUDNN
/* Algorithms the heuristics may rank, at most. */
#define CONV_CANDIDATES 8

/* The geometry of a convolution as cuDNN's descriptors take it. */
typedef struct conv_geometry {
    int n, c, h, w, k, r, s, oh, ow, stride_h, stride_w, pad_h, pad_w;
    int dil_h, dil_w, groups;
} conv_geometry;

/* Sets h's descriptors to g's convolution: NCHW floats, cross-correlation
 * (rill's weight is not flipped), the filter [k, c/groups, r, s], the
 * dilation and group count, float arithmetic without TF32
 * (CUDNN_FMA_MATH). */
static cudnnStatus_t conv_describe(const struct rill__cuda_dnn *t, struct rill__cuda_handle *h,
                                   const conv_geometry *g, const char **call) {
    cudnnStatus_t s;
    if ((s = t->set_tensor(h->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, g->n, g->c, g->h, g->w)) !=
        CUDNN_STATUS_SUCCESS) {
        *call = "cudnnSetTensor4dDescriptor";
        return s;
    }
    if ((s = t->set_tensor(h->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, g->n, g->k, g->oh, g->ow)) !=
        CUDNN_STATUS_SUCCESS) {
        *call = "cudnnSetTensor4dDescriptor";
        return s;
    }
    if ((s = t->set_filter(h->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, g->k, g->c / g->groups, g->r,
                           g->s)) != CUDNN_STATUS_SUCCESS) {
        *call = "cudnnSetFilter4dDescriptor";
        return s;
    }
    if ((s = t->set_conv(h->conv, g->pad_h, g->pad_w, g->stride_h, g->stride_w, g->dil_h, g->dil_w,
                         CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)) != CUDNN_STATUS_SUCCESS) {
        *call = "cudnnSetConvolution2dDescriptor";
        return s;
    }
    if ((s = t->set_conv_groups(h->conv, g->groups)) != CUDNN_STATUS_SUCCESS) {
        *call = "cudnnSetConvolutionGroupCount";
        return s;
    }
    if ((s = t->set_conv_math(h->conv, CUDNN_FMA_MATH)) != CUDNN_STATUS_SUCCESS)
        *call = "cudnnSetConvolutionMathType";
    return s;
}

/* The algorithm the heuristics rank first among those that keep to
 * float arithmetic and fit in ws_bytes of workspace; implicit GEMM, which
 * needs none, when none does. Asks the heuristics only (no trial runs, no
 * allocation), so a captured call stays capture-safe. */
static cudnnConvolutionFwdAlgo_t
conv_algorithm(const struct rill__cuda_dnn *t, const struct rill__cuda_handle *h, size_t ws_bytes) {
    cudnnConvolutionFwdAlgoPerf_t perf[CONV_CANDIDATES];
    int found = 0;
    if (t->forward_algorithms(h->dnn, h->x, h->w, h->conv, h->y, CONV_CANDIDATES, &found, perf) ==
        CUDNN_STATUS_SUCCESS) {
        for (int i = 0; i < found; i++) {
            if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH &&
                perf[i].memory <= ws_bytes)
                return perf[i].algo;
        }
    }
    return CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
}

/* out = conv(in, weight) with cuDNN's int dimensions: each of n, c, h, w,
 * k, r, s is at most INT_MAX (checked by the op layer), and each tensor
 * must hold at most INT_MAX elements. The workspace is the op's scratch,
 * one block's slot of it (a grid has at least one block): the op holds it
 * until its work is done, and no other work touches it. */
static rill_status conv2d(const struct rill__cuda_dnn *t, struct rill__cuda_handle *h,
                          const rill__op_conv2d_args *p, char *why, size_t why_size) {
    size_t oh = p->h - p->r + 1, ow = p->w - p->s + 1;
    size_t in_elems = p->n * p->c * p->h * p->w, out_elems = p->n * p->k * oh * ow;
    if (in_elems > INT_MAX || out_elems > INT_MAX) {
        say(why, why_size,
            "conv2d_f32: in has %zu and out %zu elements, and cuDNN's convolution takes at most "
            "%d each; split the batch into smaller ones",
            in_elems, out_elems, INT_MAX);
        return RILL_ERROR_NOT_SUPPORTED;
    }
    const char *call = NULL;
    conv_geometry g = {(int)p->n, (int)p->c, (int)p->h, (int)p->w, (int)p->k, (int)p->r,
                       (int)p->s, (int)oh,   (int)ow,   1,         1,         0,
                       0,         1,         1,         1};
    cudnnStatus_t s = conv_describe(t, h, &g, &call);
    if (s != CUDNN_STATUS_SUCCESS)
        return dnn_fail(t, call, s, why, why_size);
    size_t ws_bytes = p->scratch != NULL ? rill__op_conv2d_slot_floats(p) * sizeof(float) : 0;
    cudnnConvolutionFwdAlgo_t algo = conv_algorithm(t, h, ws_bytes);
    size_t need = 0;
    if ((s = t->forward_workspace(h->dnn, h->x, h->w, h->conv, h->y, algo, &need)) !=
        CUDNN_STATUS_SUCCESS)
        return dnn_fail(t, "cudnnGetConvolutionForwardWorkspaceSize", s, why, why_size);
    if (need > ws_bytes) {
        say(why, why_size,
            "conv2d_f32: cuDNN's algorithm %d needs %zu bytes of workspace, and the op has %zu",
            (int)algo, need, ws_bytes);
        return RILL_ERROR_NOT_SUPPORTED;
    }
    const float one = 1.0f, zero = 0.0f;
    s = t->forward(h->dnn, &one, h->x, p->in, h->w, p->weight, h->conv, algo,
                   need > 0 ? p->scratch : NULL, need, &zero, h->y, p->out);
    if (s != CUDNN_STATUS_SUCCESS)
        return dnn_fail(t, "cudnnConvolutionForward", s, why, why_size);
    return RILL_OK;
}

/* The backward algorithm the heuristics rank first among those that keep
 * to float arithmetic, fit in ws_bytes and are deterministic (no atomic
 * adds, so a call repeated gives the same bits), then among those that
 * are not; ALGO_0 of each, which needs no workspace, when none fits.
 * Heuristics only, as conv_algorithm. */
static cudnnConvolutionBwdDataAlgo_t
data_algorithm(const struct rill__cuda_dnn *t, const struct rill__cuda_handle *h, size_t ws_bytes) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CONV_CANDIDATES];
    int found = 0;
    if (t->data_algorithms(h->dnn, h->w, h->y, h->conv, h->x, CONV_CANDIDATES, &found, perf) ==
        CUDNN_STATUS_SUCCESS) {
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < found; i++)
                if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH &&
                    perf[i].memory <= ws_bytes &&
                    (pass == 1 || perf[i].determinism == CUDNN_DETERMINISTIC))
                    return perf[i].algo;
    }
    return CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
}

static cudnnConvolutionBwdFilterAlgo_t filter_algorithm(const struct rill__cuda_dnn *t,
                                                        const struct rill__cuda_handle *h,
                                                        size_t ws_bytes) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CONV_CANDIDATES];
    int found = 0;
    if (t->filter_algorithms(h->dnn, h->x, h->y, h->conv, h->w, CONV_CANDIDATES, &found, perf) ==
        CUDNN_STATUS_SUCCESS) {
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < found; i++)
                if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH &&
                    perf[i].memory <= ws_bytes &&
                    (pass == 1 || perf[i].determinism == CUDNN_DETERMINISTIC))
                    return perf[i].algo;
    }
    return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
}

/* grad_in or grad_weight of p (op says which) by cuDNN, with the limits
 * of conv2d above. The workspace is the op's whole scratch: the call is
 * the op's only user of it until its work is done. */
static rill_status conv2d_backward(const struct rill__cuda_dnn *t, struct rill__cuda_handle *h,
                                   rill__op op, const rill__op_conv2d_backward_args *p, char *why,
                                   size_t why_size) {
    size_t in_elems = p->n * p->c * p->h * p->w, out_elems = p->n * p->k * p->oh * p->ow;
    if (in_elems > INT_MAX || out_elems > INT_MAX) {
        say(why, why_size,
            "conv2d_backward_f32: in has %zu and grad_out %zu elements, and cuDNN's convolution "
            "takes at most %d each; split the batch into smaller ones",
            in_elems, out_elems, INT_MAX);
        return RILL_ERROR_NOT_SUPPORTED;
    }
    const char *call = NULL;
    conv_geometry g = {(int)p->n,     (int)p->c,        (int)p->h,        (int)p->w,
                       (int)p->k,     (int)p->r,        (int)p->s,        (int)p->oh,
                       (int)p->ow,    (int)p->stride_h, (int)p->stride_w, (int)p->pad_h,
                       (int)p->pad_w, (int)p->dil_h,    (int)p->dil_w,    (int)p->conv_groups};
    cudnnStatus_t s = conv_describe(t, h, &g, &call);
    if (s != CUDNN_STATUS_SUCCESS)
        return dnn_fail(t, call, s, why, why_size);
    size_t ws_bytes = p->scratch_floats * sizeof(float);
    size_t need = 0;
    int algo;
    if (op == RILL__OP_CONV2D_BACKWARD_DATA_F32) {
        cudnnConvolutionBwdDataAlgo_t a = data_algorithm(t, h, ws_bytes);
        algo = (int)a;
        call = "cudnnGetConvolutionBackwardDataWorkspaceSize";
        s = t->data_workspace(h->dnn, h->w, h->y, h->conv, h->x, a, &need);
    } else {
        cudnnConvolutionBwdFilterAlgo_t a = filter_algorithm(t, h, ws_bytes);
        algo = (int)a;
        call = "cudnnGetConvolutionBackwardFilterWorkspaceSize";
        s = t->filter_workspace(h->dnn, h->x, h->y, h->conv, h->w, a, &need);
    }
    if (s != CUDNN_STATUS_SUCCESS)
        return dnn_fail(t, call, s, why, why_size);
    if (need > ws_bytes) {
        say(why, why_size,
            "conv2d_backward_f32: cuDNN's algorithm %d needs %zu bytes of workspace, and the op "
            "has %zu",
            algo, need, ws_bytes);
        return RILL_ERROR_NOT_SUPPORTED;
    }
    const float one = 1.0f, zero = 0.0f;
    void *ws = need > 0 ? p->scratch : NULL;
    if (op == RILL__OP_CONV2D_BACKWARD_DATA_F32) {
        call = "cudnnConvolutionBackwardData";
        s = t->backward_data(h->dnn, &one, h->w, p->weight, h->y, p->grad_out, h->conv,
                             (cudnnConvolutionBwdDataAlgo_t)algo, ws, need, &zero, h->x,
                             p->grad_in);
    } else {
        call = "cudnnConvolutionBackwardFilter";
        s = t->backward_filter(h->dnn, &one, h->x, p->in, h->y, p->grad_out, h->conv,
                               (cudnnConvolutionBwdFilterAlgo_t)algo, ws, need, &zero, h->w,
                               p->grad_weight);
    }
    if (s != CUDNN_STATUS_SUCCESS)
        return dnn_fail(t, call, s, why, why_size);
    return RILL_OK;
}

static rill_status run_dnn(rill__cuda_libs *libs, rill__op op, CUstream stream, const void *args,
                           char *why, size_t why_size) {
    struct rill__cuda_handle *h;
    rill_status st = take_handle(libs, LIB_DNN, &h, why, why_size);
    if (st != RILL_OK)
        return st;
    const struct rill__cuda_dnn *t = libs->dnn;
    cudnnStatus_t s = t->set_stream(h->dnn, stream);
    if (s != CUDNN_STATUS_SUCCESS)
        st = dnn_fail(t, "cudnnSetStream", s, why, why_size);
    else if (op == RILL__OP_CONV2D_F32)
        st = conv2d(t, h, args, why, why_size);
    else
        st = conv2d_backward(t, h, op, args, why, why_size);
    give_handle(libs, LIB_DNN, h);
    return st;
}
#endif

/* ---- entry points ---- */

/* The library op runs through; false for an op that runs as a kernel. */
static bool library_of(rill__op op, lib_kind *kind) {
    switch (op) {
    case RILL__OP_MATMUL_F32:
    case RILL__OP_MATMUL_F16:
    case RILL__OP_MATMUL_BATCHED_F32:
        *kind = LIB_BLAS;
        return true;
    case RILL__OP_CONV2D_F32:
    case RILL__OP_CONV2D_BACKWARD_DATA_F32:
    case RILL__OP_CONV2D_BACKWARD_FILTER_F32:
        *kind = LIB_DNN;
        return true;
    default:
        return false;
    }
}

static rill_status not_a_library_op(rill__op op, char *why, size_t why_size) {
    say(why, why_size, "op %d runs as a kernel on CUDA devices, not through a library", (int)op);
    return RILL_ERROR_INTERNAL;
}

rill_status rill__cuda_libs_prepare(rill__cuda_libs *libs, rill__op op, char *why,
                                    size_t why_size) {
    lib_kind kind;
    if (!library_of(op, &kind))
        return RILL_OK;
    struct rill__cuda_handle *h;
    rill_status st = take_handle(libs, kind, &h, why, why_size);
    if (st != RILL_OK)
        return st;
    give_handle(libs, kind, h);
    return RILL_OK;
}

rill_status rill__cuda_op_library(rill__cuda_libs *libs, rill__op op, CUstream stream,
                                  const void *args, char *why, size_t why_size) {
    lib_kind kind;
    if (!library_of(op, &kind))
        return not_a_library_op(op, why, why_size);
    if (kind == LIB_BLAS)
        return run_blas(libs, op, stream, args, why, why_size);
#ifdef RILL_HAVE_CUDNN
    return run_dnn(libs, op, stream, args, why, why_size);
#else
    (void)stream;
    (void)args;
    return load(libs, LIB_DNN, why, why_size);
#endif
}
