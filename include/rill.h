/*
 * rill.h: the public contract of rill, in one header.
 *
 * rill runs work on devices through streams: in-order queues whose work
 * runs asynchronously to the host and concurrently with other streams.
 * Events mark points in a stream; other streams and the host wait on them.
 * Memory is allocated in stream order and is never reused while any
 * stream may still touch it. Work on several streams can be captured into
 * a graph once and replayed many times at a fraction of the launch cost.
 *
 * Observability: timeline traces (rill_trace_start, RILL_TRACE) and the
 * stream sanitizer (rill_sanitizer_enable, RILL_SANITIZE).
 *
 * Conventions
 *  - Every call returns rill_status; RILL_OK is 0. Results go through
 *    out-parameters, which are last. On failure out-parameters are left
 *    NULL/zero and rill_last_error() explains, in one sentence, what went
 *    wrong and what to do about it.
 *  - A NULL rill_device* means the calling thread's current device.
 *    A NULL rill_stream* means the calling thread's current stream of the
 *    current device (rill_current_stream), which is what makes the
 *    "with stream s: ..." style of the frameworks work in C. Once the
 *    current stream is destroyed (by any thread), NULL means the device's
 *    default stream again, made to wait first for the work that the
 *    destroyed stream held, so that the thread's later work still follows
 *    its earlier work.
 *  - Handles are opaque. Whoever creates a handle destroys it. Destroying a
 *    stream, event, kernel or graph exec with work still pending is
 *    allowed: the work finishes, then the resources are released. In a
 *    program whose other threads have made calls, a destroyed stream,
 *    event or kernel may be released later still: once those threads'
 *    next calls, or later destroys, show that no call still uses it
 *    (rill_shutdown releases everything); a thread asleep in a
 *    synchronize does not hold it back. Its handle is stale at once.
 *  - A handle is not the address of anything: it names a slot of the
 *    library's handle table and that slot's generation. A destroyed handle
 *    (and every handle after rill_shutdown, devices and library-owned
 *    streams and events included) stays told apart from live ones, even
 *    from an object created later in its place: passing it again is
 *    RILL_ERROR_INVALID_ARGUMENT with a sentence, never a crash or a call
 *    on another object. So is a handle of another kind, or a pointer rill
 *    never gave out. A call that races with the destruction of one of its
 *    handles on another thread either behaves as if it came first (the
 *    object stays whole until the call returns) or is refused as given a
 *    destroyed handle. Compare handles with ==; never dereference them.
 *  - Every function is thread-safe. Commands that several threads submit to
 *    one stream run in the order in which the calls returned.
 *  - The library initialises itself on first use; rill_shutdown() waits for
 *    all work and releases everything (for leak checkers and embedders).
 */
/* The contract keeps the layout of its tables and comments as written. */
/* clang-format off */
#ifndef RILL_H
#define RILL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

typedef enum rill_status {
    RILL_OK = 0,
    RILL_NOT_READY,                  /* query: work still pending; not an error */
    RILL_ERROR_INVALID_ARGUMENT,     /* NULL where a value is needed, bad flag, size 0, ... */
    RILL_ERROR_OUT_OF_MEMORY,        /* the pool cannot serve it, even from its emptied cache (see rill_malloc) */
    RILL_ERROR_NO_DEVICE,            /* no such device, or its backend is not available here */
    RILL_ERROR_DEVICE_MISMATCH,      /* e.g. recording an event on a stream of another device */
    RILL_ERROR_NOT_SUPPORTED,        /* the device or build lacks the feature */
    RILL_ERROR_NOT_PERMITTED,        /* e.g. a blocking call from inside a host function or kernel */
    RILL_ERROR_TIMING_DISABLED,      /* elapsed time of an event created without RILL_EVENT_TIMING */
    RILL_ERROR_NOT_RECORDED,         /* elapsed time of an event never recorded */
    RILL_ERROR_KERNEL_FAILED,        /* a kernel or host function reported failure; see rill_stream_clear_error */
    RILL_ERROR_CAPTURE_UNSUPPORTED,  /* call not allowed while a capture is active; the capture is invalidated */
    RILL_ERROR_CAPTURE_INVALIDATED,  /* end_capture of a capture invalidated (forbidden call, destroyed stream) */
    RILL_ERROR_CAPTURE_UNJOINED,     /* end_capture while a forked stream has work not joined back */
    RILL_ERROR_CAPTURE_UNMATCHED,    /* end_capture on a stream that is not the origin of its capture */
    RILL_ERROR_CAPTURE_ISOLATION,    /* a dependency between captured and uncaptured work, or two captures */
    RILL_ERROR_CAPTURE_WRONG_THREAD, /* end_capture from another thread than begin_capture (not RELAXED) */
    RILL_ERROR_IPC,                  /* an inter-process handle could not be exported or opened */
    RILL_ERROR_INTERNAL,
    RILL_ERROR_DEVICE_LOST           /* the device failed as a whole (a GPU fault ended its context): every
                                      * stream of it fails; only rill_shutdown and a new runtime recover.
                                      * CPU devices never report it */
} rill_status;

const char *rill_status_name(rill_status status);   /* "RILL_ERROR_CAPTURE_UNJOINED" */
const char *rill_status_string(rill_status status); /* a sentence for people */
/* Detail of the last failing call made by this thread ("" if none), e.g.
 * "end_capture: stream 'side' has 2 commands after its last join to the
 * origin stream 'main'; record an event on it and wait on that event from
 * 'main' before ending the capture". It names the call that failed once,
 * then the root cause: a failure that reached a stream through waits
 * names where it began (the kernel, its stream and its message) and the
 * stream it came through. At most 1023 bytes and the terminating NUL; a
 * longer sentence is cut after a whole word and ends in "...". */
const char *rill_last_error(void);

/* Waits for all work, then releases everything the library holds: every
 * handle becomes invalid, and the next call initialises the library
 * afresh. Blocks; RILL_ERROR_NOT_PERMITTED from a kernel or host function.
 * Calls of other threads may race with it: one under way when it begins is
 * waited for, and returns as if it came first; one that begins while it
 * runs is refused the handles of the library it releases
 * (RILL_ERROR_INVALID_ARGUMENT, with a sentence that says so), and one
 * that needs no handle (its first call, say, or a launch on the current
 * stream) waits for it, then runs on a freshly initialised library. Two
 * threads may call it at once: one releases everything, the other waits
 * for it, and both return RILL_OK. A rill_shutdown that finds another
 * thread's first call initialising the library returns RILL_OK at once
 * and leaves that library running. */
rill_status rill_shutdown(void);

/* fork(): the child of a process that has used rill gets a fresh library,
 * as if rill_shutdown had run there without waiting: the parent's work and
 * worker threads stay in the parent, and the child's first call starts new
 * ones. In the child, the parent's devices, streams, events, graphs and
 * execs are invalid (RILL_ERROR_INVALID_ARGUMENT) and its memory is unknown
 * to rill (rill_free, rill_free_host: RILL_ERROR_INVALID_ARGUMENT). Device
 * memory stays mapped and shared with the parent, not copied: the child
 * must not write it while the parent may use it. Page-locked host memory
 * is the child's private copy, ordinary memory there. Kernels carry over:
 * the parent's kernels launch in the child and are destroyed there as
 * usual. rill_shutdown in a child that made no rill call returns at once.
 * The parent is unaffected; a fork waits for an initialisation or a
 * rill_shutdown under way in another thread. The child of a fork made
 * inside a kernel or host function must exec or _exit before that function
 * returns (POSIX already restricts the child of a multithreaded process so);
 * if it returns, the child's copy of the thread that ran it (a worker, or a
 * thread that ran it while it waited for it) ends, and with it the child
 * unless the child made threads. */

/* --------------------------------------------------------------- devices */

typedef struct rill_device rill_device;

typedef enum rill_device_kind {
    RILL_DEVICE_CPU = 1,  /* always present: worker threads act as compute units */
    RILL_DEVICE_CUDA = 2  /* a GPU the NVIDIA driver lists, where RILL_CUDA_ENABLE=1 is
                           * set (off by default until the backend has passed its GPU
                           * checks, docs/cuda.md); rill_device_count_of_kind says why
                           * there is none */
    /* other values: the kinds of backends a build adds (see
     * rill_device_kind_from_name) */
} rill_device_kind;

typedef struct rill_device_info {
    rill_device_kind kind;
    int ordinal;                 /* index in rill_device_get */
    char name[128];
    int compute_units;           /* CPU: worker threads; CUDA: multiprocessors */
    size_t memory_bytes;         /* total device memory (CPU: what rill may take, see below) */
    int least_priority;          /* stream priority range: lower number = higher priority, */
    int greatest_priority;       /* so greatest_priority <= least_priority; default 0 */
} rill_device_info;

/* Devices are owned by the library and live until rill_shutdown. Ordinals:
 * CUDA devices first, then the CPU devices:
 * one per NUMA node the process may run on (one on a machine without NUMA
 * information), or RILL_CPU_DEVICES=N of them, which split the processors
 * the process may run on into N even runs. With several CPU devices, each
 * one's workers run on its own processors only, and its name says which.
 * RILL_CPU_WORKERS=N sets each CPU device's compute units (default: the
 * number of its processors). RILL_DEVICE=NAME:N in the environment, NAME
 * a kind's name (cpu, cuda: rill_device_kind_from_name), chooses the
 * initial current device, the N-th of that kind ("cpu" is cpu:0; default:
 * ordinal 0; a cuda:N that names no device makes
 * rill_get_device fail with RILL_ERROR_NO_DEVICE and the reason). The CUDA
 * backend loads the NVIDIA driver at run time (libcuda.so.1, or the file
 * RILL_CUDA_DRIVER names); rill links no CUDA library.
 *
 * A CPU device's memory_bytes is not the machine's memory but what rill may
 * take of it, so that a program that allocates until it fails gets
 * RILL_ERROR_OUT_OF_MEMORY rather than being killed by the kernel (Linux
 * hands out pages only when they are first touched, and its out-of-memory
 * killer ends the process that touches one too many). By default it is
 * 3/4 of the smaller of physical memory and the limit of the process's
 * memory cgroup (cgroup v2's memory.max, v1's memory.limit_in_bytes, the
 * smallest over the cgroup and its ancestors), read at initialisation;
 * the rest is left to the program's own memory, other processes and the
 * kernel. RILL_CPU_MEMORY=SIZE (bytes, or a number with K, M, G or T:
 * powers of 1024) or RILL_CPU_MEMORY=PERCENT% (1 to 100, of that smaller
 * figure) sets it instead; any other value makes no CPU device
 * (RILL_ERROR_NO_DEVICE, naming the variable). The amount is the process's,
 * not each device's: every CPU device reports it, and all of them together
 * reserve at most that much, rill_malloc_host's memory included (see
 * rill_mem_set_limit to give a device less). `rill info` shows it and how
 * to change it; rill_mem_summary says what chose it and how much is taken. */
rill_status rill_device_count(int *count);
/* The number of devices of kind in *count; when it is 0, a sentence saying
 * why goes into why (size bytes; one too long ends in "..." at a word
 * boundary; why may be NULL when size is 0): no driver, no GPU, a backend not built, RILL_CPU_DEVICES refused.
 * An unknown kind is RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_device_count_of_kind(rill_device_kind kind, int *count, char *why, size_t size);
rill_status rill_device_get(int ordinal, rill_device **out);
rill_status rill_device_get_by_kind(rill_device_kind kind, int index, rill_device **out);
/* The kind whose backend this build names name ("cpu", "cuda": what
 * RILL_DEVICE and `rill info` use) in *out; RILL_ERROR_NO_DEVICE with the
 * names it knows when none does. Does not start the runtime; never
 * blocks. */
rill_status rill_device_kind_from_name(const char *name, rill_device_kind *out);
rill_status rill_device_get_info(rill_device *dev, rill_device_info *out);
rill_status rill_set_device(rill_device *dev);        /* for the calling thread */
rill_status rill_get_device(rill_device **out);       /* the calling thread's current device */
/* Waits for the work submitted to dev's streams before the call (other
 * devices' streams are not waited for). Work that host functions or other
 * threads submit while it waits is not promised to be waited for: each
 * stream is waited for up to the work it held when the call reached it,
 * so the wait ends even while a host function keeps submitting more.
 * RILL_ERROR_KERNEL_FAILED when one of them failed and was not cleared
 * since (see rill_stream_clear_error). */
rill_status rill_device_synchronize(rill_device *dev);

/* --------------------------------------------------------------- streams */

typedef struct rill_stream rill_stream;
typedef struct rill_event rill_event;

/* priority is clamped into [greatest_priority, least_priority]. When
 * several streams have work ready, the device starts work of the stream
 * with the higher priority (the lower number) first. */
rill_status rill_stream_create(rill_device *dev, int priority, rill_stream **out);
rill_status rill_stream_destroy(rill_stream *stream);  /* not the default stream */
rill_status rill_stream_set_name(rill_stream *stream, const char *name); /* for errors and traces */
rill_status rill_stream_get_priority(rill_stream *stream, int *priority);
rill_status rill_stream_get_device(rill_stream *stream, rill_device **out);

/* Each device has one default stream: an ordinary stream (no implicit
 * synchronisation with other streams) that is current until changed. */
rill_stream *rill_default_stream(rill_device *dev);
rill_stream *rill_current_stream(rill_device *dev);
/* Makes stream current for its device in the calling thread and returns
 * the stream that was current before, so scopes nest:
 *     rill_stream *prev = rill_set_current_stream(s); ...;
 *     rill_set_current_stream(prev);                                       */
