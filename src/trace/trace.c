/* SPDX-License-Identifier: MIT */
/* The trace recorder and its JSON writer (trace.h).
 *
 * Locks, in the order they are taken: ctl_lock (starting and stopping,
 * held while the file is written), then list_lock (the list of buffers),
 * then a buffer's lock. A recording thread takes its own buffer's lock
 * only, and list_lock once, when it makes its buffer. Buffers are never
 * freed (a thread's buffer outlives the thread, for the next thread that
 * needs one is a new one): the writer takes their records and leaves them
 * empty, so a thread that read rill__trace_on just before a stop never
 * touches freed memory. */
#include "trace/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform/thread.h"

#define CHUNK_RECS       512
#define MAX_THREAD_RECS  (1u << 20) /* per thread and trace: 120 MB at most */
#define STREAM_TID_BASE  1000000u
#define HOST_TID_BASE    100000u
#define UNITS_PER_DEVICE 1000u

_Atomic int rill__trace_on;
_Atomic int rill__trace_ticks;

typedef struct chunk {
    struct chunk *next; /* owned */
    uint32_t n;
    rill__trace_rec recs[CHUNK_RECS];
} chunk;

typedef struct tbuf {
    rill__spinlock lock;
    /* guarded by lock */
    chunk *first, *last; /* owned */
    uint32_t count;
    uint64_t dropped;
    /* guarded by list_lock */
    struct tbuf *next;
} tbuf;

static rill__spinlock ctl_lock;
static rill__spinlock list_lock;
static tbuf *buffers;            /* guarded by list_lock */
static _Atomic uint32_t session; /* written under ctl_lock */
static FILE *out_file;           /* guarded by ctl_lock */
static char out_path[512];       /* guarded by ctl_lock */
static pid_t out_pid;            /* guarded by ctl_lock: the process that started the trace */
static bool atfork_set;          /* guarded by ctl_lock */
/* guarded by ctl_lock: (ticks, ns) at start, to turn ticks into ns */
static uint64_t cal_ticks, cal_ns;
static _Thread_local tbuf *my_buf; /* the calling thread's buffer */

uint32_t rill__trace_session(void) {
    return atomic_load_explicit(&session, memory_order_relaxed);
}

void rill__trace_set_name(rill__trace_rec *r, const char *name) {
    size_t n = strlen(name);
    if (n >= sizeof r->name)
        n = sizeof r->name - 1;
    memcpy(r->name, name, n);
    r->name[n] = '\0';
}

static tbuf *new_buf(void) {
    tbuf *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    rill__spinlock_lock(&list_lock);
    b->next = buffers;
    buffers = b;
    rill__spinlock_unlock(&list_lock);
    my_buf = b;
    return b;
}

static void append_locked(tbuf *b, const rill__trace_rec *r) {
    if (b->count >= MAX_THREAD_RECS) {
        b->dropped++;
        return;
    }
    chunk *c = b->last;
    if (c == NULL || c->n == CHUNK_RECS) {
        chunk *nc = malloc(sizeof *nc);
        if (nc == NULL) {
            b->dropped++;
            return;
        }
        nc->next = NULL;
        nc->n = 0;
        if (c != NULL)
            c->next = nc;
        else
            b->first = nc;
        b->last = c = nc;
    }
    c->recs[c->n++] = *r;
    b->count++;
}

void rill__trace_emit(rill__trace_rec *r) {
    tbuf *b = my_buf;
    if (b == NULL && (b = new_buf()) == NULL)
        return;
    r->thread = (uint32_t)rill__thread_id();
    rill__spinlock_lock(&b->lock);
    /* relaxed: the lock orders this load after a stop's store (the stop
     * takes every buffer's lock after it). */
    if (atomic_load_explicit(&rill__trace_on, memory_order_relaxed))
        append_locked(b, r);
    rill__spinlock_unlock(&b->lock);
}

void rill__trace_flow(uint64_t stream_id, uint64_t id, bool end) {
    if (!rill__tracing())
        return;
    rill__trace_rec r;
    memset(&r, 0, sizeof r);
    r.type = RILL__TRACE_FLOW;
    r.stream = stream_id;
    r.t0 = rill__trace_now();
    r.a = id;
    r.b = end;
    rill__trace_emit(&r);
}

