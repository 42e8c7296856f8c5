/* SPDX-License-Identifier: MIT */
/* Sticky errors of a stream: the windows of sequence numbers whose work
 * failed or was skipped, each with the sentence of its root cause and how
 * it reached this stream (stream.h). Guarded by the stream's err_lock;
 * has_failed lets the fast path skip the lock. */
#include <stdio.h>
#include <string.h>

#include "core/stream.h"
#include "util/alloc.h"
#include "util/status.h"

/* Opens a window at seq whose sentence is message, the first cause_bytes
 * of it the root cause, unless a window is open. */
static void open_window(rill__stream *s, uint64_t seq, const char *message, size_t cause_bytes) {
    char *copy = rill__strdup(message);
    rill__mutex_lock(&s->err_lock);
    size_t n = s->num_windows;
    if (n > 0 && s->windows[n - 1].hi == UINT64_MAX) {
        rill__mutex_unlock(&s->err_lock); /* already failing */
        rill__free(copy);
        return;
    }
    if (n == s->cap_windows) {
        size_t cap = 2 * n;
        rill__fail_window *w = rill__malloc(cap * sizeof *w);
        if (w == NULL) {
            /* Out of memory: reopen the last window instead (stricter,
             * never more lenient). */
            s->windows[n - 1].hi = UINT64_MAX;
            rill__mutex_unlock(&s->err_lock);
            rill__free(copy);
            return;
        }
        memcpy(w, s->windows, n * sizeof *w);
        if (s->windows != &s->first_window)
            rill__free(s->windows);
        s->windows = w;
        s->cap_windows = cap;
    }
    s->windows[n].lo = seq;
    s->windows[n].hi = UINT64_MAX;
    s->windows[n].message = copy;
    s->windows[n].cause_bytes = copy != NULL ? cause_bytes : 0;
    s->num_windows = n + 1;
    atomic_store(&s->has_failed, 1);
    rill__mutex_unlock(&s->err_lock);
}

void rill__stream_fail(rill__stream *s, uint64_t seq, const char *cause) {
    char text[RILL__CAUSE_BYTES];
    size_t n = rill__fit(text, sizeof text, cause);
    open_window(s, seq, text, n);
}

void rill__stream_clear_failure(rill__stream *s, uint64_t seq) {
    rill__mutex_lock(&s->err_lock);
    size_t n = s->num_windows;
    if (n > 0 && s->windows[n - 1].hi == UINT64_MAX)
        s->windows[n - 1].hi = seq;
    rill__mutex_unlock(&s->err_lock);
}

/* The window that holds seq, or NULL; err_lock held. */
static const rill__fail_window *window_at_locked(rill__stream *s, uint64_t seq) {
    /* The last window with lo <= seq is the only one that may hold seq. */
    size_t lo = 0, hi = s->num_windows;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->windows[mid].lo <= seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && seq < s->windows[lo - 1].hi ? &s->windows[lo - 1] : NULL;
}

/* When the work of s up to seq failed, copies its window's sentence into
 * msg (size > RILL__CAUSE_BYTES) and sets *cause_bytes to the length of
 * its root cause there. */
static bool failure_of(rill__stream *s, uint64_t seq, char *msg, size_t size, size_t *cause_bytes) {
    static const char no_memory[] = "a kernel failed (there was no memory for its message)";
    /* acquire: pairs with the seq_cst store in open_window. */
    if (!atomic_load_explicit(&s->has_failed, memory_order_acquire))
        return false;
    rill__mutex_lock(&s->err_lock);
    const rill__fail_window *w = window_at_locked(s, seq);
    if (w != NULL && msg != NULL) {
        size_t n = rill__fit(msg, size, w->message != NULL ? w->message : no_memory);
        *cause_bytes = w->message != NULL && w->cause_bytes < n ? w->cause_bytes : n;
    }
    rill__mutex_unlock(&s->err_lock);
    return w != NULL;
}

bool rill__stream_carry_failure(rill__stream *s, uint64_t seq, rill__stream *t, uint64_t t_seq) {
    char sentence[RILL__ERROR_BYTES], cause[RILL__CAUSE_BYTES], through[96], name[80];
    char text[RILL__ERROR_BYTES];
    size_t cause_bytes;
    if (!failure_of(t, t_seq, sentence, sizeof sentence, &cause_bytes))
        return false;
    /* t's own part is dropped: the root cause, then the last hop. */
    bool carried = sentence[cause_bytes] != '\0';
    sentence[cause_bytes] = '\0';
    cause_bytes = rill__fit(cause, sizeof cause, sentence); /* it fits: rill__stream_fail */
    through[0] = '\0';
    if (carried) {
        rill__stream_name(t, name, sizeof name);
        snprintf(through, sizeof through, " through stream %s", name);
    }
    rill__stream_name(s, name, sizeof name);
    snprintf(text, sizeof text, "%s; stream %s waited for it%s", cause, name, through);
    open_window(s, seq, text, cause_bytes);
    return true;
}

RILL_HOT bool rill__stream_failed_at(rill__stream *s, uint64_t seq, char *msg, size_t size) {
    char text[RILL__ERROR_BYTES], whole[2 * RILL__ERROR_BYTES];
    size_t cause_bytes;
    if (!failure_of(s, seq, msg != NULL ? text : NULL, sizeof text, &cause_bytes))
        return false;
    if (msg == NULL)
        return true;
    if (s->kind == RILL__STREAM_PROXY) /* stands for another process: no advice here */
        snprintf(whole, sizeof whole, "%s", text);
    else if (text[cause_bytes] != '\0') /* carried: the sentence names s */
        snprintf(whole, sizeof whole, "%s and skips its later work until rill_stream_clear_error",
                 text);
    else
        snprintf(whole, sizeof whole,
                 "%s; the stream skips its later work until rill_stream_clear_error", text);
    rill__fit(msg, size, whole);
    return true;
}
