/* SPDX-License-Identifier: MIT */
/* The device interface: everything a backend and the core share. The core
 * owns the semantics (sequence numbers, events, sticky errors, waits,
 * memory reuse, graphs); a backend owns the mechanism that runs commands
 * on its devices. Of the core, a backend includes this header only: what
 * it may read of the core's objects, the commands it runs, the graphs it
 * launches, the core functions it may call, and the table of operations
 * it implements (rill__backend_ops, at the end). Besides it, a backend
 * includes the ops' shared headers beside this one (op_args.h, op_math.h,
 * half_bits.h) and the layers below the core (platform, util, trace).
 *
 * Sequence numbers: each stream numbers its commands 1, 2, 3, ... in
 * submission order. A stream's queue (rill__queue) holds sub_seq, the last
 * number handed out (the backend assigns it inside submit), and done_seq,
 * the last command completed. A backend completes commands strictly in
 * order by calling rill__stream_complete(stream, seq) for each.
 *
 * Completion: rill__stream_complete, rill__stream_fail and the other calls
 * of "What the core provides" below may be made from any thread (a worker,
 * a driver's callback thread, a host thread that runs work while it waits)
 * with no lock of the backend held, since they wake waiters and run their
 * callbacks, which may submit work to any stream of any device.
 *
 * Waits across devices: a WAIT command names a stream that may belong to
 * another device, even another backend. The waiting backend reads that
 * stream's done_seq (acquire) and registers a rill__waiter on it with
 * rill__stream_add_waiter to learn when it moves; it never calls into the
 * other backend. A backend with a faster path for waits on its own
 * devices (a device-side wait on a device event) uses it when the awaited
 * stream is one of its own, and the waiter otherwise. */
#ifndef RILL_BACKEND_H
#define RILL_BACKEND_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/op_args.h"
#include "platform/shm.h"
#include "rill.h"

/* --------------------------------------------------------------- objects
 * The internal objects behind rill.h's handles. Code below the public
 * calls works with these; a public call turns each handle it receives into
 * its object (core/handle.h) and gives users the object's handle. The
 * distinct types make the compiler refuse a handle where an object is
 * meant, and the other way round. A backend sees them as opaque, except
 * for the first member of three of them (below). */
typedef struct rill__device rill__device;
typedef struct rill__stream rill__stream;
typedef struct rill__event rill__event;
typedef struct rill__kernel rill__kernel;
typedef struct rill__graph rill__graph;
typedef struct rill__graph_node rill__graph_node;
typedef struct rill__graph_exec rill__graph_exec;

/* What a backend reads of a device: the first member of rill__device. */
typedef struct rill__device_base {
    /* filled by the backend's device_init (all but ordinal), then immutable */
    rill_device_info info;
    void *state; /* owned by the backend: set by device_init, freed by device_shutdown */
    /* set once by rill__device_lost (release), never cleared: the device
     * failed as a whole; lost_why is written before and then immutable */
    _Atomic int lost;
    char lost_why[256];
    /* set by device_init: the most blocks of RILL__OP_BLOCK_THREADS threads
     * a built-in op whose kernel loops over its grid is launched with, for
     * a device that runs many blocks at once (a GPU: enough to fill its
     * multiprocessors several times over); 0 for one whose blocks are its
     * workers' turns (the CPU device), which the op layer sizes by
     * compute_units */
    size_t op_grid_blocks;
    /* set by device_init: the device's matmul body adds
     * rill__op_matmul_args.bias itself (the CPU device); otherwise the op
     * layer adds it with a second kernel */
    bool op_matmul_bias;
    /* host threads (not the backend's) asleep in a wait for one of the
     * device's streams (core/stream_wait.c): the processors they left are
     * free for the backend's threads; relaxed, a hint */
    _Atomic int hosts_asleep;
} rill__device_base;

/* What a backend reads and writes of a stream: the first member of
 * rill__stream. The sequence counters sit on lines of their own, apart
 * from the immutable fields that every command reads. */
typedef struct rill__queue {
    /* immutable after the stream is created */
    uint64_t id; /* unique for the life of the process, never reused */
    rill__device *dev;
    int priority; /* within [greatest_priority, least_priority] of the device */
    void *state;  /* the backend's, rill__backend_ops.stream_state_bytes long, 64-aligned */
    /* written by the backend's submit (release) */
    alignas(64) _Atomic uint64_t sub_seq;
    /* the last command submitted with RILL__CMD_OPAQUE (0: none; UINT64_MAX
     * for streams that complete by events outside the process): written by
     * submit before it publishes sub_seq, so whoever read a sequence
     * number from sub_seq sees the opaque commands up to it */
    _Atomic uint64_t opaque_seq;
    /* the core's (core/queue_limit.h): a submission that finds sub_seq
     * below it has room in the stream's queue without looking further;
     * written by the core's check of the bounds (relaxed), on the line that
     * submitters write anyway */
    _Atomic uint64_t room_seq;
    /* written by rill__stream_complete (release) */
    alignas(64) _Atomic uint64_t done_seq;
} rill__queue;

