/* SPDX-License-Identifier: MIT */
/* The invariant checkers of the core (docs/design.md, "Invariant
 * checkers"): rill__stream_check and rill__device_check_streams, for tests
 * and debugging. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

#include "core/runtime.h"
#include "core/stream.h"
#include "util/alloc.h"
#include "util/status.h"

static rill__stream *stream_of(rill__link *l) {
    return l != NULL ? RILL__OWNER(l, rill__stream, dev_link) : NULL;
}

bool rill__stream_check(rill__stream *s, char *why, size_t cap) {
    char what[200] = "";
    /* done and opaque before sub: done_seq only grows, and never past
     * sub_seq, so a later load of sub_seq cannot be below it; opaque_seq is
     * stored just before submit publishes the same number in sub_seq, under
     * the backend's lock of the stream, so it is at most one ahead. */
    uint64_t done = atomic_load(&s->q.done_seq);
    uint64_t opaque = atomic_load(&s->q.opaque_seq);
    uint64_t sub = atomic_load(&s->q.sub_seq);
    if (atomic_load(&s->magic) != RILL__MAGIC_STREAM)
        snprintf(what, sizeof what, "is not a live stream");
    else if (done > sub)
        snprintf(what, sizeof what, "completed command %" PRIu64 " of %" PRIu64 " submitted", done,
                 sub);
    else if (opaque > sub + 1 && opaque != UINT64_MAX)
        snprintf(what, sizeof what, "marks command %" PRIu64 " opaque of %" PRIu64 " submitted",
                 opaque, sub);
    if (what[0] == '\0') {
        rill__mutex_lock(&s->err_lock);
        size_t n = s->num_windows;
        if (n > s->cap_windows || (n != 0) != (atomic_load(&s->has_failed) != 0))
            snprintf(what, sizeof what, "has %zu failure windows in room for %zu (failed flag %d)",
                     n, s->cap_windows, atomic_load(&s->has_failed));
        for (size_t i = 0; what[0] == '\0' && i < n; i++) {
            const rill__fail_window *w = &s->windows[i];
            if (w->lo == 0 || w->lo >= w->hi || w->lo > sub ||
                (i + 1 < n && w->hi > s->windows[i + 1].lo))
                snprintf(what, sizeof what,
                         "has a failure window [%" PRIu64 ", %" PRIu64
                         ") out of order or past its %" PRIu64 " submitted commands",
                         w->lo, w->hi, sub);
        }
        rill__mutex_unlock(&s->err_lock);
    }
    if (what[0] == '\0') {
        rill__mutex_lock(&s->wait_lock);
        uint64_t min = atomic_load(&s->waiter_min);
        for (rill__waiter *w = s->waiters; what[0] == '\0' && w != NULL; w = w->next)
            if (w->seq < min)
                snprintf(what, sizeof what,
                         "has a waiter for command %" PRIu64
                         " below its least awaited number %" PRIu64,
                         w->seq, min);
        rill__mutex_unlock(&s->wait_lock);
    }
    if (what[0] == '\0')
        return true;
    if (why != NULL && cap > 0) {
        char name[96];
        rill__stream_name(s, name, sizeof name);
        snprintf(why, cap, "stream %s %s", name, what);
    }
    return false;
}

bool rill__device_check_streams(rill_device *dev_h, char *why, size_t cap) {
    rill__device *dev;
    if (rill__device_resolve(dev_h, "rill__device_check_streams", &dev) != RILL_OK) {
        if (why != NULL && cap > 0)
            snprintf(why, cap, "%s", rill_last_error());
        return false;
    }
    /* The streams are checked outside dev->lock, each held by a reference. */
    rill__mutex_lock(&dev->lock);
    size_t n = 0;
    for (rill__stream *s = stream_of(dev->streams); s != NULL; s = stream_of(s->dev_link.next))
        n++;
    rill__stream **list = rill__malloc((n > 0 ? n : 1) * sizeof *list);
    if (list != NULL) {
        n = 0;
        for (rill__stream *s = stream_of(dev->streams); s != NULL;
             s = stream_of(s->dev_link.next)) {
            if (rill__stream_try_ref(s))
                list[n++] = s;
        }
    }
    rill__mutex_unlock(&dev->lock);
    if (list == NULL) {
        if (why != NULL && cap > 0)
            snprintf(why, cap, "no memory to list the streams of device %d",
                     dev->base.info.ordinal);
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        if (ok)
            ok = rill__stream_check(list[i], why, cap);
        rill__stream_unref(list[i]);
    }
    rill__free(list);
    return ok;
}
