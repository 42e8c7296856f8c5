/* SPDX-License-Identifier: MIT */
/* reduce_task.c: aclrtReduceAsync, declared in acl/acl_rt.h, on rill's
 * element-wise ops. */
#ifndef RILL_ACL_REDUCE_TASK_H
#define RILL_ACL_REDUCE_TASK_H

#include "acl/acl_rt.h"

#endif /* RILL_ACL_REDUCE_TASK_H */
