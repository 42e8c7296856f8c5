/* SPDX-License-Identifier: MIT */
/* The CPU device's compute units and wake-ups, which the scheduler, the
 * graph runner and the workers share: taking and giving back a unit,
 * waking sleeping workers, and whether the device has work. Invariant:
 * bit u of free_units is set while no thread holds unit u. */
#include "backend/cpu/cpu.h"

/* Set when this worker woke a sleeping host thread and has nothing left to
 * run: it sleeps at once instead of spinning, so that the woken thread
 * gets a processor without waiting for an idle one to wake up. */
static _Thread_local bool leave_cpu;

void rill__cpu_leave_processor(void) {
    leave_cpu = true;
}

bool rill__cpu_leaving_processor(void) {
    return leave_cpu;
}

void rill__cpu_stay_on_processor(void) {
    leave_cpu = false;
}

RILL_HOT void rill__cpu_wake_workers(cpu_device *d, int count) {
    /* seq_cst load: a Dekker pair with the sleepers increment in
     * cpu_worker.c's idle_wait, which is followed by a seq_cst load of the
     * work state. */
    if (atomic_load(&d->sleepers) > 0) {
        /* relaxed: a hint for cpu_worker.c's woken_here. */
        atomic_store_explicit(&d->waker_cpu, rill__cpu_current(), memory_order_relaxed);
        atomic_fetch_add(&d->work_gen, 1);
        rill__futex_wake(&d->work_gen, count);
    }
}

RILL_HOT int rill__cpu_has_work(cpu_device *d) {
    return atomic_load(&d->ready_mask) != 0 || atomic_load(&d->num_launches) != 0 ||
           atomic_load(&d->graph_work) > 0 || atomic_load(&d->stop);
}

/* ---------------------------------------------------------- compute units */

RILL_HOT int rill__cpu_unit_take(cpu_device *d) {
    int words = (d->num_workers + 63) / 64;
    for (int i = 0; i < words; i++) {
        /* seq_cst: a Dekker pair with rill__cpu_unit_release's seq_cst store of the bit
         * and load of unit_waiters (see cpu_worker.c's wait_for_unit). */
        uint64_t v = atomic_load(&d->free_units[i]);
        while (v != 0) {
            uint64_t bit = v & (~v + 1);
            /* seq_cst, an acquire: pairs with the release in
             * rill__cpu_unit_put, so the previous holder's blocks happen
             * before ours. */
            if (atomic_compare_exchange_weak(&d->free_units[i], &v, v & ~bit))
                return i * 64 + __builtin_ctzll(bit);
        }
    }
    return -1;
}

RILL_HOT void rill__cpu_unit_release(cpu_device *d, int unit) {
    /* seq_cst, a release: see rill__cpu_unit_take. */
    atomic_fetch_or(&d->free_units[unit / 64], (uint64_t)1 << (unit % 64));
}

RILL_HOT void rill__cpu_unit_put(cpu_device *d, int unit) {
    rill__cpu_unit_release(d, unit);
    /* seq_cst: the other half of the pair in cpu_worker.c's wait_for_unit. A worker that
     * waits for a unit is needed only when there is work to do. */
    if (atomic_load(&d->unit_waiters) > 0 && rill__cpu_has_work(d))
        rill__cpu_wake_workers(d, 1);
}

RILL_HOT bool rill__cpu_unit_any_free(cpu_device *d) {
    int words = (d->num_workers + 63) / 64;
    for (int i = 0; i < words; i++)
        /* relaxed: a hint; rill__cpu_unit_take decides. */
        if (atomic_load_explicit(&d->free_units[i], memory_order_relaxed) != 0)
            return true;
    return false;
}
