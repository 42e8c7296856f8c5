/* SPDX-License-Identifier: MIT */
/*
 * ACL's callbacks on rill's host functions. aclrtLaunchCallback queues a
 * host function (deliver) on the stream; when the stream reaches it, it
 * hands the callback to the thread subscribed to the stream and, for
 * ACL_CALLBACK_BLOCK, waits until that thread has run it, so that the
 * stream's later work waits too. The subscribed thread runs what it was
 * handed in aclrtProcessReport.
 *
 * aclrtSubscribeHostFunc does the same for aclrtLaunchHostFunc: a host
 * function launched on a stream so subscribed is handed to that thread,
 * which runs it in aclrtProcessHostFunc, and the stream waits for it as for
 * a blocking callback. The two kinds of subscription are independent: a
 * stream may have one of each, and each call hands over and runs its own
 * kind only.
 *
 * State, all guarded by one mutex (not a hot path): the subscriptions, an
 * array of (stream, thread, kind), at most one per stream and kind; one
 * queue of the callbacks handed over and not yet taken; and the list of
 * every callback launched and not yet freed. A callback is owned by its
 * deliver while it blocks its stream, else by whoever holds it (the queue,
 * then the thread that runs it); one whose host function rill skipped (its
 * stream failed first) is freed by aclFinalize, once rill_shutdown has
 * dropped its stream's work. No callback runs with the mutex held.
 *
 * A callback with no thread to hand it to (its stream's subscription ended
 * meanwhile) runs where it is: in deliver on rill's thread, or, for one
 * already queued and not blocking, on the thread that ended the
 * subscription. A subscribed thread never waits for a callback that only
 * it would run: deliver running on that very thread (rill ran the stream's
 * work on a thread that waited for it) runs the callback at once, and a
 * subscribed thread that synchronizes runs its callbacks while it waits
 * (rill__acl_wait).
 */
#include "report.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "error.h"

enum { LAUNCHED, QUEUED, RUNNING, DONE, ORPHANED };

/* The two kinds of subscription and of what they hand over: callbacks
 * (aclrtSubscribeReport, run in aclrtProcessReport) and host functions
 * (aclrtSubscribeHostFunc, run in aclrtProcessHostFunc). ANY matches both. */
enum { REPORT, HOSTFUNC, ANY };

struct item {
    aclrtCallback fn;    /* immutable */
    void *data;          /* immutable */
    bool blocks;         /* immutable: ACL_CALLBACK_BLOCK, and every host function */
    int kind;            /* immutable: REPORT or HOSTFUNC */
    rill_stream *stream; /* immutable: the stream's handle */
    /* guarded by lock */
    int state;
    uint64_t thread;                    /* the thread it was handed to, once QUEUED */
    struct item *next;                  /* in the queue while QUEUED; in a batch while RUNNING */
    struct item *live_prev, *live_next; /* on the live list until freed */
};

struct sub {
    rill_stream *stream;
    uint64_t thread;
    int kind; /* REPORT or HOSTFUNC */
};

