/* SPDX-License-Identifier: MIT */
/* model.c: model running instances by capture and built by hand; its
 * functions are ACL's, declared in acl/acl_mdl.h, but for one. */
#ifndef RILL_ACL_MODEL_H
#define RILL_ACL_MODEL_H

#include "acl/acl_mdl.h"

/* Frees every model built by hand (aclFinalize, after rill_shutdown has
 * released their rill objects). */
void rill__acl_models_forget_all(void);

#endif /* RILL_ACL_MODEL_H */
