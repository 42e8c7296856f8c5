/* SPDX-License-Identifier: MIT */
/* A CPU stream's command queue, the submitters' side: its chain of blocks
 * of slots, and rill__cpu_submit, which copies a command into the next
 * slot under the stream's lock, publishes it, and schedules an IDLE
 * stream. Invariant: a slot is published (ready = its number) only after
 * it is filled, and a new block is linked before its first slot is
 * published. The owner's side is inline in cpu_sched_internal.h. Layer:
 * CPU backend. */
#include <string.h>

#include "backend/cpu/cpu_sched_internal.h"
#include "util/status.h"

/* ------------------------------------------------------------ the queue */

/* A block for s, its slots never published (ready 0 is no command's
 * number). */
static cpu_block *new_block(rill__stream *s) {
    cpu_block *b = rill__malloc_lines(sizeof *b);
    if (b == NULL)
        return NULL;
    atomic_init(&b->next, NULL);
    b->free_next = NULL;
    b->depth = 0;
    for (int i = 0; i < CPU_BLOCK_SLOTS; i++) {
        cpu_cmd *c = &b->slots[i];
        atomic_init(&c->ready, 0);
        c->stream = s;
        c->trace_t0 = 0;
        c->args_heap = NULL;
        c->accesses_heap = NULL;
    }
    return b;
}

static void free_blocks(cpu_block *b) {
    while (b != NULL) {
        cpu_block *next = b->free_next;
        rill__free(b);
        b = next;
    }
}

bool rill__cpu_stream_init_queue(rill__stream *s) {
    cpu_stream *cs = cpu_stream_of(s);
    cpu_block *b = new_block(s);
    if (b == NULL)
        return false;
    cs->wr_block = cs->rd_block = b;
    cs->wr_idx = cs->rd_idx = 0;
    cs->rd_seq = 1; /* the numbers of a stream's commands start at 1 */
    return true;
}

void rill__cpu_stream_free_queue(cpu_stream *cs) {
    /* The queue is empty: from the block of the next command on, the
     * blocks hold nothing to run. */
    for (cpu_block *b = cs->rd_block; b != NULL;) {
        cpu_block *next = atomic_load_explicit(&b->next, memory_order_relaxed);
        rill__free(b);
        b = next;
    }
    free_blocks(cs->free_blocks);
    free_blocks(atomic_exchange(&cs->returned, NULL));
}

/* The slot for a new command: the next of the block being filled, else
 * the first of a block reused from those the owner ran through, else of a
 * new one. The new block is linked before its first slot is published: an
 * owner that moves to it finds that slot unpublished and the queue empty. */
RILL_HOT static cpu_cmd *take_slot_locked(rill__stream *s, cpu_stream *cs) {
    if (cs->wr_idx < CPU_BLOCK_SLOTS)
        return &cs->wr_block->slots[cs->wr_idx++];
    cpu_block *b = cs->free_blocks;
    if (b == NULL)
        /* acquire: pairs with the release CAS in cpu_retire_block. */
        b = atomic_exchange_explicit(&cs->returned, NULL, memory_order_acquire);
    if (b != NULL) {
        cs->free_blocks = b->free_next;
        atomic_store_explicit(&b->next, NULL, memory_order_relaxed);
    } else if ((b = new_block(s)) == NULL) {
        return NULL;
    }
    /* release: the owner that follows the link sees next cleared. */
    atomic_store_explicit(&cs->wr_block->next, b, memory_order_release);
    cs->wr_block = b;
    cs->wr_idx = 1;
    return &b->slots[0];
}

/* ---------------------------------------------------------------- submit */

/* Copies cmd into slot c, with the kernel's args and accesses into the
 * slot or the heap copies the caller made for them (args_heap, acc_heap:
 * owned by the slot from now on). Copies only the member in use, so that
 * most commands write one line. */
