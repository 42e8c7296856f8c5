/* SPDX-License-Identifier: MIT */
/*
 * The two-phase op API: the first phase (…GetWorkspaceSize) checks the
 * tensors and copies what the op needs into an executor, so the tensors may
 * be destroyed before the second phase submits the work to a stream. No op
 * needs a workspace. An executor runs once and is freed by its run, unless
 * aclSetAclOpExecutorRepeatable made it repeatable. Tensors, scalars and
 * executors are handles (handle.h): a run takes its executor's handle, or
 * copies the executor, under the table's lock, so that a second run, or a
 * destroy on another thread, finds the handle closed or the copy whole.
 */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elementwise.h"
#include "error.h"
#include "handle.h"
#include "memory.h"

static const char *const op_names[] = {[RILL_ACL_OP_ADD] = "aclnnAdd",
                                       [RILL_ACL_OP_SUB] = "aclnnSub",
                                       [RILL_ACL_OP_MUL] = "aclnnMul",
                                       [RILL_ACL_OP_DIV] = "aclnnDiv",
                                       [RILL_ACL_OP_MATMUL] = "aclnnMatmul",
                                       [RILL_ACL_OP_RELU] = "aclnnRelu",
                                       [RILL_ACL_OP_GELU] = "aclnnGelu",
                                       [RILL_ACL_OP_SIGMOID] = "aclnnSigmoid",
                                       [RILL_ACL_OP_TANH] = "aclnnTanh",
                                       [RILL_ACL_OP_SILU] = "aclnnSilu",
                                       [RILL_ACL_OP_SOFTMAX] = "aclnnSoftmax",
                                       [RILL_ACL_OP_LOG_SOFTMAX] = "aclnnLogSoftmax",
                                       [RILL_ACL_OP_CAST] = "aclnnCast",
                                       [RILL_ACL_OP_INPLACE_COPY] = "aclnnInplaceCopy",
                                       [RILL_ACL_OP_REDUCE_SUM] = "aclnnReduceSum",
                                       [RILL_ACL_OP_MEAN] = "aclnnMean",
                                       [RILL_ACL_OP_AMAX] = "aclnnAmax",
                                       [RILL_ACL_OP_AMIN] = "aclnnAmin",
                                       [RILL_ACL_OP_CONVOLUTION] = "aclnnConvolution",
                                       [RILL_ACL_OP_AVG_POOL2D] = "aclnnAvgPool2d",
                                       [RILL_ACL_OP_MAX_POOL] = "aclnnMaxPool"};

/* ---- checks of the first phase ---- */

aclnnStatus rill__acl_null_arg(const char *call, const char *name) {
    return rill__acl_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is NULL", call, name);
}

/* The elements an op may take: its kernel's grid (blocks of
 * RILL_ACL_EW_CHUNK elements) counts blocks in 32 bits. */
#define MAX_ELEMENTS ((uint64_t)UINT32_MAX * RILL_ACL_EW_CHUNK)

/* The bytes that t's elements reach from t->data: (offset + sum of
 * (dims[d] - 1) * strides[d] + 1) elements; false when that is more than
 * PTRDIFF_MAX bytes (so the kernels' offsets, in int64_t bytes, cannot
 * overflow) or runs past the end of the address space. t has elements. */
static bool reach_bytes(const struct rill__acl_tensor *t, size_t esize, uint64_t *bytes) {
    const uint64_t limit = (uint64_t)PTRDIFF_MAX / esize - 1; /* in elements, less one */
    uint64_t last = (uint64_t)t->offset;
    if (last > limit)
        return false;
    for (int d = 0; d < t->ndim; d++) {
        uint64_t steps = (uint64_t)t->dims[d] - 1, stride = (uint64_t)t->strides[d];
        if (steps != 0 && stride > (limit - last) / steps)
            return false;
        last += steps * stride;
    }
    *bytes = (last + 1) * esize;
    return *bytes <= UINTPTR_MAX - (uintptr_t)t->data;
}

