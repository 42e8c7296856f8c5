/* SPDX-License-Identifier: MIT */
/* The stream sanitizer: see sanitizer.h for the model, rill.h for the
 * calls. Races inside a launched graph are graphs.c's; the state and
 * helpers the two share are in internal.h. */
#include "sanitizer/sanitizer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/calls.h"
#include "core/kernel.h"
#include "core/runtime.h"
#include "core/stream.h"
#include "graph/graph.h"
#include "mem/pool.h"
#include "platform/thread.h"
#include "sanitizer/internal.h"
#include "util/alloc.h"
#include "util/ptrmap.h"
#include "util/status.h"

san_state rill__san_state;

static _Atomic uint64_t reports;

/* rill_sanitizer_set_location: the next command of this thread. */
static _Thread_local const char *tls_file;
static _Thread_local int tls_line;

/* rill_sanitizer_host_accesses: the next host function of this thread. */
#define HOST_ACCESSES_MAX 16
static _Thread_local rill_access tls_host_acc[HOST_ACCESSES_MAX];
static _Thread_local size_t tls_host_n;

/* An array arr of elements of elem bytes, n of them in room for *cap,
 * with room for one more: arr itself, or arr doubled (first elements at
 * first). NULL when out of memory, arr and *cap unchanged. */
static void *room_for_one(void *arr, size_t n, size_t *cap, size_t elem, size_t first) {
    if (n < *cap)
        return arr;
    size_t c = *cap ? *cap * 2 : first;
    void *a = rill__realloc(arr, c * elem);
    if (a != NULL)
        *cap = c;
    return a;
}

/* --------------------------------------------------------------- clocks */