rill_stream *rill_set_current_stream(rill_stream *stream);

/* RILL_OK when all work submitted so far has completed, else RILL_NOT_READY. */
rill_status rill_stream_query(rill_stream *stream);

/* The device's own handle of a stream, for libraries that take it (cuBLAS,
 * NCCL, PyTorch's ExternalStream): a CUstream on a CUDA device, NULL on a
 * CPU device (whose streams are rill's own queues). rill keeps ownership;
 * work a library submits to a native stream is ordered with the stream's
 * rill work, but rill does not see it (it is not captured, traced or
 * checked by the sanitizer). RILL_ERROR_INVALID_ARGUMENT for a destroyed
 * handle or a NULL out. Does not block; allowed anywhere. */
rill_status rill_stream_native(rill_stream *stream, void **out);
/* The event's CUevent (made without timing), for code built on the CUDA
 * runtime or driver: cuStreamWaitEvent / cudaStreamWaitEvent on it makes
 * their stream wait for the event's latest record, cuEventQuery and
 * cuEventSynchronize see it complete. It is made by the first call and
 * owned by the event: the same handle every time, valid until the event
 * is freed (rill_event_destroy, once its records completed, or
 * rill_shutdown); do not destroy it. Every rill_event_record after the
 * first call records it too, one driver call more per record, when the
 * stream reaches the record on the host: at once, or, behind work rill
 * holds back on the host (a host function, a wait for another device's
 * stream), once that work let it through; until then, a wait on the
 * CUevent waits for its previous record only (for nothing before its
 * first). The first call brings it to the latest record: one that
 * completed already needs nothing (a CUevent never recorded reports
 * complete); one still pending is covered by a record the call queues at
 * the end of that stream, which also covers work submitted to the stream
 * after the event's record, so ask for it before recording where that
 * matters. It reports completion only: a failure of the awaited work is
 * not seen through it, and records made by graph launches (event record
 * nodes, records captured into a graph) do not move it. Recording it
 * yourself, or waiting on it inside a rill capture, is not seen by rill.
 * RILL_ERROR_NOT_RECORDED for an event never recorded (it is bound to no
 * device yet); RILL_ERROR_NOT_SUPPORTED for an event bound to a device
 * whose events have no native handle (a CPU device); both with a
 * sentence. RILL_ERROR_INVALID_ARGUMENT for a destroyed handle or a NULL
 * out. Does not block; allowed anywhere. */
rill_status rill_event_native(rill_event *event, void **out);
/* Waits until all work submitted to stream so far has completed. Blocks;
 * RILL_ERROR_NOT_PERMITTED from a kernel or host function.
 *
 * Waiting threads help: rill_stream_synchronize, rill_device_synchronize
 * and rill_event_synchronize of an event without RILL_EVENT_BLOCKING_SYNC
 * run the awaited work on the calling thread when no awake worker has taken
 * it (the device's workers slept while there was nothing to do), up to the
 * point awaited, in stream order and with the same sticky errors. The
 * thread then stands for a sleeping compute unit (rill_block_ctx.worker),
 * and runs kernels and host functions as a worker would: blocking calls
 * from them return RILL_ERROR_NOT_PERMITTED, and what they change of the
 * calling thread's rill state (current device and stream, capture mode,
 * rill_last_error) is the thread's own again once the wait returns. */
rill_status rill_stream_synchronize(rill_stream *stream);
/* rill_stream_synchronize, rill_event_synchronize and
 * rill_device_synchronize with a time limit, for a thread that must stay
 * responsive while it waits (a language runtime that handles signals
 * between waits: rill's Python package waits in slices of these). Each
 * waits as its plain call does, for the work submitted before it, but
 * returns RILL_NOT_READY when that work has not completed within
 * timeout_ns nanoseconds (0: at once), changing nothing: the work runs on,
 * and the caller may wait again (for what is submitted by then) or query.
 * They run the awaited work on the calling thread (see "Waiting threads
 * help" above) only while the stream has none pending that may wait for
 * anything (a host function, a graph with host nodes, a wait for another
 * process or for a stream with such work), so they return in time even
 * behind a host function that never returns: blocks for timeout_ns at
 * most, or as long as a kernel or copy that the thread runs meanwhile.
 * RILL_ERROR_NOT_PERMITTED from a kernel or host function. */
rill_status rill_stream_synchronize_for(rill_stream *stream, uint64_t timeout_ns);
rill_status rill_event_synchronize_for(rill_event *event, uint64_t timeout_ns);
rill_status rill_device_synchronize_for(rill_device *dev, uint64_t timeout_ns);

/* Queue bounds (back-pressure): a host thread never runs far ahead of the
 * device. A stream holds at most `commands` commands submitted and not yet
 * completed (default 1024, about CUDA's queue of pending launches;
 * RILL_QUEUE_LIMIT=N sets it at initialisation, 0: no bounds; a value that
 * is not a number makes every queuing call fail with
 * RILL_ERROR_INVALID_ARGUMENT naming the variable), and a device's streams
 * together hold at most `bytes` of host memory in queued commands (each
 * command's slot, and a kernel's arguments and access list in full when
 * they pass 192 bytes; default: 1/32 of the device's memory_bytes; a
 * stream with fewer than 64 commands queued is counted but does not wait
 * for it). A call that queues a command (rill_launch_kernel and the
 * built-in ops, rill_launch_host_func, rill_memcpy_async,
 * rill_memset_async, rill_event_record, rill_stream_wait_event,
 * rill_stream_wait_stream, rill_graph_launch) and finds a bound reached
 * blocks until the device has run that stream (or the device's fullest
 * stream) down to half of it, running the work itself where a synchronize
 * would. It never blocks
 * inside a kernel or host function, nor for a capturing stream (which
 * queues nothing); the library's own commands are counted but never wait.
 * Where the work ahead may wait for something rill cannot see (a host
 * function, a wait for another process), it may be waiting for the
 * blocked thread itself (a gate that thread opens later): such a wait ends
 * once that work has not moved for 200 ms, and the thread goes on past the
 * bound until the work moves again (CUDA would block for good). Commands
 * queued behind a long host function can therefore pass the bound for as
 * long as it runs. */
/* Sets the bounds for every stream and device from now on (a stream with
 * room sees a change within 64 submissions): commands per stream (0: no
 * bounds at all), bytes per device (0: 1/32 of each device's
 * memory_bytes). They last until rill_shutdown; the next runtime starts
 * from RILL_QUEUE_LIMIT again. Does not block; allowed anywhere. */
rill_status rill_set_queue_limit(size_t commands, size_t bytes);
/* The bounds in force for dev (NULL: the current device): commands per
 * stream and bytes for the device's streams together (both 0 when there
 * are no bounds). RILL_ERROR_INVALID_ARGUMENT for a NULL out. */
rill_status rill_get_queue_limit(rill_device *dev, size_t *commands, size_t *bytes);
/* The wait of a queuing call that finds a bound reached, with a time
 * limit, for a thread that must stay responsive (rill's Python package
 * waits in slices of it before launching a host function, so Ctrl-C ends
 * the wait): RILL_OK once stream may take a command without waiting (or
 * may pass the bound, behind work that has not moved for 200 ms, as
 * above), RILL_NOT_READY when it still may not after timeout_ns, changing
 * nothing. Blocks for timeout_ns at most, or as long as a kernel or copy that the
 * thread runs meanwhile. RILL_ERROR_NOT_PERMITTED from a kernel or host
 * function. */
rill_status rill_stream_make_room_for(rill_stream *stream, uint64_t timeout_ns);

/* Work submitted to stream after this call waits until event completes, as
 * recorded at the time of this call (later records of event do not
 * matter). Waiting on a never-recorded event, or on one whose work has
 * already completed without failing, enqueues nothing: the stream is
 * ordered after that work at once, and a trace shows no wait (no arrow)
 * for it. Streams of any device may wait on any event. */
rill_status rill_stream_wait_event(rill_stream *stream, rill_event *event);
/* Work submitted to stream after this call waits for all work submitted to
 * other before this call. */
rill_status rill_stream_wait_stream(rill_stream *stream, rill_stream *other);

/* Sticky errors: when a kernel or host function fails, the rest of its
 * stream's work is skipped, query/synchronize return
 * RILL_ERROR_KERNEL_FAILED, and streams that wait on that work fail too:
 * nothing runs on inputs that were never produced. Clearing lets the
 * stream run new work again. Waits made while a stream fails still hold
 * back its work after the clear until what they wait for is done. */
rill_status rill_stream_clear_error(rill_stream *stream);

/* The same tag on the same device always names the same stream, created at
 * first use with the given priority and owned by the library (torchair's
 * npu_stream_switch). */
rill_status rill_stream_get_tagged(rill_device *dev, const char *tag, int priority,
                                   rill_stream **out);

/* ---------------------------------------------------------------- events */

enum rill_event_flags {
    RILL_EVENT_DEFAULT = 0,
    RILL_EVENT_TIMING = 1u << 0,        /* record a timestamp: needed by elapsed_ms */
    RILL_EVENT_BLOCKING_SYNC = 1u << 1, /* host waits sleep instead of spinning */
    RILL_EVENT_INTERPROCESS = 1u << 2   /* may be shared with other processes; not with TIMING */
};

/* An event binds to a device when first recorded (or, if never recorded,
 * when rill_event_ipc_handle exports it); after that only streams of that
 * device may record it (RILL_ERROR_DEVICE_MISMATCH). */
rill_status rill_event_create(unsigned flags, rill_event **out);
rill_status rill_event_destroy(rill_event *event);
/* Captures the work submitted to stream so far; re-recording moves the
 * event to the new point for later waits and queries. */
rill_status rill_event_record(rill_event *event, rill_stream *stream);
/* RILL_OK when the recorded work has completed or the event was never
 * recorded, else RILL_NOT_READY. */
rill_status rill_event_query(rill_event *event);
rill_status rill_event_synchronize(rill_event *event);
/* Milliseconds between two completed records, with at least microsecond
 * resolution. RILL_ERROR_TIMING_DISABLED, RILL_ERROR_NOT_RECORDED, or
 * RILL_NOT_READY when either is still pending. */
rill_status rill_event_elapsed_ms(rill_event *start, rill_event *end, float *ms);

/* The same tag always names the same event (torchair's tagged events). */
rill_status rill_event_get_tagged(const char *tag, rill_event **out);
/* The device the event is bound to (see rill_event_create; an opened
 * interprocess event is bound to its handle's), or NULL when it is bound
 * to none yet. Does not block. */
rill_status rill_event_get_device(rill_event *event, rill_device **out);

/* Inter-process events: the handle is plain bytes that may be sent to
 * another process on the same machine, which opens it on the same device.
 * The exporting process keeps the event alive while others use it.
 *
 * Every process that holds the event (the exporter and each opener) may
 * record it and wait on it; records in all of them number one sequence,
 * and a wait, query or synchronize is for the record that was the latest
 * in any process at the time of the call. A stream waiting for another
 * process's record parks without holding a worker. When the recorded
 * work failed, waits on it fail too (RILL_ERROR_KERNEL_FAILED). A wait
 * also fails, within about 100 ms, rather than hanging when the exporter
 * exits before the awaited record completes, or when the process that
 * made that record exits before it completes and no later record of a
 * running process (which would meet the wait too) is pending; a query
 * keeps answering RILL_NOT_READY. So a process must run until the records
 * it made complete. Up to 64 processes recording one event at once are
 * followed; waits for records of others hang if those exit. A failed wait
 * fails the waiting stream like any failure, rill_stream_clear_error on
 * that stream ends it, and rill_device_synchronize does not report it
 * again. An opened event is destroyed with rill_event_destroy; the
 * exporter's event may be destroyed while opened elsewhere (openers keep
 * the shared state mapped), but then no record of it can complete.
 *
 * rill_event_ipc_handle: RILL_ERROR_INVALID_ARGUMENT unless the event was
 * created with RILL_EVENT_INTERPROCESS; an opened event's handle may be
 * passed on. The handle names the event's device: a never-recorded event
 * is bound to the calling thread's current device first (as CUDA binds an
 * event to the device current at its creation). Does not block. rill_event_open_ipc_handle: RILL_ERROR_IPC
 * when the bytes are not a handle (damaged, zeroed, another kind; a
 * checksum catches changed bytes) or its exporter has exited;
 * RILL_ERROR_OUT_OF_MEMORY when this process has no room for another
 * mapping (descriptors, mappings or address space). The event is bound
 * to the handle's device. Opening in the exporting process gives a second
 * event sharing the same state. Does not block. */
typedef struct rill_ipc_event_handle { unsigned char bytes[64]; } rill_ipc_event_handle;
rill_status rill_event_ipc_handle(rill_event *event, rill_ipc_event_handle *out);
rill_status rill_event_open_ipc_handle(const rill_ipc_event_handle *handle, rill_event **out);

/* ------------------------------------------------------- host functions */

typedef void (*rill_host_fn)(void *user_data);

/* Runs fn(user_data) on a worker in stream order, or on a thread that
 * waits for it (see rill_stream_synchronize). fn must not block on rill
 * (synchronize calls from it return RILL_ERROR_NOT_PERMITTED). Every call
 * of fn starts from a worker's state, whichever thread runs it and
 * whatever ran there before: the default device and current streams,
 * RILL_CAPTURE_GLOBAL, no rill_last_error() sentence; what fn changes of
 * these ends with it. */