/* What a backend reads of a kernel: the first member of rill__kernel,
 * immutable while the kernel lives (which is at least as long as any
 * launch of it may run). */
typedef struct rill__kernel_image {
    char name[64];
    rill__op op; /* a built-in op's id (op_args.h), or RILL__OP_NONE */
    /* owned: the kernel's images (rill_kernel_image_desc's list, or what
     * rill_kernel_desc's fields stand for), bytes and entry names copied;
     * none for a built-in op */
    rill_kernel_image *images;
    size_t num_images;
} rill__kernel_image;

static inline rill__device_base *rill__device_base_of(rill__device *dev) {
    return (rill__device_base *)(void *)dev;
}
static inline rill__queue *rill__queue_of(rill__stream *s) {
    return (rill__queue *)(void *)s;
}
static inline const rill__kernel_image *rill__kernel_image_of(const rill__kernel *k) {
    return (const rill__kernel_image *)(const void *)k;
}

/* -------------------------------------------------------------- commands
 * A command as the core hands it to a backend's submit op. The core takes
 * a reference on every handle a command names before submitting it; the
 * backend releases them (rill__cmd_release) once the command has run or
 * been skipped. Pointers to caller memory (args, accesses) are borrowed
 * only for the duration of submit: the backend copies them. */

typedef enum rill__cmd_kind {
    RILL__CMD_KERNEL = 1, /* a grid of blocks */
    RILL__CMD_HOST,       /* rill_launch_host_func */
    RILL__CMD_WAIT,       /* wait until u.wait.stream completes u.wait.seq */
    RILL__CMD_RECORD,     /* timestamp a timing event; publish an interprocess record */
    RILL__CMD_COPY,       /* memcpy */
    RILL__CMD_SET,        /* memset */
    RILL__CMD_CLEAR,      /* rill_stream_clear_error: later work runs again */
    RILL__CMD_GRAPH       /* rill_graph_launch: every node of an exec */
} rill__cmd_kind;

enum rill__cmd_flags {
    /* The command may wait for something the library cannot see: a host
     * function, a wait for another process, or a wait for a stream with
     * such work pending. Work queued behind it may come to wait for any
     * later work of any stream, so the memory pool never makes another
     * stream wait behind it (see rill__stream_opaque_pending). */
    RILL__CMD_OPAQUE = 1u << 0,
    /* A WAIT that orders memory only (the pool's internal waits): it ends
     * when the awaited work completes or is skipped after a failure, and
     * never carries that failure to the waiting stream. */
    RILL__CMD_ORDER_ONLY = 1u << 1,
    /* A RECORD that only records the event's native event (u.record.native)
     * at its point: the event is not stamped (rill__event_stamp) when it
     * runs. */
    RILL__CMD_NATIVE_ONLY = 1u << 2,
    /* A HOST command that runs even where its stream skips its work after
     * a failure (rill_stream_add_callback): the backend hands it to
     * rill__host_skipped instead of dropping it. */
    RILL__CMD_ALWAYS = 1u << 3,
    /* A KERNEL whose work costs less than handing it to another thread (an
     * element-wise op of a few hundred elements): a backend whose kernels
     * run on the host may run it on the submitting thread, when its stream
     * has nothing else to run, instead of waking a worker for it. */
    RILL__CMD_SMALL = 1u << 4
};

struct rill__graph_launch;

/* A kernel's arguments and access list up to this many bytes together are
 * counted in its command's cmd_bytes; larger ones, in full, on their own. */
#define RILL__QUEUE_INLINE_BYTES 192

/* The payloads that commands and graph nodes share: a node is a command
 * that waits in a graph. */
typedef struct rill__kernel_call {
    rill__kernel *kernel; /* borrowed: a destroyed kernel outlives its launches */
    /* what kernel_load returned for the device: the stream's (commands),
     * the exec's (the nodes of an exec's parameter sets); NULL in the
     * nodes of a graph, which is for no device yet */
    void *loaded;
    rill_dim3 grid;
    rill_dim3 block;
    /* commands: borrowed during submit; graph nodes: owned by the node */
    const void *args;
    size_t args_size;
    const rill_access *accesses;
    size_t num_accesses;
} rill__kernel_call;