/* Refuses a tensor whose elements run past the end of memory, or of its
 * allocation when its data is memory from aclrtMalloc or aclrtMallocHost
 * (other memory cannot be checked, as rill's ops do not check it). */
static aclnnStatus check_reach(const char *call, const char *name, const struct rill__acl_tensor *t,
                               size_t esize) {
    uint64_t bytes;
    if (!reach_bytes(t, esize, &bytes))
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: %s's offset and strides reach past the end of memory; pass "
                              "them in elements",
                              call, name);
    struct rill__acl_region r;
    if (rill__acl_memory_find(t->data, &r) && bytes > r.bytes - ((uintptr_t)t->data - r.base))
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: %s reaches %llu bytes from its data, past the end of its "
                              "%zu-byte allocation from %s; check its dimensions, strides and "
                              "offset",
                              call, name, (unsigned long long)bytes, r.bytes,
                              r.is_host ? "aclrtMallocHost" : "aclrtMalloc");
    return ACLNN_SUCCESS;
}

aclnnStatus rill__acl_take_view(const char *call, const char *name, const aclTensor *handle,
                                struct rill__acl_view *v) {
    struct rill__acl_tensor t;
    aclnnStatus st = rill__acl_tensor_read(call, name, handle, &t);
    if (st != ACLNN_SUCCESS)
        return st;
    if (t.dtype != ACL_FLOAT && t.dtype != ACL_FLOAT16)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: %s has data type %d; rill's ops take ACL_FLOAT and ACL_FLOAT16",
                              call, name, (int)t.dtype);
    v->dtype = t.dtype;
    v->ndim = t.ndim;
    uint64_t numel = 1;
    for (int d = 0; d < t.ndim; d++) {
        v->dims[d] = t.dims[d];
        v->strides[d] = t.strides[d];
        if (t.dims[d] != 0 && numel > MAX_ELEMENTS / (uint64_t)t.dims[d])
            return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                                  "%s: %s has more than %llu elements (2^46 - 2^14), more than an "
                                  "op takes; split the op",
                                  call, name, (unsigned long long)MAX_ELEMENTS);
        numel *= (uint64_t)t.dims[d];
    }
    v->data = t.data;
    if (numel == 0)
        return ACLNN_SUCCESS; /* nothing is read or written */
    if (!t.data)
        return rill__acl_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s has %llu elements and NULL data",
                              call, name, (unsigned long long)numel);
    size_t esize = aclDataTypeSize(t.dtype);
    st = check_reach(call, name, &t, esize);
    if (st != ACLNN_SUCCESS)
        return st;
    v->data = (char *)t.data + (size_t)t.offset * esize;
    return ACLNN_SUCCESS;
}

void rill__acl_format_dims(const struct rill__acl_view *v, char *buf, size_t size) {
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < v->ndim && used < size; d++)
        used +=
            (size_t)snprintf(buf + used, size - used, d ? ", %lld" : "%lld", (long long)v->dims[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
}

static aclnnStatus same_dtype(const char *call, const struct rill__acl_view *out,
                              const struct rill__acl_view *a, const struct rill__acl_view *b) {
    if (a->dtype == out->dtype && b->dtype == out->dtype)
        return ACLNN_SUCCESS;
    return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                          "%s: the tensors' data types differ (%d, %d, out %d); rill computes "
                          "with one data type for all three",
                          call, (int)a->dtype, (int)b->dtype, (int)out->dtype);
}

