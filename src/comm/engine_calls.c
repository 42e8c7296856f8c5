/* SPDX-License-Identifier: MIT */
/* The communication engine as other threads call it (engine.h): queueing
 * and chaining tasks, waking the thread, waiting for control tasks,
 * entering and leaving channels, and the engine's end at rill_shutdown or
 * after a fork. Every change to the channels' queues is made under the
 * engine's lock; the thread itself is in engine.c. */
#include "comm/engine.h"

#include "comm/comm_internal.h"
#include "core/handle.h"
#include "util/alloc.h"

void rill__comm_engine_kick(void) {
    atomic_fetch_add(&rill__comm_engine.kick, 1); /* seq_cst: see sleep_on_kick (engine.c) */
    if (atomic_load(&rill__comm_engine.sleeping))
        rill__futex_wake(&rill__comm_engine.kick, 1);
}

void rill__comm_engine_add(rill__comm_channel *ch, rill__comm_task *open) {
    open->next = NULL;
    rill__spinlock_lock(&rill__comm_engine.lock);
    if (!rill__comm_engine.started) {
        rill__comm_engine.started = true;
        rill__comm_engine.stop = false;
        rill__thread_start(&rill__comm_engine.thread, "rill-comm", rill__comm_engine_main, NULL);
    }
    ch->head = ch->tail = open;
    ch->next = rill__comm_engine.channels;
    rill__comm_engine.channels = ch;
    rill__spinlock_unlock(&rill__comm_engine.lock);
    rill__comm_engine_kick();
}

bool rill__comm_engine_queue(rill__comm_channel *ch, rill__comm_task *task) {
    task->next = NULL;
    rill__spinlock_lock(&rill__comm_engine.lock);
    if (ch->closing && task->op.a.kind != RILL__COMM_CLOSE) {
        rill__spinlock_unlock(&rill__comm_engine.lock);
        return false;
    }
    if (ch->tail != NULL)
        ch->tail->next = task;
    else
        ch->head = task;
    ch->tail = task;
    rill__spinlock_unlock(&rill__comm_engine.lock);
    if (task->op.a.kind == RILL__COMM_CLOSE)
        rill__comm_engine_kick(); /* a stream operation is kicked when ready */
    return true;
}

bool rill__comm_engine_chain(rill__comm_channel *ch, rill__comm_task *task) {
    uint64_t id = task->stream->q.id;
    rill__spinlock_lock(&rill__comm_engine.lock);
    bool behind = ch->last_stream_id == id && ch->last_wait_seq + 1 == task->wait_seq;
    /* ch->last is cleared (under this lock) before its task finishes, so
     * a task found here is alive. */
    rill__comm_task *p = ch->last;
    bool chained = behind && p != NULL;
    bool ready = behind && p == NULL && ch->last_ok;
    if (chained)
        p->chained = task;
    ch->last = task;
    ch->last_stream_id = id;
    ch->last_wait_seq = task->wait_seq;
    ch->last_ok = false;
    rill__spinlock_unlock(&rill__comm_engine.lock);
    if (ready) {
        /* The stream reaches it once its worker passes the WAIT of an
         * operation that completed: nothing can fail it any more. release:
         * pairs with the acquire load in startable. */
        atomic_store_explicit(&task->ready, 1, memory_order_release);
        rill__comm_engine_kick();
    }
    return chained || ready;
}

void rill__comm_engine_unqueue(rill__comm_channel *ch, rill__comm_task *task) {
    rill__spinlock_lock(&rill__comm_engine.lock);
    rill__comm_task *prev = NULL;
    for (rill__comm_task *t = ch->head; t != NULL; prev = t, t = t->next) {
        if (t != task)
            continue;
        if (prev != NULL)
            prev->next = t->next;
        else
            ch->head = t->next;
        if (ch->tail == t)
            ch->tail = prev;
        break;
    }
    rill__spinlock_unlock(&rill__comm_engine.lock);
    rill__comm_engine_kick(); /* the tasks behind it may start now */
}