void rill__trace_host_slice(const char *call, uint64_t stream_id, uint64_t t0) {
    rill__trace_rec r;
    memset(&r, 0, sizeof r);
    r.type = RILL__TRACE_HOST_SLICE;
    r.stream = stream_id;
    r.t0 = t0;
    r.t1 = rill__trace_now();
    rill__trace_set_name(&r, call);
    rill__trace_emit(&r);
}

/* ---------------------------------------------------------------- control */

/* In a fork's child: the trace is the parent's, which writes it. fork_prepare
 * takes ctl_lock and list_lock, so the lists are whole in the child. */
static void fork_prepare(void) {
    rill__spinlock_lock(&ctl_lock);
    rill__spinlock_lock(&list_lock);
}

static void fork_parent(void) {
    rill__spinlock_unlock(&list_lock);
    rill__spinlock_unlock(&ctl_lock);
}

static void fork_child(void) {
    atomic_store_explicit(&rill__trace_on, 0, memory_order_relaxed);
    /* The parent's threads are not here: a buffer one of them was filling
     * stays locked in the child. Free every lock and forget the parent's
     * records (the parent writes them), so that a trace the child starts
     * can collect its own. */
    for (tbuf *b = buffers; b != NULL; b = b->next) {
        atomic_store_explicit(&b->lock.held, 0, memory_order_relaxed);
        b->first = b->last = NULL;
        b->count = 0;
        b->dropped = 0;
    }
    rill__spinlock_unlock(&list_lock);
    rill__spinlock_unlock(&ctl_lock);
}

static void at_exit(void) {
    char what[256];
    (void)rill__trace_end(what, sizeof what);
}

int rill__trace_begin(const char *path, char *what, size_t what_size) {
    rill__spinlock_lock(&ctl_lock);
    if (out_file != NULL && out_pid == getpid()) {
        snprintf(what, what_size, "a trace is already being recorded into '%s'", out_path);
        rill__spinlock_unlock(&ctl_lock);
        return -1;
    }
    if (out_file != NULL) { /* a parent's trace, inherited by fork: not ours to write */
        fclose(out_file);
        out_file = NULL;
    }
    if (strlen(path) >= sizeof out_path) {
        snprintf(what, what_size, "the path is %zu bytes long; use one shorter than %zu bytes",
                 strlen(path), sizeof out_path);
        rill__spinlock_unlock(&ctl_lock);
        return ENAMETOOLONG;
    }
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        int err = errno;
        snprintf(what, what_size, "cannot open '%s' for writing (%s)", path, strerror(err));
        rill__spinlock_unlock(&ctl_lock);
        return err != 0 ? err : EIO;
    }
    if (!atfork_set) {
        atfork_set = rill__fork_handlers(fork_prepare, fork_parent, fork_child);
        atexit(at_exit);
    }
    out_file = f;
    out_pid = getpid();
    snprintf(out_path, sizeof out_path, "%s", path);
    atomic_fetch_add_explicit(&session, 1, memory_order_relaxed);
    atomic_store_explicit(&rill__trace_ticks, rill__ticks_steady(), memory_order_relaxed);
    cal_ns = rill__now_ns();
    cal_ticks = rill__trace_now();
    atomic_store_explicit(&rill__trace_on, 1, memory_order_relaxed);
    rill__spinlock_unlock(&ctl_lock);
    return 0;
}

/* Takes every buffer's records: one chunk list, *count records. */
static chunk *collect(size_t *count, uint64_t *dropped) {
    chunk *all = NULL;
    *count = 0;
    *dropped = 0;
    rill__spinlock_lock(&list_lock);
    for (tbuf *b = buffers; b != NULL; b = b->next) {
        rill__spinlock_lock(&b->lock);
        if (b->last != NULL) {
            b->last->next = all;
            all = b->first;
        }
        *count += b->count;
        *dropped += b->dropped;
        b->first = b->last = NULL;
        b->count = 0;
        b->dropped = 0;
        rill__spinlock_unlock(&b->lock);
    }
    rill__spinlock_unlock(&list_lock);
    return all;
}

static void free_chunks(chunk *c) {
    while (c != NULL) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
}

/* ---------------------------------------------------------------- writer */