rill_status rill_launch_host_func(rill_stream *stream, rill_host_fn fn, void *user_data);
/* A host function calls this to fail itself, as a kernel calls
 * rill_kernel_fail: once fn returns, its stream's error is sticky (see
 * rill_stream_clear_error) and the stream's sentence ends in message ("host
 * function on stream 's' failed: <message>", cut to 255 bytes); in a graph,
 * the launch fails as with a failing kernel node. The first call's message
 * counts. Does not block. RILL_ERROR_NOT_PERMITTED when the calling thread
 * is not running a host function. */
rill_status rill_host_func_fail(const char *message);

typedef void (*rill_stream_callback)(rill_stream *stream, rill_status status, void *user_data);

/* Runs fn(stream, status, user_data) in stream order as a host function
 * does (rill_launch_host_func's rules hold), and runs it even when the
 * stream skips its work after a failure (see rill_stream_clear_error), so
 * that what user_data holds is always released: status is RILL_OK when the
 * work before it ran, RILL_ERROR_KERNEL_FAILED when the callback's place
 * in the stream was skipped (fn should then not read what the skipped work
 * would have written). stream is the handle given here. As CUDA's
 * cudaStreamAddCallback, a capturing stream refuses it with
 * RILL_ERROR_CAPTURE_UNSUPPORTED and the capture is invalidated: a graph
 * runs its nodes at each launch, a callback once; capture
 * rill_launch_host_func instead. */
rill_status rill_stream_add_callback(rill_stream *stream, rill_stream_callback fn,
                                     void *user_data);

/* --------------------------------------------------------------- kernels */

typedef struct rill_dim3 { uint32_t x, y, z; } rill_dim3;

/* What a CPU kernel body sees: one call per block of the grid. Blocks of
 * one launch run concurrently on the device's compute units. */
typedef struct rill_block_ctx {
    rill_dim3 block_idx;
    rill_dim3 grid_dim;
    int worker;                 /* which compute unit runs this block: 0 to compute_units - 1,
                                 * never the same for two blocks that run at once (a unit is
                                 * a worker thread, or a thread that waits for the work and
                                 * runs it meanwhile: see rill_stream_synchronize) */
    void *state;                /* private to the library */
} rill_block_ctx;
typedef void (*rill_cpu_kernel_fn)(const rill_block_ctx *ctx, const void *args);

/* A kernel body calls this to fail its launch (sticky error, see above). */
void rill_kernel_fail(const rill_block_ctx *ctx, const char *message);

/* One form of a kernel's body, for the devices whose backend loads its
 * format. A kernel carries any number of images; a device runs the first
 * of them (in the list's order) in the format its backend prefers among
 * those it loads and the kernel has. Formats below 0x10000 are rill's; a
 * backend that brings a format of its own numbers it from
 * RILL_KERNEL_IMAGE_BACKEND. */
typedef enum rill_kernel_image_format {
    RILL_KERNEL_IMAGE_CPU_FN = 1,          /* fn: a body run on the host, block by block
                                            * (the CPU devices) */
    RILL_KERNEL_IMAGE_PTX = 2,             /* bytes: PTX text; entry: the entry point
                                            * (CUDA devices) */
    RILL_KERNEL_IMAGE_BACKEND = 0x10000
} rill_kernel_image_format;
typedef struct rill_kernel_image {
    unsigned format;            /* a rill_kernel_image_format */
    const void *bytes;          /* the image, for formats that are bytes; NULL for fn */
    size_t size;                /* bytes of it; 0: text, up to its NUL */
    rill_cpu_kernel_fn fn;      /* the body, for RILL_KERNEL_IMAGE_CPU_FN; NULL otherwise */
    const char *entry;          /* the entry point's name in bytes, or NULL */
} rill_kernel_image;

/* The first form of a kernel's description, kept as it is: its fields are
 * shorthand for images (cpu for a RILL_KERNEL_IMAGE_CPU_FN image,
 * cuda_ptx and cuda_entry for a RILL_KERNEL_IMAGE_PTX one); see
 * rill_kernel_image_desc for any other format. */
typedef struct rill_kernel_desc {
    const char *name;           /* shown in errors, traces and graph dumps */
    rill_cpu_kernel_fn cpu;     /* body for CPU devices, or NULL */
    const char *cuda_ptx;       /* PTX text for CUDA devices, or NULL */
    const char *cuda_entry;     /* entry point in cuda_ptx */
} rill_kernel_desc;
/* A kernel as a list of images, the form that grows: struct_size comes
 * first and says which fields the caller knows, so fields added later are
 * read only from callers built with them. */
typedef struct rill_kernel_image_desc {
    size_t struct_size;         /* sizeof(rill_kernel_image_desc) */
    const char *name;           /* shown in errors, traces and graph dumps */
    const rill_kernel_image *images;
    size_t num_images;
} rill_kernel_image_desc;
typedef struct rill_kernel rill_kernel;
/* Creates a kernel from desc's bodies (shorthand for images, above).
 * RILL_ERROR_INVALID_ARGUMENT when it has none, or cuda_ptx without
 * cuda_entry or the other way round. */
rill_status rill_kernel_create(const rill_kernel_desc *desc, rill_kernel **out);
/* Creates a kernel from desc's images, copied (the caller may free them on
 * return); as rill_kernel_create otherwise. RILL_ERROR_INVALID_ARGUMENT
 * when struct_size is not one this version knows, the list is empty, or
 * an image has no format, no fn (RILL_KERNEL_IMAGE_CPU_FN) or no bytes
 * (other formats). Either way a launch on a device whose backend loads
 * none of the kernel's formats fails with RILL_ERROR_NOT_SUPPORTED, with a
 * sentence naming the kernel, its formats and those the device loads. */
rill_status rill_kernel_create_from_images(const rill_kernel_image_desc *desc, rill_kernel **out);
/* The kernel may be destroyed while launches of it are queued and while
 * graphs and execs name it: it is released once they are done. Does not
 * block, except when there is no memory to note the queued work: then it
 * waits for that work, or returns RILL_ERROR_OUT_OF_MEMORY (destroying
 * nothing) when called from a kernel or host function. */
rill_status rill_kernel_destroy(rill_kernel *kernel);

typedef enum rill_access_mode {
    RILL_READ = 1,
    RILL_WRITE = 2,
    RILL_READ_WRITE = 3
} rill_access_mode;
/* A buffer that a launch touches. Declared accesses drive the automatic
 * cross-stream lifetime of memory and the stream sanitizer. */
typedef struct rill_access {
    const void *ptr;
    size_t bytes;
    rill_access_mode mode;
} rill_access;

typedef struct rill_launch {
    rill_dim3 grid;             /* blocks; 0 in a dimension is invalid */
    rill_dim3 block;            /* threads per block on CUDA; ignored on CPU */
    const void *args;           /* packed like the kernel's parameters; copied */
    size_t args_size;
    const rill_access *accesses;
    size_t num_accesses;
} rill_launch;
/* Where the process has a device other than a CPU device, a declared
 * access to memory the stream's device cannot reach (as the built-in ops
 * below define it) is RILL_ERROR_DEVICE_MISMATCH and nothing runs; its size
 * is not checked. */
rill_status rill_launch_kernel(rill_stream *stream, rill_kernel *kernel, const rill_launch *launch);

/* ------------------------------------------------------------ built-in ops
 * float32, row-major, on device memory; each declares its accesses. Each
 * access is checked against the allocation that holds it, as for
 * rill_memcpy: a size that runs past the end of memory from rill (device
 * memory, page-locked host memory, memory opened from another process), a
 * pointer to freed device memory, or dimensions whose product does not
 * fit in a size_t is RILL_ERROR_INVALID_ARGUMENT and nothing runs.
 * Ordinary host memory cannot be checked; it is used as given. Memory the
 * stream's device cannot reach is RILL_ERROR_DEVICE_MISMATCH and nothing
 * runs: another device's memory from rill (unless both are CPU devices,
 * whose memory is host memory), and on a CUDA device host memory that is
 * not page-locked or another GPU's memory (asked of the driver for memory
 * rill did not allocate). Page-locked host memory reaches every device.
 * An op on another CPU device's memory is ordered as every op is: after
 * the work submitted to its stream before it, and after other streams'
 * work, of its device or another, only through a wait
 * (rill_stream_wait_event, rill_stream_wait_stream); the pool keeps that
 * memory from reuse until the op has run, as for a use from another
 * stream of its own device. */
rill_status rill_op_fill_f32(rill_stream *s, float *x, float value, size_t n);
rill_status rill_op_add_f32(rill_stream *s, float *out, const float *a, const float *b,
                            float alpha, size_t n);            /* out = a + alpha*b */
rill_status rill_op_mul_f32(rill_stream *s, float *out, const float *a, const float *b, size_t n);
rill_status rill_op_add_scalar_f32(rill_stream *s, float *out, const float *a, float value,
                                   size_t n);
rill_status rill_op_sum_f32(rill_stream *s, float *out, const float *a, size_t n); /* out[0] */
/* out[i] = a[i] + value for n int64s, wrapping modulo 2^64 as PyTorch's
 * integer add does (a counter such as batch norm's num_batches_tracked);
 * out may equal a, or else overlap it nowhere. */
rill_status rill_op_add_scalar_i64(rill_stream *s, int64_t *out, const int64_t *a, int64_t value,
                                   size_t n);
/* x[i] = bits for n elements of element_bytes each (1, 2, 4 or 8), each
 * stored as an unsigned integer of that width holding bits modulo
 * 2^(8 element_bytes): a fill of any type of that width whose bits the
 * caller knows (a bool, an int8 to int64, a half, a double), as PyTorch's
 * fill_ and zero_ are on tensors of those types. x must be aligned to
 * element_bytes; another width, an unaligned x, or n 0 is
 * RILL_ERROR_INVALID_ARGUMENT and nothing runs. */
rill_status rill_op_fill_bits(rill_stream *s, void *x, uint64_t bits, size_t element_bytes,
                              size_t n);
rill_status rill_op_matmul_f32(rill_stream *s, float *c, const float *a, const float *b,
                               size_t m, size_t k, size_t n);   /* c[m,n] = a[m,k] b[k,n] */
/* rill_op_matmul_f32 with either operand stored transposed, as flags
 * say: RILL_MATMUL_A_T, a holds a's transpose (row-major [k,m]: a linear
 * layer's input gradient x^T); RILL_MATMUL_B_T, b holds b's transpose
 * ([n,k]: a linear layer's weight), read in place. Same checks and
 * accesses (m*k floats of a, k*n of b) as rill_op_matmul_f32; the result
 * is the product's within rounding (the CPU's sgemm picks its kernels by
 * the operands' storage, so the last bits may differ from those of the
 * contiguous copies' product). Other bits of flags are
 * RILL_ERROR_INVALID_ARGUMENT. */
#define RILL_MATMUL_A_T 1u
#define RILL_MATMUL_B_T 2u
rill_status rill_op_matmul_ex_f32(rill_stream *s, float *c, const float *a, const float *b,
                                  size_t m, size_t k, size_t n, unsigned flags);
/* count products at once: c[i] = a[i] b[i] for i < batch->count, c
 * contiguous [count,m,n], each operand read in place from a strided batch
 * (the heads of an attention, a transposed or sliced view): product i's a
 * starts stride_a floats after product i-1's and is [m,k] with its rows
 * lda floats apart, or with RILL_MATMUL_A_T in flags is stored as its
 * transpose [k,m] with rows lda apart; b likewise with stride_b and ldb
 * ([k,n], or [n,k] with RILL_MATMUL_B_T). A stride of 0 reads the same
 * matrix for every product (broadcasting); a and b may overlap. One
 * launch; a CPU device shares the products (and rows of each) among its
 * blocks, a CUDA device runs cublasSgemmStridedBatched. Each product is
 * what rill_op_matmul_ex_f32 gives within rounding. Declares the span of
 * each operand (from its first float to its last) as read and c's
 * count*m*n floats as written, checked as rill_op_matmul_f32 checks its
 * operands. batch NULL, count 0, a row stride below its stored row's
 * length (k, m, n or k), other bits of flags, or c overlapping a or b is
 * RILL_ERROR_INVALID_ARGUMENT; count, a row stride or a dimension above
 * INT_MAX is RILL_ERROR_NOT_SUPPORTED. */
typedef struct rill_matmul_batch {
    size_t count;              /* products, at least 1 */
    size_t lda, ldb;           /* floats between rows of a and of b as stored */
    size_t stride_a, stride_b; /* floats from one product's a (b) to the next's */
} rill_matmul_batch;
rill_status rill_op_matmul_batched_f32(rill_stream *s, float *c, const float *a, const float *b,
                                       size_t m, size_t k, size_t n, unsigned flags,
                                       const rill_matmul_batch *batch);
/* c = a b + bias, a linear layer's forward (torch's addmm with beta and
 * alpha 1): rill_op_matmul_ex_f32's product, with its flags, checks and
 * accesses, plus bias[i*bias_rs + j*bias_cs] for element (i, j) of c; a
 * stride of 0 repeats bias along that dimension (a bias of n floats per
 * column: 0 and 1; of m floats per row: 1 and 0; one float: 0 and 0; a
 * full [m,n] matrix: n and 1). Each element is the product's, rounded to
 * a float, plus its bias, rounded once more: the same bits as
 * rill_op_matmul_ex_f32 followed by rill_op_binary_f32's RILL_BINARY_ADD
 * of bias into c on the same stream. A CPU device adds the bias in the
 * blocks that compute the product, while c is in their caches: one
 * command; a CUDA device runs cuBLAS's product, then the add as a second
 * kernel. Declares bias's span (from its first float to element (m-1,
 * n-1)) as read, checked as the operands are. bias NULL, a span that does
 * not fit in memory, or bias overlapping c is RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_addmm_f32(rill_stream *s, float *c, const float *a, const float *b,
                              const float *bias, size_t bias_rs, size_t bias_cs, size_t m,
                              size_t k, size_t n, unsigned flags);
/* NCHW input [n,c,h,w], weight [k,c,r,s], stride 1, no padding:
 * output [n,k,h-r+1,w-s+1]. */
