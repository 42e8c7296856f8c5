/* SPDX-License-Identifier: MIT */
/* ops.c: the executors of the two-phase op API and the element-wise ops
 * and matmul, declared in aclnn/acl_meta.h and aclnnop/aclnn_*.h; the
 * checks and executors that the other ops (nn.c, reduce.c, conv.c) share. */
#ifndef RILL_ACL_OPS_H
#define RILL_ACL_OPS_H

#include "aclnnop/aclnn_add.h"
#include "aclnnop/aclnn_div.h"
#include "aclnnop/aclnn_matmul.h"
#include "aclnnop/aclnn_mul.h"
#include "aclnnop/aclnn_sub.h"
#include "elementwise.h"

enum rill__acl_op {
    RILL_ACL_OP_ADD,
    RILL_ACL_OP_SUB,
    RILL_ACL_OP_MUL,
    RILL_ACL_OP_DIV,
    RILL_ACL_OP_MATMUL,
    RILL_ACL_OP_RELU,
    RILL_ACL_OP_GELU,
    RILL_ACL_OP_SIGMOID,
    RILL_ACL_OP_TANH,
    RILL_ACL_OP_SILU,
    RILL_ACL_OP_SOFTMAX,
    RILL_ACL_OP_LOG_SOFTMAX,
    RILL_ACL_OP_CAST,
    RILL_ACL_OP_INPLACE_COPY,
    RILL_ACL_OP_REDUCE_SUM,
    RILL_ACL_OP_MEAN,
    RILL_ACL_OP_AMAX,
    RILL_ACL_OP_AMIN,
    RILL_ACL_OP_CONVOLUTION,
    RILL_ACL_OP_AVG_POOL2D,
    RILL_ACL_OP_MAX_POOL
};

/* What the first phase keeps for the second: the views (b and c unused by
 * ops of fewer inputs) and the op's parameters. */
struct rill__acl_executor {
    enum rill__acl_op op;            /* immutable */
    bool repeatable;                 /* guarded by the handle table's lock */
    struct rill__acl_view out, a, b; /* immutable */
    struct rill__acl_view c;         /* immutable: a third input (conv's bias), else unused */
    float alpha;                     /* immutable: add's and sub's scale */
    int64_t dim;                     /* immutable: softmax's dimension, made non-negative */
    int64_t params[16]; /* immutable: the sizes an op computes with (reduce.c, conv.c) */
};

/* ACLNN_ERR_PARAM_NULLPTR: "<call>: <name> is NULL". */
aclnnStatus rill__acl_null_arg(const char *call, const char *name);
/* handle's tensor as a view, after the checks every op makes of its
 * tensors: live, ACL_FLOAT or ACL_FLOAT16, not too many elements, inside
 * its allocation. */
aclnnStatus rill__acl_take_view(const char *call, const char *name, const aclTensor *handle,
                                struct rill__acl_view *v);
/* "[2, 3]" into buf. */
void rill__acl_format_dims(const struct rill__acl_view *v, char *buf, size_t size);
/* The checks that ops of one input share, each ACLNN_ERR_PARAM_INVALID
 * with a message naming the tensor: out's shape is in's; v is ACL_FLOAT;
 * v is row-major contiguous; out and in do not overlap in memory. */
aclnnStatus rill__acl_check_same_shape(const char *call, const char *name,
                                       const struct rill__acl_view *out,
                                       const struct rill__acl_view *in);
aclnnStatus rill__acl_check_float32(const char *call, const char *name,
                                    const struct rill__acl_view *v);
aclnnStatus rill__acl_check_contiguous(const char *call, const char *name,
                                       const struct rill__acl_view *v);
aclnnStatus rill__acl_check_apart(const char *call, const char *out_name,
                                  const struct rill__acl_view *out, const char *in_name,
                                  const struct rill__acl_view *in);
/* A new executor from *proto, and a workspace size of 0. */
aclnnStatus rill__acl_finish(const char *call, const struct rill__acl_executor *proto,
                             uint64_t *workspaceSize, aclOpExecutor **executor);
/* A new executor, a copy of *proto (not repeatable), in *executor. */
aclnnStatus rill__acl_new_executor(const char *call, const struct rill__acl_executor *proto,
                                   aclOpExecutor **executor);
/* The executor of op that handle names: copied into *copy, and taken (its
 * handle closed) unless repeatable, in one step under the table's lock, so
 * that of two runs of a spent executor only one finds it. *owned receives
 * the taken executor, for the caller to free, or NULL. */
aclnnStatus rill__acl_find_executor(const char *call, enum rill__acl_op op, aclOpExecutor *handle,
                                    struct rill__acl_executor *copy,
                                    struct rill__acl_executor **owned);

/* Submits an executor's work to stream (its out has elements). */
typedef rill_status (*rill__acl_submit_fn)(rill_stream *stream, const struct rill__acl_executor *e);
/* The second phase of op: finds the executor, submits its work unless out
 * is empty, frees it unless repeatable, and maps rill's status. */
aclnnStatus rill__acl_run(enum rill__acl_op op, aclOpExecutor *executor, aclrtStream stream,
                          rill__acl_submit_fn submit);

#endif /* RILL_ACL_OPS_H */