static const char *const what_names[RILL__TRACE_WHAT_COUNT] = {
    [RILL__TRACE_KERNEL] = "kernel",
    [RILL__TRACE_HOST_FN] = "host function",
    [RILL__TRACE_WAIT] = "wait",
    [RILL__TRACE_RECORD] = "event record",
    [RILL__TRACE_COPY] = "memcpy",
    [RILL__TRACE_SET] = "memset",
    [RILL__TRACE_CLEAR] = "clear",
    [RILL__TRACE_GRAPH] = "graph launch",
    [RILL__TRACE_COLLECTIVE] = "collective",
};

static const char *what_name(unsigned w) {
    return w < RILL__TRACE_WHAT_COUNT && what_names[w] != NULL ? what_names[w] : "command";
}

/* Appends s to buf, which holds *n bytes and room for size - 1, cut to fit. */
static void append(char *buf, size_t size, size_t *n, const char *s) {
    size_t k = strlen(s);
    if (k > size - 1 - *n)
        k = size - 1 - *n;
    memcpy(buf + *n, s, k);
    *n += k;
    buf[*n] = '\0';
}

void rill__trace_name_op(rill__trace_rec *r, const char *op) {
    char base[sizeof r->name];
    snprintf(base, sizeof base, "%s", r->name[0] != '\0' ? r->name : what_name(r->what));
    size_t n = 0;
    r->name[0] = '\0';
    append(r->name, sizeof r->name, &n, op);
    append(r->name, sizeof r->name, &n, " (");
    append(r->name, sizeof r->name, &n, base);
    append(r->name, sizeof r->name, &n, ")");
}

static void put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void put_ts(FILE *f, const char *key, uint64_t ns) {
    fprintf(f, "\"%s\":%" PRIu64 ".%03u", key, ns / 1000u, (unsigned)(ns % 1000u));
}

static uint64_t stream_tid(uint64_t id) {
    return STREAM_TID_BASE + id;
}

static uint64_t unit_tid(int device, int unit) {
    return 1u + (uint64_t)device * UNITS_PER_DEVICE + (uint64_t)unit;
}

static uint64_t host_tid(uint32_t thread) {
    return HOST_TID_BASE + thread;
}

/* (stream, seq) -> index of its STREAM_SLICE, open addressing. */
typedef struct slice_map {
    uint64_t *keys_stream, *keys_seq;
    size_t *index;
    size_t mask;
} slice_map;

static size_t slot_of(const slice_map *m, uint64_t stream, uint64_t seq) {
    uint64_t h = (stream * 0x9E3779B97F4A7C15u) ^ (seq * 0xC2B2AE3D27D4EB4Fu);
    h ^= h >> 29;
    size_t i = (size_t)h & m->mask;
    while (m->keys_stream[i] != 0 && (m->keys_stream[i] != stream || m->keys_seq[i] != seq))
        i = (i + 1) & m->mask;
    return i;
}

static bool map_init(slice_map *m, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n + 2)
        cap *= 2;
    m->keys_stream = calloc(cap, sizeof *m->keys_stream);
    m->keys_seq = calloc(cap, sizeof *m->keys_seq);
    m->index = calloc(cap, sizeof *m->index);
    m->mask = cap - 1;
    return m->keys_stream != NULL && m->keys_seq != NULL && m->index != NULL;
}

static void map_free(slice_map *m) {
    free(m->keys_stream);
    free(m->keys_seq);
    free(m->index);
}

static void put_grid_args(FILE *f, const rill__trace_rec *r) {
    fprintf(f, ",\"grid\":[%u,%u,%u],\"bytes\":%" PRIu64, r->grid[0], r->grid[1], r->grid[2],
            r->bytes);
}

/* Track names and their order: streams, then compute units, then host
 * threads; a stream's name is its last TRACK record's. */
