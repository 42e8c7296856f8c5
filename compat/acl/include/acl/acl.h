/* SPDX-License-Identifier: MIT */
/*
 * acl/acl.h: the entry header of Ascend ACL's C API as librill_acl
 * implements it on rill (docs/acl.md): the runtime (acl_rt.h) and models
 * built by capture (acl_mdl.h). The ops are in aclnnop/aclnn_*.h.
 */
#ifndef RILL_ACL_ACL_H
#define RILL_ACL_ACL_H

#include "acl_base.h"
#include "acl_mdl.h"
#include "acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Starts ACL; configPath (a JSON file of CANN's settings) may be NULL, and
 * when given must name a readable file, whose settings rill does not use.
 * ACL_ERROR_REPEAT_INITIALIZE when ACL is already started. */
ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath);
/* Waits for all work and releases everything: streams, events, memory and
 * models (rill_shutdown). ACL_ERROR_REPEAT_FINALIZE when called again
 * without an aclInit between, ACL_ERROR_UNINITIALIZE before any aclInit.
 * aclInit may start ACL again afterwards. */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACL_H */