rill_status rill_op_conv2d_f32(rill_stream *s, float *out, const float *in, const float *weight,
                               size_t n, size_t c, size_t h, size_t w,
                               size_t k, size_t r, size_t sz);

/* The element-wise ops into new memory, the per-op sequence of an eager
 * tensor library in one call: rill_malloc_async of n floats on s, the op
 * (rill_op_add_f32, rill_op_mul_f32, rill_op_add_scalar_f32) into that
 * memory on s, then, when event is not NULL, rill_event_record(event, s)
 * after it (s NULL: the calling thread's current stream, as for the ops).
 * *out receives the memory, which the caller frees with rill_free_async
 * like any memory of rill_malloc_async. The commands are those of the
 * separate calls, so capture, stream order and the cross-stream lifetime
 * of the inputs behave as they do for them. Every argument is checked
 * before anything happens, with the ops' checks for a, b and n (the new
 * memory needs none); RILL_ERROR_OUT_OF_MEMORY when the pool cannot
 * provide the memory. A status of the record (such as
 * RILL_ERROR_DEVICE_MISMATCH for an event bound to another device) comes
 * after the op was submitted: its memory is then freed in stream order
 * after it. On any failure *out is NULL and nothing stays allocated.
 * Does not block, as rill_malloc_async does not; allowed inside a host
 * function and during capture, as the separate calls are. */
rill_status rill_op_add_f32_new(rill_stream *s, const float *a, const float *b, float alpha,
                                size_t n, rill_event *event, float **out); /* a + alpha*b */
rill_status rill_op_mul_f32_new(rill_stream *s, const float *a, const float *b, size_t n,
                                rill_event *event, float **out);
rill_status rill_op_add_scalar_f32_new(rill_stream *s, const float *a, float value, size_t n,
                                       rill_event *event, float **out);

/* x[i] = mean + std * z[i], z a standard normal sample that depends only
 * on seed and i (a counter-based generator and the Box-Muller transform),
 * so the values are the same for every grid, stream and device: the fill
 * behind randn. std may be 0 (every element is mean); a negative or
 * non-finite std or mean is RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_randn_f32(rill_stream *s, float *x, size_t n, float mean, float std,
                              uint64_t seed);

/* float16 (IEEE 754 binary16) storage, float32 compute: rill_half holds
 * the bits of one half. Converting a float rounds to the nearest half, ties
 * to even; values from 65520 up in magnitude become infinity; a NaN stays
 * a (quiet) NaN. Converting a half to float is exact. Where the processor
 * has F16C the conversions use it, with the same bits as the portable
 * code. An op on halves (below, or the f32 op between the two conversions)
 * rounds its result to a half once. n counts elements; the checks are those
 * of the element-wise f32 ops (out and in, of different sizes, must not
 * overlap). */
typedef uint16_t rill_half;
rill_status rill_op_cast_f32_f16(rill_stream *s, rill_half *out, const float *in, size_t n);
rill_status rill_op_cast_f16_f32(rill_stream *s, float *out, const rill_half *in, size_t n);
/* The element-wise ops on halves: each element computed in float32 from
 * the halves' values, as the f32 op computes it, and rounded to a half once.
 * The arguments and their checks are the f32 ops', with n halves. */
rill_status rill_op_fill_f16(rill_stream *s, rill_half *x, float value, size_t n);
rill_status rill_op_add_f16(rill_stream *s, rill_half *out, const rill_half *a, const rill_half *b,
                            float alpha, size_t n); /* out = a + alpha*b */
rill_status rill_op_mul_f16(rill_stream *s, rill_half *out, const rill_half *a, const rill_half *b,
                            size_t n);
rill_status rill_op_add_scalar_f16(rill_stream *s, rill_half *out, const rill_half *a, float value,
                                   size_t n);
/* sum, matmul and conv2d on halves: the arguments, shapes, checks and
 * declared accesses of their f32 twins, with halves in place of floats,
 * and the same splitting of the work into blocks. The inputs' halves are
 * converted to floats (F16C where the processor has it), multiplied and
 * accumulated in float32 (sum adds in double, as rill_op_sum_f32 does),
 * and each output element is rounded to a half once. matmul converts a
 * and b tile by tile for the sgemm of the f32 op, conv2d the weight once
 * per call: into scratch memory that the call allocates on s and frees in
 * stream order, as the f32 sum and conv2d do with theirs
 * (RILL_ERROR_OUT_OF_MEMORY when the pool cannot provide it). */
rill_status rill_op_sum_f16(rill_stream *s, rill_half *out, const rill_half *a, size_t n);
rill_status rill_op_matmul_f16(rill_stream *s, rill_half *c, const rill_half *a, const rill_half *b,
                               size_t m, size_t k, size_t n);
rill_status rill_op_conv2d_f16(rill_stream *s, rill_half *out, const rill_half *in,
                               const rill_half *weight, size_t n, size_t c, size_t h, size_t w,
                               size_t k, size_t r, size_t sz);

/* ------------------------------------------------------------ tensor ops
 * What a small neural network needs beyond the ops above, on float32 device
 * memory: strided layouts (the views of a tensor library: transposes,
 * slices, broadcasting), element-wise maps, reductions and softmax along
 * one dimension, conv2d with strides and padding, and pooling. Each is a
 * stream-ordered launch like the ops above, declares its exact accesses,
 * and checks every argument first (RILL_ERROR_INVALID_ARGUMENT, with a
 * sentence naming the argument; nothing runs). Each access is checked
 * against the allocation that holds it, as for the ops above. Does not
 * block; allowed inside a host function and during capture.
 *
 * A strided operand: the element at index (i[0], .., i[ndim-1]) of shape is
 * at sum over d of i[d] * strides[d] floats from the pointer; a stride may
 * be 0 (the operand repeats along that dimension: broadcasting). ndim is 0
 * to RILL_OP_MAX_DIMS (0: one element; shape and strides may then be
 * NULL); every dimension at least 1. */
#define RILL_OP_MAX_DIMS 6

/* out at i = in at i for every index i of shape: a gather (a transposed or
 * sliced view made contiguous), a scatter (a tensor written into a slice
 * of another, as cat does), or both. out's layout must not reach one
 * element twice (no stride 0 along a dimension of more than one), and out
 * may not overlap in. */
rill_status rill_op_copy_strided_f32(rill_stream *s, float *out, const size_t *out_strides,
                                     const float *in, const size_t *in_strides,
                                     const size_t *shape, size_t ndim);

typedef enum rill_binary_op {
    RILL_BINARY_ADD, /* a + b */
    RILL_BINARY_SUB, /* a - b */
    RILL_BINARY_MUL, /* a * b */
    RILL_BINARY_DIV, /* a / b (IEEE: x/0 is an infinity or NaN) */
    RILL_BINARY_MAX, /* the larger; NaN when either is NaN */
    RILL_BINARY_MIN, /* the smaller; NaN when either is NaN */
    RILL_BINARY_POW, /* powf(a, b) */
    RILL_BINARY_RELU_BACKWARD, /* b <= 0 ? 0 : a: relu's gradient a at its output
                                * (or input) b; a where b is NaN */
    RILL_BINARY_GELU_BACKWARD, /* a (Phi(b) + b phi(b)): RILL_MAP_GELU's gradient a
                                * at its input b (Phi, phi: the normal's
                                * distribution and density) */
    RILL_BINARY_GELU_TANH_BACKWARD /* RILL_MAP_GELU_TANH's gradient a at its input
                                    * b, after PyTorch's formula */
} rill_binary_op;
/* out[i] = a at i (op) b at i, out contiguous in shape (row-major), a and
 * b strided: with strides 0 this is broadcasting. out may equal a (or b)
 * when that input's strides are the contiguous ones of shape (in place);
 * otherwise it may overlap neither. An op outside rill_binary_op is
 * RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_binary_f32(rill_stream *s, rill_binary_op op, float *out, const float *a,
                               const size_t *a_strides, const float *b, const size_t *b_strides,
                               const size_t *shape, size_t ndim);

typedef enum rill_map_op {
    RILL_MAP_NEG,        /* -x */
    RILL_MAP_SCALE,      /* x * alpha */
    RILL_MAP_DIV,        /* x / alpha */
    RILL_MAP_RDIV,       /* alpha / x */
    RILL_MAP_RSUB,       /* alpha - x */
    RILL_MAP_POW,        /* powf(x, alpha) */
    RILL_MAP_MAX,        /* max(x, alpha): clamp from below; NaN stays NaN */
    RILL_MAP_MIN,        /* min(x, alpha): clamp from above; NaN stays NaN */
    RILL_MAP_RELU,       /* max(x, 0); NaN stays NaN */
    RILL_MAP_LEAKY_RELU, /* x > 0 ? x : alpha * x */
    RILL_MAP_GELU,       /* x/2 (1 + erf(x / sqrt 2)) */
    RILL_MAP_GELU_TANH,  /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    RILL_MAP_SIGMOID,    /* 1 / (1 + exp(-x)) */
    RILL_MAP_TANH,       /* tanh x */
    RILL_MAP_SILU,       /* x * sigmoid(x) */
    RILL_MAP_EXP,        /* exp x */
    RILL_MAP_LOG,        /* log x (natural) */
    RILL_MAP_SQRT,       /* sqrt x */
    RILL_MAP_ABS         /* |x| */
} rill_map_op;
/* out[i] = op(a[i]) for i < n, with alpha where op names it (ignored
 * otherwise): activations and the ops between a tensor and a number.
 * Computed in float32; on the CPU exp, sigmoid, silu, tanh and GELU_TANH
 * use rill's vectorized exp and tanh (within 2 ulp of exact, sigmoid 3,
 * with the C library's results at infinities, NaN, overflow and
 * underflow), the others the C library's functions; on a GPU CUDA's (the
 * two may differ in the last bits). out may equal a, as for
 * rill_op_add_f32; an op outside rill_map_op is
 * RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_map_f32(rill_stream *s, rill_map_op op, float *out, const float *a,
                            float alpha, size_t n);
/* rill_op_map_f32 into new memory, as rill_op_add_f32_new and its kin do
 * (rill_malloc_async of n floats on s, the map, the record of event when
 * not NULL; *out NULL on failure, with nothing left allocated): the
 * per-op sequence of `a * 2.0` and `-a` in one call. */
rill_status rill_op_map_f32_new(rill_stream *s, rill_map_op op, const float *a, float alpha,
                                size_t n, rill_event *event, float **out);
/* out[i] = (a[i] * m) * scale for i < n, m 1 where the byte mask[i] is not
 * 0 and 0 where it is, each product rounded to float: dropout's backward
 * as PyTorch computes it (grad * mask * scale; a dropped element is a[i] *
 * 0, a zero with a[i]'s sign, NaN for a NaN or an infinity), and its
 * forward once the mask is drawn. mask holds n bytes (a bool tensor). out
 * may equal a, as for rill_op_add_f32; out overlapping mask is
 * RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_masked_scale_f32(rill_stream *s, float *out, const float *a,
                                     const uint8_t *mask, float scale, size_t n);

/* The element types of the ops below, which take more than float32: each
 * the C type it names, in device memory. A bool tensor is
 * RILL_ELEMENT_BOOL, whose bytes other than 0 all read as true (the same
 * as RILL_ELEMENT_U8 where they are 0 or 1). */
typedef enum rill_element_type {
    RILL_ELEMENT_U8,  /* uint8_t */
    RILL_ELEMENT_I32, /* int32_t */
    RILL_ELEMENT_I64, /* int64_t */
    RILL_ELEMENT_F32, /* float */
    RILL_ELEMENT_F64, /* double */
    RILL_ELEMENT_BOOL /* a byte: read as true where not 0, written as 0 or 1 */
} rill_element_type;

typedef enum rill_compare_op {
    RILL_COMPARE_EQ, /* a == b (-0 equals 0; NaN equals nothing) */
    RILL_COMPARE_NE, /* a != b (true when either is NaN) */
    RILL_COMPARE_LT, /* a < b; the four orders are false when either is NaN */
    RILL_COMPARE_LE, /* a <= b */
    RILL_COMPARE_GT, /* a > b */
    RILL_COMPARE_GE  /* a >= b */
} rill_compare_op;
/* out[i] = 1 when a at i (op) b at i holds, else 0: out contiguous bytes in
 * shape (a bool tensor), a and b strided in elements of type, as for
 * rill_op_binary_f32 (strides 0: broadcasting). out overlaps neither a nor
 * b. An op or type outside its enum is RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_compare(rill_stream *s, rill_compare_op op, rill_element_type type,
                            uint8_t *out, const void *a, const size_t *a_strides, const void *b,
                            const size_t *b_strides, const size_t *shape, size_t ndim);
/* out[i] = in at i converted from in_type to out_type: out contiguous in
 * shape, in strided in its elements (strides 0: broadcasting), the two not
 * overlapping. The rules are C's, with PyTorch's choices where C leaves
 * them open: to BOOL, 1 where the value is not 0 (NaN included); from
 * BOOL, 1 or 0; between integers, the low bits (two's complement); from an
 * integer or a double to a floating type, rounded to nearest; from a
 * floating type to an integer, rounded toward zero, with NaN and values
 * past the target's range giving its lowest value (INT32_MIN, INT64_MIN;
 * U8 takes the low byte of the I64 result), which is what x86 gives and
 * PyTorch's CPU device returns there. A type outside its enum is
 * RILL_ERROR_INVALID_ARGUMENT. PyTorch's copy_ and .to() between dtypes. */