typedef struct rill__host_call {
    rill_host_fn fn;
    void *user_data;
} rill__host_call;

typedef struct rill__copy_call {
    void *dst;
    const void *src;
    size_t bytes;
    /* the devices whose memory dst and src are, or NULL for host memory
     * that no device owns */
    rill__device *dst_dev, *src_dev;
} rill__copy_call;

typedef struct rill__set_call {
    void *dst;
    int value;
    size_t bytes;
} rill__set_call;

typedef struct rill__cmd {
    rill__cmd_kind kind;
    unsigned flags; /* enum rill__cmd_flags */
    /* set by the core before submit and kept with the command until its
     * release: a kernel's bytes of arguments and access list when they
     * are more than RILL__QUEUE_INLINE_BYTES (0 otherwise), which the
     * device's queue bound counts beyond the backend's cmd_bytes
     * (core/queue_limit.h) */
    size_t extra_bytes;
    union {
        rill__kernel_call kernel;
        rill__host_call host;
        struct {
            rill__stream *stream; /* ref; of any device */
            uint64_t seq;
        } wait;
        struct {
            rill__event *event; /* ref */
            uint64_t gen;
            /* borrowed (the event, which the command's reference keeps):
             * the event's native event (native_event_create), which the
             * backend records at the command's point, or NULL */
            void *native;
        } record;
        rill__copy_call copy;
        rill__set_call set;
        struct {
            /* ref: what the launch runs (below); the core releases it */
            struct rill__graph_launch *launch;
            void (*release)(struct rill__graph_launch *launch, void **ext);
            /* the exec's previous launch, on another stream, or NULL: the
             * launch runs (or is skipped) only once after_stream completed
             * after_seq, whether that work ran, failed or was skipped, so
             * launches of one exec never overlap and a failure of one does
             * not fail the next */
            rill__stream *after_stream; /* ref */
            uint64_t after_seq;
            /* owned, NULL when the exec has no extern node: this launch's
             * extern work, issued when it was submitted, one token per
             * extern node (rill__xnode.ext_slot). The backend takes a token
             * (sets its slot to NULL) when it starts the node; the release
             * drops the tokens left, as skipped. */
            void **ext;
        } graph;
    } u;
    /* set by the core at submit: the submitting thread's op name
     * (rill_thread_exchange_op_name), static storage, or NULL; after the
     * payload, off the line that the worker reads first */
    const char *op_name;
} rill__cmd;

/* ---------------------------------------------------------------- graphs
 * An exec (a graph instantiated for launching) as a backend runs it: its
 * nodes in a topological order, each with its count of predecessors and
 * the list of its successors, so that a launch only resets counters and
 * runs. The graph layer (src/graph) builds it, device-independent; the
 * backend prepares its own state from it once (graph_prepare: the CPU
 * device its run state, the CUDA device CUDA graphs), follows the updates
 * of its parameters (graph_update) and runs each launch with that. */

typedef enum rill__gnode_kind {
    RILL__GNODE_KERNEL = 1,
    RILL__GNODE_HOST,
    RILL__GNODE_COPY,
    RILL__GNODE_SET,
    RILL__GNODE_EMPTY,
    RILL__GNODE_RECORD, /* rill_graph_add_event_record_node */
    RILL__GNODE_WAIT,   /* rill_graph_add_event_wait_node */
    RILL__GNODE_EXTERN  /* work another part of the library carries out (a collective) */
} rill__gnode_kind;

/* An extern node's work: done outside the backend, by a part of the
 * library above the graph layer (a collective, carried out by the
 * communication engine), which provides these operations. The graph
 * layer issues the work when a launch is submitted, so that work of one
 * kind keeps the order of the submitting calls (collectives of a
 * communicator must start in the same order on every rank); the backend
 * starts it when the run reaches the node, holding no compute unit while
 * it is under way, and runs the node's successors once it is done. */