/* The broadcast of a's and b's shapes must be out's. */
static aclnnStatus check_broadcast(const char *call, const struct rill__acl_view *out,
                                   const struct rill__acl_view *a, const struct rill__acl_view *b) {
    int ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    bool ok = out->ndim == ndim;
    for (int d = 0; d < ndim && ok; d++) {
        int da = d - (ndim - a->ndim), db = d - (ndim - b->ndim);
        int64_t sa = da < 0 ? 1 : a->dims[da], sb = db < 0 ? 1 : b->dims[db];
        if (sa != sb && sa != 1 && sb != 1) {
            char ba[160], bb[160];
            rill__acl_format_dims(a, ba, sizeof ba);
            rill__acl_format_dims(b, bb, sizeof bb);
            return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                                  "%s: shapes %s and %s do not broadcast (dimension %d: %lld "
                                  "against %lld)",
                                  call, ba, bb, d, (long long)sa, (long long)sb);
        }
        ok = out->dims[d] == (sa == 1 ? sb : sa);
    }
    if (ok)
        return ACLNN_SUCCESS;
    char ba[160], bb[160], bo[160];
    rill__acl_format_dims(a, ba, sizeof ba);
    rill__acl_format_dims(b, bb, sizeof bb);
    rill__acl_format_dims(out, bo, sizeof bo);
    return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                          "%s: out has shape %s, but %s and %s broadcast to another", call, bo, ba,
                          bb);
}

aclnnStatus rill__acl_new_executor(const char *call, const struct rill__acl_executor *proto,
                                   aclOpExecutor **executor) {
    struct rill__acl_executor *e = malloc(sizeof *e);
    if (!e)
        return rill__acl_fail(ACLNN_ERR_RUNTIME_ERROR, "%s: out of host memory", call);
    *e = *proto;
    e->repeatable = false;
    aclOpExecutor *handle = rill__acl_handle_open(RILL_ACL_EXECUTOR, e);
    if (!handle) {
        free(e);
        return rill__acl_fail(ACLNN_ERR_RUNTIME_ERROR, "%s: out of host memory for handles", call);
    }
    *executor = handle;
    return ACLNN_SUCCESS;
}

static bool same_shape(const struct rill__acl_view *x, const struct rill__acl_view *y) {
    return x->ndim == y->ndim && memcmp(x->dims, y->dims, (size_t)x->ndim * sizeof x->dims[0]) == 0;
}

aclnnStatus rill__acl_check_same_shape(const char *call, const char *name,
                                       const struct rill__acl_view *out,
                                       const struct rill__acl_view *in) {
    if (same_shape(out, in))
        return ACLNN_SUCCESS;
    char bo[160], bi[160];
    rill__acl_format_dims(out, bo, sizeof bo);
    rill__acl_format_dims(in, bi, sizeof bi);
    return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                          "%s: out has shape %s, %s has %s; they must match", call, bo, name, bi);
}

aclnnStatus rill__acl_check_float32(const char *call, const char *name,
                                    const struct rill__acl_view *v) {
    if (v->dtype == ACL_FLOAT)
        return ACLNN_SUCCESS;
    return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                          "%s: %s is ACL_FLOAT16; rill computes this op in ACL_FLOAT only "
                          "(convert with aclnnCast first)",
                          call, name);
}

aclnnStatus rill__acl_check_contiguous(const char *call, const char *name,
                                       const struct rill__acl_view *v) {
    if (rill__acl_view_is_contiguous(v))
        return ACLNN_SUCCESS;
    return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                          "%s: %s is not contiguous; this op takes row-major tensors: copy it "
                          "into one first (aclnnInplaceCopy)",
                          call, name);
}

/* The bytes from v's first element to past its last. */
static uint64_t span_bytes(const struct rill__acl_view *v) {
    uint64_t last = 0;
    for (int d = 0; d < v->ndim; d++)
        last += (uint64_t)(v->dims[d] - 1) * (uint64_t)v->strides[d];
    return (last + 1) * (v->dtype == ACL_FLOAT16 ? 2u : 4u);
}

aclnnStatus rill__acl_check_apart(const char *call, const char *out_name,
                                  const struct rill__acl_view *out, const char *in_name,
                                  const struct rill__acl_view *in) {
    if (rill__acl_view_numel(out) == 0 || rill__acl_view_numel(in) == 0)
        return ACLNN_SUCCESS;
    uintptr_t o = (uintptr_t)out->data, i = (uintptr_t)in->data;
    if (o + span_bytes(out) <= i || i + span_bytes(in) <= o)
        return ACLNN_SUCCESS;
    return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                          "%s: %s and %s overlap in memory; this op reads one while it writes "
                          "the other: use separate memory",
                          call, out_name, in_name);
}

