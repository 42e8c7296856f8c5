/* SPDX-License-Identifier: MIT */
/* The CPU backend's internal structures and functions, shared by its
 * files and declared here grouped by defining file: the device and its
 * streams (cpu_device.c), memory (cpu_memory.c), the scheduler
 * (cpu_ready.c, cpu_queue.c, cpu_exec.c, cpu_host.c, cpu_worker.c,
 * cpu_units.c), grids of blocks (cpu_grid.c) and graphs (cpu_graph.c). A
 * stream is a queue, not a thread; its states and who owns it are below,
 * the scheduler's design in docs/cpu.md. */

/* The stream's state moves
 *     IDLE --submit--> READY --worker pops--> RUNNING --queue empty--> IDLE
 *                                             RUNNING --wait not met--> PARKED --met--> READY
 * and a stream that is not IDLE holds one reference on itself (the
 * "scheduled" reference), so a destroyed stream lives until its work is
 * done. Exactly one thread owns a RUNNING stream: a worker, or a host
 * thread that took it off the ready queue to run the work it waits for
 * (rill__cpu_host_help); except while a multi-block kernel of it runs:
 * then the thread that finishes the last block takes it over. IDLE is
 * stored, and read by submitters, under the stream's lock. */
#ifndef RILL_BACKEND_CPU_H
#define RILL_BACKEND_CPU_H

#include <stdalign.h>
#include <stdatomic.h>

#include "backend/backend.h"
#include "platform/thread.h"
#include "util/list.h"

#define CPU_PRIORITY_LEVELS 6 /* priorities -5 (greatest) .. 0 (least) */
/* Every op's arguments fit inline (op_kernels.c checks): a command that
 * allocated them on the submitting thread and freed them on a worker
 * would cost both threads a trip through malloc's shared arenas. */
#define CPU_ARGS_INLINE   232
#define CPU_ACCESS_INLINE 4

enum cpu_stream_state { CPU_IDLE = 0, CPU_READY, CPU_RUNNING, CPU_PARKED };

/* What running a command did to its stream: done (the worker goes on),
 * parked on a wait, or handed to the worker that finishes the command. */
enum exec_result { EXEC_DONE, EXEC_PARKED, EXEC_HANDED_OFF };

/* Multi-block work published for idle workers to help with (a launch, a
 * graph run), on one of the device's lists; guarded by its launch_lock. */
typedef struct cpu_pub {
    rill__link link;
    int listed;
} cpu_pub;

/* A command in its stream's queue: a slot of one of the stream's blocks
 * (below). The submitter fills it under the stream's lock and publishes it
 * last, by storing its number in ready; the thread that runs the stream
 * reads it once ready holds the number it expects next. */
typedef struct cpu_cmd {
    /* first cache line: all a host function, wait or record touches */
    alignas(64) _Atomic uint64_t ready; /* seq once published (release); older numbers before */
    uint64_t seq;
    rill__stream *stream; /* borrowed: the stream whose block holds the slot */
    /* traces: when the command started (0: not traced); written by the
     * thread that starts it, read by the one that finishes it */
    uint64_t trace_t0;
    rill__cmd c; /* only the member of c.u that c.kind names is set */
    /* kernels: owned heap copies when the args or accesses do not fit
     * inline; NULL otherwise (and always between uses of the slot) */
    void *args_heap;
    rill_access *accesses_heap;
    /* multi-block launches: on the device's launches */
    cpu_pub pub;
    /* atomic */
    _Atomic uint32_t next_block; /* next block index to hand out */
    _Atomic int refs;            /* workers still running blocks of it */
    /* immutable while the launch runs */
    uint32_t total_blocks;
    uint32_t chunk;
    int trace_unit;    /* the unit that started it */
    int trace_on_unit; /* it ran whole on trace_unit: one record for both tracks */
    alignas(16) unsigned char args_inline[CPU_ARGS_INLINE];
    rill_access accesses_inline[CPU_ACCESS_INLINE];
} cpu_cmd;

/* A stream's queue is a chain of blocks of CPU_BLOCK_SLOTS slots, filled in
 * order by the submitters and run in order by the stream's owner, so that a
 * long queue is read from consecutive memory. The owner hands a block it has
 * run through back to the submitters (cpu_stream.returned), and frees it
 * instead when CPU_SPARE_BLOCKS wait there already. */