static bool kind_matches(int kind, int wanted) {
    return wanted == ANY || kind == wanted;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed; /* any state change; made monotonic in init */
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* guarded by lock */
static struct sub *subs; /* owned: subs[0..num_subs) */
static size_t num_subs, cap_subs;
static struct item *head, *tail; /* the queue, in hand-over order */
static struct item *live;        /* every callback launched and not yet freed */

static void init(void) {
    pthread_condattr_t a;
    if (pthread_condattr_init(&a) != 0 || pthread_condattr_setclock(&a, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&changed, &a) != 0)
        abort();
    pthread_condattr_destroy(&a);
}

static void lock_all(void) {
    pthread_once(&once, init);
    if (pthread_mutex_lock(&lock) != 0)
        abort();
}

static void unlock_all(void) {
    if (pthread_mutex_unlock(&lock) != 0)
        abort();
}

static void broadcast(void) {
    if (pthread_cond_broadcast(&changed) != 0)
        abort();
}

static uint64_t self_id(void) {
    return (uint64_t)pthread_self();
}

static void link_live_locked(struct item *it) {
    it->live_prev = NULL;
    it->live_next = live;
    if (live)
        live->live_prev = it;
    live = it;
}

static void unlink_live_locked(struct item *it) {
    if (it->live_prev)
        it->live_prev->live_next = it->live_next;
    else
        live = it->live_next;
    if (it->live_next)
        it->live_next->live_prev = it->live_prev;
}

/* Takes it off the live list and frees it. */
static void drop(struct item *it) {
    lock_all();
    unlink_live_locked(it);
    unlock_all();
    free(it);
}

/* The subscription of stream of kind, or NULL (lock held). */
static struct sub *sub_of_stream_locked(rill_stream *stream, int kind) {
    for (size_t i = 0; i < num_subs; i++)
        if (subs[i].stream == stream && subs[i].kind == kind)
            return &subs[i];
    return NULL;
}

static bool thread_subscribed_locked(uint64_t thread, int kind) {
    for (size_t i = 0; i < num_subs; i++)
        if (subs[i].thread == thread && kind_matches(subs[i].kind, kind))
            return true;
    return false;
}

/* The stream ACL's stream names (NULL: the calling thread's current
 * stream), checked to be a live stream. */
static aclError resolve(const char *call, aclrtStream stream, rill_stream **out) {
    rill_stream *s = stream ? (rill_stream *)stream : rill_current_stream(NULL);
    int p;
    aclError err = rill__acl_check(rill_stream_get_priority(s, &p), call);
    if (err == ACL_SUCCESS)
        *out = s;
    return err;
}

/* ---- on the stream ---- */

static void deliver(void *arg) {
    struct item *it = arg;
    lock_all();
    struct sub *sub = sub_of_stream_locked(it->stream, it->kind);
    if (!sub || sub->thread == self_id()) {
        unlock_all();
        it->fn(it->data);
        drop(it);
        return;
    }
    it->thread = sub->thread;
    it->state = QUEUED;
    it->next = NULL;
    if (tail)
        tail->next = it;
    else
        head = it;
    tail = it;
    broadcast();
    if (!it->blocks) { /* the queue owns it now */
        unlock_all();
        return;
    }
    while (it->state != DONE && it->state != ORPHANED)
        if (pthread_cond_wait(&changed, &lock) != 0)
            abort();
    bool orphaned = it->state == ORPHANED;
    unlock_all();
    if (orphaned)
        it->fn(it->data);
    drop(it);
}

/* Unlinks it, which follows prev (NULL: it is the head), from the queue
 * (lock held). */
static void unlink_locked(struct item *prev, struct item *it) {
    if (prev)
        prev->next = it->next;
    else
        head = it->next;
    if (tail == it)
        tail = prev;
}

/* Unlinks the queued items of kind that match (thread, and stream unless
 * NULL) (lock held): blocking ones become ORPHANED for their deliver to
 * run; the others are returned as a list, the caller's to run and free. */
static struct item *orphan_locked(uint64_t thread, rill_stream *stream, int kind) {
    struct item *run = NULL, **run_tail = &run, *prev = NULL;
    for (struct item *it = head, *next; it; it = next) {
        next = it->next;
        if (it->thread != thread || (stream && it->stream != stream) || it->kind != kind) {
            prev = it;
            continue;
        }
        unlink_locked(prev, it);
        if (it->blocks) {
            it->state = ORPHANED;
        } else {
            it->next = NULL;
            *run_tail = it;
            run_tail = &it->next;
        }
    }
    broadcast();
    return run;
}

static void run_and_free(struct item *list) {
    for (struct item *it = list, *next; it; it = next) {
        next = it->next;
        it->fn(it->data);
        drop(it);
    }
}

/* ---- the calls ---- */

static const char *const subscribe_call[] = {"aclrtSubscribeReport", "aclrtSubscribeHostFunc"};
static const char *const unsubscribe_call[] = {"aclrtUnSubscribeReport",
                                               "aclrtUnSubscribeHostFunc"};

static aclError subscribe(int kind, uint64_t threadId, aclrtStream stream) {
    const char *call = subscribe_call[kind];
    rill_stream *s;
    aclError err = resolve(call, stream, &s);
    if (err != ACL_SUCCESS)
        return err;
    lock_all();
    struct sub *old = sub_of_stream_locked(s, kind);
    if (old) {
        uint64_t other = old->thread;
        unlock_all();
        return rill__acl_fail(ACL_ERROR_RT_STREAM_SUBSCRIBE,
                              "%s: the stream is already subscribed by thread %llu; a stream "
                              "has one thread for its %s (%s first)",
                              call, (unsigned long long)other,
                              kind == REPORT ? "callbacks" : "host functions",
                              unsubscribe_call[kind]);
    }
    if (num_subs == cap_subs) {
        size_t grown = cap_subs ? cap_subs * 2 : 8;
        struct sub *n = realloc(subs, grown * sizeof *n);
        if (!n) {
            unlock_all();
            return rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory for a subscription", call);
        }
        subs = n;
        cap_subs = grown;
    }
    subs[num_subs++] = (struct sub){.stream = s, .thread = threadId, .kind = kind};
    unlock_all();
    return ACL_SUCCESS;
}

static aclError unsubscribe(int kind, uint64_t threadId, aclrtStream stream) {
    const char *call = unsubscribe_call[kind];
    /* Not checked with rill: a stream destroyed while subscribed must
     * still be unsubscribed. */
    rill_stream *s = stream ? (rill_stream *)stream : rill_current_stream(NULL);
    lock_all();
    struct sub *sub = sub_of_stream_locked(s, kind);
    if (!sub || sub->thread != threadId) {
        bool other = sub != NULL;
        uint64_t other_thread = other ? sub->thread : 0;
        unlock_all();
        if (other)
            return rill__acl_fail(ACL_ERROR_RT_STREAM_SUBSCRIBE,
                                  "%s: the stream is subscribed by thread %llu, not by thread "
                                  "%llu",
                                  call, (unsigned long long)other_thread,
                                  (unsigned long long)threadId);
        return rill__acl_fail(ACL_ERROR_RT_STREAM_SUBSCRIBE,
                              "%s: the stream (%p) is not subscribed by any thread", call, stream);
    }
    *sub = subs[--num_subs];
    struct item *run = orphan_locked(threadId, s, kind);
    unlock_all();
    run_and_free(run);
    return ACL_SUCCESS;
}

aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream) {
    return subscribe(REPORT, threadId, stream);
}

aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream) {
    return unsubscribe(REPORT, threadId, stream);
}

aclError aclrtSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream) {
    return subscribe(HOSTFUNC, hostFuncThreadId, exeStream);
}

aclError aclrtUnSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream) {
    return unsubscribe(HOSTFUNC, hostFuncThreadId, exeStream);
}

void rill__acl_reports_release_all(void) {
    lock_all();
    struct item *run = NULL;
    while (num_subs > 0) {
        struct sub sub = subs[--num_subs];
        struct item *more = orphan_locked(sub.thread, sub.stream, sub.kind);
        if (more) {
            struct item *last = more;
            while (last->next)
                last = last->next;
            last->next = run;
            run = more;
        }
    }
    free(subs);
    subs = NULL;
    cap_subs = 0;
    unlock_all();
    run_and_free(run);
}

void rill__acl_reports_forget_all(void) {
    lock_all();
    while (live) {
        struct item *it = live;
        live = it->live_next;
        free(it);
    }
    head = tail = NULL;
    unlock_all();
}

/* Notes it among the live items and launches its deliver on s; it is
 * freed should the launch fail. */
static aclError launch_item(const char *call, rill_stream *s, struct item *it) {
    lock_all();
    link_live_locked(it);
    unlock_all();
    aclError err = rill__acl_check(rill_launch_host_func(s, deliver, it), call);
    if (err != ACL_SUCCESS)
        drop(it);
    return err;
}

aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType,
                             aclrtStream stream) {
    const char *call = "aclrtLaunchCallback";
    if (!fn)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: fn is NULL", call);
    if (blockType != ACL_CALLBACK_NO_BLOCK && blockType != ACL_CALLBACK_BLOCK)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: blockType %d is neither ACL_CALLBACK_NO_BLOCK nor "
                              "ACL_CALLBACK_BLOCK",
                              call, (int)blockType);
    rill_stream *s;
    aclError err = resolve(call, stream, &s);
    rill_capture_status cs = RILL_CAPTURE_NONE;
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_stream_get_capture_status(s, &cs), call);
    if (err != ACL_SUCCESS)
        return err;
    if (cs != RILL_CAPTURE_NONE)
        return rill__acl_fail(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                              "%s: the stream is being captured; a callback is handed to its "
                              "thread once, so it cannot be part of a model that replays",
                              call);
    lock_all();
    bool subscribed = sub_of_stream_locked(s, REPORT) != NULL;
    unlock_all();
    if (!subscribed)
        return rill__acl_fail(ACL_ERROR_RT_STREAM_NO_CB_REG,
                              "%s: no thread is subscribed to the stream; call "
                              "aclrtSubscribeReport(threadId, stream) first",
                              call);
    struct item *it = malloc(sizeof *it);
    if (!it)
        return rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory for a callback", call);
    *it = (struct item){.fn = fn,
                        .data = userData,
                        .blocks = blockType == ACL_CALLBACK_BLOCK,
                        .kind = REPORT,
                        .stream = s,
                        .state = LAUNCHED};
    return launch_item(call, s, it);
}

/* The absolute CLOCK_MONOTONIC time timeout_ms from now. */
static struct timespec deadline_in(int32_t timeout_ms) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += timeout_ms / 1000;
    t.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Unlinks the queued items of kind handed to thread, as RUNNING (lock
 * held). */
static struct item *take_locked(uint64_t thread, int kind) {
    struct item *batch = NULL, **batch_tail = &batch, *prev = NULL;
    for (struct item *it = head, *next; it; it = next) {
        next = it->next;
        if (it->thread != thread || !kind_matches(it->kind, kind)) {
            prev = it;
            continue;
        }
        unlink_locked(prev, it);
        it->state = RUNNING;
        it->next = NULL;
        *batch_tail = it;
        batch_tail = &it->next;
    }
    return batch;
}