static void put_tracks(FILE *f, int pid, rill__trace_rec **recs, size_t n, const char **sep) {
    fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":", *sep,
            pid);
    char pname[64];
    snprintf(pname, sizeof pname, "rill (pid %d)", pid);
    put_string(f, pname);
    fputs("}}", f);
    *sep = ",\n";
    slice_map named;
    if (!map_init(&named, n))
        goto out;
    /* streams: the latest TRACK record names them; a stream without one is
     * "stream <id>" */
    for (size_t i = 0; i < n; i++) {
        const rill__trace_rec *r = recs[i];
        uint64_t sid = 0;
        if (r->type == RILL__TRACE_STREAM_SLICE || r->type == RILL__TRACE_INSTANT ||
            r->type == RILL__TRACE_TRACK || r->type == RILL__TRACE_FLOW)
            sid = r->stream;
        if (sid == 0)
            continue;
        size_t k = slot_of(&named, sid, 0);
        if (named.keys_stream[k] == 0) {
            named.keys_stream[k] = sid;
            named.index[k] = SIZE_MAX;
        }
        if (r->type == RILL__TRACE_TRACK &&
            (named.index[k] == SIZE_MAX || recs[named.index[k]]->t0 <= r->t0))
            named.index[k] = i;
    }
    for (size_t k = 0; k <= named.mask; k++) {
        uint64_t sid = named.keys_stream[k];
        if (sid == 0)
            continue;
        char name[RILL__TRACE_NAME_BYTES + 40];
        if (named.index[k] != SIZE_MAX)
            snprintf(name, sizeof name, "stream %s", recs[named.index[k]]->name);
        else
            snprintf(name, sizeof name, "stream %" PRIu64, sid);
        fprintf(f,
                ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%" PRIu64
                ",\"args\":{\"name\":",
                pid, stream_tid(sid));
        put_string(f, name);
        fprintf(f,
                "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%" PRIu64
                ",\"args\":{\"sort_index\":%" PRIu64 "}}",
                pid, stream_tid(sid), sid);
    }
    map_free(&named);
    /* units and host threads, each once */
    slice_map seen;
    if (!map_init(&seen, n))
        goto out;
    for (size_t i = 0; i < n; i++) {
        const rill__trace_rec *r = recs[i];
        uint64_t tid;
        char name[64];
        uint64_t sort;
        if ((r->type == RILL__TRACE_UNIT_SLICE || r->type == RILL__TRACE_NODE_SLICE ||
             (r->type == RILL__TRACE_STREAM_SLICE && (r->flags & RILL__TRACE_ON_UNIT))) &&
            r->unit >= 0) {
            tid = unit_tid(r->device, r->unit);
            snprintf(name, sizeof name, "compute unit %d (device %d)", r->unit, r->device);
            sort = 100000000u + tid;
        } else if (r->type == RILL__TRACE_HOST_SLICE) {
            tid = host_tid(r->thread);
            snprintf(name, sizeof name, "host thread %u", r->thread);
            sort = 200000000u + tid;
        } else {
            continue;
        }
        size_t k = slot_of(&seen, tid, 1);
        if (seen.keys_stream[k] != 0)
            continue;
        seen.keys_stream[k] = tid;
        seen.keys_seq[k] = 1;
        fprintf(f,
                ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%" PRIu64
                ",\"args\":{\"name\":",
                pid, tid);
        put_string(f, name);
        fprintf(f,
                "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%" PRIu64
                ",\"args\":{\"sort_index\":%" PRIu64 "}}",
                pid, tid, sort);
    }
    map_free(&seen);
out:
    return;
}