rill_status rill_op_convert(rill_stream *s, rill_element_type out_type, void *out,
                            rill_element_type in_type, const void *in, const size_t *in_strides,
                            const size_t *shape, size_t ndim);
/* out[i] = start + i * step for i < n, computed in int64_t (wrapping as
 * two's complement) and converted to type by rill_op_convert's rules: out
 * contiguous elements of type, aligned to them. PyTorch's arange of an
 * integer type, and of a floating one where every value is an integer the
 * type holds exactly (|value| <= 2^24 for F32, 2^53 for F64). n 0 or a
 * type outside its enum is RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_arange(rill_stream *s, rill_element_type type, void *out, int64_t start,
                           int64_t step, size_t n);
/* rill_op_compare against a number: b at every index is *value, one
 * element of type in host memory, read during the call. isneginf is EQ
 * against -inf; a bool tensor's logical not is EQ against 0. */
rill_status rill_op_compare_scalar(rill_stream *s, rill_compare_op op, rill_element_type type,
                                   uint8_t *out, const void *a, const size_t *a_strides,
                                   const void *value, const size_t *shape, size_t ndim);

/* out[i] = cond at i ? a at i : b at i, for elements of element_bytes (1,
 * 2, 4 or 8: any type, copied as bits): out contiguous in shape; cond
 * strided bytes, true where not 0; a and b strided in their elements
 * (strides 0: broadcasting). out may equal a or b when that input's
 * strides are the contiguous ones of shape (in place); otherwise out
 * overlaps none of the three. PyTorch's where. */
rill_status rill_op_where(rill_stream *s, size_t element_bytes, void *out, const uint8_t *cond,
                          const size_t *cond_strides, const void *a, const size_t *a_strides,
                          const void *b, const size_t *b_strides, const size_t *shape,
                          size_t ndim);
/* x[i] = bits where mask at i is not 0, the others unchanged: x contiguous
 * in shape, of elements of element_bytes (1, 2, 4 or 8) set as
 * rill_op_fill_bits sets them; mask strided bytes (strides 0:
 * broadcasting), not overlapping x. PyTorch's masked_fill_. */
rill_status rill_op_masked_fill(rill_stream *s, size_t element_bytes, void *x,
                                const uint8_t *mask, const size_t *mask_strides, uint64_t bits,
                                const size_t *shape, size_t ndim);
/* The lower or upper triangle of each of batch matrices [rows, cols],
 * contiguous, of elements of element_bytes (1, 2, 4 or 8): out[b, i, j] =
 * in[b, i, j] where j - i <= diagonal (upper 0: PyTorch's tril) or j -
 * i >= diagonal (upper not 0: triu), else 0 (every bit clear). out may
 * equal in (in place); otherwise the two do not overlap. */
rill_status rill_op_triangle(rill_stream *s, size_t element_bytes, void *out, const void *in,
                             size_t batch, size_t rows, size_t cols, int64_t diagonal,
                             int upper);

typedef enum rill_reduce_dim_op {
    RILL_REDUCE_DIM_SUM,  /* the sum, added in double precision */
    RILL_REDUCE_DIM_MEAN, /* the sum over dim, divided by dim */
    RILL_REDUCE_DIM_MAX,  /* the largest; NaN when any is NaN */
    RILL_REDUCE_DIM_MIN   /* the smallest; NaN when any is NaN */
} rill_reduce_dim_op;
/* Reduces the middle dimension of a, contiguous [outer, dim, inner], into
 * out, [outer, inner]: out[o, i] = op over d < dim of a[o, d, i] (a
 * reduction along any one dimension of a row-major tensor: outer is the
 * product of the dimensions before it, inner of those after). For MAX and
 * MIN, indices, when not NULL, receives [outer, inner] int64 positions d
 * of the results (the first one; the first NaN's when there is one); for
 * SUM and MEAN it must be NULL. out and indices overlap neither a nor each
 * other. */
rill_status rill_op_reduce_dim_f32(rill_stream *s, rill_reduce_dim_op op, float *out,
                                   int64_t *indices, const float *a, size_t outer, size_t dim,
                                   size_t inner);

typedef enum rill_reduce_bool_op {
    RILL_REDUCE_BOOL_ANY,  /* 1 when any byte is not 0, else 0: a byte */
    RILL_REDUCE_BOOL_ALL,  /* 1 when every byte is not 0, else 0: a byte */
    RILL_REDUCE_BOOL_COUNT /* how many bytes are not 0: an int64_t */
} rill_reduce_bool_op;
/* Reduces the middle dimension of a, contiguous bytes [outer, dim, inner]
 * (a bool tensor), into out, [outer, inner] bytes for ANY and ALL,
 * int64_t for COUNT: PyTorch's any, all and the sum of a bool tensor. out
 * does not overlap a. An op outside its enum is
 * RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_reduce_dim_bool(rill_stream *s, rill_reduce_bool_op op, void *out,
                                    const uint8_t *a, size_t outer, size_t dim, size_t inner);

/* Softmax along the middle dimension of a, contiguous [outer, dim, inner]:
 * out[o, d, i] = exp(a[o, d, i] - m) / sum over e of exp(a[o, e, i] - m),
 * m the largest a[o, :, i], the sum in double precision; out has a's
 * shape and may equal a. log_softmax gives a[o, d, i] - m - log(sum), the
 * logarithm without its rounding errors. As PyTorch's, a row holding a
 * NaN or +inf, or only -inf, gives NaNs, and -inf among numbers gives 0
 * (log_softmax -inf). */
rill_status rill_op_softmax_f32(rill_stream *s, float *out, const float *a, size_t outer,
                                size_t dim, size_t inner);
rill_status rill_op_log_softmax_f32(rill_stream *s, float *out, const float *a, size_t outer,
                                    size_t dim, size_t inner);

/* Layer norm over each row of x, contiguous [rows, n] (PyTorch's
 * native_layer_norm over its last dimensions, flattened into n):
 * out[r, j] = (x[r, j] - mean_r) * rstd_r * weight[j] + bias[j], where
 * mean_r and the variance var_r (the mean of the squared deviations, not
 * Bessel-corrected) are summed in double precision, and rstd_r =
 * 1 / sqrt(var_r + eps), each rounded once to float; the rest is float
 * arithmetic in that order. weight and bias ([n] each) may be NULL (1 and
 * 0). mean and rstd, when not NULL, receive mean_r and rstd_r ([rows]
 * each), what the backward of the norm takes. out may equal x; no other
 * output overlaps an input or another output. rows and n are at least 1,
 * eps at least 0. One launch. */
rill_status rill_op_layer_norm_f32(rill_stream *s, float *out, float *mean, float *rstd,
                                   const float *x, const float *weight, const float *bias,
                                   size_t rows, size_t n, float eps);

/* The gradients of rill_op_layer_norm_f32 from dy, the gradient of its out
 * ([rows, n]), its x, and the mean and rstd it returned: with xhat =
 * (x[r, j] - mean_r) * rstd_r and g = dy[r, j] * weight[j] (dy where
 * weight is NULL), dx[r, j] = rstd_r * ((g - mean_r(g)) - xhat *
 * mean_r(g * xhat)), the means over the row summed in double precision
 * and rounded to float; dweight[j] = the sum over the rows of dy * xhat,
 * dbias[j] the sum of dy, in double precision. Each of dx ([rows, n]),
 * dweight and dbias ([n]) may be NULL, not all three; none overlaps an
 * input or another output. One launch. */
rill_status rill_op_layer_norm_backward_f32(rill_stream *s, float *dx, float *dweight, float *dbias,
                                            const float *dy, const float *x, const float *mean,
                                            const float *rstd, const float *weight, size_t rows,
                                            size_t n);

/* rill_op_conv2d_f32 with strides and zero padding, as torch's conv2d:
 * input [n,c,h,w], weight [k,c,r,sz], output [n,k,oh,ow] with oh = (h +
 * 2*pad_h - r) / stride_h + 1 and ow = (w + 2*pad_w - sz) / stride_w + 1
 * (rounded down); the input is read as if surrounded by pad_h rows and
 * pad_w columns of zeros. Strides are at least 1 and the filter no larger
 * than the padded input. Uses scratch
 * memory that it allocates on s and frees in stream order
 * (RILL_ERROR_OUT_OF_MEMORY when the pool cannot provide it). With
 * strides 1 and no padding it computes what rill_op_conv2d_f32 does. */
rill_status rill_op_conv2d_ex_f32(rill_stream *s, float *out, const float *in,
                                  const float *weight, size_t n, size_t c, size_t h, size_t w,
                                  size_t k, size_t r, size_t sz, size_t stride_h, size_t stride_w,
                                  size_t pad_h, size_t pad_w);
/* The backward of rill_op_conv2d_ex_f32 for the same arguments (shapes,
 * strides, padding): given grad_out [n,k,oh,ow], the gradient of a loss
 * with respect to that op's output, grad_in [n,c,h,w] receives the
 * gradient with respect to in (computed from grad_out and weight) and
 * grad_weight [k,c,r,sz] the gradient with respect to weight (from
 * grad_out and in), as torch's convolution_backward without the bias's
 * (a sum of grad_out over n, oh and ow, which rill_op_reduce_dim_f32
 * gives). Each is overwritten, not added to. Either may be NULL to skip
 * it, but not both; in may be NULL when grad_weight is, weight when
 * grad_in is. A gradient overlaps none of the other buffers. On a CPU
 * device the sums run in an order fixed by the shapes and the device's
 * compute units (no atomic adds), so a call repeated on one device gives
 * the same bits; on a CUDA device the gradients come from cuDNN, whose
 * deterministic algorithms it prefers (RILL_ERROR_NOT_SUPPORTED, with the
 * reason, where cuDNN is missing or refuses the shape). Uses scratch
 * memory that it allocates on s and frees in stream order
 * (RILL_ERROR_OUT_OF_MEMORY when the pool cannot provide it); cuDNN's
 * workspace is that memory. */
rill_status rill_op_conv2d_backward_f32(rill_stream *s, float *grad_in, float *grad_weight,
                                        const float *grad_out, const float *in,
                                        const float *weight, size_t n, size_t c, size_t h,
                                        size_t w, size_t k, size_t r, size_t sz, size_t stride_h,
                                        size_t stride_w, size_t pad_h, size_t pad_w);

/* The geometry of a 2-D convolution beyond its shapes, as torch's conv2d
 * takes it: strides (at least 1), zero padding, dilation (at least 1: the
 * filter's taps dilation apart, so an r x sz filter spans (r-1)*dilation_h
 * + 1 rows and (sz-1)*dilation_w + 1 columns) and groups (at least 1,
 * dividing c and k): the c input channels and k filters are cut into
 * groups of c/groups and k/groups, each filter sees only the channels of
 * its group, and the weight is [k, c/groups, r, sz] (depthwise convolution
 * is groups == c). {stride_h, stride_w, pad_h, pad_w, 1, 1, 1} is
 * rill_op_conv2d_ex_f32's geometry. */
typedef struct rill_conv2d_params {
    size_t stride_h, stride_w;
    size_t pad_h, pad_w;
    size_t dilation_h, dilation_w;
    size_t groups;
} rill_conv2d_params;
/* rill_op_conv2d_ex_f32 with dilation and groups (params, which is read
 * at the call): input [n,c,h,w], weight [k,c/groups,r,sz], output
 * [n,k,oh,ow] with oh = (h + 2*pad_h - dilation_h*(r-1) - 1) / stride_h +
 * 1 and ow likewise (rounded down); out[i, f, y, x] = the sum over the
 * channels ci of f's group and the taps (ri, si) of weight[f, ci, ri, si]
 * * in[i, g*c/groups + ci, y*stride_h + ri*dilation_h - pad_h, x*stride_w
 * + si*dilation_w - pad_w], 0 outside the image (g = f / (k/groups)).
 * The dilated filter may be no larger than the padded input. params NULL,
 * a dilation or groups of 0, or groups dividing c or k unevenly is
 * RILL_ERROR_INVALID_ARGUMENT with a sentence naming it; the other checks,
 * the scratch memory and its statuses are rill_op_conv2d_ex_f32's. On a
 * CPU device each group's filters meet its rows of the im2col matrix in
 * one sgemm; on a CUDA device a kernel sums each output directly. */
rill_status rill_op_conv2d_ex2_f32(rill_stream *s, float *out, const float *in,
                                   const float *weight, size_t n, size_t c, size_t h, size_t w,
                                   size_t k, size_t r, size_t sz, const rill_conv2d_params *params);
/* The backward of rill_op_conv2d_ex2_f32 for the same arguments, as
 * rill_op_conv2d_backward_f32 is for rill_op_conv2d_ex_f32: grad_in
 * [n,c,h,w] and grad_weight [k,c/groups,r,sz] (either may be NULL, not
 * both) overwritten, the same checks as the forward's plus that one's,
 * the same determinism on a CPU device (each sum in an order fixed by the
 * shapes and the device's compute units), cuDNN's convolution with the
 * dilation and group count on a CUDA device (RILL_ERROR_NOT_SUPPORTED
 * with the reason where cuDNN is missing or refuses the shape). The
 * transposed convolution of torch's conv_transpose2d is this backward's
 * input gradient, and its backward rill_op_conv2d_ex2_f32 and this
 * backward's weight gradient with the roles of in and grad_out swapped. */