aclnnStatus rill__acl_finish(const char *call, const struct rill__acl_executor *proto,
                             uint64_t *workspaceSize, aclOpExecutor **executor) {
    aclnnStatus st = rill__acl_new_executor(call, proto, executor);
    if (st == ACLNN_SUCCESS)
        *workspaceSize = 0;
    return st;
}

/* A new executor of op over out, a and b, in *executor. */
static aclnnStatus new_executor(const char *call, enum rill__acl_op op,
                                const struct rill__acl_view *out, const struct rill__acl_view *a,
                                const struct rill__acl_view *b, float alpha,
                                aclOpExecutor **executor) {
    struct rill__acl_executor e = {.op = op, .out = *out, .a = *a, .b = *b, .alpha = alpha};
    return rill__acl_new_executor(call, &e, executor);
}

static aclnnStatus elementwise_phase1(const char *call, enum rill__acl_op op, const aclTensor *self,
                                      const aclTensor *other, float alpha, aclTensor *out,
                                      uint64_t *workspaceSize, aclOpExecutor **executor) {
    struct rill__acl_view vo, va, vb;
    aclnnStatus st = rill__acl_take_view(call, "self", self, &va);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "other", other, &vb);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "out", out, &vo);
    if (st == ACLNN_SUCCESS)
        st = same_dtype(call, &vo, &va, &vb);
    if (st == ACLNN_SUCCESS)
        st = check_broadcast(call, &vo, &va, &vb);
    if (st == ACLNN_SUCCESS)
        st = new_executor(call, op, &vo, &va, &vb, alpha, executor);
    if (st != ACLNN_SUCCESS)
        return st;
    *workspaceSize = 0;
    return ACLNN_SUCCESS;
}

/* The first phase of self + alpha * other, or of self - alpha * other when
 * negate. */
static aclnnStatus alpha_phase1(const char *call, enum rill__acl_op op, const aclTensor *self,
                                const aclTensor *other, const aclScalar *alpha, bool negate,
                                aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
    if (!self || !other || !alpha || !out || !workspaceSize || !executor)
        return rill__acl_null_arg(call, !self            ? "self"
                                        : !other         ? "other"
                                        : !alpha         ? "alpha"
                                        : !out           ? "out"
                                        : !workspaceSize ? "workspaceSize"
                                                         : "executor");
    struct rill__acl_scalar a;
    aclnnStatus st = rill__acl_scalar_read(call, "alpha", alpha, &a);
    if (st != ACLNN_SUCCESS)
        return st;
    return elementwise_phase1(call, op, self, other, negate ? -(float)a.value : (float)a.value, out,
                              workspaceSize, executor);
}

/* The first phase of an op of self and other without a scalar. */
static aclnnStatus pair_phase1(const char *call, enum rill__acl_op op, const aclTensor *self,
                               const aclTensor *other, aclTensor *out, uint64_t *workspaceSize,
                               aclOpExecutor **executor) {
    if (!self || !other || !out || !workspaceSize || !executor)
        return rill__acl_null_arg(call, !self            ? "self"
                                        : !other         ? "other"
                                        : !out           ? "out"
                                        : !workspaceSize ? "workspaceSize"
                                                         : "executor");
    return elementwise_phase1(call, op, self, other, 1.0f, out, workspaceSize, executor);
}

aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
                                     const aclScalar *alpha, aclTensor *out,
                                     uint64_t *workspaceSize, aclOpExecutor **executor) {
    return alpha_phase1("aclnnAddGetWorkspaceSize", RILL_ACL_OP_ADD, self, other, alpha, false, out,
                        workspaceSize, executor);
}

aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
                                     const aclScalar *alpha, aclTensor *out,
                                     uint64_t *workspaceSize, aclOpExecutor **executor) {
    /* self - alpha * other is aclnnAdd's self + (-alpha) * other. */
    return alpha_phase1("aclnnSubGetWorkspaceSize", RILL_ACL_OP_SUB, self, other, alpha, true, out,
                        workspaceSize, executor);
}

