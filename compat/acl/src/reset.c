/* SPDX-License-Identifier: MIT */
/*
 * ACL's device resets, as CANN documents them: every aclrtSetDevice of a
 * device adds one to its count and every aclrtResetDevice takes one away;
 * when the count reaches 0 (or at aclrtResetDeviceForce, whatever the
 * count) the reset waits for the device's work and releases what ACL made
 * on it: the streams and events created through ACL (noted here at their
 * creation; a stream's device, and an event's, is the one rill reports at
 * the reset, or for an event not yet bound to one the current device at
 * its creation) and the memory of aclrtMalloc (memory.c). Their handles are rill's, which a
 * destroy closes, so a later use of one is rill's refusal
 * (ACL_ERROR_RT_PARAM_INVALID), and freed memory is refused by memory.c's
 * table. A reset of a device whose count is 0 is refused.
 *
 * State, guarded by one mutex (not a hot path): counts[0..num_counts),
 * grown to a device's ordinal as needed, and notes[0..num_notes), the
 * handles noted and not yet destroyed through ACL. No rill call is made
 * with the mutex held: a reset copies the notes, asks rill, destroys, and
 * then drops the notes of what it destroyed.
 */
#include "reset.h"

#include <pthread.h>
#include <stdlib.h>

#include "error.h"
#include "memory.h"
#include "report.h"
#include "stream.h"

struct note {
    void *handle; /* a rill_stream or a rill_event, as is_event says */
    bool is_event;
    rill_device *made_on; /* an event's: the current device at its creation */
};

static pthread_mutex_t reset_lock = PTHREAD_MUTEX_INITIALIZER;
/* guarded by reset_lock */
static int *counts; /* owned */
static size_t num_counts;
static struct note *notes; /* owned */
static size_t num_notes, cap_notes;

static void lock(void) {
    if (pthread_mutex_lock(&reset_lock) != 0)
        abort();
}

static void unlock(void) {
    if (pthread_mutex_unlock(&reset_lock) != 0)
        abort();
}

bool rill__acl_device_set(int ordinal) {
    lock();
    bool ok = (size_t)ordinal < num_counts;
    if (!ok) {
        int *n = realloc(counts, ((size_t)ordinal + 1) * sizeof *n);
        if (n) {
            for (size_t i = num_counts; i <= (size_t)ordinal; i++)
                n[i] = 0;
            counts = n;
            num_counts = (size_t)ordinal + 1;
            ok = true;
        }
    }
    if (ok)
        counts[ordinal]++;
    unlock();
    return ok;
}

static bool note(void *handle, bool is_event) {
    rill_device *made_on = NULL;
    if (is_event && rill_get_device(&made_on) != RILL_OK)
        made_on = NULL;
    lock();
    bool ok = num_notes < cap_notes;
    if (!ok) {
        size_t grown = cap_notes ? cap_notes * 2 : 32;
        struct note *n = realloc(notes, grown * sizeof *n);
        if (n) {
            notes = n;
            cap_notes = grown;
            ok = true;
        }
    }
    if (ok)
        notes[num_notes++] = (struct note){handle, is_event, made_on};
    unlock();
    return ok;
}

static void forget_locked(void *handle) {
    for (size_t i = 0; i < num_notes; i++)
        if (notes[i].handle == handle) {
            notes[i] = notes[--num_notes];
            return;
        }
}

static void forget(void *handle) {
    lock();
    forget_locked(handle);
    unlock();
}

bool rill__acl_note_stream(rill_stream *stream) {
    return note(stream, false);
}

bool rill__acl_note_event(rill_event *event) {
    return note(event, true);
}

void rill__acl_forget_stream(rill_stream *stream) {
    forget(stream);
}

void rill__acl_forget_event(rill_event *event) {
    forget(event);
}

void rill__acl_resets_forget_all(void) {
    lock();
    free(counts);
    counts = NULL;
    num_counts = 0;
    free(notes);
    notes = NULL;
    num_notes = cap_notes = 0;
    unlock();
}

/* Destroys the noted streams and events of dev and drops their notes, with
 * those of handles that rill no longer knows (destroyed through rill). */
static aclError release_handles(const char *call, rill_device *dev) {
    lock();
    size_t n = num_notes;
    struct note *copy = n ? malloc(n * sizeof *copy) : NULL;
    if (copy)
        for (size_t i = 0; i < n; i++)
            copy[i] = notes[i];
    unlock();
    if (n && !copy)
        return rill__acl_fail(ACL_ERROR_BAD_ALLOC,
                              "%s: no memory to list the device's streams and events", call);
    for (size_t i = 0; i < n; i++) {
        rill_device *on = NULL;
        rill_status st = copy[i].is_event ? rill_event_get_device(copy[i].handle, &on)
                                          : rill_stream_get_device(copy[i].handle, &on);
        if (st == RILL_OK && !on) /* an event bound to no device yet: its creation's */
            on = copy[i].made_on;
        if (st == RILL_OK && on != dev) {
            copy[i].handle = NULL; /* another device's: kept */
            continue;
        }
        if (st == RILL_OK && copy[i].is_event)
            (void)rill_event_destroy(copy[i].handle);
        else if (st == RILL_OK) {
            (void)rill_stream_destroy(copy[i].handle);
            rill__acl_stream_forget(copy[i].handle);
        }
    }
    lock();
    for (size_t i = 0; i < n; i++)
        if (copy[i].handle)
            forget_locked(copy[i].handle);
    unlock();
    free(copy);
    return ACL_SUCCESS;
}

/* Takes one from the count of ordinal (force: all of it); *release is
 * whether it reached 0. A count already 0 is refused. */
static aclError take_count(const char *call, int ordinal, bool force, bool *release) {
    lock();
    int *c = (size_t)ordinal < num_counts ? &counts[ordinal] : NULL;
    int was = c ? *c : 0;
    if (was > 0)
        *c = force ? 0 : was - 1;
    *release = was > 0 && (force || was == 1);
    unlock();
    if (was == 0)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: device %d is not set: each aclrtResetDevice answers one "
                              "aclrtSetDevice of the device, and its resources are released "
                              "once (call aclrtSetDevice(%d) first)",
                              call, ordinal, ordinal);
    return ACL_SUCCESS;
}

aclError rill__acl_device_reset(const char *call, rill_device *dev, int ordinal, bool force) {
    bool release;
    aclError err = take_count(call, ordinal, force, &release);
    if (err != ACL_SUCCESS || !release)
        return err;
    /* A failure of the device's work is not the reset's: the streams that
     * hold it go with the rest. */
    (void)rill__acl_wait(rill__acl_wait_device, dev, UINT64_MAX);
    err = release_handles(call, dev);
    if (err == ACL_SUCCESS)
        err = rill__acl_memory_release_device(call, ordinal);
    return err;
}