void rill__comm_engine_wait(rill__comm_task *task) {
    for (;;) {
        uint32_t gen = atomic_load(&rill__comm_engine.finished);
        /* acquire: pairs with the release store in finish_control. */
        if (atomic_load_explicit(&task->done, memory_order_acquire))
            return;
        rill__futex_wait(&rill__comm_engine.finished, gen);
    }
}

rill__comm_entry rill__comm_engine_enter(const void *handle, rill__comm_channel **out) {
    rill__spinlock_lock(&rill__comm_engine.lock);
    rill__comm_channel *ch = rill__handle_get(handle, RILL__HANDLE_COMM);
    rill__comm_entry e = ch == NULL    ? RILL__COMM_NO_CHANNEL
                         : ch->closing ? RILL__COMM_CLOSING
                                       : RILL__COMM_ENTERED;
    if (e == RILL__COMM_ENTERED)
        ch->users++;
    rill__spinlock_unlock(&rill__comm_engine.lock);
    *out = e == RILL__COMM_ENTERED ? ch : NULL;
    return e;
}

void rill__comm_engine_leave(rill__comm_channel *ch) {
    rill__spinlock_lock(&rill__comm_engine.lock);
    bool kick = --ch->users == 0 && ch->closing;
    rill__spinlock_unlock(&rill__comm_engine.lock);
    if (kick)
        rill__comm_engine_kick(); /* its CLOSE may start now */
}

void rill__comm_engine_set_opened(rill__comm_channel *ch) {
    rill__spinlock_lock(&rill__comm_engine.lock);
    ch->opened = true;
    rill__spinlock_unlock(&rill__comm_engine.lock);
}

bool rill__comm_engine_begin_close(rill__comm_channel *ch) {
    rill__spinlock_lock(&rill__comm_engine.lock);
    bool was = ch->closing;
    ch->closing = true;
    rill__spinlock_unlock(&rill__comm_engine.lock);
    return !was;
}

rill__comm_channel *rill__comm_engine_claim_open(void) {
    rill__spinlock_lock(&rill__comm_engine.lock);
    rill__comm_channel *ch = rill__comm_engine.channels;
    while (ch != NULL && (!ch->opened || ch->closing))
        ch = ch->next;
    if (ch != NULL)
        ch->closing = true;
    rill__spinlock_unlock(&rill__comm_engine.lock);
    return ch;
}

void rill__comm_engine_shutdown(void) {
    rill__spinlock_lock(&rill__comm_engine.lock);
    bool started = rill__comm_engine.started;
    rill__comm_engine.stop = true;
    rill__spinlock_unlock(&rill__comm_engine.lock);
    if (started) {
        rill__comm_engine_kick();
        /* It ends once the channels that other threads close are gone. */
        rill__thread_join(&rill__comm_engine.thread);
    }
    rill__spinlock_lock(&rill__comm_engine.lock);
    rill__stream **proxies = rill__comm_engine.proxies;
    size_t n = rill__comm_engine.num_proxies;
    rill__comm_engine.proxies = NULL;
    rill__comm_engine.num_proxies = rill__comm_engine.cap_proxies = 0;
    rill__comm_engine.started = rill__comm_engine.stop = false;
    rill__spinlock_unlock(&rill__comm_engine.lock);
    for (size_t i = 0; i < n; i++)
        rill__comm_engine_release_proxy(proxies[i]);
    rill__free(proxies);
}

void rill__comm_engine_forget(void) {
    /* The thread, its tasks and the proxies stayed with the parent. */
    atomic_store(&rill__comm_engine.lock.held, 0);
    rill__comm_engine.started = rill__comm_engine.stop = false;
    rill__comm_engine.channels = NULL;
    rill__comm_engine.proxies = NULL;
    rill__comm_engine.num_proxies = rill__comm_engine.cap_proxies = 0;
    rill__comm_engine.active = NULL;
    rill__comm_engine.live = 0;
    atomic_store(&rill__comm_engine.kick, 0);
    atomic_store(&rill__comm_engine.sleeping, 0);
}