#define CPU_BLOCK_SLOTS  16
#define CPU_SPARE_BLOCKS 16

typedef struct cpu_block {
    /* set (release) by the submitter that fills the block after this one,
     * before it fills it; NULL until then */
    alignas(64) _Atomic(struct cpu_block *) next;
    struct cpu_block *free_next; /* on returned or the submitters' free list */
    unsigned depth;              /* blocks on returned from this one down, this one included */
    cpu_cmd slots[CPU_BLOCK_SLOTS];
} cpu_block;

/* A graph exec's state on the CPU device (graph_prepare), used by one
 * launch at a time: launches of one exec never overlap. Nodes become ready once each; a ready node
 * is run at once by the worker that readied it, or published in the ready array, whose slots [head,
 * tail) are there for any worker to claim. */
typedef struct cpu_grun {
    _Atomic int32_t *pending;     /* per node: predecessors not yet done */
    _Atomic uint32_t *ready;      /* per slot: node index + 1, 0 until published */
    _Atomic uint32_t *next_block; /* per node: multi-block kernels' next block */
    _Atomic uint32_t *next_succ;  /* per node: next single successor to hand out */
    _Atomic uint32_t *blocks_done;
    const rill__gprog *prog; /* the exec's topology */
    /* owned, immutable: prog's successor lists, each node's num_single
     * successors that have it as their only predecessor first */
    uint32_t *succ;
    uint32_t *num_single;
    /* whether parameter set number chain_version is a single chain of
     * one-block nodes (is_chain), decided at its first launch */
    uint64_t chain_version;
    bool chain;
    /* the launch being run and its parameters */
    struct cpu_cmd *cmd;
    rill__stream *stream;
    const rill__xnode *nodes;
    _Atomic uint64_t *record_gen;           /* per node: event record nodes' generation */
    cpu_pub pub;                            /* on the device's graph_runs */
    alignas(64) _Atomic uint32_t head;      /* next slot to claim */
    _Atomic uint32_t tail;                  /* slots reserved by publishers */
    alignas(64) _Atomic uint32_t remaining; /* nodes not yet done */
    alignas(64) _Atomic int refs;           /* workers inside the run */
    /* multi-block kernel nodes with blocks to hand out; guarded by
     * active_lock */
    rill__spinlock active_lock;
    uint32_t *active;
    uint32_t num_active;
    _Atomic uint32_t has_active;
    rill__launch_state ls; /* the first kernel failure */
    _Atomic int named;     /* failed_node is being or has been written */
    char failed_node[96];  /* the kernel that failed, for the stream's sentence */
    uint32_t last_tail;    /* slots the previous launch used (to clear) */
    _Atomic int woken;     /* sleeping workers were woken for this launch */
    /* extern nodes: the launch's tokens (rill__cmd.u.graph.ext), and per
     * slot what their completion needs to find the run */
    void **ext;
    struct cpu_gext *ext_args;
} cpu_grun;

/* What an extern node's completion carries (rill__extern_done's arg). */
typedef struct cpu_gext {
    struct cpu_device *d;
    cpu_grun *r;
    uint32_t node;
} cpu_gext;

typedef struct cpu_stream {
    rill__stream *self; /* borrowed: the stream this state belongs to */
    /* guarded by lock (the producer side) */
    alignas(64) rill__spinlock lock;
    cpu_block *wr_block;    /* the block the next command goes to */
    unsigned wr_idx;        /* its next slot; CPU_BLOCK_SLOTS: full */
    cpu_block *free_blocks; /* blocks the submitters may reuse */
    /* atomic, beside the lock that every submit takes: set when a host
     * thread made the stream ready and left its wake-up to the watch
     * (rill__cpu_push_ready); left_ns is when a later submit first found it set (0:
     * none yet). A submit that finds it set LEFT_WAKE_NS after that wakes a
     * worker: the thread is submitting a long batch, not coming back at
     * once (rill__cpu_submit). */
    _Atomic bool wake_left;
    _Atomic uint64_t left_ns;
    /* atomic: written by the worker only on state changes */
    alignas(64) _Atomic int state; /* enum cpu_stream_state */
    /* atomic: blocks the owner has run through, taken whole by submitters */
    alignas(64) _Atomic(cpu_block *) returned;
    /* owned by the thread running the stream */
    alignas(64) cpu_block *rd_block; /* the block of the next command */
    unsigned rd_idx;                 /* its slot; CPU_BLOCK_SLOTS: in the next block */
    uint64_t rd_seq;                 /* the next command's number */
    int skipping;                    /* a failure is open: skip work until CLEAR */
    rill__waiter waiter;             /* registered while PARKED */
    rill__launch_state ls;           /* the running launch's failure state */
    /* owned by the thread that met the stream's wait: its list of streams
     * to run after the one it runs (cpu_exec.c, on_wait_met) */
    rill__stream *met_next;
    /* guarded by the device's ready_lock */
    rill__stream *ready_next;
} cpu_stream;