aclnnStatus aclnnDivGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out,
                                     uint64_t *workspaceSize, aclOpExecutor **executor) {
    return pair_phase1("aclnnDivGetWorkspaceSize", RILL_ACL_OP_DIV, self, other, out, workspaceSize,
                       executor);
}

aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out,
                                     uint64_t *workspaceSize, aclOpExecutor **executor) {
    return pair_phase1("aclnnMulGetWorkspaceSize", RILL_ACL_OP_MUL, self, other, out, workspaceSize,
                       executor);
}

/* ---- matmul ---- */

/* The shapes of torch.matmul: batch dimensions broadcast, a 1-D operand a
 * row (self) or a column (mat2) whose dimension leaves out. */
struct mm_shape {
    int64_t m, k, n;
    struct rill__acl_view batch; /* the broadcast batch dimensions (dims only) */
};

static aclnnStatus matmul_shape(const char *call, const struct rill__acl_view *a,
                                const struct rill__acl_view *b, const struct rill__acl_view *out,
                                struct mm_shape *s) {
    if (a->ndim == 0 || b->ndim == 0)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: %s has no dimensions; matmul needs at least one", call,
                              a->ndim == 0 ? "self" : "mat2");
    s->m = a->ndim == 1 ? 1 : a->dims[a->ndim - 2];
    s->k = a->dims[a->ndim - 1];
    int64_t k2 = b->ndim == 1 ? b->dims[0] : b->dims[b->ndim - 2];
    s->n = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
    if (s->k != k2)
        return rill__acl_fail(
            ACLNN_ERR_PARAM_INVALID, "%s: self's last dimension (%lld) is not mat2's %s (%lld)",
            call, (long long)s->k, b->ndim == 1 ? "only one" : "second to last", (long long)k2);
    /* Batch dimensions: those before the last two, broadcast like aclnnAdd's. */
    struct rill__acl_view ba = {.ndim = a->ndim > 2 ? a->ndim - 2 : 0};
    struct rill__acl_view bb = {.ndim = b->ndim > 2 ? b->ndim - 2 : 0};
    for (int d = 0; d < ba.ndim; d++)
        ba.dims[d] = a->dims[d];
    for (int d = 0; d < bb.ndim; d++)
        bb.dims[d] = b->dims[d];
    int nb = ba.ndim > bb.ndim ? ba.ndim : bb.ndim;
    s->batch = (struct rill__acl_view){.ndim = nb};
    for (int d = 0; d < nb; d++) {
        int da = d - (nb - ba.ndim), db = d - (nb - bb.ndim);
        int64_t x = da < 0 ? 1 : ba.dims[da], y = db < 0 ? 1 : bb.dims[db];
        if (x != y && x != 1 && y != 1)
            return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                                  "%s: batch dimension %d of self (%lld) and mat2 (%lld) do not "
                                  "broadcast",
                                  call, d, (long long)x, (long long)y);
        s->batch.dims[d] = x == 1 ? y : x;
    }
    /* out: batch, then m unless self is 1-D, then n unless mat2 is 1-D. */
    struct rill__acl_view want = s->batch;
    if (a->ndim > 1)
        want.dims[want.ndim++] = s->m;
    if (b->ndim > 1)
        want.dims[want.ndim++] = s->n;
    bool dot_as_one = a->ndim == 1 && b->ndim == 1 && out->ndim == 1 && out->dims[0] == 1;
    bool same = out->ndim == want.ndim;
    for (int d = 0; d < want.ndim && same; d++)
        same = out->dims[d] == want.dims[d];
    if (!same && !dot_as_one) {
        char bo[160], bw[160];
        rill__acl_format_dims(out, bo, sizeof bo);
        rill__acl_format_dims(&want, bw, sizeof bw);
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID, "%s: out has shape %s; the product has %s",
                              call, bo, bw);
    }
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnMatmulGetWorkspaceSize(const aclTensor *self, const aclTensor *mat2,
                                        aclTensor *out, int8_t cubeMathType,
                                        uint64_t *workspaceSize, aclOpExecutor **executor) {
    const char *call = "aclnnMatmulGetWorkspaceSize";
    if (!self || !mat2 || !out || !workspaceSize || !executor)
        return rill__acl_null_arg(call, !self            ? "self"
                                        : !mat2          ? "mat2"
                                        : !out           ? "out"
                                        : !workspaceSize ? "workspaceSize"
                                                         : "executor");
    if (cubeMathType < 0 || cubeMathType > 3)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: cubeMathType %d is none of 0 (KEEP_DTYPE) to 3 (USE_HF32)", call,
                              (int)cubeMathType);
    struct rill__acl_view vo, va, vb;
    struct mm_shape shape;
    aclnnStatus st = rill__acl_take_view(call, "self", self, &va);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "mat2", mat2, &vb);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "out", out, &vo);
    if (st == ACLNN_SUCCESS)
        st = same_dtype(call, &vo, &va, &vb);
    if (st == ACLNN_SUCCESS)
        st = matmul_shape(call, &va, &vb, &vo, &shape);
    if (st != ACLNN_SUCCESS)
        return st;
    const struct rill__acl_view *views[] = {&va, &vb, &vo};
    const char *names[] = {"self", "mat2", "out"};
    for (int i = 0; i < 3; i++)
        if (!rill__acl_view_is_contiguous(views[i]))
            return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                                  "%s: %s is not contiguous; rill's matmul takes row-major "
                                  "tensors: copy it into one first",
                                  call, names[i]);
    st = new_executor(call, RILL_ACL_OP_MATMUL, &vo, &va, &vb, 1.0f, executor);
    if (st != ACLNN_SUCCESS)
        return st;
    *workspaceSize = 0;
    return ACLNN_SUCCESS;
}

