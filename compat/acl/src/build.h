/* SPDX-License-Identifier: MIT */
/* build.c: models built by hand (aclmdlRIBuildBegin, aclmdlRIBindStream,
 * aclmdlRIEndTask, aclmdlRIBuildEnd, aclmdlRIUnbindStream, declared in
 * acl/acl_mdl.h). */
#ifndef RILL_ACL_BUILD_H
#define RILL_ACL_BUILD_H

#include "model.h"

/* Ends the capture of a model still being built, dropping what it
 * recorded (models' lock held): aclmdlRIDestroy of such a model. */
void rill__acl_build_abandon_locked(struct rill__acl_model *m);

#endif /* RILL_ACL_BUILD_H */