/* A thread that runs work: a worker thread, or a host thread that runs
 * work while it waits for it (rill__cpu_host_help; then thread is unset). */
typedef struct cpu_worker {
    struct cpu_device *d;
    int index;                /* the worker thread's number (its name), -1 for a host thread */
    int unit;                 /* the compute unit it holds (rill_block_ctx.worker), -1: none */
    unsigned naps;            /* timed sleeps in a row that found no graph work */
    unsigned met_after_yield; /* waits in a row met just after a yield (cpu_exec.c) */
    uint32_t forks;           /* rill__fork_count when the thread started running work */
    rill__thread thread;
} cpu_worker;

typedef struct cpu_device {
    rill__device *dev; /* borrowed: owns this */
    int num_workers;
    int num_cpus;        /* the device's processors (all the process may run on, for one device) */
    int *cpus;           /* owned: their numbers */
    int pinned;          /* the workers run on the device's processors only */
    bool pin_each;       /* RILL_CPU_PIN=1, one device, a worker per processor: worker i runs
                          * on cpus[i] only */
    int node;            /* several devices: the NUMA node its memory prefers; else -1 */
    cpu_worker *workers; /* owned */
    /* atomic, owned: (num_workers + 63) / 64 words; bit u set while no
     * thread holds compute unit u (cpu_worker.c) */
    _Atomic uint64_t *free_units;
    /* guarded by ready_lock: a spin lock, held for a few loads and stores,
     * whose code is inline (a launch after a pause runs with cold caches) */
    alignas(64) rill__spinlock ready_lock;
    rill__stream *ready_head[CPU_PRIORITY_LEVELS], *ready_tail[CPU_PRIORITY_LEVELS];
    /* atomic: bit i set when level i has ready streams */
    alignas(64) _Atomic uint32_t ready_mask;
    /* guarded by launch_lock */
    alignas(64) rill__mutex launch_lock;
    rill__link *launches;   /* cpu_cmd: multi-block launches with blocks left to hand out */
    rill__link *graph_runs; /* cpu_grun: graph launches that others may help with */
    /* atomic */
    alignas(64) _Atomic int num_launches; /* entries in launches */
    _Atomic int graph_work;               /* published, unclaimed graph nodes (a hint) */
    _Atomic int num_graph_runs;           /* entries in graph_runs */
    /* atomic, each group on lines of its own: what every waker reads, what
     * the watch and host threads write, what workers write as they go idle
     * and busy (read by waits' spins); idle workers poll none of them */
    alignas(64) _Atomic uint32_t work_gen; /* futex word idle workers sleep on */
    _Atomic int sleepers;
    _Atomic int unit_waiters;         /* sleepers that woke up and wait for a unit */
    _Atomic int waker_cpu;            /* the processor of the last thread that woke workers */
    alignas(64) _Atomic int watching; /* 1 while a worker naps as the watch (cpu_worker.c) */
    _Atomic int left_to_watch;        /* set when a host thread leaves a wake-up to the watch */
    _Atomic uint64_t watch_catches;   /* times the watch (or a kick) ran work left to it */
    alignas(64) _Atomic int idle;     /* workers in idle_wait, spinning or asleep */
    _Atomic int spinning;             /* workers spinning in idle_wait */
    alignas(64) _Atomic int stop;     /* written once: idle workers poll it */
} cpu_device;

static inline cpu_stream *cpu_stream_of(rill__stream *s) {
    return (cpu_stream *)rill__queue_of(s)->state;
}

