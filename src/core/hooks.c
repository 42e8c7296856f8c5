/* SPDX-License-Identifier: MIT */
/* The hooks the layers above the core install (see hooks.h), and what they
 * do before that: a call may check for captures before the runtime (and
 * the graph layer) started, and then there is none. */
#include "core/hooks.h"

static void no_use(rill__stream *s, uint64_t seq, const void *ptr, size_t bytes) {
    (void)s, (void)seq, (void)ptr, (void)bytes;
}

static const rill__mem_hooks no_mem = {.note_use = no_use};

static rill_status no_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq) {
    (void)s, (void)cmd, (void)seq;
    return RILL_ERROR_INTERNAL; /* only capturing streams come here */
}

static rill_status not_event(rill__event *e, rill__stream *s, bool *handled) {
    (void)e, (void)s;
    *handled = false;
    return RILL_OK;
}

static rill_status not_wait_event(rill__stream *s, rill__event *e, bool *handled) {
    (void)e, (void)s;
    *handled = false;
    return RILL_OK;
}

static rill_status not_wait_stream(rill__stream *s, rill__stream *other, bool *handled) {
    (void)s, (void)other;
    *handled = false;
    return RILL_OK;
}

static rill_status ok_stream(rill__stream *s, const char *fn) {
    (void)s, (void)fn;
    return RILL_OK;
}

static rill_status ok_event(rill__event *e, const char *fn) {
    (void)e, (void)fn;
    return RILL_OK;
}

static rill_status ok_device(rill__device *dev, const char *fn) {
    (void)dev, (void)fn;
    return RILL_OK;
}

static rill_status ok_call(const char *fn) {
    (void)fn;
    return RILL_OK;
}

static rill_status ok_free(void *ptr, const char *fn) {
    (void)ptr, (void)fn;
    return RILL_OK;
}

static rill_status no_malloc(rill__stream *s, size_t bytes, void **out) {
    (void)s, (void)bytes, (void)out;
    return RILL_ERROR_INTERNAL; /* only capturing streams come here */
}

static rill_status not_free(rill__stream *s, void *ptr, bool *handled) {
    (void)s, (void)ptr;
    *handled = false;
    return RILL_OK;
}

static void no_destroy(rill__stream *s) {
    (void)s;
}

static const rill__capture_hooks no_capture = {
    .submit = no_submit,
    .event_record = not_event,
    .wait_event = not_wait_event,
    .wait_stream = not_wait_stream,
    .check_stream_sync = ok_stream,
    .check_event_sync = ok_event,
    .check_device_sync = ok_device,
    .check_unsafe = ok_call,
    .check_free = ok_free,
    .malloc = no_malloc,
    .free = not_free,
    .stream_destroyed = no_destroy,
};

_Atomic(const rill__mem_hooks *) rill__mem = &no_mem;
_Atomic(const rill__capture_hooks *) rill__capture_ops = &no_capture;
_Atomic int rill__captures_active;
