/* SPDX-License-Identifier: MIT */
/* nn.c: the op API's ops of one input (activations, softmax and
 * log-softmax, cast, in-place copy), declared in aclnnop/aclnn_*.h. */
#ifndef RILL_ACL_NN_H
#define RILL_ACL_NN_H

#include "aclnnop/aclnn_cast.h"
#include "aclnnop/aclnn_copy.h"
#include "aclnnop/aclnn_gelu.h"
#include "aclnnop/aclnn_logsoftmax.h"
#include "aclnnop/aclnn_relu.h"
#include "aclnnop/aclnn_sigmoid.h"
#include "aclnnop/aclnn_silu.h"
#include "aclnnop/aclnn_softmax.h"
#include "aclnnop/aclnn_tanh.h"

#endif /* RILL_ACL_NN_H */
