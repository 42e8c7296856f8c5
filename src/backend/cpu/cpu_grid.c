/* SPDX-License-Identifier: MIT */
/* Grids of blocks on the CPU device, the same for kernel launches
 * (cpu_exec.c) and the kernel nodes of graphs (cpu_graph.c): how many
 * blocks a worker takes at once, taking them, running them, the lists by
 * which multi-block work is published to idle workers, and the stream
 * failure that a failed kernel or node opens. */
#include <stdio.h>

#include "backend/cpu/cpu.h"

uint32_t rill__cpu_grid_chunk(const cpu_device *d, uint32_t blocks) {
    /* A quarter of an even share: workers that start late or run slow
     * blocks still find work, and a chunk costs one atomic add. */
    uint32_t chunk = blocks / ((uint32_t)d->num_workers * 4u);
    return chunk > 0 ? chunk : 1;
}

RILL_HOT bool rill__cpu_grid_take(_Atomic uint32_t *next, uint32_t chunk, uint32_t blocks,
                                  uint32_t *first, uint32_t *end) {
    /* relaxed: the counter only partitions block indices. */
    uint32_t f = atomic_fetch_add_explicit(next, chunk, memory_order_relaxed);
    if (f >= blocks)
        return false;
    *first = f;
    *end = blocks - f <= chunk ? blocks : f + chunk;
    return true;
}

RILL_HOT bool rill__cpu_grid_run(const cpu_worker *w, rill_cpu_kernel_fn body, const void *args,
                                 rill_dim3 grid, rill__launch_state *ls, uint32_t first,
                                 uint32_t end) {
    rill_block_ctx ctx = {.grid_dim = grid, .worker = w->unit, .state = ls};
    (void)rill__took_kernel_failure(); /* an earlier body's, on this thread */
    for (uint32_t b = first; b < end; b++) {
        /* acquire: pairs with the release store in rill_kernel_fail. */
        if (atomic_load_explicit(&ls->failed, memory_order_acquire))
            return false;
        ctx.block_idx.x = b % grid.x;
        ctx.block_idx.y = (b / grid.x) % grid.y;
        ctx.block_idx.z = b / (grid.x * grid.y);
        body(&ctx, args);
        if (rill__took_kernel_failure())
            return true;
    }
    return false;
}

void rill__cpu_publish(cpu_device *d, rill__link **list, _Atomic int *count, cpu_pub *p) {
    rill__mutex_lock(&d->launch_lock);
    rill__list_push(list, &p->link);
    p->listed = 1;
    /* seq_cst: a worker about to sleep loads the count after it announced
     * itself, and the publisher wakes sleepers after this store
     * (cpu_worker.c); on x86 the locked add costs the same either way. */
    atomic_fetch_add(count, 1);
    rill__mutex_unlock(&d->launch_lock);
}

void rill__cpu_unpublish(cpu_device *d, rill__link **list, _Atomic int *count, cpu_pub *p) {
    rill__mutex_lock(&d->launch_lock);
    if (p->listed) {
        rill__list_remove(list, &p->link);
        p->listed = 0;
        atomic_fetch_sub(count, 1);
    }
    rill__mutex_unlock(&d->launch_lock);
}

/* what ("kernel 'scale'") failed with the kernel's message, detail. */
void rill__cpu_fail_stream(rill__stream *s, uint64_t seq, const char *what, const char *detail) {
    char name[80], msg[RILL__CAUSE_BYTES];
    cpu_stream_of(s)->skipping = 1;
    rill__stream_name(s, name, sizeof name);
    snprintf(msg, sizeof msg, "%s on stream %s failed: %s", what, name,
             detail[0] != '\0' ? detail : "(no message)");
    rill__stream_fail(s, seq, msg);
}
