/* SPDX-License-Identifier: MIT */
/* reduce.c: the op API's reductions (aclnnReduceSum, aclnnMean,
 * aclnnAmax, aclnnAmin), declared in aclnnop/aclnn_*.h. */
#ifndef RILL_ACL_REDUCE_H
#define RILL_ACL_REDUCE_H

#include "aclnnop/aclnn_amax.h"
#include "aclnnop/aclnn_amin.h"
#include "aclnnop/aclnn_mean.h"
#include "aclnnop/aclnn_reduce_sum.h"

#endif /* RILL_ACL_REDUCE_H */