static uint32_t vc_find(const vclock *v, uint32_t idx) {
    uint32_t lo = 0, hi = v->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (v->e[mid].idx < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint64_t vc_get(const vclock *v, uint32_t idx) {
    uint32_t i = vc_find(v, idx);
    return i < v->n && v->e[i].idx == idx ? v->e[i].seq : 0;
}

static bool vc_raise(vclock *v, uint32_t idx, uint64_t seq) {
    uint32_t i = vc_find(v, idx);
    if (i < v->n && v->e[i].idx == idx) {
        if (seq > v->e[i].seq)
            v->e[i].seq = seq;
        return true;
    }
    vc_entry *e = room_for_one(v->e, v->n, &v->cap, sizeof *e, 4);
    if (e == NULL)
        return false;
    v->e = e;
    memmove(v->e + i + 1, v->e + i, (v->n - i) * sizeof *v->e);
    v->e[i] = (vc_entry){idx, seq};
    v->n++;
    return true;
}

/* The clock of stream st for its command seq (NULL: ordered after
 * nothing). */
static const vclock *vc_at(const san_stream *st, uint64_t seq) {
    for (uint32_t h = st->num_hist; h-- > 0;)
        if (st->hist[h].after < seq)
            return &st->hist[h].vc;
    return st->hist_lost ? &st->hist[0].vc : NULL;
}

/* The clock of what st submits from now on. */
static const vclock *vc_now(const san_stream *st) {
    return st->num_hist > 0 ? &st->hist[st->num_hist - 1].vc : NULL;
}

/* The clock that holds once stream st completed seq: the current one
 * when seq is all its work so far (waits that submitted no command
 * included), else that of its command seq. */
static const vclock *upto(const san_stream *st, uint64_t seq, bool all) {
    return all ? vc_now(st) : vc_at(st, seq);
}

/* Makes room for a new clock of st's work after `after`, a copy of the
 * current one, and returns it (NULL: out of memory). */
static vclock *vc_next(san_stream *st, uint64_t after) {
    if (st->num_hist > 0 && st->hist[st->num_hist - 1].after >= after)
        return &st->hist[st->num_hist - 1].vc; /* no command since the last change */
    const vclock *cur = vc_now(st);
    vclock v = {NULL, 0, 0};
    if (cur != NULL && cur->n > 0) {
        v.e = rill__malloc(cur->n * sizeof *v.e);
        if (v.e == NULL)
            return NULL;
        memcpy(v.e, cur->e, cur->n * sizeof *v.e);
        v.n = v.cap = cur->n;
    }
    if (st->num_hist == HISTORY) {
        rill__free(st->hist[0].vc.e);
        memmove(st->hist, st->hist + 1, (HISTORY - 1) * sizeof *st->hist);
        st->num_hist--;
        st->hist_lost = true;
    }
    st->hist[st->num_hist] = (snapshot){after, v};
    return &st->hist[st->num_hist++].vc;
}

/* ------------------------------------------------------------- streams */

static void clear_state(void) {
    for (uint32_t i = 0; i < S.num_streams; i++)
        for (uint32_t h = 0; h < S.streams[i].num_hist; h++)
            rill__free(S.streams[i].hist[h].vc.e);
    rill__free(S.streams);
    rill__free(S.recs);
    rill__free(S.covers);
    rill__ptrmap_free(&S.ids);
    rill__ptrmap_free(&S.checked);
    for (uint32_t i = 0; i < S.num_ev; i++)
        rill__free(S.ev[i].e);
    rill__free(S.ev);
    rill__ptrmap_free(&S.events);
    S.ev = NULL;
    S.num_ev = S.cap_ev = 0;
    S.streams = NULL;
    S.recs = NULL;
    S.covers = NULL;
    S.num_streams = S.cap_streams = 0;
    S.num_recs = S.cap_recs = S.max_len = 0;
    S.num_covers = S.cap_covers = 0;
}

/* Out of memory: the sanitizer cannot go on without missing or inventing
 * orders, so it says so and stops. */
static void give_up(void) {
    fprintf(stderr, "rill sanitizer: out of memory; the sanitizer stops here (turn it on again "
                    "with rill_sanitizer_enable once memory is free)\n");
    atomic_store_explicit(&rill__san_on, 0, memory_order_relaxed);
    clear_state();
}

/* The index of the stream with this id, created when new (dev may be NULL
 * for a stream only known by id). UINT32_MAX when out of memory. */
static uint32_t index_of_id(uint64_t id, rill__device *dev) {
    uint32_t v;
    if (rill__ptrmap_get(&S.ids, (const void *)(uintptr_t)id, &v))
        return v - 1;
    san_stream *grown = room_for_one(S.streams, S.num_streams, &S.cap_streams, sizeof *grown, 16);
    if (grown == NULL)
        return UINT32_MAX;
    S.streams = grown;
    uint32_t idx = S.num_streams;
    if (!rill__ptrmap_put(&S.ids, (const void *)(uintptr_t)id, idx + 1))
        return UINT32_MAX;
    san_stream *st = &S.streams[idx];
    memset(st, 0, sizeof *st);
    st->id = id;
    st->dev = dev;
    snprintf(st->label, sizeof st->label, "#%" PRIu64, id);
    S.num_streams++;
    return idx;
}

static uint32_t index_of(rill__stream *s) {
    uint32_t idx = index_of_id(s->q.id, s->q.dev);
    if (idx == UINT32_MAX)
        return idx;
    san_stream *st = &S.streams[idx];
    st->dev = s->q.dev;
    /* The name may change (rill_stream_set_name): read it each time. */
    rill__mutex_lock(&s->err_lock);
    if (s->name[0] != '\0')
        snprintf(st->label, sizeof st->label, "'%s'", s->name);
    rill__mutex_unlock(&s->err_lock);
    return idx;
}

/* Command seq of stream u is ordered before what stream t submits now. */
static bool ordered(uint32_t t, uint32_t u, uint64_t seq) {
    const vclock *v = vc_now(&S.streams[t]);
    return t == u || S.streams[u].done >= seq || (v != NULL && vc_get(v, u) >= seq);
}

/* The host saw stream t complete seq, and so what that work was ordered
 * after. */
static void observe(uint32_t t, uint64_t seq, const vclock *v) {
    san_stream *st = &S.streams[t];
    if (seq > st->done)
        st->done = seq;
    for (uint32_t i = 0; v != NULL && i < v->n; i++) {
        san_stream *o = &S.streams[v->e[i].idx];
        if (v->e[i].seq > o->done)
            o->done = v->e[i].seq;
    }
}

/* ------------------------------------------------------------- reports */

static void where(char *buf, size_t size, const char *file, int line) {
    if (file != NULL)
        snprintf(buf, size, ", at %s:%d", file, line);
    else
        buf[0] = '\0';
}

void rill__san_finish_report(void) {
    atomic_fetch_add_explicit(&reports, 1, memory_order_relaxed);
    fflush(stderr);
    if (S.abort_at_first) {
        fprintf(stderr, "rill sanitizer: aborting at the first report (RILL_SANITIZE=abort)\n");
        fflush(stderr);
        abort();
    }
}

/* (a) and (b): a (on stream t) and r overlap on [lo, hi), unordered. */
static void report_race(uint32_t t, uint64_t seq, const access *a, const san_rec *r, uintptr_t lo,
                        uintptr_t hi) {
    const char *sl = S.streams[t].label, *rl = S.streams[r->stream].label;
    char wa[300], wr[300];
    where(wa, sizeof wa, a->file, a->line);
    where(wr, sizeof wr, r->file, r->line);
    if (a->host) {
        fprintf(stderr,
                "rill sanitizer: host access not ordered after device work, on bytes [%p, %p) "
                "(%zu bytes)\n"
                "  %s on the host (run through stream %s) %s them%s\n"
                "  %s on stream %s (command %" PRIu64 ") %s them%s\n"
                "  the host did not wait for that work; fix: rill_stream_synchronize(stream %s) "
                "(or rill_event_synchronize of an event recorded there after %s), or make stream "
                "%s wait for stream %s, before %s\n",
                (void *)lo, (void *)hi, (size_t)(hi - lo), a->what, sl,
                a->write ? "writes" : "reads", wa, r->what, rl, r->seq,
                r->write ? "writes" : "reads", wr, rl, r->what, sl, rl, a->what);
    } else {
        fprintf(stderr,
                "rill sanitizer: race between streams on bytes [%p, %p) (%zu bytes)\n"
                "  %s on stream %s (command %" PRIu64 ") %s them%s\n"
                "  %s on stream %s (command %" PRIu64 ") %s them%s\n"
                "  no wait orders the two; fix: make stream %s wait for stream %s before %s "
                "(rill_stream_wait_stream, or rill_stream_wait_event on an event recorded on "
                "stream %s after %s)\n",
                (void *)lo, (void *)hi, (size_t)(hi - lo), a->what, sl, seq,
                a->write ? "writes" : "reads", wa, r->what, rl, r->seq,
                r->write ? "writes" : "reads", wr, sl, rl, a->what, rl, r->what);
    }
    rill__san_finish_report();
}

/* (c): the block [lo, hi) freed on stream f while r may still use it. */
static void report_free(uint32_t f, const char *fn, const void *ptr, uintptr_t lo, uintptr_t hi,
                        const san_rec *r, const char *file, int line) {
    const char *fl = S.streams[f].label, *rl = S.streams[r->stream].label;
    char wf[300], wr[300];
    where(wf, sizeof wf, file, line);
    where(wr, sizeof wr, r->file, r->line);
    fprintf(stderr,
            "rill sanitizer: free of memory that another stream may still use, bytes [%p, %p) "
            "(%zu bytes)\n"
            "  %s frees %p on stream %s%s\n"
            "  %s on stream %s (command %" PRIu64 ") %s them%s\n"
            "  no wait orders the free after that use, and the pool does not track it; fix: make "
            "stream %s wait for stream %s before the free (rill_stream_wait_stream), or call "
            "rill_record_stream(%p, stream %s)\n",
            (void *)lo, (void *)hi, (size_t)(hi - lo), fn, ptr, fl, wf, r->what, rl, r->seq,
            r->write ? "writes" : "reads", wr, fl, rl, ptr, rl);
    rill__san_finish_report();
}

/* --------------------------------------------------------------- records */

/* The first record whose lo is at least lo. */
static size_t rec_lower(uintptr_t lo) {
    size_t a = 0, b = S.num_recs;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (S.recs[mid].lo < lo)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

/* The first record that may overlap [lo, ...). */
static size_t rec_first(uintptr_t lo) {
    return rec_lower(lo > S.max_len ? lo - S.max_len : 0);
}

/* One report per pair of commands: true when r's command was reported
 * with this one already (or too many were to remember). */
static bool seen_before(seen *s, const san_rec *r) {
    for (unsigned i = 0; i < s->n; i++)
        if (s->stream[i] == r->stream && s->seq[i] == r->seq)
            return true;
    if (s->n == 8)
        return true;
    s->stream[s->n] = r->stream;
    s->seq[s->n++] = r->seq;
    return false;
}

/* Checks the access a of command seq of stream t, then remembers it. */
bool rill__san_check_access(uint32_t t, uint64_t seq, const access *a, seen *sn) {
    uintptr_t lo = a->lo, hi = a->hi;
    if (hi <= lo)
        return true;
    size_t first = rec_first(lo), k;
    for (k = first; k < S.num_recs && S.recs[k].lo < hi; k++) {
        const san_rec *r = &S.recs[k];
        if (r->hi <= lo || !(r->write || a->write))
            continue;
        if (ordered(t, r->stream, r->seq))
            continue;
        if (seen_before(sn, r))
            continue;
        report_race(t, seq, a, r, r->lo > lo ? r->lo : lo, r->hi < hi ? r->hi : hi);
    }
    /* Drop what the new record dominates (see sanitizer.h). */
    size_t w = first;
    for (k = first; k < S.num_recs && S.recs[k].lo < hi; k++) {
        const san_rec *r = &S.recs[k];
        bool drop = r->lo >= lo && r->hi <= hi && (a->write || !r->write) &&
                    (r->covered || !a->covered) && ordered(t, r->stream, r->seq);
        if (!drop)
            S.recs[w++] = S.recs[k];
    }
    if (w != k) {
        memmove(S.recs + w, S.recs + k, (S.num_recs - k) * sizeof *S.recs);
        S.num_recs -= k - w;
    }
    san_rec *recs = room_for_one(S.recs, S.num_recs, &S.cap_recs, sizeof *recs, 64);
    if (recs == NULL)
        return false;
    S.recs = recs;
    size_t at = rec_lower(lo);
    memmove(S.recs + at + 1, S.recs + at, (S.num_recs - at) * sizeof *S.recs);
    san_rec *r = &S.recs[at];
    r->lo = lo;
    r->hi = hi;
    r->seq = seq;
    r->stream = t;
    r->write = a->write;
    r->covered = a->covered;
    r->file = a->file;
    r->line = a->line;
    snprintf(r->what, sizeof r->what, "%s", a->what);
    S.num_recs++;
    if (hi - lo > S.max_len)
        S.max_len = hi - lo;
    return true;
}

access rill__san_make_access(const void *p, size_t bytes, bool write, const char *what,
                             unsigned flags) {
    access a = {.lo = (uintptr_t)p,
                .hi = (uintptr_t)p + bytes,
                .write = write,
                .covered = 1,
                .host = (flags & RILL__SAN_HOST) != 0,
                .file = tls_file,
                .line = tls_line,
                .what = what};
    if (a.hi < a.lo)
        a.hi = UINTPTR_MAX; /* the launch checks caught sizes past the end of memory */
    return a;
}

bool rill__san_check_kernel(uint32_t t, uint64_t seq, const rill_access *acc, size_t n,
                            const char *what, unsigned flags, bool covered, seen *sn) {
    for (size_t i = 0; i < n; i++) {
        access a = rill__san_make_access(acc[i].ptr, acc[i].bytes, (acc[i].mode & RILL_WRITE) != 0,
                                         what, flags);
        a.covered = covered;
        if (!rill__san_check_access(t, seq, &a, sn))
            return false;
    }
    return true;
}

/* ----------------------------------------------------------------- hooks */

static void on_command(rill__stream *s, uint64_t seq, const rill__cmd *cmd, unsigned flags) {
    rill__mutex_lock(&S.lock);
    if (!rill__san_active()) {
        rill__mutex_unlock(&S.lock);
        return;
    }
    uint32_t t = index_of(s);
    bool ok = t != UINT32_MAX;
    seen sn = {.n = 0};
    if (ok && seq > S.streams[t].last)
        S.streams[t].last = seq;
    char what[96];
    if (!ok) {
    } else if (cmd->kind == RILL__CMD_KERNEL) {
        snprintf(what, sizeof what, "kernel '%s'", cmd->u.kernel.kernel->image.name);
        ok = rill__san_check_kernel(t, seq, cmd->u.kernel.accesses, cmd->u.kernel.num_accesses,
                                    what, flags, true, &sn);
    } else if (cmd->kind == RILL__CMD_COPY) {
        const char *fn = (flags & RILL__SAN_HOST) ? "rill_memcpy" : "rill_memcpy_async";
        access a = rill__san_make_access(cmd->u.copy.src, cmd->u.copy.bytes, false, fn, flags);
        ok = rill__san_check_access(t, seq, &a, &sn);
        a = rill__san_make_access(cmd->u.copy.dst, cmd->u.copy.bytes, true, fn, flags);
        ok = ok && rill__san_check_access(t, seq, &a, &sn);
    } else if (cmd->kind == RILL__CMD_SET) {
        access a = rill__san_make_access(cmd->u.set.dst, cmd->u.set.bytes, true,
                                         "rill_memset_async", flags);
        ok = rill__san_check_access(t, seq, &a, &sn);
    } else if (cmd->kind == RILL__CMD_GRAPH) {
        ok = rill__san_check_graph(t, seq, rill__xparams_of(cmd->u.graph.launch), &sn);
    } else if (cmd->kind == RILL__CMD_HOST) {
        /* The pool does not see a host function's uses: not covered. */
        ok = rill__san_check_kernel(t, seq, tls_host_acc, tls_host_n, "host function", flags, false,
                                    &sn);
    }
    if (!ok)
        give_up();
    rill__mutex_unlock(&S.lock);
    tls_file = NULL;
    tls_line = 0;
    if (cmd->kind == RILL__CMD_HOST)
        tls_host_n = 0;
}

static void on_touches(rill__stream *s, uint64_t seq, const rill_access *acc, size_t n,
                       const char *what) {
    rill__mutex_lock(&S.lock);
    if (!rill__san_active()) {
        rill__mutex_unlock(&S.lock);
        return;
    }
    uint32_t t = index_of(s);
    seen sn = {.n = 0};
    bool ok = t != UINT32_MAX;
    if (ok && seq > S.streams[t].last)
        S.streams[t].last = seq;
    if (ok)
        ok = rill__san_check_kernel(t, seq, acc, n, what, 0, true, &sn);
    if (!ok)
        give_up();
    rill__mutex_unlock(&S.lock);
    tls_file = NULL;
    tls_line = 0;
}

static void on_order(rill__stream *s, rill__stream *other, uint64_t seq, bool all) {
    rill__mutex_lock(&S.lock);
    if (!rill__san_active()) {
        rill__mutex_unlock(&S.lock);
        return;
    }
    uint32_t t = index_of(s), o = t != UINT32_MAX ? index_of(other) : UINT32_MAX;
    bool ok = o != UINT32_MAX;
    if (ok) {
        /* s's work from its next command on is ordered after other's
         * command seq and what that command was ordered after. */
        uint64_t after = atomic_load_explicit(&s->q.sub_seq, memory_order_acquire);
        vclock *tv = vc_next(&S.streams[t], after);
        const vclock *ov = upto(&S.streams[o], seq, all);
        ok = tv != NULL;
        for (uint32_t i = 0; ok && ov != NULL && i < ov->n; i++)
            ok = vc_raise(tv, ov->e[i].idx, ov->e[i].seq);
        ok = ok && vc_raise(tv, o, seq);
    }
    if (!ok)
        give_up();
    rill__mutex_unlock(&S.lock);
}

/* Raises dst to src's entries. */
static bool vc_join(vclock *dst, const vclock *src) {
    for (uint32_t i = 0; src != NULL && i < src->n; i++)
        if (!vc_raise(dst, src->e[i].idx, src->e[i].seq))
            return false;
    return true;
}

/* The clock of event e's last record, NULL when none was seen. */
static vclock *event_clock(const rill__event *e) {
    uint32_t v;
    return rill__ptrmap_get(&S.events, e, &v) ? &S.ev[v - 1] : NULL;
}

static void on_event_record(rill__event *e, rill__stream *s, uint64_t seq) {
    rill__mutex_lock(&S.lock);
    if (!rill__san_active()) {
        rill__mutex_unlock(&S.lock);
        return;
    }
    uint32_t t = index_of(s);
    vclock *v = t != UINT32_MAX ? event_clock(e) : NULL;
    bool ok = t != UINT32_MAX;
    if (ok && v == NULL) {
        vclock *ev = room_for_one(S.ev, S.num_ev, &S.cap_ev, sizeof *ev, 16);
        ok = ev != NULL;
        if (ok)
            S.ev = ev;
        ok = ok && rill__ptrmap_put(&S.events, e, S.num_ev + 1);
        if (ok) {
            v = &S.ev[S.num_ev++];
            *v = (vclock){NULL, 0, 0};
        }
    }
    if (ok) {
        v->n = 0; /* a record replaces the last one */
        ok = vc_join(v, vc_now(&S.streams[t])) && vc_raise(v, t, seq);
    }
    if (!ok)
        give_up();
    rill__mutex_unlock(&S.lock);
}

static void on_event_wait(rill__stream *s, rill__event *e) {
    rill__mutex_lock(&S.lock);
    const vclock *ev = rill__san_active() ? event_clock(e) : NULL;
    if (ev != NULL) {
        uint32_t t = index_of(s);
        uint64_t after = atomic_load_explicit(&s->q.sub_seq, memory_order_acquire);
        vclock *tv = t != UINT32_MAX ? vc_next(&S.streams[t], after) : NULL;
        if (tv == NULL || !vc_join(tv, ev))
            give_up();
    }
    rill__mutex_unlock(&S.lock);
}

static void on_event_observed(rill__event *e) {
    rill__mutex_lock(&S.lock);
    const vclock *ev = rill__san_active() ? event_clock(e) : NULL;
    for (uint32_t i = 0; ev != NULL && i < ev->n; i++) {
        san_stream *o = &S.streams[ev->e[i].idx];
        if (ev->e[i].seq > o->done)
            o->done = ev->e[i].seq;
    }
    rill__mutex_unlock(&S.lock);
}

static void on_observed(rill__stream *s, uint64_t seq, bool all) {
    rill__mutex_lock(&S.lock);
    if (rill__san_active()) {
        uint32_t t = index_of(s);
        if (t == UINT32_MAX)
            give_up();
        else
            observe(t, seq, upto(&S.streams[t], seq, all));
    }
    rill__mutex_unlock(&S.lock);
}

static void on_observed_device(rill__device *dev) {
    rill__mutex_lock(&S.lock);
    if (rill__san_active())
        for (uint32_t t = 0; t < S.num_streams; t++)
            if (S.streams[t].dev == dev)
                observe(t, S.streams[t].last, vc_now(&S.streams[t]));
    rill__mutex_unlock(&S.lock);
}

static bool recorded(uint32_t stream, uintptr_t lo, uintptr_t hi) {
    for (size_t i = 0; i < S.num_covers; i++)
        if (S.covers[i].stream == stream && S.covers[i].ptr >= lo && S.covers[i].ptr < hi)
            return true;
    return false;
}

static void on_free(const void *ptr, rill__stream *f) {
    const char *file = tls_file;
    int line = tls_line;
    tls_file = NULL;
    tls_line = 0;
    rill__stream *owner;
    size_t bytes;
    if (!rill__pool_owner(ptr, &owner, &bytes))
        return; /* not a block: rill_free says so */
    rill__mutex_lock(&S.lock);
    uint32_t fi = rill__san_active() ? index_of(f != NULL ? f : owner) : UINT32_MAX;
    if (fi == UINT32_MAX) {
        if (rill__san_active())
            give_up();
        rill__mutex_unlock(&S.lock);
        rill__stream_unref(owner);
        return;
    }
    uintptr_t lo = (uintptr_t)ptr, hi = lo + bytes;
    const char *fn = f != NULL ? "rill_free_async" : "rill_free";
    seen sn = {.n = 0};
    size_t first = rec_first(lo), k, w = first;
    for (k = first; k < S.num_recs && S.recs[k].lo < hi; k++) {
        const san_rec *r = &S.recs[k];
        if (r->hi <= lo)
            continue;
        if (!r->covered && !ordered(fi, r->stream, r->seq) && !recorded(r->stream, lo, hi) &&
            !seen_before(&sn, r))
            report_free(fi, fn, ptr, r->lo > lo ? r->lo : lo, r->hi < hi ? r->hi : hi, r, file,
                        line);
    }
    /* The block's bytes are new memory for whoever allocates them next. */
    for (k = first; k < S.num_recs && S.recs[k].lo < hi; k++)
        if (!(S.recs[k].lo >= lo && S.recs[k].hi <= hi))
            S.recs[w++] = S.recs[k];
    if (k > w) /* S.recs is NULL until the first access is recorded */
        memmove(S.recs + w, S.recs + k, (S.num_recs - k) * sizeof *S.recs);
    S.num_recs -= k - w;
    size_t c = 0;
    for (size_t i = 0; i < S.num_covers; i++)
        if (!(S.covers[i].ptr >= lo && S.covers[i].ptr < hi))
            S.covers[c++] = S.covers[i];
    S.num_covers = c;
    rill__mutex_unlock(&S.lock);
    rill__stream_unref(owner);
}

static void on_record_stream(const void *ptr, rill__stream *s) {
    rill__mutex_lock(&S.lock);
    if (!rill__san_active()) {
        rill__mutex_unlock(&S.lock);
        return;
    }
    uint32_t t = index_of(s);
    bool ok = t != UINT32_MAX;
    san_cover *covers =
        ok ? room_for_one(S.covers, S.num_covers, &S.cap_covers, sizeof *covers, 16) : NULL;
    ok = covers != NULL;
    if (ok)
        S.covers = covers;
    if (ok)
        S.covers[S.num_covers++] = (san_cover){(uintptr_t)ptr, t};
    else
        give_up();
    rill__mutex_unlock(&S.lock);
}

static const rill__san_hooks hooks = {
    .command = on_command,
    .order = on_order,
    .event_record = on_event_record,
    .event_wait = on_event_wait,
    .event_observed = on_event_observed,
    .observed = on_observed,
    .observed_device = on_observed_device,
    .free = on_free,
    .record_stream = on_record_stream,
    .touches = on_touches,
};

/* ------------------------------------------------------------ subsystem */

/* Turns the sanitizer on or off; every order and record learnt so far is
 * forgotten. S.lock held. */
static void set_mode_locked(int mode) {
    clear_state();
    S.abort_at_first = mode == 2;
    atomic_store_explicit(&rill__san_on, mode != 0, memory_order_relaxed);
}

static void san_start(rill__runtime *rt) {
    (void)rt;
    if (!S.lock_ready) {
        rill__mutex_init(&S.lock);
        S.lock_ready = 1;
    }
    atomic_store_explicit(&rill__san_ops, &hooks, memory_order_relaxed);
    const char *env = getenv("RILL_SANITIZE");
    if (env == NULL || env[0] == '\0' || strcmp(env, "0") == 0)
        return;
    int mode = strcmp(env, "1") == 0 ? 1 : strcmp(env, "abort") == 0 ? 2 : -1;
    if (mode < 0) {
        fprintf(stderr,
                "rill: RILL_SANITIZE=%s is not 0, 1 or abort; the stream sanitizer stays as it "
                "was\n",
                env);
        return;
    }
    rill__mutex_lock(&S.lock);
    set_mode_locked(mode);
    rill__mutex_unlock(&S.lock);
}

static void san_shutdown(rill__runtime *rt, rill__shutdown_phase phase) {
    (void)rt;
    if (phase != RILL__SHUTDOWN_DEVICES)
        return;
    /* Streams and devices are gone: forget them, and stay on or off. */
    rill__mutex_lock(&S.lock);
    clear_state();
    rill__mutex_unlock(&S.lock);
}

static void san_fork_child(rill__runtime *rt) {
    (void)rt;
    /* Another thread may have held the lock mid-change: drop the state
     * without reading or freeing it. */
    rill__mutex_init(&S.lock);
    S.streams = NULL;
    S.recs = NULL;
    S.covers = NULL;
    S.ids = (rill__ptrmap)RILL__PTRMAP_INIT;
    S.checked = (rill__ptrmap)RILL__PTRMAP_INIT;
    S.events = (rill__ptrmap)RILL__PTRMAP_INIT;
    S.ev = NULL;
    S.num_ev = S.cap_ev = 0;
    S.num_streams = S.cap_streams = 0;
    S.num_recs = S.cap_recs = S.max_len = 0;
    S.num_covers = S.cap_covers = 0;
}

const rill__subsystem rill__sanitizer_subsystem = {
    .name = "sanitizer",
    .start = san_start,
    .shutdown = san_shutdown,
    .fork_child = san_fork_child,
};

/* ---------------------------------------------------------------- public */

rill_status rill_sanitizer_enable(int enabled) {
    RILL_CALL_SCOPE();
    if (enabled < 0 || enabled > 2)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_sanitizer_enable: enabled is %d; pass 0 (off), 1 (report races "
                          "on stderr) or 2 (report, then abort at the first)",
                          enabled);
    rill__runtime *rt;
    rill_status st = rill__runtime_get(&rt);
    if (st != RILL_OK)
        return rill__fail_from(st, "rill_sanitizer_enable");
    rill__mutex_lock(&S.lock);
    set_mode_locked(enabled);
    rill__mutex_unlock(&S.lock);
    return RILL_OK;
}

uint64_t rill_sanitizer_report_count(void) {
    return atomic_load_explicit(&reports, memory_order_relaxed);
}

rill_status rill_sanitizer_host_accesses(const rill_access *accesses, size_t num_accesses) {
    RILL_CALL_SCOPE();
    rill__runtime_enter();
    static const char fn[] = "rill_sanitizer_host_accesses";
    if (num_accesses > 0 && accesses == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: num_accesses is %zu but accesses is NULL; pass the accesses, or "
                          "NULL and 0 to declare none",
                          fn, num_accesses);
    if (num_accesses > HOST_ACCESSES_MAX)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %zu accesses; a host function declares at most %d (merge "
                          "neighbouring buffers into one access)",
                          fn, num_accesses, HOST_ACCESSES_MAX);
    for (size_t i = 0; i < num_accesses; i++)
        if (accesses[i].ptr == NULL || accesses[i].mode < RILL_READ ||
            accesses[i].mode > RILL_READ_WRITE)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: access %zu has a NULL pointer or a mode other than RILL_READ, "
                              "RILL_WRITE or RILL_READ_WRITE",
                              fn, i);
    tls_host_n = 0;
    if (!rill__san_active() || num_accesses == 0)
        return RILL_OK; /* nothing to check */
    memcpy(tls_host_acc, accesses, num_accesses * sizeof *accesses);
    tls_host_n = num_accesses;
    return RILL_OK;
}

rill_status rill_sanitizer_set_location(const char *file, int line) {
    RILL_CALL_SCOPE();
    if ((file == NULL) != (line == 0) || line < 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_sanitizer_set_location: file is %s and line is %d; pass a file "
                          "name and a line above 0 (RILL_SANITIZER_HERE() does), or NULL and 0 "
                          "to forget the location",
                          file == NULL ? "NULL" : "given", line);
    tls_file = file;
    tls_line = line;
    return RILL_OK;
}