rill_status rill_op_conv2d_backward_ex2_f32(rill_stream *s, float *grad_in, float *grad_weight,
                                            const float *grad_out, const float *in,
                                            const float *weight, size_t n, size_t c, size_t h,
                                            size_t w, size_t k, size_t r, size_t sz,
                                            const rill_conv2d_params *params);

typedef enum rill_pool_op {
    RILL_POOL_MAX, /* the largest in the window (padding left out); NaN wins */
    RILL_POOL_AVG  /* the mean over r*sz, padding counted as zeros */
} rill_pool_op;
/* 2-D pooling of planes images [h, w] (an NCHW tensor has n*c of them)
 * into [oh, ow], oh = (h + 2*pad_h - r) / stride_h + 1, ow likewise, as
 * torch's max_pool2d and avg_pool2d (without ceil_mode and dilation):
 * out[p, y, x] = op over the r x sz window at (y*stride_h - pad_h,
 * x*stride_w - pad_w). Strides at least 1, padding at most half the window,
 * the window no larger than the padded image; out may not overlap in. */
rill_status rill_op_pool2d_f32(rill_stream *s, rill_pool_op op, float *out, const float *in,
                               size_t planes, size_t h, size_t w, size_t r, size_t sz,
                               size_t stride_h, size_t stride_w, size_t pad_h, size_t pad_w);
/* rill_op_pool2d_f32's RILL_POOL_MAX that also gives, for the backward of
 * torch's max_pool2d, where each maximum came from: indices [planes, oh,
 * ow] int64 receives the position yy*w + xx within its image of the
 * element out took, the first largest in the window (row by row), or the
 * last NaN when the window holds NaN, as torch's max_pool2d_with_indices
 * chooses. indices may overlap neither in nor out; NULL is
 * RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_max_pool2d_f32(rill_stream *s, float *out, int64_t *indices, const float *in,
                                   size_t planes, size_t h, size_t w, size_t r, size_t sz,
                                   size_t stride_h, size_t stride_w, size_t pad_h, size_t pad_w);
/* The backward of rill_op_max_pool2d_f32 for its input, as torch's
 * max_pool2d_with_indices_backward: grad_in [planes, h, w] is overwritten
 * with 0 plus, at each position that indices [planes, oh, ow] names
 * within its image (yy*w + xx, as rill_op_max_pool2d_f32 gives them), the
 * sum of the grad_out [planes, oh, ow] elements that name it, added in
 * order of (y, x): the same results for every grid and run (no atomics).
 * The planes run in parallel. grad_in may overlap neither grad_out nor
 * indices. An index below 0 or at least h*w fails the launch as
 * rill_op_embedding_f32's do (the sentence names the index, its position
 * and its plane; a CUDA device traps), grad_in then undefined. A size 0
 * is RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_max_pool2d_backward_f32(rill_stream *s, float *grad_in, const float *grad_out,
                                            const int64_t *indices, size_t planes, size_t h,
                                            size_t w, size_t oh, size_t ow);
/* The backward of rill_op_pool2d_f32's RILL_POOL_AVG for its input, as
 * torch's avg_pool2d_backward with count_include_pad: grad_in[p, yy, xx]
 * = the sum, in order of (y, x), of grad_out[p, y, x] / (r*sz) over the
 * outputs whose window holds (yy, xx), and 0 where none does (the window,
 * stride and padding as the forward's, padding counted in the divisor).
 * grad_out is [planes, oh, ow] with oh and ow as rill_op_pool2d_f32
 * computes them; grad_in [planes, h, w] is written whole (each element
 * gathered, never scattered: the same for every grid) and may not overlap
 * grad_out. The geometry is checked as rill_op_pool2d_f32 checks it. */
rill_status rill_op_avg_pool2d_backward_f32(rill_stream *s, float *grad_in,
                                            const float *grad_out, size_t planes, size_t h,
                                            size_t w, size_t r, size_t sz, size_t stride_h,
                                            size_t stride_w, size_t pad_h, size_t pad_w);
/* The options of torch's max_pool2d and avg_pool2d beyond
 * rill_op_pool2d_f32's: the window r x sz, strides (at least 1), padding
 * (at most half the dilated window), dilation (at least 1; RILL_POOL_MAX
 * only, 1 for RILL_POOL_AVG), divisor (RILL_POOL_AVG only: when not 0,
 * every window's divisor, torch's divisor_override) and flags:
 * RILL_POOL_CEIL_MODE rounds the output size up, as ceil_mode does, keeping
 * a last window that starts inside the image or its left padding;
 * RILL_POOL_EXCLUDE_PAD (RILL_POOL_AVG only, count_include_pad=False)
 * divides by the window's elements inside the image rather than by its
 * size with padding. */
#define RILL_POOL_CEIL_MODE 1u
#define RILL_POOL_EXCLUDE_PAD 2u
typedef struct rill_pool2d_params {
    size_t r, sz;
    size_t stride_h, stride_w;
    size_t pad_h, pad_w;
    size_t dilation_h, dilation_w;
    size_t divisor;
    unsigned flags;
} rill_pool2d_params;
/* 2-D pooling of planes images [h, w] into [oh, ow] as torch's max_pool2d
 * (RILL_POOL_MAX) and avg_pool2d (RILL_POOL_AVG) with params (read at the
 * call): oh = (h + 2*pad_h - dilation_h*(r-1) - 1 (+ stride_h - 1 in ceil
 * mode)) / stride_h + 1, less one in ceil mode when the last window would
 * start at or past h + pad_h; ow likewise. A max takes the taps inside the
 * image, and indices, when not NULL (RILL_POOL_MAX only), receives
 * positions as rill_op_max_pool2d_f32 gives them, for
 * rill_op_max_pool2d_backward_f32. An average sums the window's elements
 * inside the image and divides by divisor when not 0, else, with
 * RILL_POOL_EXCLUDE_PAD, by their count, else by the window's size with
 * padding but cut at h + pad_h (w + pad_w), as torch does in ceil mode.
 * out and indices overlap in and each other nowhere. An option of the
 * other op (dilation other than 1 for RILL_POOL_AVG, divisor, the
 * exclude flag or a NULL params for either, unknown flags) is
 * RILL_ERROR_INVALID_ARGUMENT with a sentence naming it. */
rill_status rill_op_pool2d_ex_f32(rill_stream *s, rill_pool_op op, float *out, int64_t *indices,
                                  const float *in, size_t planes, size_t h, size_t w,
                                  const rill_pool2d_params *params);
/* The backward of rill_op_pool2d_ex_f32's RILL_POOL_AVG for its input with
 * the same params: grad_in[p, yy, xx] = the sum, in order of (y, x), of
 * grad_out[p, y, x] / (that output's divisor) over the outputs whose
 * window holds (yy, xx), 0 where none does; gathered, so the same for
 * every grid, as rill_op_avg_pool2d_backward_f32. grad_out is [planes, oh,
 * ow] as the forward computes them; grad_in [planes, h, w] is written
 * whole and may not overlap grad_out. The checks are the forward's. */
rill_status rill_op_avg_pool2d_backward_ex_f32(rill_stream *s, float *grad_in,
                                               const float *grad_out, size_t planes, size_t h,
                                               size_t w, const rill_pool2d_params *params);
/* An embedding lookup, as torch's embedding: out[i, :] = weight[indices[i],
 * :] for i < n, weight [rows, dim] and out [n, dim] contiguous floats,
 * indices n integers of index_bytes each (4: int32_t, 8: int64_t). out may
 * overlap neither weight nor indices. An index below 0 or at least rows
 * cannot be seen at the call (the indices are device memory, perhaps not
 * yet written): the launch fails when it runs, the stream's error sticky
 * and its sentence naming the op, the index and its position ("index 7 at
 * position 3 is out of range for 5 rows"), out's rows left as they were
 * for such indices; on a CUDA device the kernel traps instead, which ends
 * the device's context (PyTorch's device-side assert does the same). n,
 * rows or dim 0, or index_bytes neither 4 nor 8, is
 * RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_embedding_f32(rill_stream *s, float *out, const float *weight,
                                  const void *indices, size_t index_bytes, size_t n, size_t rows,
                                  size_t dim);
/* The backward of rill_op_embedding_f32 for the weight, as torch's
 * embedding_dense_backward without scale_grad_by_freq: grad_weight[r, :] =
 * the sum, in order of i, of grad[i, :] over the i < n with indices[i] ==
 * r, and 0 for the rows no index names and for row padding_idx (a
 * padding_idx below 0 or at least rows names none). The whole of
 * grad_weight [rows, dim] is written; grad is [n, dim]; the results are
 * the same for every grid (each element's sum has one order). grad_weight
 * may overlap neither grad nor indices. Indices out of range fail the
 * launch as rill_op_embedding_f32's do, grad_weight then undefined. */
rill_status rill_op_embedding_backward_f32(rill_stream *s, float *grad_weight, const float *grad,
                                           const void *indices, size_t index_bytes, size_t n,
                                           size_t rows, size_t dim, int64_t padding_idx);

typedef enum rill_loss_reduction {
    RILL_LOSS_NONE, /* one loss per row */
    RILL_LOSS_SUM,  /* the rows' losses added */
    RILL_LOSS_MEAN  /* their sum divided by the total weight */
} rill_loss_reduction;
/* The negative log likelihood loss, as torch's nll_loss: input [n,
 * classes] contiguous floats (log-probabilities), targets n integers of
 * index_bytes each (4: int32_t, 8: int64_t), weight NULL or classes
 * floats. Row i's loss is 0 where targets[i] == ignore_index, else
 * -input[i, t] * w[t], t = targets[i] and w[t] = weight[t] or 1. With
 * RILL_LOSS_NONE out receives the n losses; with SUM and MEAN out[0]
 * receives their sum, added as torch's CPU kernel adds it (into partial
 * sums of 16, 256, ... rows, then those added from the smallest up: the
 * same bits as torch), which MEAN divides by the total weight: the sum of
 * w[t] over the rows not ignored (their count without a weight), so NaN
 * when every row is ignored. total_weight, when not NULL, receives that
 * total (0 with RILL_LOSS_NONE, as torch's). A target other than
 * ignore_index below 0 or at least classes fails the launch as
 * rill_op_embedding_f32's indices do (the sentence names the target and
 * its position; a CUDA device traps), out then undefined. out and
 * total_weight overlap each other and what the op reads nowhere. n or
 * classes 0, index_bytes neither 4 nor 8, or an unknown reduction is
 * RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_nll_loss_f32(rill_stream *s, rill_loss_reduction reduction, float *out,
                                 float *total_weight, const float *input, const void *targets,
                                 size_t index_bytes, const float *weight, size_t n, size_t classes,
                                 int64_t ignore_index);
/* The backward of rill_op_nll_loss_f32 for its input, as torch's
 * nll_loss_backward: grad_input [n, classes] is overwritten with 0 but at
 * (i, t = targets[i]) for the rows not ignored, where it is -w[t] *
 * grad_out[i] with RILL_LOSS_NONE (grad_out n floats), else w[t] * -g, g =
 * grad_out[0], divided first by total_weight[0] with RILL_LOSS_MEAN (the
 * forward's total; otherwise total_weight may be NULL). Targets are
 * checked as the forward checks them, grad_input then undefined.
 * grad_input overlaps what the op reads nowhere. */
rill_status rill_op_nll_loss_backward_f32(rill_stream *s, rill_loss_reduction reduction,
                                          float *grad_input, const float *grad_out,
                                          const float *total_weight, const void *targets,
                                          size_t index_bytes, const float *weight, size_t n,
                                          size_t classes, int64_t ignore_index);
/* rill_op_nll_loss_f32 over positions, as torch's nll_loss2d (and its
 * nll_loss of [N, C, d1, ..., dk] inputs, inner = d1*...*dk): input [n,
 * classes, inner] contiguous floats, targets [n, inner], the loss of row
 * r = b*inner + e 0 where targets[r] == ignore_index, else -input[b, t, e]
 * * w[t], t = targets[r]. RILL_LOSS_NONE gives the n*inner losses in that
 * order; SUM and MEAN add them in rill_op_nll_loss_f32's order over the
 * rows r (torch's nll_loss2d adds them so: the same bits). With inner 1 it
 * is rill_op_nll_loss_f32; its other rules, checks and statuses are that
 * one's, with inner 0 also RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_op_nll_loss_nd_f32(rill_stream *s, rill_loss_reduction reduction, float *out,
                                    float *total_weight, const float *input, const void *targets,
                                    size_t index_bytes, const float *weight, size_t n,
                                    size_t classes, size_t inner, int64_t ignore_index);
/* The backward of rill_op_nll_loss_nd_f32 for its input, as
 * rill_op_nll_loss_backward_f32 is for rill_op_nll_loss_f32: grad_input
 * [n, classes, inner] is overwritten with 0 but at (b, t, e) for the rows
 * r = b*inner + e not ignored, t = targets[r], where it is -w[t] *
 * grad_out[r] with RILL_LOSS_NONE (grad_out n*inner floats), else w[t] *
 * -g as there. */
rill_status rill_op_nll_loss_backward_nd_f32(rill_stream *s, rill_loss_reduction reduction,
                                             float *grad_input, const float *grad_out,
                                             const float *total_weight, const void *targets,
                                             size_t index_bytes, const float *weight, size_t n,
                                             size_t classes, size_t inner, int64_t ignore_index);

