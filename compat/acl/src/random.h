/* SPDX-License-Identifier: MIT */
/* random.c: aclrtRandomNumAsync on rill_op_randn_f32 and a kernel of its
 * own. */
#ifndef RILL_ACL_RANDOM_H
#define RILL_ACL_RANDOM_H

#include "acl/acl_rt.h"

#endif /* RILL_ACL_RANDOM_H */
