/* SPDX-License-Identifier: MIT */
/*
 * The op API's reductions (aclnnReduceSum, aclnnMean, aclnnAmax,
 * aclnnAmin) on rill_op_reduce_dim_f32, which reduces the middle dimension
 * of a contiguous [outer, len, inner] tensor. The reduced dimensions must
 * therefore be adjacent (any one, several in a row, or all of them: an
 * empty list): they are merged into one. The first phase works out outer,
 * len and inner (params[0..3)) and checks out's shape, with the reduced
 * dimensions kept as 1 or left out.
 */
#include "reduce.h"

#include "error.h"
#include "ops.h"

enum { OUTER, LEN, INNER };

static rill_reduce_dim_op reduce_op(enum rill__acl_op op) {
    return op == RILL_ACL_OP_REDUCE_SUM ? RILL_REDUCE_DIM_SUM
           : op == RILL_ACL_OP_MEAN     ? RILL_REDUCE_DIM_MEAN
           : op == RILL_ACL_OP_AMAX     ? RILL_REDUCE_DIM_MAX
                                        : RILL_REDUCE_DIM_MIN;
}

/* The dimensions of self that dims names, as a range [*first, *last]
 * (every one for an empty list); refused unless they are distinct, in
 * range and adjacent. */
static aclnnStatus reduced_range(const char *call, const struct rill__acl_view *self,
                                 const struct rill__acl_int_array *dims, int *first, int *last) {
    int ndim = self->ndim;
    if (dims->size == 0) {
        *first = 0;
        *last = ndim - 1;
        return ACLNN_SUCCESS;
    }
    bool seen[RILL_ACL_MAX_DIMS] = {false};
    int lo = ndim, hi = -1;
    for (uint64_t i = 0; i < dims->size; i++) {
        int64_t d = dims->values[i];
        int64_t rank = ndim > 0 ? ndim : 1;
        if (d < -rank || d >= rank)
            return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                                  "%s: dim %lld is outside [%lld, %lld] for self's %d dimensions",
                                  call, (long long)d, (long long)-rank, (long long)(rank - 1),
                                  ndim);
        int k = (int)(d < 0 ? d + rank : d);
        if (ndim == 0)
            continue; /* a 0-d tensor: dimension 0 is the tensor itself */
        if (seen[k])
            return rill__acl_fail(ACLNN_ERR_PARAM_INVALID, "%s: dimension %d is named twice", call,
                                  k);
        seen[k] = true;
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    if (ndim > 0 && (uint64_t)(hi - lo + 1) != dims->size)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: the dimensions to reduce are not adjacent; rill reduces one "
                              "run of adjacent dimensions at a time: reduce in two calls",
                              call);
    *first = ndim > 0 ? lo : 0;
    *last = ndim > 0 ? hi : -1;
    return ACLNN_SUCCESS;
}