/* ---------------------------------------------------------------- memory */

/* Device memory from the device's caching pool. Memory freed while work on
 * any stream may still use it is reused only after that work completes:
 * launches that declare an access to a block from a stream other than the
 * one it was allocated on are tracked automatically; rill_record_stream
 * covers uses the library cannot see (host functions, undeclared access).
 *
 * rill_malloc returns memory that any stream may use at once: never a
 * block that pending work still touches. When the pool can only serve it
 * by reusing such a block (the limit is reached or the device is full), it
 * blocks: it waits on the host for the pending frees, as MindSpore
 * synchronises pending events when an allocation fails, even when they sit
 * behind host functions (RILL_ERROR_OUT_OF_MEMORY from a kernel or host
 * function, which may not wait).
 *
 * rill_malloc_async returns memory for use in stream order and never
 * blocks, as cudaMallocAsync: it may reuse a block freed on stream, or one
 * whose last use another stream made before stream waited for it ("return
 * flow"), at once; see rill_mem_set_reuse_policy for blocks that other
 * streams' pending work still holds. When stream order cannot provide the
 * memory (with the cache emptied and the pool grown to its limit), it
 * fails at once with RILL_ERROR_OUT_OF_MEMORY, a sentence giving the
 * limit, the bytes in use and those still held by pending frees (and a
 * stream that holds them), and nothing already submitted changes: it
 * never waits on the host for a free, which may sit behind a host
 * function that the calling thread releases only later. The same holds
 * for rill_malloc_async during capture and for the ops that allocate in
 * stream order (scratch memory, the *_new ops). Allowed inside a host
 * function.
 *
 * The allocation belongs to the stream (rill_malloc: the calling thread's
 * current stream of dev), whose later work is ordered with the free;
 * rill_free frees at the end of the work submitted to it so far,
 * rill_free_async on stream. */
rill_status rill_malloc(rill_device *dev, size_t bytes, void **out);
rill_status rill_free(void *ptr);
rill_status rill_malloc_async(size_t bytes, rill_stream *stream, void **out);
rill_status rill_free_async(void *ptr, rill_stream *stream);
rill_status rill_record_stream(void *ptr, rill_stream *stream);

/* Host memory, fastest for copies to and from the current device: page-
 * locked where the device copies by DMA. The CPU device copies with the
 * processor, so there it is ordinary pageable memory, 256-byte aligned
 * (nothing is locked, nothing counts against RLIMIT_MEMLOCK), and it counts
 * against the CPU devices' memory_bytes as their pools' memory does:
 * RILL_ERROR_OUT_OF_MEMORY when it does not fit. Freed by rill_free_host,
 * or by rill_shutdown. */
rill_status rill_malloc_host(size_t bytes, void **out);
rill_status rill_free_host(void *ptr);

/* Direction is inferred from where dst and src live (host memory, page-
 * locked host memory, or a device's memory). A copy or fill runs on its
 * stream's device, which reaches its own memory, host memory and the
 * memory of other devices of its kind, but a CPU device does not reach a
 * GPU's: RILL_ERROR_DEVICE_MISMATCH (pass a stream of the GPU).
 * rill_memcpy is synchronous: it runs after all work already submitted to
 * the current stream of the device that src (else dst) belongs to, or of
 * the one of the two that reaches both, as if submitted there, and returns
 * when the copy is done; work on other streams is not waited for. A copy
 * or fill that runs past the end of memory from rill is
 * RILL_ERROR_INVALID_ARGUMENT; ordinary host memory is not checked.
 *
 * rill_memcpy_async reads and writes host memory in stream order, on
 * every device: keep the source unchanged, and do not read the
 * destination, until the copy completed. On a CUDA device, ordinary
 * (pageable) host memory goes through page-locked staging buffers: a copy
 * from it into device memory of at most 64 KiB, queued when nothing
 * before it in its stream runs on the host or writes host memory (host
 * functions, copies into host memory, waits for other streams), has
 * read its source when the call returns (then is its place in stream
 * order), so the caller may reuse it at once; a copy into it has written
 * the destination before anything after it in the stream starts. Beyond
 * the queue bounds, the call never waits for the GPU to reach the copy
 * (CUDA's cudaMemcpyAsync of pageable memory may). Where no page-locked
 * memory is to be had, the copy is still done, more slowly. */
rill_status rill_memcpy_async(void *dst, const void *src, size_t bytes, rill_stream *stream);
rill_status rill_memcpy(void *dst, const void *src, size_t bytes);
rill_status rill_memset_async(void *dst, int value, size_t bytes, rill_stream *stream);

typedef struct rill_mem_stats {
    size_t allocated_bytes;      /* handed out and not yet freed */
    size_t reserved_bytes;       /* held from the system, cached included */
    size_t peak_allocated_bytes;
    size_t peak_reserved_bytes;
    uint64_t allocations;
    uint64_t frees;
    uint64_t cache_hits;         /* allocations served without the system */
    uint64_t deferred_frees;     /* frees that waited for another stream */
    uint64_t oom_recoveries;     /* allocations that succeeded after emptying the cache */
    uint64_t pending_reuses;     /* allocations served by an internal stream wait
                                    instead of growing (rill_mem_set_reuse_policy) */
    size_t limit_bytes;          /* rill_mem_set_limit's limit; 0: none */
} rill_mem_stats;
/* The device-wide figures of dev's caching pool, all read at one moment.
 * Does not block; allowed anywhere. */
rill_status rill_mem_get_stats(rill_device *dev, rill_mem_stats *out);

/* The pools of a device's memory, as rill_mem_summary shows them: small
 * serves requests up to 1 MiB, large the rest; each has its own segments. */
typedef enum rill_mem_pool {
    RILL_MEM_POOL_SMALL = 0,
    RILL_MEM_POOL_LARGE = 1
} rill_mem_pool;
typedef struct rill_mem_pool_stats {
    size_t segments;             /* segments held from the system */
    size_t reserved_bytes;       /* bytes of those segments held from the system */
    size_t allocated_bytes;      /* bytes of the live blocks, as rounded by the pool */
    size_t live_blocks;          /* blocks handed out and not yet freed */
    size_t free_blocks;          /* free blocks, those in per-thread caches included */
    size_t largest_free_bytes;   /* the largest free block; 0 when there is none */
    size_t pending_free_blocks;  /* free blocks that pending work of other streams still holds */
} rill_mem_pool_stats;
/* The figures of one pool of dev's memory: the rows of rill_mem_summary's
 * per-pool table, read at one moment. Summed over both pools,
 * allocated_bytes is rill_mem_stats' allocated_bytes and reserved_bytes
 * its reserved_bytes. Walks every block of dev's pools, and takes back the
 * free blocks that threads keep cached for their next allocations (as
 * rill_mem_summary and rill_mem_empty_cache do): meant for inspection,
 * not for every allocation. Does not block; allowed anywhere. A pool
 * other than RILL_MEM_POOL_SMALL or RILL_MEM_POOL_LARGE is
 * RILL_ERROR_INVALID_ARGUMENT. */
rill_status rill_mem_get_pool_stats(rill_device *dev, rill_mem_pool pool, rill_mem_pool_stats *out);
/* Lowers peak_allocated_bytes and peak_reserved_bytes to the current
 * allocated and reserved bytes, so that later peaks measure a phase of the
 * program (torch.cuda.reset_peak_memory_stats); counts are kept. Does not
 * block; allowed anywhere. */
rill_status rill_mem_reset_peak_stats(rill_device *dev);
rill_status rill_mem_empty_cache(rill_device *dev);
/* The most that dev's pool may reserve (rill_mem_stats' reserved_bytes),
 * cache included: an allocation that would reserve more first empties the
 * cache (rill_malloc also waits for pending frees, rill_malloc_async only
 * in stream order: see rill_malloc), then fails with
 * RILL_ERROR_OUT_OF_MEMORY, whose sentence gives the pool's figures and
 * says what stood in the way. The limit may be raised or lowered at any
 * time; memory already reserved beyond a lowered limit stays until it is
 * freed and the cache emptied. 0 (the default) is none: the device's
 * memory still caps what the pool reserves, and a limit above it does not
 * raise it. For the CPU devices that memory is memory_bytes, shared with
 * the other CPU devices and rill_malloc_host (rill_device_info): set
 * RILL_CPU_MEMORY before the first call to change it. Does not block;
 * allowed anywhere. */
rill_status rill_mem_set_limit(rill_device *dev, size_t max_reserved_bytes); /* 0: none */
rill_status rill_mem_get_limit(rill_device *dev, size_t *max_reserved_bytes); /* 0: none */

/* How rill_malloc_async on a stream S may reuse a free block that another
 * stream's pending work still holds (freed there, or used there), S not
 * yet ordered after that work:
 *  - RILL_MEM_REUSE_INTERNAL_WAITS (the default, as CUDA's
 *    cudaMemPoolReuseAllowInternalDependencies): rather than grow, the
 *    pool may hand out such a block and make S wait for that work, when
 *    the wait is short (no longer than S's own unfinished work plus a few
 *    commands) or the pool cannot grow. The wait orders memory only: it
 *    ends when that work completes or is skipped after a failure, and
 *    never carries the failure to S. So that a program correct without
 *    the wait stays correct with it, the pool never waits behind work that
 *    may itself wait for anything, S's later work included: host
 *    functions, graph launches with host nodes, waits for other processes'
 *    records, and waits for streams with such work pending. Kernels are
 *    taken to finish on their own.
 *  - 0: the pool never adds a wait; it grows instead, and when it cannot
 *    grow the allocation fails with RILL_ERROR_OUT_OF_MEMORY (it never
 *    waits on the host; rill_malloc does).
 * A block whose work is complete, or that S is already ordered after, is
 * reused either way. Per device; takes effect for later allocations. */
enum rill_mem_reuse_flags { RILL_MEM_REUSE_INTERNAL_WAITS = 1u << 0 };
rill_status rill_mem_set_reuse_policy(rill_device *dev, unsigned flags);
rill_status rill_mem_get_reuse_policy(rill_device *dev, unsigned *flags);

/* Inter-process memory: rill_ipc_get_mem_handle describes a block from
 * rill_malloc or rill_malloc_async (ptr is the pointer the allocation
 * returned) as plain bytes that another process on the same machine, run
 * by the same user, passes to rill_ipc_open_mem_handle to map the same
 * memory. The opened pointer is memory of the same device: copies,
 * memsets, ops and launches accept it. Nothing orders the two processes'
 * accesses but what they arrange (an interprocess event, say), and the
 * exporter must not free the block while others use it. Opening in the
 * exporting process maps the memory again, at another address.
 * rill_ipc_close_mem_handle waits for the work already submitted to the
 * streams of the pointer's device, then unmaps it; the mapping stays
 * valid even if the exporter exits first. None of these blocks, except
 * close (RILL_ERROR_NOT_PERMITTED from a kernel or host function).
 * Statuses: RILL_ERROR_INVALID_ARGUMENT for a pointer that is not the
 * start of an allocated block (get) or not an opened pointer (close);
 * RILL_ERROR_IPC when the block cannot be shared (get), or the bytes are
 * not a handle or the exporter has exited or freed the memory's segment
 * (open); RILL_ERROR_OUT_OF_MEMORY when this process has no room for the
 * mapping (descriptors, mappings or address space: close what it no
 * longer needs); RILL_ERROR_NOT_SUPPORTED on devices that cannot share
 * memory. */
typedef struct rill_ipc_mem_handle { unsigned char bytes[64]; } rill_ipc_mem_handle;
rill_status rill_ipc_get_mem_handle(void *ptr, rill_ipc_mem_handle *out);
rill_status rill_ipc_open_mem_handle(const rill_ipc_mem_handle *handle, void **out);
rill_status rill_ipc_close_mem_handle(void *ptr);
/* Writes a table of dev's memory to out (like torch.cuda.memory_summary):
 * allocated and reserved bytes now and at peak, the limit, the device's
 * memory (for the CPU devices: how much, how much all of them and host
 * memory have taken, and what chose the amount), per pool (small:
 * requests up to 1 MiB; large: the rest) its segments, live and free
 * blocks, the largest free block and the free blocks still held by pending
 * work of other streams, and the allocation, free, cache-hit, deferred-free
 * and out-of-memory-recovery counts. Does not block; allowed anywhere. */
rill_status rill_mem_summary(rill_device *dev, FILE *out);

/* ---------------------------------------------------------------- graphs */

typedef struct rill_graph rill_graph;
typedef struct rill_graph_node rill_graph_node;
typedef struct rill_graph_exec rill_graph_exec;

typedef enum rill_capture_mode {
    RILL_CAPTURE_GLOBAL = 0,       /* unsafe calls fail in every thread */
    RILL_CAPTURE_THREAD_LOCAL = 1, /* unsafe calls fail in the capturing thread */
    RILL_CAPTURE_RELAXED = 2       /* unsafe calls run at once and are not captured */
} rill_capture_mode;

typedef enum rill_capture_status {
    RILL_CAPTURE_NONE = 0,
    RILL_CAPTURE_ACTIVE = 1,
    RILL_CAPTURE_INVALIDATED = 2
} rill_capture_status;