/* One product per batch element; batch coordinates index each operand's own
 * batch dimensions, 0 where it is broadcast. */
static rill_status run_matmul(rill_stream *stream, const struct rill__acl_executor *e) {
    const struct rill__acl_view *a = &e->a, *b = &e->b, *out = &e->out;
    struct mm_shape s;
    if (matmul_shape("aclnnMatmul", a, b, out, &s) != ACLNN_SUCCESS)
        return RILL_ERROR_INTERNAL; /* checked by the first phase */
    size_t esize = out->dtype == ACL_FLOAT16 ? 2 : 4;
    uint64_t batches = rill__acl_view_numel(&s.batch);
    size_t out_bytes = (size_t)(s.m * s.n) * esize;
    int a_batch = a->ndim > 2 ? a->ndim - 2 : 0, b_batch = b->ndim > 2 ? b->ndim - 2 : 0;
    for (uint64_t i = 0; i < batches && s.m * s.n > 0; i++) {
        /* Offsets of batch element i in a and b, in matrices. */
        uint64_t rest = i, ia = 0, ib = 0, sa = 1, sb = 1;
        for (int d = s.batch.ndim - 1; d >= 0; d--) {
            int64_t c = (int64_t)(rest % (uint64_t)s.batch.dims[d]);
            rest /= (uint64_t)s.batch.dims[d];
            int da = d - (s.batch.ndim - a_batch), db = d - (s.batch.ndim - b_batch);
            if (da >= 0) {
                ia += (uint64_t)(a->dims[da] == 1 ? 0 : c) * sa;
                sa *= (uint64_t)a->dims[da];
            }
            if (db >= 0) {
                ib += (uint64_t)(b->dims[db] == 1 ? 0 : c) * sb;
                sb *= (uint64_t)b->dims[db];
            }
        }
        char *o = out->data + i * out_bytes;
        const char *pa = a->data + ia * (uint64_t)(s.m * s.k) * esize;
        const char *pb = b->data + ib * (uint64_t)(s.k * s.n) * esize;
        rill_status st;
        if (s.k == 0)
            st = rill_memset_async(o, 0, out_bytes, stream); /* an empty sum: zeros */
        else if (esize == 2)
            st = rill_op_matmul_f16(stream, (rill_half *)o, (const rill_half *)pa,
                                    (const rill_half *)pb, (size_t)s.m, (size_t)s.k, (size_t)s.n);
        else
            st = rill_op_matmul_f32(stream, (float *)o, (const float *)pa, (const float *)pb,
                                    (size_t)s.m, (size_t)s.k, (size_t)s.n);
        if (st != RILL_OK)
            return st;
    }
    return RILL_OK;
}