typedef void (*rill__extern_done)(void *arg, const char *failure);
typedef struct rill__extern_ops {
    void (*ref)(void *obj);
    void (*unref)(void *obj);
    /* What the node does, for traces, graph dumps and sentences
     * ("rill_allreduce_f32 (sum of 1000 floats)"). */
    void (*describe)(void *obj, char *buf, size_t size);
    /* A launch on s was submitted: *token receives the launch's work,
     * issued and not started. Any thread, under the exec's launch lock;
     * a failure with a sentence that names no public call. */
    rill_status (*issue)(void *obj, rill__stream *s, void **token);
    /* The run reached the node: starts token's work, or skips it (skip:
     * the launch failed before it). done(arg, failure) is called once,
     * from any thread with no lock held, perhaps before start returns:
     * failure is NULL, or what failed and why. */
    void (*start)(void *token, bool skip, rill__extern_done done, void *arg);
    /* The launch ended without reaching the node (its stream skipped it):
     * token's work is skipped. */
    void (*drop)(void *token);
    /* The launch was never submitted (a later node's issue failed): token's
     * work is taken back, as if it had never been issued. */
    void (*withdraw)(void *token);
    /* The memory the work touches, for the stream sanitizer: *acc gets an
     * array that lives as long as obj; returns its length. */
    size_t (*accesses)(void *obj, const rill_access **acc);
} rill__extern_ops;

typedef struct rill__extern_call {
    const rill__extern_ops *ops;
    void *obj; /* ref */
} rill__extern_call;

/* What a node does; the same in graphs and execs. */
typedef struct rill__gnode_params {
    rill__gnode_kind kind;
    union {
        rill__kernel_call kernel; /* the kernel held by the graph layer; args owned */
        rill__host_call host;
        rill__copy_call copy;
        rill__set_call set;
        struct {
            rill__event *event; /* ref */
            int timing;         /* record nodes: the event has RILL_EVENT_TIMING */
        } event;
        rill__extern_call ext;
    } u;
} rill__gnode_params;

/* A node of an exec, laid out for the launch path. */
typedef struct rill__xnode {
    rill__gnode_params p; /* args/accesses point into its parameter set's arena */
    uint32_t num_preds;
    uint32_t succ_begin, num_succ; /* in rill__gprog.succ */
    uint32_t graph_index;          /* the node's index in its graph, for errors */
    uint32_t ext_slot;             /* extern nodes: the slot of its token (rill__cmd.u.graph.ext) */
} rill__xnode;

/* The topology of an exec: immutable after instantiation. */
typedef struct rill__gprog {
    uint32_t num_nodes;
    const uint32_t *succ;  /* the successor lists, each node's a slice */
    const uint32_t *roots; /* nodes without predecessors */
    uint32_t num_roots;
    uint32_t num_ext; /* extern nodes, numbered by ext_slot in node order */
} rill__gprog;

/* One launch of an exec, as the command carries it: the topology, the
 * backend's state from graph_prepare, and the parameter set current when
 * it was submitted (launches of one exec never overlap, but an update may
 * replace the set of later launches while one runs). How a backend runs
 * the nodes (on which threads, in what batches) is its own: the graph
 * layer says only what they are and what depends on what. */
typedef struct rill__graph_launch {
    const rill__gprog *prog;
    void *state;                  /* from graph_prepare, for the stream's device */
    const rill__xnode *nodes;     /* prog->num_nodes, topological order */
    _Atomic uint64_t *record_gen; /* per node: event record nodes' generation (relaxed) */
    /* the parameter set's number: 0 for the one made at instantiation,
     * then 1, 2, ... for each rill_graph_exec_update's (graph_update);
     * launches carry nondecreasing numbers in submission order */
    uint64_t version;
} rill__graph_launch;

/* -------------------------------------------------- what the core provides */

/* Marks seq as completed (in order) and wakes waiters: parked streams and
 * sleeping host threads alike. */
void rill__stream_complete(rill__stream *s, uint64_t seq);
/* True, once, after the calling thread woke a sleeping host thread in
 * rill__stream_complete: a worker then leaves its processor to the woken
 * thread instead of spinning on it. */
bool rill__stream_took_host_wake(void);
/* Size of the root cause of a sticky error (what failed, where, and its
 * message): short enough that a sentence carrying it from stream to stream
 * still fits rill_last_error's buffer. */
#define RILL__CAUSE_BYTES 512
/* Opens a failure window at seq, unless one is open, whose root cause is
 * cause: what failed on s and why ("kernel 'scale' on stream 'main'
 * failed: ..."), without advice; cut to RILL__CAUSE_BYTES. */
void rill__stream_fail(rill__stream *s, uint64_t seq, const char *cause);
/* When the work of t up to t_seq failed, opens a failure window on s at
 * seq (a WAIT of s for it ran) that carries t's root cause, names s, and
 * names t when the failure began before t; returns whether it did. */
bool rill__stream_carry_failure(rill__stream *s, uint64_t seq, rill__stream *t, uint64_t t_seq);
/* The device failed as a whole (a GPU fault ended its context), for the
 * reason why ("the GPU stopped: CUDA_ERROR_ILLEGAL_ADDRESS ..."): from now
 * on every submission to its streams is refused and every failure on them
 * is RILL_ERROR_DEVICE_LOST; the backend still fails each stream's pending
 * work (rill__stream_fail). The first call's reason stays. Any thread. */
