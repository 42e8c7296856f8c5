/* SPDX-License-Identifier: MIT */
/* context.c: ACL's contexts (aclrtContext), each standing for one device,
 * and aclrtGetRunMode. */
#ifndef RILL_ACL_CONTEXT_H
#define RILL_ACL_CONTEXT_H

#include "acl/acl_rt.h"

#endif /* RILL_ACL_CONTEXT_H */