/* Runs a batch that take_locked unlinked: a blocking callback's deliver is
 * told it ran (and frees it), the others are freed here. */
static void run_batch(struct item *batch) {
    for (struct item *it = batch, *next; it; it = next) {
        next = it->next;
        it->fn(it->data);
        if (!it->blocks) {
            drop(it);
            continue;
        }
        lock_all(); /* its deliver frees it once DONE */
        it->state = DONE;
        broadcast();
        unlock_all();
    }
}

static aclError process(int kind, int32_t timeout) {
    const char *call = kind == REPORT ? "aclrtProcessReport" : "aclrtProcessHostFunc";
    const char *what = kind == REPORT ? "callback" : "host function";
    if (timeout < -1)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: timeout %d ms is below -1; pass -1 to wait without a limit",
                              call, (int)timeout);
    uint64_t me = self_id();
    struct timespec deadline = deadline_in(timeout < 0 ? 0 : timeout);
    struct item *batch = NULL;
    lock_all();
    for (;;) {
        if (!thread_subscribed_locked(me, kind)) {
            unlock_all();
            return rill__acl_fail(ACL_ERROR_RT_THREAD_SUBSCRIBE,
                                  "%s: the calling thread (%llu) is subscribed to no stream; "
                                  "call %s with its id first",
                                  call, (unsigned long long)me, subscribe_call[kind]);
        }
        if ((batch = take_locked(me, kind)) != NULL)
            break;
        int rc = timeout < 0 ? pthread_cond_wait(&changed, &lock)
                             : pthread_cond_timedwait(&changed, &lock, &deadline);
        if (rc == ETIMEDOUT && (batch = take_locked(me, kind)) == NULL) {
            unlock_all();
            return rill__acl_fail(ACL_ERROR_RT_REPORT_TIMEOUT, "%s: no %s arrived within %d ms",
                                  call, what, (int)timeout);
        }
        if (batch)
            break;
        if (rc != 0 && rc != ETIMEDOUT)
            abort();
    }
    unlock_all();
    run_batch(batch);
    return ACL_SUCCESS;
}

aclError aclrtProcessReport(int32_t timeout) {
    return process(REPORT, timeout);
}

aclError aclrtProcessHostFunc(int32_t timeout) {
    return process(HOSTFUNC, timeout);
}

/* Runs the callbacks and host functions handed to the calling thread so
 * far; false when it is subscribed to no stream. */
static bool serve_pending(uint64_t me) {
    lock_all();
    bool subscribed = thread_subscribed_locked(me, ANY);
    struct item *batch = subscribed ? take_locked(me, ANY) : NULL;
    unlock_all();
    run_batch(batch);
    return subscribed;
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

rill_status rill__acl_wait(rill__acl_wait_fn wait, void *obj, uint64_t timeout_ns) {
    enum { SLICE_NS = 1000000 };
    uint64_t me = self_id();
    if (!serve_pending(me))
        return wait(obj, timeout_ns);
    uint64_t start = now_ns();
    for (;;) {
        uint64_t waited = now_ns() - start;
        uint64_t left = timeout_ns == UINT64_MAX ? UINT64_MAX
                        : waited >= timeout_ns   ? 0
                                                 : timeout_ns - waited;
        rill_status st = wait(obj, left < SLICE_NS ? left : SLICE_NS);
        if (st != RILL_NOT_READY || left <= SLICE_NS)
            return st;
        serve_pending(me);
    }
}

aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args) {
    const char *call = "aclrtLaunchHostFunc";
    if (!fn)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: fn is NULL", call);
    rill_stream *s;
    aclError err = resolve(call, stream, &s);
    if (err != ACL_SUCCESS)
        return err;
    lock_all();
    bool subscribed = sub_of_stream_locked(s, HOSTFUNC) != NULL;
    unlock_all();
    if (!subscribed) /* rill's thread runs it; a capture records it */
        return rill__acl_check(rill_launch_host_func(s, fn, args), call);
    rill_capture_status cs = RILL_CAPTURE_NONE;
    err = rill__acl_check(rill_stream_get_capture_status(s, &cs), call);
    if (err != ACL_SUCCESS)
        return err;
    if (cs != RILL_CAPTURE_NONE)
        return rill__acl_fail(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                              "%s: the stream is being captured and has a thread subscribed "
                              "with aclrtSubscribeHostFunc; a host function handed to that "
                              "thread runs once, so it cannot be part of a model that replays",
                              call);
    struct item *it = malloc(sizeof *it);
    if (!it)
        return rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory for a host function", call);
    *it = (struct item){
        .fn = fn, .data = args, .blocks = true, .kind = HOSTFUNC, .stream = s, .state = LAUNCHED};
    return launch_item(call, s, it);
}