void rill__device_lost(rill__device *dev, const char *why);
/* Closes the open failure window at seq (a CLEAR command ran). */
void rill__stream_clear_failure(rill__stream *s, uint64_t seq);
void rill__stream_ref(rill__stream *s);
void rill__stream_unref(rill__stream *s);
/* Copies the stream's name ("stream 0x..." when unnamed) into buf. */
void rill__stream_name(rill__stream *s, char *buf, size_t size);
/* Names s's track in the running trace (src/trace/trace.h), once per trace
 * and again after rill_stream_set_name. Call only while rill__tracing(). */
void rill__stream_trace_track(rill__stream *s);
struct rill__trace_rec;
/* Fills the fields of a trace record (src/trace/trace.h) that command c,
 * number seq of s, decides: what, device, stream, seq, name (its kernel's,
 * or its framework op's), grid, bytes, a, b; the caller sets type, unit,
 * flags, t0 and t1. */
void rill__trace_describe(struct rill__trace_rec *r, rill__stream *s, const rill__cmd *c,
                          uint64_t seq);

/* Someone to notify when a stream completes a sequence number. */
typedef struct rill__waiter {
    struct rill__waiter *next;
    uint64_t seq;
    void (*fn)(struct rill__waiter *w); /* called with no lock held */
} rill__waiter;
/* Registers w to be called once s completes w->seq. Returns false, without
 * registering, when that already happened. */
bool rill__stream_add_waiter(rill__stream *s, rill__waiter *w);

/* Releases the references a command of s holds (see rill__cmd) and what
 * the queue bounds count for it: once per command submitted to s, run or
 * skipped, before rill__stream_complete of its number. */
void rill__cmd_release(rill__stream *s, rill__cmd *cmd);

/* Called when a RECORD command or record node of generation gen runs, with
 * the device's timestamp (timestamp_ns); failed != 0 when the stream is
 * skipping work after a failure. */
void rill__event_stamp(rill__event *e, uint64_t gen, uint64_t now_ns, int failed);

/* What rill_block_ctx.state points at while a launch runs: the backend
 * provides it; rill_kernel_fail records the first message. */
typedef struct rill__launch_state {
    _Atomic int failed;
    char message[256];
} rill__launch_state;
/* Records message as the failure of the launch with state ls, unless one
 * is recorded already; returns whether this call recorded it. */
bool rill__launch_state_fail(rill__launch_state *ls, const char *message);
/* True, once, when a kernel body that ran on the calling thread since the
 * last call recorded its launch's failure (its rill_kernel_fail came
 * first): a graph runner names that node, not another that finished
 * later. */
bool rill__took_kernel_failure(void);
/* rill_kernel_fail for the bodies of the built-in ops (backend/op_args.h),
 * which reach the core through this file only. */
void rill__kernel_fail(const rill_block_ctx *ctx, const char *message);
/* Runs fn(user_data) as a host function whose rill_host_func_fail writes
 * into *ls (reset first); returns whether it failed. Worker threads only. */
bool rill__host_run(rill_host_fn fn, void *user_data, rill__launch_state *ls);
/* What a backend does with a HOST command (cmd flags: flags) that its
 * stream skips: a RILL__CMD_ALWAYS one runs, told that it was skipped;
 * others are dropped. Worker threads only. */
void rill__host_skipped(const rill__host_call *call, unsigned flags, rill__launch_state *ls);

/* Worker threads of a backend mark themselves, so blocking calls made from
 * kernels and host functions fail with RILL_ERROR_NOT_PERMITTED. */
void rill__thread_set_worker(int is_worker);
int rill__thread_is_worker(void);
/* A host thread that runs device work while it waits for it (host_help)
 * does so as a worker would: enter sets the thread's own state aside
 * (current device and streams, capture mode, thread number, last error
 * sentence, errno) and gives it a worker's (no current stream,
 * RILL_CAPTURE_GLOBAL, a fresh thread number, blocking calls
 * RILL_ERROR_NOT_PERMITTED); leave drops what the work set and puts the
 * thread's own state back. Not nested. */
void rill__thread_enter_worker(void);
void rill__thread_leave_worker(void);
/* After each host function, on whichever thread ran it: drops what the
 * function set (current device and streams, capture mode, last error
 * sentence), so that the next one starts from a worker's state. */