static void put_slice(FILE *f, int pid, const rill__trace_rec *r) {
    uint64_t dur = r->t1 > r->t0 ? r->t1 - r->t0 : 0;
    switch (r->type) {
    case RILL__TRACE_STREAM_SLICE:
        if ((r->flags & RILL__TRACE_ON_UNIT) && r->unit >= 0) {
            rill__trace_rec u = *r;
            u.type = RILL__TRACE_UNIT_SLICE;
            put_slice(f, pid, &u);
        }
        fputs(",\n{\"ph\":\"X\",\"name\":", f);
        put_string(f, r->name[0] != '\0' ? r->name : what_name(r->what));
        fprintf(f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%" PRIu64 ",", what_name(r->what), pid,
                stream_tid(r->stream));
        put_ts(f, "ts", r->t0);
        fputc(',', f);
        put_ts(f, "dur", dur);
        fprintf(f, ",\"args\":{\"seq\":%" PRIu64 ",\"unit\":%d", r->seq, r->unit);
        if (r->what == RILL__TRACE_KERNEL || r->what == RILL__TRACE_COPY ||
            r->what == RILL__TRACE_SET)
            put_grid_args(f, r);
        if (r->what == RILL__TRACE_WAIT)
            fprintf(f, ",\"waits_for_stream\":%" PRIu64 ",\"waits_for_seq\":%" PRIu64, r->a, r->b);
        if (r->what == RILL__TRACE_COLLECTIVE)
            fprintf(f, ",\"bytes\":%" PRIu64, r->bytes);
        fputs("}}", f);
        break;
    case RILL__TRACE_UNIT_SLICE:
    case RILL__TRACE_NODE_SLICE:
        fputs(",\n{\"ph\":\"X\",\"name\":", f);
        put_string(f, r->name[0] != '\0' ? r->name : what_name(r->what));
        fprintf(f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%" PRIu64 ",",
                r->type == RILL__TRACE_NODE_SLICE ? "graph node" : what_name(r->what), pid,
                unit_tid(r->device, r->unit));
        put_ts(f, "ts", r->t0);
        fputc(',', f);
        put_ts(f, "dur", dur);
        fprintf(f, ",\"args\":{\"stream\":%" PRIu64 ",\"seq\":%" PRIu64, r->stream, r->seq);
        if (r->type == RILL__TRACE_NODE_SLICE) {
            fprintf(f, ",\"node\":%" PRIu64, r->a);
            if (r->what == RILL__TRACE_KERNEL || r->what == RILL__TRACE_COPY ||
                r->what == RILL__TRACE_SET)
                put_grid_args(f, r);
        }
        fputs("}}", f);
        break;
    case RILL__TRACE_HOST_SLICE:
        fputs(",\n{\"ph\":\"X\",\"name\":", f);
        put_string(f, r->name);
        fprintf(f, ",\"cat\":\"host\",\"pid\":%d,\"tid\":%" PRIu64 ",", pid, host_tid(r->thread));
        put_ts(f, "ts", r->t0);
        fputc(',', f);
        put_ts(f, "dur", dur);
        fprintf(f, ",\"args\":{\"stream\":%" PRIu64 "}}", r->stream);
        break;
    case RILL__TRACE_COUNTER:
        fprintf(f, ",\n{\"ph\":\"C\",\"name\":\"memory (device %d)\",\"pid\":%d,", r->device, pid);
        put_ts(f, "ts", r->t0);
        fprintf(f, ",\"args\":{\"allocated\":%" PRIu64 ",\"reserved\":%" PRIu64 "}}", r->a, r->b);
        break;
    case RILL__TRACE_FLOW:
        /* A string id: the arrows of one trace are numbered, these are
         * named the same in every process's trace (rill trace-merge). */
        fprintf(f,
                ",\n{\"ph\":\"%s\",%s\"name\":\"ipc event\",\"cat\":\"ipc\","
                "\"id\":\"ipc-%016" PRIx64 "\",\"pid\":%d,\"tid\":%" PRIu64 ",",
                r->b ? "f" : "s", r->b ? "\"bp\":\"e\"," : "", r->a, pid, stream_tid(r->stream));
        put_ts(f, "ts", r->t0);
        fputc('}', f);
        break;
    case RILL__TRACE_INSTANT:
        fputs(",\n{\"ph\":\"i\",\"s\":\"t\",\"name\":", f);
        put_string(f, r->name);
        fprintf(f, ",\"cat\":\"capture\",\"pid\":%d,\"tid\":%" PRIu64 ",", pid,
                stream_tid(r->stream));
        put_ts(f, "ts", r->t0);
        fputc('}', f);
        break;
    default:
        break;
    }
}

/* Arrows from the command a wait waited for to the wait, each bound to
 * its slice: the start inside the producer's slice, the end inside the
 * wait's. Returns how many. */
static uint64_t put_flows(FILE *f, int pid, rill__trace_rec **recs, size_t n) {
    slice_map m;
    uint64_t flows = 0;
    if (!map_init(&m, n))
        goto out;
    for (size_t i = 0; i < n; i++) {
        const rill__trace_rec *r = recs[i];
        if (r->type != RILL__TRACE_STREAM_SLICE)
            continue;
        size_t k = slot_of(&m, r->stream, r->seq);
        m.keys_stream[k] = r->stream;
        m.keys_seq[k] = r->seq;
        m.index[k] = i;
    }
    for (size_t i = 0; i < n; i++) {
        const rill__trace_rec *w = recs[i];
        if (w->type != RILL__TRACE_STREAM_SLICE || w->what != RILL__TRACE_WAIT || w->a == 0)
            continue;
        size_t k = slot_of(&m, w->a, w->b);
        if (m.keys_stream[k] == 0)
            continue; /* the awaited work ran before the trace started */
        const rill__trace_rec *p = recs[m.index[k]];
        flows++;
        uint64_t ps = p->t1 > p->t0 ? p->t1 - 1 : p->t0;
        uint64_t ws = w->t1 > w->t0 ? w->t1 - 1 : w->t0;
        if (ws < ps)
            ws = ps; /* the clocks of two threads agree to within the ns */
        fprintf(f,
                ",\n{\"ph\":\"s\",\"name\":\"wait\",\"cat\":\"wait\",\"id\":%" PRIu64
                ",\"pid\":%d,\"tid\":%" PRIu64 ",",
                flows, pid, stream_tid(p->stream));
        put_ts(f, "ts", ps);
        fprintf(f,
                "},\n{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"wait\",\"cat\":\"wait\",\"id\":%" PRIu64
                ",\"pid\":%d,\"tid\":%" PRIu64 ",",
                flows, pid, stream_tid(w->stream));
        put_ts(f, "ts", ws);
        fputc('}', f);
    }
    map_free(&m);
out:
    return flows;
}