static aclnnStatus reduce_phase1(const char *call, enum rill__acl_op op, const aclTensor *self,
                                 const aclIntArray *dim, bool keepDim, aclDataType dtype,
                                 aclTensor *out, uint64_t *workspaceSize,
                                 aclOpExecutor **executor) {
    if (!self || !dim || !out || !workspaceSize || !executor)
        return rill__acl_null_arg(call, !self            ? "self"
                                        : !dim           ? "dim"
                                        : !out           ? "out"
                                        : !workspaceSize ? "workspaceSize"
                                                         : "executor");
    if (dtype != ACL_FLOAT)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: dtype %d is not ACL_FLOAT, the type rill reduces in", call,
                              (int)dtype);
    struct rill__acl_executor e = {.op = op};
    struct rill__acl_int_array dims;
    aclnnStatus st = rill__acl_int_array_read(call, "dim", dim, &dims);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "self", self, &e.a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "out", out, &e.out);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_float32(call, "self", &e.a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_float32(call, "out", &e.out);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_contiguous(call, "self", &e.a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_contiguous(call, "out", &e.out);
    int first = 0, last = -1;
    if (st == ACLNN_SUCCESS)
        st = reduced_range(call, &e.a, &dims, &first, &last);
    if (st != ACLNN_SUCCESS)
        return st;
    /* out's shape: self's, with the reduced dimensions 1 or left out. */
    struct rill__acl_view want = {.ndim = 0};
    int64_t outer = 1, len = 1, inner = 1;
    for (int d = 0; d < e.a.ndim; d++) {
        bool reduced = d >= first && d <= last;
        if (d < first)
            outer *= e.a.dims[d];
        else if (reduced)
            len *= e.a.dims[d];
        else
            inner *= e.a.dims[d];
        if (!reduced || keepDim)
            want.dims[want.ndim++] = reduced ? 1 : e.a.dims[d];
    }
    st = rill__acl_check_same_shape(call, "the reduction of self", &e.out, &want);
    if (st == ACLNN_SUCCESS && len == 0 && outer * inner > 0)
        st = rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                            "%s: the dimensions to reduce have no elements; rill reduces at "
                            "least one",
                            call);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_apart(call, "out", &e.out, "self", &e.a);
    if (st != ACLNN_SUCCESS)
        return st;
    e.params[OUTER] = outer;
    e.params[LEN] = len;
    e.params[INNER] = inner;
    return rill__acl_finish(call, &e, workspaceSize, executor);
}

static rill_status submit_reduce(rill_stream *s, const struct rill__acl_executor *e) {
    return rill_op_reduce_dim_f32(s, reduce_op(e->op), (float *)e->out.data, NULL,
                                  (const float *)e->a.data, (size_t)e->params[OUTER],
                                  (size_t)e->params[LEN], (size_t)e->params[INNER]);
}

#define RUN(Name, OP)                                                                              \
    aclnnStatus aclnn##Name(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,      \
                            aclrtStream stream) {                                                  \
        (void)workspace;                                                                           \
        (void)workspaceSize;                                                                       \
        return rill__acl_run(OP, executor, stream, submit_reduce);                                 \
    }

aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor *self, const aclIntArray *dims,
                                           bool keepDims, aclDataType dtype, aclTensor *out,
                                           uint64_t *workspaceSize, aclOpExecutor **executor) {
    return reduce_phase1("aclnnReduceSumGetWorkspaceSize", RILL_ACL_OP_REDUCE_SUM, self, dims,
                         keepDims, dtype, out, workspaceSize, executor);
}
RUN(ReduceSum, RILL_ACL_OP_REDUCE_SUM)

aclnnStatus aclnnMeanGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepDim,
                                      aclDataType dtype, aclTensor *out, uint64_t *workspaceSize,
                                      aclOpExecutor **executor) {
    return reduce_phase1("aclnnMeanGetWorkspaceSize", RILL_ACL_OP_MEAN, self, dim, keepDim, dtype,
                         out, workspaceSize, executor);
}
RUN(Mean, RILL_ACL_OP_MEAN)

aclnnStatus aclnnAmaxGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepDim,
                                      aclTensor *out, uint64_t *workspaceSize,
                                      aclOpExecutor **executor) {
    return reduce_phase1("aclnnAmaxGetWorkspaceSize", RILL_ACL_OP_AMAX, self, dim, keepDim,
                         ACL_FLOAT, out, workspaceSize, executor);
}
RUN(Amax, RILL_ACL_OP_AMAX)

aclnnStatus aclnnAminGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepDim,
                                      aclTensor *out, uint64_t *workspaceSize,
                                      aclOpExecutor **executor) {
    return reduce_phase1("aclnnAminGetWorkspaceSize", RILL_ACL_OP_AMIN, self, dim, keepDim,
                         ACL_FLOAT, out, workspaceSize, executor);
}
RUN(Amin, RILL_ACL_OP_AMIN)
