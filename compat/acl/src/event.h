/* SPDX-License-Identifier: MIT */
/* event.c: the event calls beyond create, record, query, synchronize and
 * elapsed time: flag variants, reset, waits with a time limit, and
 * interprocess events. */
#ifndef RILL_ACL_EVENT_H
#define RILL_ACL_EVENT_H

#include "acl/acl_rt.h"
#include "rill.h"

/* Records event on stream (aclrtRecordEvent and the default flag). An
 * interprocess event bound to another device than the stream's is
 * recorded through a relay: the stream records an event of its own
 * device, and a stream of the event's device waits for that one and
 * records the event. */
aclError rill__acl_record_event(const char *call, rill_event *event, rill_stream *stream);

#endif /* RILL_ACL_EVENT_H */