static int cmp_t0(const void *a, const void *b) {
    const rill__trace_rec *x = *(rill__trace_rec *const *)a, *y = *(rill__trace_rec *const *)b;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* Turns the records' times into nanoseconds of rill__now_ns: ticks are
 * scaled by the rate measured between the start and now (at least a
 * millisecond apart, so that the rate is good to a few parts in 10^5). */
static void to_ns(chunk *all) {
    if (!atomic_load_explicit(&rill__trace_ticks, memory_order_relaxed))
        return;
    uint64_t end_ns;
    while ((end_ns = rill__now_ns()) < cal_ns + 1000000u)
        rill__cpu_relax();
    uint64_t end_ticks = rill__ticks();
    double per_tick =
        end_ticks > cal_ticks ? (double)(end_ns - cal_ns) / (double)(end_ticks - cal_ticks) : 1.0;
    for (chunk *c = all; c != NULL; c = c->next) {
        for (uint32_t i = 0; i < c->n; i++) {
            rill__trace_rec *r = &c->recs[i];
            if (r->flags & RILL__TRACE_NS)
                continue;
            /* signed: a record may predate the start by a little */
            r->t0 = cal_ns + (uint64_t)llround((double)(int64_t)(r->t0 - cal_ticks) * per_tick);
            if (r->t1 != 0)
                r->t1 = cal_ns + (uint64_t)llround((double)(int64_t)(r->t1 - cal_ticks) * per_tick);
        }
    }
}

static int write_json(FILE *f, chunk *all, size_t count, uint64_t dropped) {
    rill__trace_rec **recs = malloc((count > 0 ? count : 1) * sizeof *recs);
    if (recs == NULL)
        return ENOMEM;
    to_ns(all);
    size_t n = 0;
    for (chunk *c = all; c != NULL; c = c->next)
        for (uint32_t i = 0; i < c->n; i++)
            recs[n++] = &c->recs[i];
    qsort(recs, n, sizeof *recs, cmp_t0);
    int pid = (int)getpid();
    const char *sep = "";
    fputs("{\"traceEvents\":[\n", f);
    put_tracks(f, pid, recs, n, &sep);
    for (size_t i = 0; i < n; i++)
        put_slice(f, pid, recs[i]);
    uint64_t flows = put_flows(f, pid, recs, n);
    fprintf(
        f,
        "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"producer\":\"rill\",\"records\":%zu,"
        "\"flows\":%" PRIu64 ",\"dropped_records\":%" PRIu64 "}}\n",
        n, flows, dropped);
    free(recs);
    return 0;
}

int rill__trace_end(char *what, size_t what_size) {
    rill__spinlock_lock(&ctl_lock);
    if (out_file == NULL || out_pid != getpid()) {
        rill__spinlock_unlock(&ctl_lock);
        return -1;
    }
    atomic_store_explicit(&rill__trace_on, 0, memory_order_relaxed);
    size_t count;
    uint64_t dropped;
    chunk *all = collect(&count, &dropped);
    FILE *f = out_file;
    out_file = NULL;
    int err = write_json(f, all, count, dropped);
    free_chunks(all);
    if (ferror(f) && err == 0)
        err = errno != 0 ? errno : EIO;
    if (fclose(f) != 0 && err == 0)
        err = errno != 0 ? errno : EIO;
    if (err != 0)
        snprintf(what, what_size, "writing '%s' failed (%s)", out_path, strerror(err));
    rill__spinlock_unlock(&ctl_lock);
    return err;
}