static inline cpu_device *cpu_device_of(rill__device *dev) {
    return (cpu_device *)rill__device_base_of(dev)->state;
}

/* cpu_memory.c: the memory ops of the ops table, and the memory that all
 * CPU devices and host memory may take together (the budget). probe sets
 * the budget from RILL_CPU_MEMORY, physical memory and the memory cgroup
 * (false, with why, when RILL_CPU_MEMORY names no amount), on the
 * initialising thread before any CPU device exists. choose is probe's
 * rule, for tests: env is RILL_CPU_MEMORY's value (NULL: unset), physical
 * and cgroup the system's figures (0: unknown, none); how receives what
 * chose *out, or why env names no amount (then false). */
bool rill__cpu_memory_probe(char *why, size_t size);
bool rill__cpu_memory_choose(const char *env, size_t physical, size_t cgroup, size_t *out,
                             char *how, size_t size);
size_t rill__cpu_memory_bytes(void); /* the budget; 0: none (the system gave no figures) */
size_t rill__cpu_memory_taken(void); /* committed segment memory and host memory, all devices */
rill_status rill__cpu_mem_alloc(rill__device *dev, size_t bytes, void **out, void **handle);
void rill__cpu_mem_free(rill__device *dev, void *ptr, size_t bytes, void *handle);
rill_status rill__cpu_mem_commit(rill__device *dev, void *handle, size_t offset, size_t bytes);
void rill__cpu_mem_decommit(rill__device *dev, void *handle, size_t offset, size_t bytes);
void rill__cpu_mem_describe(rill__device *dev, char *buf, size_t size);
const rill__shm *rill__cpu_ipc_export(rill__device *dev, void *handle);
rill__shm_map_result rill__cpu_ipc_map(rill__device *dev, const rill__shm_name *name,
                                       size_t object_bytes, size_t offset, size_t bytes, void **out,
                                       char *why, size_t why_size);
void rill__cpu_ipc_unmap(rill__device *dev, void *ptr, size_t bytes);
void *rill__cpu_host_alloc(rill__device *dev, size_t bytes);
void rill__cpu_host_free(rill__device *dev, void *ptr, size_t bytes);

/* cpu_queue.c */
rill_status rill__cpu_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq);
/* Gives a new stream its first block (stream_init): false when out of
 * memory. Frees every block a stream holds (stream_fini). */
bool rill__cpu_stream_init_queue(rill__stream *s);
void rill__cpu_stream_free_queue(cpu_stream *cs);

/* cpu_ready.c */
/* For cpu_worker.c: takes the ready stream of greatest priority, or NULL. */
rill__stream *rill__cpu_pop_ready(cpu_device *d);
/* The backend's kick (backend.h): wakes a worker for ready work that no
 * worker has taken, when one sleeps. */
void rill__cpu_kick(rill__stream *s);

/* cpu_exec.c */
/* For cpu_worker.c: runs a stream's commands until its queue is empty, it
 * parks, a multi-block kernel hands it to another worker, or it yields to
 * other streams; runs blocks of a published launch (the last worker out
 * finishes the command and carries on with its stream), 0 when there was
 * none. */
void rill__cpu_run_stream(cpu_device *d, cpu_worker *w, rill__stream *s);
int rill__cpu_help_launch(cpu_device *d, cpu_worker *w);
/* For a worker that ran a graph launch's last node (rill__cpu_help_graph):
 * completes c and goes on running its stream. */
void rill__cpu_resume_stream(cpu_device *d, cpu_worker *w, rill__stream *s, cpu_cmd *c);
/* On the worker running s: EXEC_DONE once t has completed seq, whether
 * that work ran, failed or was skipped (an ordering, never a failure of
 * s), else EXEC_PARKED: s parks and its command runs again when t gets
 * there. */
enum exec_result rill__cpu_wait_ended(rill__stream *s, rill__stream *t, uint64_t seq);

/* cpu_host.c */
/* The backend's host_help (backend.h): a host thread that waits for s up
 * to seq runs that work itself, with a borrowed compute unit, when the
 * stream waits in the ready queue for a worker or a kernel of it has
 * blocks left. */