void rill__thread_reset_worker(void);
/* How many times this process was made by fork() from a process that had
 * used rill: a worker that finds it changed after a host function returns
 * is the child's copy of a worker, and must stop. */
extern _Atomic uint32_t rill__fork_count;

/* ------------------------------------------------------------ operations */

/* What a device's memory is, for the layers that hand it on (the reach
 * checks of kernels and copies, the collectives' transports). */
enum rill__mem_caps {
    /* host memory: the host, and every device whose memory is host memory,
     * read and write it as it is */
    RILL__MEMCAP_HOST = 1u << 0,
    /* CUDA device memory: a CUDA-aware MPI takes it as it is; otherwise it
     * goes through page-locked host memory (host_alloc) */
    RILL__MEMCAP_CUDA = 1u << 1
};

/* An image format a backend loads (rill_kernel_image.format), with its
 * name for sentences ("PTX"). */
typedef struct rill__image_format {
    unsigned format;
    const char *name;
} rill__image_format;

typedef struct rill__backend_ops {
    /* the kind's name: what RILL_DEVICE and rill_device_kind_from_name
     * take ("cpu"), unique among the backends */
    const char *name;
    rill_device_kind kind; /* unique among the backends */
    unsigned mem_caps;     /* enum rill__mem_caps; 0: memory nobody else reaches */
    /* The image formats kernel_load takes, the preferred first, ending in
     * {0, NULL}: the core hands it a kernel's first image in the first of
     * them the kernel has. */
    const rill__image_format *image_formats;
    /* Bytes of backend state that rill__queue.state points at. */
    size_t stream_state_bytes;
    /* The host memory a queued command takes (its slot, its share of the
     * queue's blocks, a kernel's first RILL__QUEUE_INLINE_BYTES of arguments
     * and accesses): what the device's queue bound counts per command
     * (core/queue_limit.h). */
    size_t cmd_bytes;

    /* How many devices of this backend the process may use (0 when none:
     * no driver, no hardware); when it returns 0, a sentence saying why
     * goes into why (size bytes), for rill_device_count's callers. Called
     * once, on the initialising thread, no locks held. */
    int (*probe)(char *why, size_t size);
    /* Fills the device's info (except ordinal) and creates the backend's
     * state in its state field, for the index-th device of this backend
     * (0 <= index < probe()). Called once per device, on the initialising
     * thread, no locks held. RILL_ERROR_NO_DEVICE with a sentence when the
     * device cannot start. */
    rill_status (*device_init)(rill__device *dev, int index);
    /* Stops the device's threads and frees its state. Called by
     * rill_shutdown after every stream has drained; no locks held. */
    void (*device_shutdown)(rill__device *dev);
    /* The device's clock, in nanoseconds from an epoch of the device's
     * choosing: what RECORD commands of timing events are stamped with
     * (rill__event_stamp), so rill_event_elapsed_ms compares two stamps of
     * one device. Any thread. */
    uint64_t (*timestamp_ns)(rill__device *dev);

    /* Prepares or releases a stream's backend state. Any thread, no locks
     * held; stream_fini runs only when the stream has no pending work. A
     * failure's sentence names no public call (the caller names its own). */
    rill_status (*stream_init)(rill__stream *s);
    void (*stream_fini)(rill__stream *s);
    /* The device's own handle of stream s (rill_stream_native: a
     * CUstream). NULL as op where streams have none (the CPU device). Any
     * thread; never blocks. */
    void *(*stream_native)(rill__stream *s);
    /* Makes a native event for an event bound to dev (rill_event_native: a
     * CUevent without timing), in *out. The rill event owns it from then on:
     * the core puts it into every later RECORD of the event
     * (u.record.native), which the backend records at the command's point
     * when it issues the command, and frees it with native_event_destroy
     * when the event is freed (after its last RECORD completed, possibly
     * after device_shutdown: the backend keeps what the native event needs
     * until then). A native event never recorded reports complete. NULL
     * ops where events have none (the CPU device: rill_event_native is
     * RILL_ERROR_NOT_SUPPORTED). Any thread, no locks held; may block in
     * the driver. RILL_ERROR_OUT_OF_MEMORY with a sentence when the device
     * makes none. */
    rill_status (*native_event_create)(rill__device *dev, void **out);
    void (*native_event_destroy)(rill__device *dev, void *native);

    /* Appends cmd to s in stream order, assigns it the next sequence number
     * (stored in *seq), and arranges for it to run. Takes over the
     * references in cmd and copies what cmd borrows. When cmd->flags has
     * RILL__CMD_OPAQUE, stores the number in opaque_seq before it
     * publishes sub_seq (release). A WAIT runs even while the stream
     * skips work after a failure; it fails the stream only when the
     * awaited work failed, the stream is not failing already, and the WAIT
     * is not RILL__CMD_ORDER_ONLY. Any thread, no locks held; never blocks
     * on other work. RILL_ERROR_OUT_OF_MEMORY when the command cannot be
     * stored, RILL_ERROR_INVALID_ARGUMENT when a kernel's grid, blocks or
     * arguments are past what the device launches (nothing was submitted
     * then), with a sentence that names no public call. */
    rill_status (*submit)(rill__stream *s, const rill__cmd *cmd, uint64_t *seq);
    /* Runs work of s, up to the command numbered seq, on the calling thread
     * when no awake worker has taken it. The caller is a host thread about
     * to wait for seq (not a worker, not inside a kernel or host function),
     * with no locks held. It runs that work as a worker would, kernels and
     * host functions included (between rill__thread_enter_worker and
     * rill__thread_leave_worker), in stream order and with the stream's
     * sticky errors, and gives the stream back to the device before it
     * returns. Returns true when it ran some of the work (the caller checks
     * seq again, and may call again), false when it found nothing it may run
     * now. May block as long as the work it runs. NULL when the device's
     * work never runs on host threads. */
    bool (*host_help)(rill__stream *s, uint64_t seq);
    /* Makes sure that work of s's device which no worker has taken gets
     * one: a host thread is about to wait or poll for s's work and does not
     * run it itself (submit may leave the wake-up of a sleeping worker for
     * later, when the submitting thread is expected to come back for its
     * work). Any thread, no locks held; never blocks beyond waking a
     * thread; cheap when there is nothing to do. NULL when submit always
     * wakes. */
    void (*kick)(rill__stream *s);

    /* Makes a kernel ready to launch on dev (a CUDA device loads its
     * module and finds its function) and returns the device's state for it
     * in *loaded, which launches on dev carry (rill__cmd.u.kernel.loaded).
     * image is the kernel's image the core chose (image_formats), or NULL
     * for a built-in op (k->op), whose body the backend has.
     * RILL_ERROR_NOT_SUPPORTED, with a sentence that names the kernel and
     * no public call, when the device cannot load it. Called once per
     * kernel and device, at its first launch or graph node there, under a
     * lock of the core's; never blocks on other work. */
    rill_status (*kernel_load)(rill__device *dev, const rill__kernel_image *k,
                               const rill_kernel_image *image, void **loaded);
    /* Frees what kernel_load made, once no launch of the kernel may run
     * (NULL when kernel_load makes nothing to free). No locks held. */
    void (*kernel_unload)(rill__device *dev, const rill__kernel_image *k, void *loaded);

    /* Prepares the backend's state for launching an exec on dev, once,
     * when the exec is instantiated: prog is its topology (immutable while
     * the exec lives) and nodes its first parameter set (version 0),
     * read-only, in prog's topological order: each node's kind, its
     * parameters (kernels loaded for dev) and, through prog, its
     * successors; the backend may build its own graph from them.
     * RILL_ERROR_OUT_OF_MEMORY or RILL_ERROR_NOT_SUPPORTED (a node the
     * device cannot run) with a sentence that names no public call. Every
     * launch carries *state (rill__graph_launch); graph_release frees it
     * after the last launch completed. Any thread, no locks held. */
    rill_status (*graph_prepare)(rill__device *dev, const rill__gprog *prog,
                                 const rill__xnode *nodes, void **state);
    /* rill_graph_exec_update made a parameter set (nodes, numbered
     * version) of the same topology and node kinds: launches submitted
     * from now on carry it, those submitted before keep theirs and may
     * still run. The backend readies what it needs to run it; on a
     * failure (RILL_ERROR_OUT_OF_MEMORY, RILL_ERROR_NOT_SUPPORTED, with a
     * sentence that names no public call) the update changes nothing.
     * Called with the exec's launch lock held (no launch of the exec is
     * submitted meanwhile), never during graph_prepare or graph_release;
     * must not call into the core. NULL when the backend reads each
     * launch's parameters as it runs it. */
    rill_status (*graph_update)(rill__device *dev, void *state, const rill__xnode *nodes,
                                uint64_t version);
    void (*graph_release)(rill__device *dev, void *state);

    /* Reserves a segment of device memory for the pool (src/mem/pool.c),
     * bytes of address space that the pool commits piece by piece, in
     * granules of mem_granule bytes (mem_commit). *handle receives what the
     * backend keeps with the segment (for the CPU device, what makes it
     * shareable with other processes); it is passed back to the other
     * memory ops. Any thread; the pool's lock may be held;
     * RILL_ERROR_OUT_OF_MEMORY when the device cannot reserve that much. */
    rill_status (*mem_alloc)(rill__device *dev, size_t bytes, void **out, void **handle);
    void (*mem_free)(rill__device *dev, void *ptr, size_t bytes, void *handle);
    /* The unit in which the pool commits and decommits segment memory: a
     * power of two, at least the page size. */
    size_t mem_granule;
    /* Backs [offset, offset + bytes) of a segment (whole granules) with
     * memory before the pool hands it out: RILL_ERROR_OUT_OF_MEMORY, with
     * a sentence that names no public call, when the device has none left.
     * NULL when the device provides memory for a page when it is first
     * touched and has no count of its own to keep. (The CPU device's
     * shared memory objects are sparse: its mem_commit only counts the
     * bytes against the memory all CPU devices may take.) Any thread; the
     * pool's lock may be held; never blocks on other work. */
    rill_status (*mem_commit)(rill__device *dev, void *handle, size_t offset, size_t bytes);
    /* Gives the memory behind [offset, offset + bytes) of a segment back to
     * the device (the whole granules inside it); the range stays reserved,
     * and what it holds once committed again is unspecified (rill_malloc
     * promises no contents). NULL when the device cannot.
     * Any thread; the pool's lock may be held; never blocks on other work. */
    void (*mem_decommit)(rill__device *dev, void *handle, size_t offset, size_t bytes);
    /* Writes a phrase about dev's memory for out-of-memory sentences and
     * rill_mem_summary: how much there is, how much is taken, what chose
     * the amount and how to change it (the CPU devices: "17.6 GiB for the
     * CPU devices and host memory together, ..."). NULL when memory_bytes
     * says it all. Any thread; the pool's lock may be held; never blocks. */
    void (*mem_describe)(rill__device *dev, char *buf, size_t size);
    /* Whether dev's work may read and write [p, p + bytes), memory that no
     * rill pool, rill_malloc_host or IPC mapping holds (another library's
     * device memory, or ordinary host memory): RILL_OK, or
     * RILL_ERROR_DEVICE_MISMATCH with a phrase in why ("pageable host
     * memory, which the GPU cannot read"). NULL when the device reaches all
     * such memory (a CPU device: it is host memory). Any thread, no locks
     * held; never blocks on other work. */
    rill_status (*mem_reachable)(rill__device *dev, const void *p, size_t bytes, char *why,
                                 size_t why_size);

    /* Host memory for copies to and from dev at the device's full speed
     * (page-locked where the device copies by DMA), rill_malloc_host: NULL
     * and a sentence naming no public call when there is none. The CPU
     * device needs no pinning: its memory is host memory. Any thread. */
    void *(*host_alloc)(rill__device *dev, size_t bytes);
    void (*host_free)(rill__device *dev, void *ptr, size_t bytes);

    /* Interprocess memory. ipc_export names the shared memory object behind
     * a segment from mem_alloc, which another process maps (src/mem/ipc.c):
     * NULL when that segment could not be made shareable. ipc_map maps
     * [offset, offset + bytes) of such an object, named in a handle from
     * another process, into this one for dev (a sentence naming no public
     * call in why when it cannot), and ipc_unmap undoes it once no work
     * touches the mapping (at rill_shutdown, after device_shutdown). NULL as
     * ops on devices without interprocess memory. Any thread, no locks
     * held. */
    const rill__shm *(*ipc_export)(rill__device *dev, void *handle);
    rill__shm_map_result (*ipc_map)(rill__device *dev, const rill__shm_name *name,
                                    size_t object_bytes, size_t offset, size_t bytes, void **out,
                                    char *why, size_t why_size);
    void (*ipc_unmap)(rill__device *dev, void *ptr, size_t bytes);
} rill__backend_ops;

/* The backends built into this version, in device order (the ordinals of
 * a backend's devices follow those of the backends before it);
 * NULL-terminated. Defined by src/assembly.c. */
#define RILL__MAX_BACKENDS 8
extern const rill__backend_ops *rill__backends[RILL__MAX_BACKENDS + 1];
/* Appends ops to rill__backends, for a test program's own backend
 * (tests/backend_null): called before the runtime first starts, on one
 * thread. False when the list has no room left. */
bool rill__backend_add_for_test(const rill__backend_ops *ops);
extern const rill__backend_ops rill__cpu_backend;
extern const rill__backend_ops rill__cuda_backend; /* built when the toolkit is found */

#endif