RILL_HOT static void fill_slot(cpu_cmd *c, const rill__cmd *cmd, void *args_heap,
                               rill_access *acc_heap) {
    c->c.kind = cmd->kind;
    c->c.flags = cmd->flags;
    c->c.extra_bytes = cmd->extra_bytes;
    c->c.op_name = cmd->op_name;
    switch (cmd->kind) {
    case RILL__CMD_KERNEL: {
        c->c.u.kernel = cmd->u.kernel;
        c->args_heap = args_heap;
        c->accesses_heap = acc_heap;
        void *args = args_heap != NULL ? args_heap : (void *)c->args_inline;
        rill_access *acc = acc_heap != NULL ? acc_heap : c->accesses_inline;
        if (cmd->u.kernel.args_size > 0)
            memcpy(args, cmd->u.kernel.args, cmd->u.kernel.args_size);
        if (cmd->u.kernel.num_accesses > 0)
            memcpy(acc, cmd->u.kernel.accesses, cmd->u.kernel.num_accesses * sizeof *acc);
        c->c.u.kernel.args = args;
        c->c.u.kernel.accesses = acc;
        break;
    }
    case RILL__CMD_HOST:
        c->c.u.host = cmd->u.host;
        break;
    case RILL__CMD_WAIT:
        c->c.u.wait = cmd->u.wait;
        break;
    case RILL__CMD_RECORD:
        c->c.u.record = cmd->u.record;
        break;
    case RILL__CMD_COPY:
        c->c.u.copy = cmd->u.copy;
        break;
    case RILL__CMD_SET:
        c->c.u.set = cmd->u.set;
        break;
    case RILL__CMD_CLEAR:
        break;
    case RILL__CMD_GRAPH:
        c->c.u.graph = cmd->u.graph;
        break;
    }
}

RILL_HOT rill_status rill__cpu_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq) {
    cpu_stream *cs = cpu_stream_of(s);
    void *args_heap = NULL;
    rill_access *acc_heap = NULL;
    if (cmd->kind == RILL__CMD_KERNEL) {
        if (cmd->u.kernel.args_size > CPU_ARGS_INLINE &&
            (args_heap = rill__malloc(cmd->u.kernel.args_size)) == NULL)
            goto oom;
        if (cmd->u.kernel.num_accesses > CPU_ACCESS_INLINE &&
            (acc_heap = rill__malloc(cmd->u.kernel.num_accesses * sizeof(rill_access))) == NULL)
            goto oom;
    }
    rill__spinlock_lock(&cs->lock);
    cpu_cmd *c = take_slot_locked(s, cs);
    if (c == NULL) {
        rill__spinlock_unlock(&cs->lock);
        goto oom;
    }
    fill_slot(c, cmd, args_heap, acc_heap);
    /* release: pairs with the acquire loads of sub_seq in queries, records
     * and synchronize. */
    uint64_t n = atomic_load_explicit(&rill__queue_of(s)->sub_seq, memory_order_relaxed) + 1;
    if (cmd->flags & RILL__CMD_OPAQUE) /* published by the release store below */
        atomic_store_explicit(&rill__queue_of(s)->opaque_seq, n, memory_order_relaxed);
    atomic_store_explicit(&rill__queue_of(s)->sub_seq, n, memory_order_release);
    c->seq = n;
    /* release: publishes the command to the owner (its acquire load of
     * ready in cpu_peek). */
    atomic_store_explicit(&c->ready, n, memory_order_release);
    /* relaxed: rill__cpu_go_idle stores IDLE under this lock once it has seen the
     * queue empty, so either it sees this command or we see IDLE. */
    bool idle = atomic_load_explicit(&cs->state, memory_order_relaxed) == CPU_IDLE;
    rill__spinlock_unlock(&cs->lock);
    if (!idle && __builtin_expect(atomic_load_explicit(&cs->wake_left, memory_order_relaxed), 0))
        rill__cpu_submitted_with_wake_left(s, cs);
    if (idle) {
        int expected = CPU_IDLE;
        /* seq_cst, an acquire: pairs with the release store in rill__cpu_go_idle. */
        if (atomic_compare_exchange_strong(&cs->state, &expected, CPU_READY)) {
            rill__stream_ref(s); /* the scheduled reference */
            bool host = !rill__thread_is_worker();
            /* A small kernel costs less than a worker's wake-up: a host
             * thread runs it at once (a worker's host function queues
             * it: the worker may hold its unit). */
            if (!rill__cpu_dispatch_first_waits(s) &&
                !(host && (cmd->flags & RILL__CMD_SMALL) && rill__cpu_run_small(s, n)))
                rill__cpu_push_ready(cpu_device_of(rill__queue_of(s)->dev), s, host);
        }
    }
    *seq = n;
    return RILL_OK;

oom:
    rill__free(args_heap);
    rill__free(acc_heap);
    return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                      "out of host memory storing a command for the CPU device; nothing was "
                      "submitted");
}
