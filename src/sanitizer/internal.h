/* SPDX-License-Identifier: MIT */
/* The stream sanitizer's shared state and helpers (sanitizer.c: clocks,
 * records, hooks, public calls; graphs.c: races inside a launched
 * graph). Internal to src/sanitizer. */
#ifndef RILL_SANITIZER_INTERNAL_H
#define RILL_SANITIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"
#include "platform/thread.h"
#include "sanitizer/sanitizer.h"
#include "util/ptrmap.h"

typedef struct vc_entry {
    uint32_t idx; /* a stream's index */
    uint64_t seq;
} vc_entry;

/* A vector clock, sparse: entries sorted by idx; a missing one is 0. */
typedef struct vclock {
    vc_entry *e; /* owned */
    uint32_t n;
    size_t cap;
} vclock;

/* What a stream's work after a point is ordered after: the clock that holds
 * for its commands numbered above `after`. */
typedef struct snapshot {
    uint64_t after;
    vclock vc;
} snapshot;

/* The clocks a stream had, newest last; older ones are forgotten beyond
 * this many (a wait for work that old then takes the oldest kept, which
 * may hide a race but never invents one). */
#define HISTORY 16

typedef struct san_stream {
    uint64_t id;            /* rill__stream.id */
    rill__device *dev;      /* borrowed: devices outlive the state (cleared at shutdown) */
    uint64_t last;          /* the highest seq of it that the sanitizer saw */
    uint64_t done;          /* the highest seq of it that the host saw complete */
    snapshot hist[HISTORY]; /* its clocks, oldest first */
    uint32_t num_hist;
    bool hist_lost; /* older clocks were forgotten */
    char label[72]; /* "'name'" or "#id" */
} san_stream;

typedef struct san_rec {
    uintptr_t lo, hi;
    uint64_t seq;
    uint32_t stream; /* index */
    uint8_t write;
    uint8_t covered; /* the pool tracks this use (rill_free waits for it) */
    int line;
    const char *file; /* static storage (__FILE__), or NULL */
    /* "kernel 'k'", "rill_memcpy_async", "graph node 3 (kernel 'k')", with " of
     * aten::add" when an op name was set (rill_thread_exchange_op_name) */
    char what[128];
} san_rec;

typedef struct san_cover {
    uintptr_t ptr;   /* rill_record_stream's pointer */
    uint32_t stream; /* index */
} san_cover;

typedef struct san_state {
    rill__mutex lock;
    int lock_ready; /* written by start, under the runtime's init lock */
    int abort_at_first;
    san_stream *streams; /* owned */
    uint32_t num_streams;
    size_t cap_streams;
    rill__ptrmap ids;     /* stream id -> index + 1 */
    rill__ptrmap checked; /* the parameter sets of execs checked inside (value 1) */
    san_rec *recs;        /* owned, sorted by lo */
    size_t num_recs, cap_recs;
    size_t max_len; /* the longest record since the last clear */
    san_cover *covers;
    size_t num_covers, cap_covers;
    rill__ptrmap events; /* event -> index + 1 in ev */
    vclock *ev;          /* owned: each event's clock at its last record */
    uint32_t num_ev;
    size_t cap_ev;
} san_state;

/* The sanitizer's state (sanitizer.c). */
extern san_state rill__san_state;

/* In every file, S is the state. */
#define S rill__san_state

/* One access of a command: its bytes and what names it in a report. */
typedef struct access {
    uintptr_t lo, hi;
    uint8_t write, covered, host;
    const char *file;
    int line;
    const char *what;
} access;

/* The commands reported with the one being checked, so that a pair is
 * reported once. */
typedef struct seen {
    uint32_t stream[8];
    uint64_t seq[8];
    unsigned n;
} seen;

/* Ends a report: counts it, and aborts under RILL_SANITIZE=abort. */
void rill__san_finish_report(void);
/* Checks access a of command seq of stream t against what other streams
 * did, reports a race, then remembers it; false when out of memory. */
bool rill__san_check_access(uint32_t t, uint64_t seq, const access *a, seen *sn);
/* The access [p, p + bytes) of a command named what, at the thread's
 * location (rill_sanitizer_set_location). */
access rill__san_make_access(const void *p, size_t bytes, bool write, const char *what,
                             unsigned flags);
/* Checks a kernel's declared accesses as check_access does. */
bool rill__san_check_kernel(uint32_t t, uint64_t seq, const rill_access *acc, size_t n,
                            const char *what, unsigned flags, bool covered, seen *sn);
/* Checks the nodes of a launched graph (its parameter set v): against the
 * other streams, and against each other (races inside it, once per set). */
bool rill__san_check_graph(uint32_t t, uint64_t seq, const rill__xparams *v, seen *sn);

/* ---- shared by the sanitizer's files (sanitizer.c defines them) ---- */

/* Reports made so far (rill_sanitizer_report_count). */
extern _Atomic uint64_t rill__san_reports;
/* rill_sanitizer_set_location: the next command of this thread. */
extern _Thread_local const char *rill__san_tls_file;
extern _Thread_local int rill__san_tls_line;

/* An array arr of elements of elem bytes, n of them in room for *cap,
 * with room for one more: arr itself, or arr doubled (first elements at
 * first). NULL when out of memory, arr and *cap unchanged. */
void *rill__san_room_for_one(void *arr, size_t n, size_t *cap, size_t elem, size_t first);
/* Raises v's entry of stream idx to seq at least; false when out of
 * memory. */
bool rill__san_vc_raise(vclock *v, uint32_t idx, uint64_t seq);
/* The clock of what st submits from now on. */
const vclock *rill__san_vc_now(const san_stream *st);
/* The clock that holds once stream st completed seq: the current one
 * when seq is all its work so far (waits that submitted no command
 * included), else that of its command seq. */
const vclock *rill__san_upto(const san_stream *st, uint64_t seq, bool all);
/* Makes room for a new clock of st's work after `after`, a copy of the
 * current one, and returns it (NULL: out of memory). */
vclock *rill__san_vc_next(san_stream *st, uint64_t after);
/* Frees every stream, record and clock the sanitizer keeps (S.lock held). */
void rill__san_clear_state(void);
/* Out of memory: the sanitizer cannot go on without missing or inventing
 * orders, so it says so and stops. */
void rill__san_give_up(void);
/* The index of s in S.streams, created when new, its label refreshed;
 * UINT32_MAX when out of memory. */
uint32_t rill__san_index_of(rill__stream *s);
/* Command seq of stream u is ordered before what stream t submits now. */
bool rill__san_ordered(uint32_t t, uint32_t u, uint64_t seq);
/* The host saw stream t complete seq, and so what that work was ordered
 * after. */
void rill__san_observe(uint32_t t, uint64_t seq, const vclock *v);
/* (c): the block [lo, hi) freed on stream f while r may still use it. */
void rill__san_report_free(uint32_t f, const char *fn, const void *ptr, uintptr_t lo, uintptr_t hi,
                           const san_rec *r, const char *file, int line);
/* The first record that may overlap [lo, ...). */
size_t rill__san_rec_first(uintptr_t lo);
/* One report per pair of commands: true when r's command was reported
 * with this one already (or too many were to remember). */
bool rill__san_seen_before(seen *s, const san_rec *r);

#endif
