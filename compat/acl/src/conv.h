/* SPDX-License-Identifier: MIT */
/* conv.c: the op API's 2-D convolution and pooling (aclnnConvolution,
 * aclnnAvgPool2d, aclnnMaxPool), declared in aclnnop/aclnn_*.h. */
#ifndef RILL_ACL_CONV_H
#define RILL_ACL_CONV_H

#include "aclnnop/aclnn_avgpool2d.h"
#include "aclnnop/aclnn_convolution.h"
#include "aclnnop/aclnn_max_pool.h"

#endif /* RILL_ACL_CONV_H */