bool rill__cpu_host_help(rill__stream *s, uint64_t seq);
/* s, which the calling host thread has just made ready and owns, holds a
 * RILL__CMD_SMALL kernel as command seq: when it is s's next command and a
 * compute unit is free, runs it on this thread with that unit and hands s
 * back (idle, or ready for a worker when more came meanwhile). False,
 * touching nothing, otherwise: the caller queues s for a worker. */
bool rill__cpu_run_small(rill__stream *s, uint64_t seq);

/* cpu_worker.c */
void rill__cpu_workers_start(cpu_device *d);
void rill__cpu_workers_stop(cpu_device *d);

/* cpu_units.c */
/* Wakes up to count sleeping workers (none when none sleeps). */
void rill__cpu_wake_workers(cpu_device *d, int count);
/* Makes the calling worker sleep at once when it next finds nothing to
 * do, without spinning for more: another thread needs its processor (it
 * woke a host thread, or was woken onto its waker's processor); whether
 * it is to; and forgetting it again. */
void rill__cpu_leave_processor(void);
bool rill__cpu_leaving_processor(void);
void rill__cpu_stay_on_processor(void);
/* Whether the device has work a worker could take, or stops. */
int rill__cpu_has_work(cpu_device *d);
/* Takes a free compute unit (-1 when none is free); puts one back, waking
 * a worker that waits for a unit when there is work; whether any is free
 * (a hint). */
int rill__cpu_unit_take(cpu_device *d);
void rill__cpu_unit_put(cpu_device *d, int unit);
bool rill__cpu_unit_any_free(cpu_device *d);
/* Puts a unit back and wakes no one: a worker about to sleep. */
void rill__cpu_unit_release(cpu_device *d, int unit);

/* cpu_grid.c */
/* How many blocks of a grid of blocks a worker takes at once. */
uint32_t rill__cpu_grid_chunk(const cpu_device *d, uint32_t blocks);
/* Takes the next chunk, [*first, *end), of blocks [0, blocks) from the
 * counter next; false when none is left. */
bool rill__cpu_grid_take(_Atomic uint32_t *next, uint32_t chunk, uint32_t blocks, uint32_t *first,
                         uint32_t *end);
/* Opens s's failure window at seq: what ("kernel 'scale'") failed, with
 * its message, detail; later work of s is skipped. */
void rill__cpu_fail_stream(rill__stream *s, uint64_t seq, const char *what, const char *detail);
/* Runs blocks [first, end) of a grid on w, with ls as the launch's state;
 * stops once the launch failed. True when a body run here recorded that
 * failure (so the caller names the right kernel). */
bool rill__cpu_grid_run(const cpu_worker *w, rill_cpu_kernel_fn body, const void *args,
                        rill_dim3 grid, rill__launch_state *ls, uint32_t first, uint32_t end);
/* Puts p on the device's list *list, or takes it off (nothing when it is
 * not on it), keeping *count (read without the lock, as a hint) in step. */
void rill__cpu_publish(cpu_device *d, rill__link **list, _Atomic int *count, cpu_pub *p);
void rill__cpu_unpublish(cpu_device *d, rill__link **list, _Atomic int *count, cpu_pub *p);

/* cpu_graph.c */
/* The backend's graph_prepare and graph_release (backend.h). */
rill_status rill__cpu_graph_prepare(rill__device *dev, const rill__gprog *prog,
                                    const rill__xnode *nodes, void **state);
void rill__cpu_graph_release(rill__device *dev, void *state);
enum exec_result rill__cpu_exec_graph(cpu_device *d, cpu_worker *w, cpu_cmd *c);
/* Helps a graph launch in progress; 0 when there was nothing to do. When
 * this worker completed the launch, *done is its command, which the
 * caller finishes (rill__cpu_resume_stream); else NULL. */
int rill__cpu_help_graph(cpu_device *d, cpu_worker *w, cpu_cmd **done);
/* For a host thread that waits for s (rill__cpu_host_help) and holds a
 * borrowed unit: runs nodes of s's graph launch, as an idle worker does.
 * 0 when s has no launch with nodes to claim, 1 when it took part, 2 when
 * it completed the launch: *done is then the command, which the caller
 * finishes, and the caller owns s (as after a kernel's last block). */
int rill__cpu_host_help_graph(cpu_device *d, cpu_worker *w, rill__stream *s, cpu_cmd **done);

#endif
