/* SPDX-License-Identifier: MIT */
/* runtime.c: aclInit/aclFinalize, devices, streams and events. Its
 * functions are ACL's, declared in acl/acl.h and acl/acl_rt.h. */
#ifndef RILL_ACL_RUNTIME_H
#define RILL_ACL_RUNTIME_H

#include "acl/acl.h"

#endif /* RILL_ACL_RUNTIME_H */
