/* SPDX-License-Identifier: MIT */
/* The stream sanitizer's state and checks: vector clocks, the streams it
 * knows, the records of declared bytes, and the reports of races (see
 * sanitizer.h for the model, rill.h for the calls). The bottom of the
 * sanitizer: races inside a launched graph are graphs.c's, the hooks, the
 * subsystem and the public calls hooks.c's, and both call this file; the
 * state and helpers they share are in internal.h. */
#include "sanitizer/sanitizer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stream.h"
#include "sanitizer/internal.h"
#include "util/alloc.h"
#include "util/ptrmap.h"
#include "util/status.h"

san_state rill__san_state;

_Atomic uint64_t rill__san_reports;

_Thread_local const char *rill__san_tls_file;
_Thread_local int rill__san_tls_line;

/* An array arr of elements of elem bytes, n of them in room for *cap,
 * with room for one more: arr itself, or arr doubled (first elements at
 * first). NULL when out of memory, arr and *cap unchanged. */
void *rill__san_room_for_one(void *arr, size_t n, size_t *cap, size_t elem, size_t first) {
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

bool rill__san_vc_raise(vclock *v, uint32_t idx, uint64_t seq) {
    uint32_t i = vc_find(v, idx);
    if (i < v->n && v->e[i].idx == idx) {
        if (seq > v->e[i].seq)
            v->e[i].seq = seq;
        return true;
    }
    vc_entry *e = rill__san_room_for_one(v->e, v->n, &v->cap, sizeof *e, 4);
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
const vclock *rill__san_vc_now(const san_stream *st) {
    return st->num_hist > 0 ? &st->hist[st->num_hist - 1].vc : NULL;
}

/* The clock that holds once stream st completed seq: the current one
 * when seq is all its work so far (waits that submitted no command
 * included), else that of its command seq. */
const vclock *rill__san_upto(const san_stream *st, uint64_t seq, bool all) {
    return all ? rill__san_vc_now(st) : vc_at(st, seq);
}

/* Makes room for a new clock of st's work after `after`, a copy of the
 * current one, and returns it (NULL: out of memory). */
vclock *rill__san_vc_next(san_stream *st, uint64_t after) {
    if (st->num_hist > 0 && st->hist[st->num_hist - 1].after >= after)
        return &st->hist[st->num_hist - 1].vc; /* no command since the last change */
    const vclock *cur = rill__san_vc_now(st);
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

void rill__san_clear_state(void) {
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
void rill__san_give_up(void) {
    fprintf(stderr, "rill sanitizer: out of memory; the sanitizer stops here (turn it on again "
                    "with rill_sanitizer_enable once memory is free)\n");
    atomic_store_explicit(&rill__san_on, 0, memory_order_relaxed);
    rill__san_clear_state();
}

/* The index of the stream with this id, created when new (dev may be NULL
 * for a stream only known by id). UINT32_MAX when out of memory. */
static uint32_t index_of_id(uint64_t id, rill__device *dev) {
    uint32_t v;
    if (rill__ptrmap_get(&S.ids, (const void *)(uintptr_t)id, &v))
        return v - 1;
    san_stream *grown =
        rill__san_room_for_one(S.streams, S.num_streams, &S.cap_streams, sizeof *grown, 16);
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

uint32_t rill__san_index_of(rill__stream *s) {
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
bool rill__san_ordered(uint32_t t, uint32_t u, uint64_t seq) {
    const vclock *v = rill__san_vc_now(&S.streams[t]);
    return t == u || S.streams[u].done >= seq || (v != NULL && vc_get(v, u) >= seq);
}

/* The host saw stream t complete seq, and so what that work was ordered
 * after. */
void rill__san_observe(uint32_t t, uint64_t seq, const vclock *v) {
    san_stream *st = &S.streams[t];
    if (seq > st->done)
        st->done = seq;
    for (uint32_t i = 0; v != NULL && i < v->n; i++) {
        san_stream *o = &S.streams[v->e[i].idx];
        if (v->e[i].seq > o->done)
            o->done = v->e[i].seq;
    }
}

/* ------------------------------------------------------------- rill__san_reports */

static void where(char *buf, size_t size, const char *file, int line) {
    if (file != NULL)
        snprintf(buf, size, ", at %s:%d", file, line);
    else
        buf[0] = '\0';
}

void rill__san_finish_report(void) {
    atomic_fetch_add_explicit(&rill__san_reports, 1, memory_order_relaxed);
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
void rill__san_report_free(uint32_t f, const char *fn, const void *ptr, uintptr_t lo, uintptr_t hi,
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
size_t rill__san_rec_first(uintptr_t lo) {
    return rec_lower(lo > S.max_len ? lo - S.max_len : 0);
}

/* One report per pair of commands: true when r's command was reported
 * with this one already (or too many were to remember). */
bool rill__san_seen_before(seen *s, const san_rec *r) {
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
    size_t first = rill__san_rec_first(lo), k;
    for (k = first; k < S.num_recs && S.recs[k].lo < hi; k++) {
        const san_rec *r = &S.recs[k];
        if (r->hi <= lo || !(r->write || a->write))
            continue;
        if (rill__san_ordered(t, r->stream, r->seq))
            continue;
        if (rill__san_seen_before(sn, r))
            continue;
        report_race(t, seq, a, r, r->lo > lo ? r->lo : lo, r->hi < hi ? r->hi : hi);
    }
    /* Drop what the new record dominates (see sanitizer.h). */
    size_t w = first;
    for (k = first; k < S.num_recs && S.recs[k].lo < hi; k++) {
        const san_rec *r = &S.recs[k];
        bool drop = r->lo >= lo && r->hi <= hi && (a->write || !r->write) &&
                    (r->covered || !a->covered) && rill__san_ordered(t, r->stream, r->seq);
        if (!drop)
            S.recs[w++] = S.recs[k];
    }
    if (w != k) {
        memmove(S.recs + w, S.recs + k, (S.num_recs - k) * sizeof *S.recs);
        S.num_recs -= k - w;
    }
    san_rec *recs = rill__san_room_for_one(S.recs, S.num_recs, &S.cap_recs, sizeof *recs, 64);
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
                .file = rill__san_tls_file,
                .line = rill__san_tls_line,
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