/* ---- the second phase ---- */

aclnnStatus rill__acl_find_executor(const char *call, enum rill__acl_op op, aclOpExecutor *handle,
                                    struct rill__acl_executor *copy,
                                    struct rill__acl_executor **owned) {
    *owned = NULL;
    rill__acl_handles_lock();
    struct rill__acl_executor *e = rill__acl_handle_get_locked(handle, RILL_ACL_EXECUTOR);
    bool other_op = e && e->op != op;
    if (e && !other_op) {
        *copy = *e;
        if (!e->repeatable) {
            rill__acl_handle_close_locked(handle);
            *owned = e;
        }
    }
    rill__acl_handles_unlock();
    if (other_op)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: executor %p is no executor of %sGetWorkspaceSize", call,
                              (void *)handle, call);
    return e ? ACLNN_SUCCESS : rill__acl_handle_fail(call, "executor", handle, RILL_ACL_EXECUTOR);
}

aclnnStatus rill__acl_run(enum rill__acl_op op, aclOpExecutor *executor, aclrtStream stream,
                          rill__acl_submit_fn submit) {
    const char *call = op_names[op];
    struct rill__acl_executor e, *owned;
    aclnnStatus found = rill__acl_find_executor(call, op, executor, &e, &owned);
    if (found != ACLNN_SUCCESS)
        return found;
    rill_status st = RILL_OK;
    if (rill__acl_view_numel(&e.out) > 0)
        st = submit(stream, &e);
    free(owned);
    return rill__aclnn_check(st, call);
}

static rill_status submit_elementwise(rill_stream *s, const struct rill__acl_executor *e) {
    enum rill__acl_ew_op ew = e->op == RILL_ACL_OP_MUL   ? RILL_ACL_EW_MUL
                              : e->op == RILL_ACL_OP_DIV ? RILL_ACL_EW_DIV
                                                         : RILL_ACL_EW_ADD;
    return rill__acl_elementwise(s, ew, &e->out, &e->a, &e->b, e->alpha);
}

static aclnnStatus run(enum rill__acl_op op, uint64_t workspaceSize, aclOpExecutor *executor,
                       aclrtStream stream) {
    (void)workspaceSize; /* no op needs a workspace */
    return rill__acl_run(op, executor, stream,
                         op == RILL_ACL_OP_MATMUL ? run_matmul : submit_elementwise);
}

/* The op API's second phase of each op. */
#define PHASE2(Name, OP)                                                                           \
    aclnnStatus aclnn##Name(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,      \
                            aclrtStream stream) {                                                  \
        (void)workspace;                                                                           \
        return run(OP, workspaceSize, executor, stream);                                           \
    }

PHASE2(Add, RILL_ACL_OP_ADD)
PHASE2(Sub, RILL_ACL_OP_SUB)
PHASE2(Div, RILL_ACL_OP_DIV)
PHASE2(Mul, RILL_ACL_OP_MUL)
PHASE2(Matmul, RILL_ACL_OP_MATMUL)

aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor) {
    rill__acl_handles_lock();
    struct rill__acl_executor *e = rill__acl_handle_get_locked(executor, RILL_ACL_EXECUTOR);
    if (e)
        e->repeatable = true;
    rill__acl_handles_unlock();
    return e ? ACLNN_SUCCESS
             : rill__acl_handle_fail("aclSetAclOpExecutorRepeatable", "executor", executor,
                                     RILL_ACL_EXECUTOR);
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor) {
    struct rill__acl_executor *e = rill__acl_handle_take(executor, RILL_ACL_EXECUTOR);
    if (!e)
        return rill__acl_handle_fail("aclDestroyAclOpExecutor", "executor", executor,
                                     RILL_ACL_EXECUTOR);
    free(e);
    return ACLNN_SUCCESS;
}
