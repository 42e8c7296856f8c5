/* SPDX-License-Identifier: MIT */
/* model.c: capture into model running instances; its functions are ACL's,
 * declared in acl/acl_mdl.h. */
#ifndef RILL_ACL_MODEL_H
#define RILL_ACL_MODEL_H

#include "acl/acl_mdl.h"

#endif /* RILL_ACL_MODEL_H */
