/* SPDX-License-Identifier: MIT */
/* event.c: the event calls beyond create, record, query, synchronize and
 * elapsed time: flag variants, reset, waits with a time limit, and
 * interprocess events. */
#ifndef RILL_ACL_EVENT_H
#define RILL_ACL_EVENT_H

#include "acl/acl_rt.h"

#endif /* RILL_ACL_EVENT_H */
