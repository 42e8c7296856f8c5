/* SPDX-License-Identifier: MIT */
/* The CPU scheduler's private declarations, shared by its four files:
 * cpu_ready.c (the device's ready queue), cpu_queue.c (a stream's command
 * queue and submit), cpu_exec.c (running commands) and cpu_host.c (host
 * threads that run the work they wait for). Calls go one way: cpu_queue.c
 * and cpu_host.c call cpu_exec.c, and all three call cpu_ready.c. The
 * owner's side of a stream's queue is inline below, for the run loop. */
#ifndef RILL_BACKEND_CPU_SCHED_INTERNAL_H
#define RILL_BACKEND_CPU_SCHED_INTERNAL_H

#include "backend/cpu/cpu.h"
#include "util/alloc.h"

/* The ready queue's level of s: 0 for the greatest priority. */
RILL_HOT static inline int cpu_prio_index(rill__stream *s) {
    return rill__queue_of(s)->priority -
           rill__device_base_of(rill__queue_of(s)->dev)->info.greatest_priority;
}

/* ---- a stream's queue, the owner's side ---- */

/* Hands a block the owner has run through back to the submitters, or
 * frees it when enough wait there. Only the owner pushes and reads depth:
 * a stale top makes the exchange fail, never pushes on a taken block. */
static inline void cpu_retire_block(cpu_stream *cs, cpu_block *b) {
    cpu_block *top = atomic_load_explicit(&cs->returned, memory_order_relaxed);
    do {
        b->depth = top != NULL ? top->depth + 1 : 1;
        if (b->depth > CPU_SPARE_BLOCKS) {
            rill__free(b);
            return;
        }
        b->free_next = top;
        /* release: pairs with the acquire exchange in take_slot_locked
         * (cpu_queue.c). */
    } while (!atomic_compare_exchange_weak_explicit(&cs->returned, &top, b, memory_order_release,
                                                    memory_order_relaxed));
}

/* Moves the owner past a block it has run through, once the submitters
 * have linked the next one. */
RILL_HOT static inline void cpu_next_block(cpu_stream *cs) {
    /* acquire: pairs with the release store of next in take_slot_locked. */
    cpu_block *n = atomic_load_explicit(&cs->rd_block->next, memory_order_acquire);
    if (n == NULL)
        return;
    cpu_retire_block(cs, cs->rd_block);
    cs->rd_block = n;
    cs->rd_idx = 0;
}

/* The stream's next command, or NULL when none is published yet; for the
 * stream's owner. */
RILL_HOT static inline cpu_cmd *cpu_peek(cpu_stream *cs) {
    if (__builtin_expect(cs->rd_idx == CPU_BLOCK_SLOTS, 0)) {
        cpu_next_block(cs);
        if (cs->rd_idx == CPU_BLOCK_SLOTS)
            return NULL;
    }
    cpu_cmd *c = &cs->rd_block->slots[cs->rd_idx];
    /* acquire: pairs with the release store of ready in rill__cpu_submit. */
    return atomic_load_explicit(&c->ready, memory_order_acquire) == cs->rd_seq ? c : NULL;
}

/* ---- cpu_ready.c ---- */

/* Puts s, which this thread owns and hands on, at the tail of its level of
 * the ready queue and wakes a worker for it, or leaves the wake-up to the
 * watch; by_host: a host thread (not a worker) made s ready. s may be gone
 * once this returns. */
void rill__cpu_push_ready(cpu_device *d, rill__stream *s, bool by_host);
/* A submit to a stream whose wake-up was left to the watch (wake_left):
 * wakes a worker once the thread has gone on submitting for a while. */
void rill__cpu_submitted_with_wake_left(rill__stream *s, cpu_stream *cs);
/* Takes s off the ready queue; false when it is not there. */
bool rill__cpu_take_ready(cpu_device *d, rill__stream *s);
/* This host thread came back for its work: its next launches may leave
 * their wake-up to the watch. */
void rill__cpu_note_comes_back(cpu_device *d);

/* ---- cpu_exec.c ---- */

/* Runs c, the next command of s, on w: EXEC_DONE when the caller is to
 * finish it (rill__cpu_finish), else parked or handed off (then s may
 * already run elsewhere). */
enum exec_result rill__cpu_exec(cpu_device *d, cpu_worker *w, rill__stream *s, cpu_cmd *c);
/* Completes c, the next command of s, and advances the stream's done_seq. */
void rill__cpu_finish(rill__stream *s, cpu_cmd *c);
/* Marks s IDLE unless a command arrived meanwhile: 1 when the thread gave
 * s up (and its scheduled reference), 0 when s is still its own. */
int rill__cpu_go_idle(rill__stream *s, cpu_stream *cs);
/* A multi-block launch, c, that other threads may help with: runs chunks
 * of its blocks, traced as this thread's part; takes it off the launch
 * list; once every block has run, turns a failure into the stream's
 * sticky error. */
void rill__cpu_help_chunks(cpu_device *d, cpu_worker *w, cpu_cmd *c);
void rill__cpu_unlist(cpu_device *d, cpu_cmd *c);
void rill__cpu_kernel_done(cpu_cmd *c);
/* s just became ready on a submitting thread: runs its first waits there
 * (docs/cpu.md, "Scheduling"); false when s is to go to the ready queue,
 * true when it is parked or idle. */
bool rill__cpu_dispatch_first_waits(rill__stream *s);

#endif
