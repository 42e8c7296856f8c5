/* SPDX-License-Identifier: MIT */
/* elementwise.c: add, mul and div of strided, broadcast views on a
 * stream. */
#ifndef RILL_ACL_ELEMENTWISE_H
#define RILL_ACL_ELEMENTWISE_H

#include <stdbool.h>

#include "rill.h"
#include "tensor.h"

/* The elements of out that one block of the kernel takes. */
#define RILL_ACL_EW_CHUNK 16384u

/* A tensor as an op sees it: data already moved to the view's first
 * element, strides in elements. The op API's first phase checked it: at
 * most UINT32_MAX blocks of RILL_ACL_EW_CHUNK elements, and every element
 * at most PTRDIFF_MAX bytes past data, without wrapping the address space. */
struct rill__acl_view {
    aclDataType dtype; /* ACL_FLOAT or ACL_FLOAT16 */
    int ndim;
    int64_t dims[RILL_ACL_MAX_DIMS];
    int64_t strides[RILL_ACL_MAX_DIMS];
    char *data; /* borrowed */
};

enum rill__acl_ew_op { RILL_ACL_EW_ADD, RILL_ACL_EW_MUL, RILL_ACL_EW_DIV };

/* out = a + alpha*b, a * b or a / b, where a's and b's shapes broadcast
 * to out's. Contiguous operands of out's shape take rill's built-in ops
 * (for a / b, float32 only); others a kernel of this layer, which runs on
 * CPU devices. */
rill_status rill__acl_elementwise(rill_stream *stream, enum rill__acl_ew_op op,
                                  const struct rill__acl_view *out, const struct rill__acl_view *a,
                                  const struct rill__acl_view *b, float alpha);
/* Whether v is row-major contiguous. */
bool rill__acl_view_is_contiguous(const struct rill__acl_view *v);
/* The number of elements of v (its dimensions fit: the ops check them). */
uint64_t rill__acl_view_numel(const struct rill__acl_view *v);

#endif /* RILL_ACL_ELEMENTWISE_H */