/* While stream captures, work submitted to it is recorded into a graph
 * instead of running. Recording an event on a capturing stream and making
 * another stream wait on it pulls that stream into the same capture
 * (fork); every such stream must be joined back to the origin stream the
 * same way before end_capture, and must not receive work after its last
 * join.
 *
 * Unsafe calls are rill_malloc, rill_free of memory in use by the capture,
 * rill_memcpy and rill_ipc_open_mem_handle: work the graph could not
 * replay. A thread T may make one unless (by T's own mode, see
 * rill_thread_exchange_capture_mode) T is GLOBAL and some capture begun
 * GLOBAL is active in any thread, or T is GLOBAL or THREAD_LOCAL and T
 * itself has a capture begun GLOBAL or THREAD_LOCAL active. Always
 * forbidden while a capture is active, whatever the modes: synchronizing or
 * querying a capturing stream, an event recorded inside the capture, or the
 * device (rill_device_synchronize). A forbidden call returns
 * RILL_ERROR_CAPTURE_UNSUPPORTED and invalidates the capture; calls on the
 * capture's streams then fail the same way until end_capture, which
 * returns RILL_ERROR_CAPTURE_INVALIDATED and no graph. An allowed unsafe
 * call runs at once and is not captured. During capture, waiting on an
 * event recorded outside it or in another capture is
 * RILL_ERROR_CAPTURE_ISOLATION (waiting on a never-recorded event still
 * does nothing). end_capture on a stream that is not the origin is
 * RILL_ERROR_CAPTURE_UNMATCHED; ending a capture not begun RELAXED from
 * another thread than the one that began it is
 * RILL_ERROR_CAPTURE_WRONG_THREAD. Both leave the capture as it was: the
 * beginning thread can still end it on its origin. Every other failure of
 * end_capture ends the capture on all its streams, leaves them usable, and
 * runs nothing that was captured.
 *
 * rill_stream_destroy of a capturing stream returns RILL_OK and never
 * leaves a capture that nothing can end. Destroying the origin ends the
 * capture as a failed end_capture does: its graph is discarded, its other
 * streams are usable, nothing captured runs. This is also how a capture
 * whose beginning thread exited without ending it is ended (a thread
 * started later is never that thread). Destroying a stream forked into a
 * capture invalidates the capture, and end_capture on the origin then
 * returns RILL_ERROR_CAPTURE_INVALIDATED naming that stream. */
rill_status rill_stream_begin_capture(rill_stream *stream, rill_capture_mode mode);
rill_status rill_stream_end_capture(rill_stream *stream, rill_graph **out);
rill_status rill_stream_get_capture_status(rill_stream *stream, rill_capture_status *out);
/* Swaps the calling thread's capture mode with *mode (ACL's
 * aclmdlRICaptureThreadExchangeMode); a thread starts in GLOBAL. */
rill_status rill_thread_exchange_capture_mode(rill_capture_mode *mode);

/* Graphs built by hand. deps may be NULL when num_deps is 0. Adding a node
 * takes time in proportion to its dependencies (capture, to what each
 * captured call records), so building a graph is linear in its size. A
 * memcpy or memset node is checked against the allocations it touches when
 * it is added, as rill_memcpy_async is (RILL_ERROR_INVALID_ARGUMENT past
 * the end of memory from rill); a refused node leaves NULL in *out. */
rill_status rill_graph_create(rill_graph **out);
rill_status rill_graph_destroy(rill_graph *graph);
rill_status rill_graph_add_kernel_node(rill_graph *graph, rill_graph_node *const *deps,
                                       size_t num_deps, rill_kernel *kernel,
                                       const rill_launch *launch, rill_graph_node **out);
rill_status rill_graph_add_host_node(rill_graph *graph, rill_graph_node *const *deps,
                                     size_t num_deps, rill_host_fn fn, void *user_data,
                                     rill_graph_node **out);
rill_status rill_graph_add_memcpy_node(rill_graph *graph, rill_graph_node *const *deps,
                                       size_t num_deps, void *dst, const void *src,
                                       size_t bytes, rill_graph_node **out);
rill_status rill_graph_add_memset_node(rill_graph *graph, rill_graph_node *const *deps,
                                       size_t num_deps, void *dst, int value, size_t bytes,
                                       rill_graph_node **out);
rill_status rill_graph_add_empty_node(rill_graph *graph, rill_graph_node *const *deps,
                                      size_t num_deps, rill_graph_node **out);
rill_status rill_graph_add_event_record_node(rill_graph *graph, rill_graph_node *const *deps,
                                             size_t num_deps, rill_event *event,
                                             rill_graph_node **out);
rill_status rill_graph_add_event_wait_node(rill_graph *graph, rill_graph_node *const *deps,
                                           size_t num_deps, rill_event *event,
                                           rill_graph_node **out);
rill_status rill_graph_node_count(rill_graph *graph, size_t *out);
/* Graphviz DOT: one node per command, labelled with kernel names and the
 * stream it was captured from, coloured by that stream; edges are
 * dependencies, less those that a longer path implies (a transitive
 * reduction; in a graph of millions of nodes, every edge past the first
 * few million steps of that search). */
rill_status rill_graph_write_dot(rill_graph *graph, const char *path);

/* An exec is a graph made ready to launch; the graph may be destroyed
 * afterwards. A launch runs the whole graph as one command in stream order;
 * independent branches run concurrently. Launches of one exec run one after
 * another, on whatever streams they are launched. */
rill_status rill_graph_instantiate(rill_graph *graph, rill_graph_exec **out);
rill_status rill_graph_exec_destroy(rill_graph_exec *exec);
rill_status rill_graph_launch(rill_graph_exec *exec, rill_stream *stream);
/* Takes the parameters of graph, which must have the same topology and
 * node kinds, into exec without instantiating again. Launches submitted
 * after it returns run with them; launches submitted before, running or
 * not, run with the parameters they were submitted with. Does not block,
 * and may be called from a host function. With updates and launches of one
 * exec on several threads, each launch runs with one whole set of
 * parameters: that of the last update that returned before the launch was
 * called, or of an update running at the same time. A device that runs
 * execs as graphs of its own (a CUDA device: CUDA graphs) takes the new
 * parameters into its graph, or makes its graph again where they change
 * what the graph holds (a memset of host memory instead of device memory);
 * when it cannot (RILL_ERROR_OUT_OF_MEMORY, RILL_ERROR_NOT_SUPPORTED), the
 * exec keeps its parameters. */
rill_status rill_graph_exec_update(rill_graph_exec *exec, rill_graph *graph);

/* What rill adds to the rules above:
 * - Memory that rill_malloc_async allocates on a capturing stream belongs
 *   to the graph: the same address at every launch, reused inside the
 *   graph once every node that used it is done, released when the graph
 *   and its last exec are destroyed. rill_free of it is
 *   RILL_ERROR_INVALID_ARGUMENT; free it with rill_free_async inside the
 *   capture.
 * - An event whose last record was made in a capture that has ended is as
 *   if never recorded outside graphs: queries return RILL_OK and waits do
 *   nothing (that record never ran).
 * - An event record node moves its event to the end of the launch, for
 *   queries and waits outside the graph; an event wait node waits for the
 *   event as recorded when the launch is submitted.
 * - A node holds the event it records or waits on: the event may be
 *   destroyed afterwards, and a wait node then waits for the event as last
 *   recorded (by a record node, or before the destroy).
 * - rill_stream_clear_error on a capturing stream is RILL_ERROR_NOT_PERMITTED,
 *   and rill_graph_launch into a capturing stream RILL_ERROR_NOT_SUPPORTED.
 * - A kernel failing in a launch fails the launch's stream as an eager
 *   launch does; the rest of the launch is skipped. That is all an exec's
 *   failure does to its later launches: a launch on another stream runs
 *   once the failed one has ended (launches of one exec never overlap) and
 *   does not fail, unless it waits for the failed work itself (through an
 *   event wait node, or rill_stream_wait_event or rill_stream_wait_stream
 *   on its stream). A launch into a stream with a sticky error is skipped,
 *   as any work there is, and still takes its turn among the exec's
 *   launches. */

/* ---------------------------------------------------------- observability */

/* Records a timeline of what runs, written as Chrome trace-event JSON to
 * path when the trace stops (rill_trace_stop, rill_shutdown or the
 * process's exit): open it in Perfetto (ui.perfetto.dev) or
 * chrome://tracing. One track per stream (named by rill_stream_set_name,
 * or its tag) with a slice per command (kernel or op name, grid, bytes its
 * accesses declare); one track per compute unit with the part of each
 * command and graph node it ran; arrows from the work a wait waited for to
 * the wait, and from an interprocess event's record to the waits it
 * released, named the same in every process's trace (`rill trace-merge`
 * joins the traces of several processes into one); host slices for
 * blocking calls (synchronize, rill_memcpy); memory counters (allocated,
 * reserved); instants where captures begin and end. Records are buffered
 * per thread: about a hundred nanoseconds per command while on, one
 * predictable branch while off.
 * RILL_TRACE=path in the environment starts one when the library starts;
 * "%p" in it stands for the process id, so that the processes of one
 * program (which inherit the environment) write a trace each.
 * path is created (or truncated) now: RILL_ERROR_INVALID_ARGUMENT when it
 * cannot be written (the sentence says why), RILL_ERROR_NOT_PERMITTED
 * while a trace already records. */
rill_status rill_trace_start(const char *path);
/* Stops the trace and writes its file; RILL_OK when none records.
 * RILL_ERROR_INVALID_ARGUMENT when the file could not be written. */
rill_status rill_trace_stop(void);

/* Names the commands the calling thread submits after the op of a
 * framework that submits them ("aten::addmm"): trace slices are named
 * "op (kernel)", sanitizer reports give the op beside each command, and
 * graph dumps label captured nodes with it. Swaps the thread's op name
 * with *name (NULL: none; a thread starts with none), so that an op
 * restores its caller's name when it ends, as
 * rill_thread_exchange_capture_mode does for modes. The string is not
 * copied: it must stay valid until rill_shutdown returns (a literal, or a
 * name kept for the life of the process). Costs a thread-local store. */
rill_status rill_thread_exchange_op_name(const char **name);

/* The stream sanitizer: reports accesses that two streams make to the same
 * memory with no event or stream wait ordering them, and memory freed
 * while another stream may still use it. Also enabled by RILL_SANITIZE=1,
 * or RILL_SANITIZE=abort (abort at the first report), read when the
 * library starts.
 *
 * It follows the order that stream order, event records and waits,
 * rill_stream_wait_stream, host synchronisation (rill_stream_synchronize,
 * rill_event_synchronize, rill_device_synchronize, rill_memcpy, and a
 * query that returned RILL_OK) and the launches of one exec make, and the
 * bytes each command declares: the accesses of rill_launch_kernel (the
 * built-in ops declare theirs), copies, fills, and the nodes of a launched
 * graph. A host wait orders what any thread submits afterwards (the
 * sanitizer does not see the program's own locks). It reports, on stderr,
 * as they happen:
 *  - "race between streams": two commands of different streams touch
 *    overlapping bytes, at least one writes, and no wait orders them;
 *  - "race inside a graph": two nodes of a launched graph do so with no
 *    path of edges between them (once per instantiation or update);
 *  - "host access not ordered after device work": rill_memcpy, or a host
 *    function with declared accesses (rill_sanitizer_host_accesses), reads
 *    or writes bytes that work of another stream touches and that the host
 *    or its stream did not wait for;
 *  - "free of memory that another stream may still use": rill_free or
 *    rill_free_async of a block that another stream's work may still use,
 *    neither ordered before the free nor tracked by the pool (declared
 *    accesses of launches, copies and fills are tracked; graph nodes and
 *    undeclared uses are not, unless rill_record_stream names the stream).
 * Each report names both commands (kernel or op, stream, command number,
 * the bytes, and the file:line given with rill_sanitizer_set_location) and
 * the wait that would order them. Work submitted before the sanitizer was
 * turned on is not known to it.
 *
 * enabled: 0 off, 1 on, 2 on and abort at the first report. Turning it on
 * or off forgets every order and access seen so far.
 * RILL_ERROR_INVALID_ARGUMENT for another value. */
rill_status rill_sanitizer_enable(int enabled);
/* Reports made since the process started. */
uint64_t rill_sanitizer_report_count(void);
/* Names the source location of the next command that the calling thread
 * submits (a launch, an op, a copy, a fill, a graph launch or a free), for
 * the sanitizer's reports; file must stay valid (a string literal, as
 * __FILE__). NULL and 0 forget it; another mix is
 * RILL_ERROR_INVALID_ARGUMENT. RILL_SANITIZER_HERE() passes the caller's
 * own location: RILL_SANITIZER_HERE(); rill_op_sum_f32(s, c, b, n); */
rill_status rill_sanitizer_set_location(const char *file, int line);
/* Declares what the next host function that the calling thread launches
 * (rill_launch_host_func) reads and writes, as a launch declares its
 * accesses, for the sanitizer only: it checks them as the host's accesses
 * ("host access not ordered after device work", naming "host function"),
 * and, since the pool does not see them, a free of that memory on another
 * stream needs a wait or rill_record_stream. The accesses are copied; at
 * most 16; NULL and 0 declare none. RILL_ERROR_INVALID_ARGUMENT for a
 * NULL pointer, a mode other than RILL_READ, RILL_WRITE or RILL_READ_WRITE,
 * or more than 16. Does nothing while the sanitizer is off. */
rill_status rill_sanitizer_host_accesses(const rill_access *accesses, size_t num_accesses);
#define RILL_SANITIZER_HERE() rill_sanitizer_set_location(__FILE__, __LINE__)

#ifdef __cplusplus
}
#endif

/* clang-format on */
#endif /* RILL_H */
