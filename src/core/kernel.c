/* SPDX-License-Identifier: MIT */
/* Kernels, kernel launches and host functions: validation and the command
 * each becomes. A launch copies its arguments and access list (the backend
 * does, inside submit), so the caller may reuse its memory on return. */
#include "core/kernel.h"

#include <stdio.h>
#include <string.h>

#include "core/calls.h"
#include "core/event.h"
#include "core/hooks.h"
#include "core/kernel_image.h"
#include "core/queue_limit.h"
#include "core/stream.h"
#include "util/alloc.h"
#include "util/status.h"

/* Frees a destroyed kernel whose pending work has completed, with no lock
 * held (dropping a stream's last reference takes its device's lock). */
static void kernel_free(rill__runtime *rt, rill__kernel *k) {
    rill__handle_close(k->handle);
    uint32_t mask = atomic_load_explicit(&k->loaded_mask, memory_order_acquire);
    for (int i = 0; i < rt->num_devices; i++) {
        rill__device *dev = rt->devices[i];
        if ((mask & 1u << i) != 0 && dev->ops->kernel_unload != NULL)
            dev->ops->kernel_unload(dev, &k->image, k->loaded[i]);
    }
    for (size_t i = 0; i < k->num_pending; i++)
        rill__stream_unref(k->pending[i].stream);
    rill__free(k->pending);
    rill__kernel_images_free(&k->image);
    rill__free(k);
}

/* Frees a chain of kernels linked by rt_link.next. */
static void free_chain(rill__runtime *rt, rill__link *l) {
    while (l != NULL) {
        rill__link *next = l->next;
        kernel_free(rt, RILL__OWNER(l, rill__kernel, rt_link));
        l = next;
    }
}

void rill__kernels_reap(rill__runtime *rt) {
    rill__link *done = NULL;
    rill__mutex_lock(&rt->lock);
    for (rill__link **p = &rt->zombie_kernels; *p != NULL;) {
        rill__kernel *k = RILL__OWNER(*p, rill__kernel, rt_link);
        /* The last graph reference is dropped with a seq_cst decrement,
         * after the node's last use of the kernel. */
        if (atomic_load(&k->graph_refs) == 0 && rill__deps_done(k->pending, k->num_pending)) {
            *p = k->rt_link.next;
            k->rt_link.next = done;
            done = &k->rt_link;
        } else {
            p = &k->rt_link.next;
        }
    }
    rill__mutex_unlock(&rt->lock);
    free_chain(rt, done);
}

/* In a fork's child: the parent's live kernels, until the next runtime
 * starts. */
static rill__link *inherited_kernels;

static void kernels_start(rill__runtime *rt) {
    rt->kernels = inherited_kernels;
    inherited_kernels = NULL;
}

/* Kernels go before the backends stop, which unload them; destroyed ones
 * release their streams. */
static void kernels_shutdown(rill__runtime *rt, rill__shutdown_phase phase) {
    if (phase != RILL__SHUTDOWN_IDLE)
        return;
    rill__mutex_lock(&rt->lock);
    rill__link *live = rt->kernels, *zombies = rt->zombie_kernels;
    rt->kernels = rt->zombie_kernels = NULL;
    rill__mutex_unlock(&rt->lock);
    free_chain(rt, live);
    free_chain(rt, zombies);
}

/* Kernels need no thread: the parent's live ones carry over. The graphs
 * that named them are gone with the parent's runtime, and so are the
 * devices they were loaded on (the child's are new). */
static void kernels_fork_child(rill__runtime *rt) {
    if (rt == NULL)
        return;
    for (rill__link *l = rt->kernels; l != NULL; l = l->next) {
        atomic_store(&RILL__OWNER(l, rill__kernel, rt_link)->graph_refs, 0);
        atomic_store(&RILL__OWNER(l, rill__kernel, rt_link)->loaded_mask, 0);
    }
    inherited_kernels = rt->kernels;
    rt->kernels = NULL;
}

const rill__subsystem rill__kernel_subsystem = {
    .name = "kernels",
    .start = kernels_start,
    .shutdown = kernels_shutdown,
    .fork_child = kernels_fork_child,
};

/* Snapshots (stream, submitted seq) of every stream, on every device, that
 * has work pending: the work that may still launch a kernel being
 * destroyed. *out is NULL when nothing is pending; RILL_ERROR_OUT_OF_MEMORY
 * (no sentence, nothing held) when the snapshot does not fit in memory. */
static rill_status snapshot_pending(rill__runtime *rt, rill__mem_dep **out, size_t *num) {
    rill__mem_dep local[16]; /* most destroys find a few streams busy: no allocation for none */
    rill__mem_dep *deps = local;
    size_t cap = sizeof local / sizeof local[0];
    *out = NULL;
    *num = 0;
    for (;;) {
        int overflow = 0;
        size_t n = 0;
        for (int i = 0; i < rt->num_devices && !overflow; i++)
            n += rill__device_pending(rt->devices[i], deps + n, cap - n, &overflow);
        if (!overflow) {
            rill__mem_dep *kept = deps;
            if (n == 0 || deps == local) {
                kept = n > 0 ? rill__malloc(n * sizeof *kept) : NULL;
                if (kept != NULL)
                    memcpy(kept, local, n * sizeof *kept);
                if (deps != local)
                    rill__free(deps);
            }
            if (n == 0 || kept != NULL) {
                *out = kept;
                *num = n;
                return RILL_OK;
            }
        }
        for (size_t i = 0; i < n; i++)
            rill__stream_unref(deps[i].stream);
        if (deps != local)
            rill__free(deps);
        if (!overflow)
            return RILL_ERROR_OUT_OF_MEMORY;
        cap *= 4; /* more streams had work pending: again, with room for them */
        deps = rill__malloc(cap * sizeof *deps);
        if (deps == NULL)
            return RILL_ERROR_OUT_OF_MEMORY;
    }
}

RILL_HOT void rill__cmd_release(rill__stream *s, rill__cmd *cmd) {
    rill__queue_discharge(s, cmd);
    switch (cmd->kind) {
    case RILL__CMD_WAIT:
        rill__stream_unref(cmd->u.wait.stream);
        break;
    case RILL__CMD_RECORD:
        rill__event_unref(cmd->u.record.event);
        break;
    case RILL__CMD_GRAPH:
        if (cmd->u.graph.after_stream != NULL)
            rill__stream_unref(cmd->u.graph.after_stream);
        cmd->u.graph.release(cmd->u.graph.launch, cmd->u.graph.ext);
        break;
    default:
        break;
    }
}

/* A launch reads the mask and its device's entry: one line. */
_Static_assert(offsetof(rill__kernel, loaded_mask) / 64 == offsetof(rill__kernel, loaded[1]) / 64,
               "rill__kernel: the launch path's fields on one cache line");

rill_status rill__kernel_load(rill__kernel *k, rill__device *dev, const char *fn, void **loaded) {
    int ordinal = dev->base.info.ordinal;
    uint32_t bit = 1u << ordinal;
    /* acquire: pairs with the release below, which follows the store of
     * loaded[ordinal]. */
    if (atomic_load_explicit(&k->loaded_mask, memory_order_acquire) & bit) {
        *loaded = k->loaded[ordinal];
        return RILL_OK;
    }
    rill__runtime *rt;
    rill__runtime_get(&rt);
    rill_status st = RILL_OK;
    rill__mutex_lock(&rt->lock);
    if ((atomic_load_explicit(&k->loaded_mask, memory_order_relaxed) & bit) == 0) {
        const rill_kernel_image *image;
        st = rill__kernel_image_choose(&k->image, dev, &image);
        if (st == RILL_OK)
            st = dev->ops->kernel_load(dev, &k->image, image, &k->loaded[ordinal]);
        if (st == RILL_OK)
            atomic_fetch_or_explicit(&k->loaded_mask, bit, memory_order_release);
    }
    rill__mutex_unlock(&rt->lock);
    if (st != RILL_OK)
        return rill__fail_from(st, fn);
    *loaded = k->loaded[ordinal];
    return RILL_OK;
}

RILL_HOT rill_status rill__kernel_resolve(rill_kernel *handle, const char *fn, rill__kernel **out) {
    rill__kernel *k = rill__handle_get(handle, RILL__HANDLE_KERNEL);
    if (k == NULL)
        return rill__handle_fail(fn, "the kernel", handle, RILL__HANDLE_KERNEL);
    *out = k;
    return RILL_OK;
}

/* Creates a kernel named name with images list[0..n) (none for a
 * built-in op, whose bodies the backends have); failures name fn. */
static rill_status create(const char *name, rill__op op, const rill_kernel_image *list, size_t n,
                          const char *fn, rill_kernel **out) {
    rill__runtime *rt;
    rill__runtime_get(&rt);
    rill__kernel *k = rill__calloc(1, sizeof *k);
    if (k == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of host memory; no kernel was created",
                          fn);
    snprintf(k->image.name, sizeof k->image.name, "%s", name);
    k->image.op = op;
    rill_status st = rill__kernel_images_copy(list, n, &k->image, fn);
    if (st != RILL_OK) {
        rill__free(k);
        return st;
    }
    if (!rill__handle_open(RILL__HANDLE_KERNEL, k, (void **)&k->handle)) {
        rill__kernel_images_free(&k->image);
        rill__free(k);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of host memory; no kernel was created",
                          fn);
    }
    atomic_store(&k->magic, RILL__MAGIC_KERNEL);
    rill__kernels_reap(rt);
    rill__mutex_lock(&rt->lock);
    rill__list_push(&rt->kernels, &k->rt_link);
    rill__mutex_unlock(&rt->lock);
    *out = k->handle;
    return RILL_OK;
}

rill_status rill__kernel_create_op(rill__op op, const char *name, rill_kernel **out) {
    return create(name, op, NULL, 0, "rill_kernel_create", out);
}

/* ---------------------------------------------------------------- public */

rill_status rill_kernel_create(const rill_kernel_desc *desc, rill_kernel **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_kernel_create: out is NULL; pass the address of a rill_kernel * to "
                          "receive the kernel");
    *out = NULL;
    if (desc == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_kernel_create: desc is NULL; pass a rill_kernel_desc with the "
                          "kernel's name and body");
    if (desc->name == NULL || desc->name[0] == '\0')
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_kernel_create: desc->name is NULL or empty; kernels need a name "
                          "for errors and traces");
    if (desc->cpu == NULL && desc->cuda_ptx == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_kernel_create: kernel '%s' has no body; set desc->cpu, or "
                          "desc->cuda_ptx and desc->cuda_entry",
                          desc->name);
    if ((desc->cuda_ptx == NULL) != (desc->cuda_entry == NULL))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_kernel_create: kernel '%s' sets only one of cuda_ptx and "
                          "cuda_entry; set both or neither",
                          desc->name);
    rill_kernel_image images[2];
    size_t n;
    rill__kernel_desc_images(desc, images, &n);
    return create(desc->name, RILL__OP_NONE, images, n, "rill_kernel_create", out);
}

rill_status rill_kernel_create_from_images(const rill_kernel_image_desc *desc, rill_kernel **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_kernel_create_from_images: out is NULL; pass the address of a "
                          "rill_kernel * to receive the kernel");
    *out = NULL;
    if (desc == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_kernel_create_from_images: desc is NULL; pass a "
                          "rill_kernel_image_desc with the kernel's name and images");
    rill_status st = rill__kernel_image_desc_check(desc);
    if (st != RILL_OK)
        return st;
    return create(desc->name, RILL__OP_NONE, desc->images, desc->num_images,
                  "rill_kernel_create_from_images", out);
}

static void drop_deps(rill__mem_dep *deps, size_t n) {
    for (size_t i = 0; i < n; i++)
        rill__stream_unref(deps[i].stream);
    rill__free(deps);
}

/* The owner's hold on a kernel whose handle closed, once no call that
 * found it is still running (core/calls.h), so that every launch of it has
 * been submitted. Launches hold no reference (kernel.h): the kernel waits
 * for the work pending now, on every device, then goes. Without memory to
 * note that work, it stays until rill_shutdown. */
static void release_kernel(void *obj) {
    rill__kernel *kernel = obj;
    rill__runtime *rt;
    rill__runtime_get(&rt);
    rill__mem_dep *deps;
    size_t n;
    if (snapshot_pending(rt, &deps, &n) != RILL_OK)
        return;
    /* One critical section moves the kernel to the zombies and gives it its
     * pending work: a reap on another thread sees both or neither. */
    rill__mutex_lock(&rt->lock);
    rill__list_remove(&rt->kernels, &kernel->rt_link);
    kernel->rt_link.next = rt->zombie_kernels;
    rt->zombie_kernels = &kernel->rt_link;
    kernel->pending = deps;
    kernel->num_pending = n;
    rill__mutex_unlock(&rt->lock);
    rill__kernels_reap(rt);
}

rill_status rill_kernel_destroy(rill_kernel *kernel_h) {
    RILL_CALL_SCOPE();
    rill__runtime *rt;
    rill__kernel *kernel;
    rill_status st = rill__kernel_resolve(kernel_h, "rill_kernel_destroy", &kernel);
    if (st != RILL_OK)
        return st;
    rill__runtime_get(&rt);
    /* The kernel will wait for the work pending when it goes (release_kernel).
     * When there is no memory to note that work now, wait for it instead,
     * so that little is pending then. */
    rill__mem_dep *deps;
    size_t n;
    if (snapshot_pending(rt, &deps, &n) != RILL_OK) {
        if (rill__thread_is_worker())
            return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                              "rill_kernel_destroy: out of memory noting the work that may still "
                              "launch kernel '%s', and a kernel or host function cannot wait for "
                              "it; the kernel was not destroyed, destroy it from the host",
                              kernel->image.name);
        for (int i = 0; i < rt->num_devices; i++)
            rill__device_drain(rt->devices[i], "rill_kernel_destroy");
    } else {
        drop_deps(deps, n);
    }
    /* Calls that found the kernel may launch it until they return, the
     * handle closed or not: it waits for the work pending when it goes. */
    return rill__destroy(&kernel->magic, RILL__MAGIC_KERNEL, kernel->handle, release_kernel, kernel,
                         RILL__RETIRE_BATCHED, "rill_kernel_destroy", "kernel");
}

bool rill__launch_state_fail(rill__launch_state *ls, const char *message) {
    int expected = 0;
    /* The first failing block's message wins; the flag also stops the
     * launch's remaining blocks from starting. */
    if (!atomic_compare_exchange_strong(&ls->failed, &expected, 2))
        return false;
    rill__fit(ls->message, sizeof ls->message, message != NULL ? message : "");
    atomic_store_explicit(&ls->failed, 1, memory_order_release);
    return true;
}

/* Set on the thread whose rill__kernel_fail (rill_kernel_fail) recorded
 * its launch's failure (rill__took_kernel_failure). */
static _Thread_local bool tls_failed_here;

void rill__kernel_fail(const rill_block_ctx *ctx, const char *message) {
    if (ctx == NULL || ctx->state == NULL)
        return;
    if (rill__launch_state_fail(ctx->state, message))
        tls_failed_here = true;
}

void rill_kernel_fail(const rill_block_ctx *ctx, const char *message) {
    rill__kernel_fail(ctx, message);
}

bool rill__took_kernel_failure(void) {
    bool failed = tls_failed_here;
    tls_failed_here = false;
    return failed;
}

/* The state of the host function that runs on this thread (NULL outside
 * one): where rill_host_func_fail writes. */
static _Thread_local rill__launch_state *tls_host;

bool rill__host_run(rill_host_fn fn, void *user_data, rill__launch_state *ls) {
    rill__launch_state *outer = tls_host;
    atomic_store_explicit(&ls->failed, 0, memory_order_relaxed);
    ls->message[0] = '\0';
    tls_host = ls;
    fn(user_data);
    tls_host = outer;
    rill__thread_reset_worker();
    return atomic_load_explicit(&ls->failed, memory_order_relaxed) != 0; /* this thread wrote it */
}

/* Set while rill__host_skipped runs a command: the callback's status. */
static _Thread_local bool tls_skipped;

void rill__host_skipped(const rill__host_call *call, unsigned flags, rill__launch_state *ls) {
    if (!(flags & RILL__CMD_ALWAYS))
        return;
    tls_skipped = true;
    /* Its own failure adds nothing: the stream fails already. */
    (void)rill__host_run(call->fn, call->user_data, ls);
    tls_skipped = false;
}

rill_status rill_host_func_fail(const char *message) {
    if (tls_host == NULL)
        return rill__fail(RILL_ERROR_NOT_PERMITTED,
                          "rill_host_func_fail: the calling thread is not running a host "
                          "function; call it from the function given to rill_launch_host_func");
    rill__launch_state_fail(tls_host, message);
    return RILL_OK;
}

RILL_HOT rill_status rill__launch_check(rill_kernel *kernel_h, const rill_launch *launch,
                                        const char *fn, rill__kernel **out) {
    rill__kernel *kernel;
    rill_status st = rill__kernel_resolve(kernel_h, fn, &kernel);
    if (st != RILL_OK)
        return st;
    if (launch == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: launch is NULL; describe the grid in a rill_launch", fn);
    if (launch->grid.x == 0 || launch->grid.y == 0 || launch->grid.z == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: kernel '%s' launched with grid (%u, %u, %u); every dimension "
                          "needs at least one block",
                          fn, kernel->image.name, launch->grid.x, launch->grid.y, launch->grid.z);
    if ((uint64_t)launch->grid.x * launch->grid.y * launch->grid.z > UINT32_MAX)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: kernel '%s' launched with more than 2^32-1 blocks; give each block "
                          "more of the work",
                          fn, kernel->image.name);
    if (launch->args_size > 0 && launch->args == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: kernel '%s' has args_size %zu but args is NULL; pass the arguments, "
                          "or args_size 0",
                          fn, kernel->image.name, launch->args_size);
    if (launch->num_accesses > 0 && launch->accesses == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: kernel '%s' has num_accesses %zu but accesses is NULL; pass the "
                          "accesses, or num_accesses 0",
                          fn, kernel->image.name, launch->num_accesses);
    for (size_t i = 0; i < launch->num_accesses; i++) {
        const rill_access *a = &launch->accesses[i];
        if (a->ptr == NULL || a->mode < RILL_READ || a->mode > RILL_READ_WRITE)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: kernel '%s' access %zu has a NULL pointer or a mode other "
                              "than RILL_READ, RILL_WRITE or RILL_READ_WRITE",
                              fn, kernel->image.name, i);
    }
    *out = kernel;
    return RILL_OK;
}

/* A kernel's declared accesses against what its stream's device reaches
 * (rill.h, rill_launch_kernel), where a runtime has a device whose memory
 * is not host memory: devices of host memory alone all reach it. The built-in ops
 * checked theirs already (src/ops). */
static rill_status check_reach(rill__stream *stream, const rill__kernel *kernel,
                               const rill_launch *launch, const char *fn) {
    if (!rill__runtime_has_device_memory())
        return RILL_OK;
    const rill__mem_hooks *mem = atomic_load_explicit(&rill__mem, memory_order_relaxed);
    for (size_t i = 0; i < launch->num_accesses; i++) {
        const rill_access *a = &launch->accesses[i];
        rill_status st =
            mem->check_reach(fn, kernel->image.name, (int)i, a->ptr, a->bytes, stream->q.dev);
        if (st != RILL_OK)
            return st;
    }
    return RILL_OK;
}

RILL_HOT rill_status rill_launch_kernel(rill_stream *stream_h, rill_kernel *kernel_h,
                                        const rill_launch *launch) {
    RILL_CALL_SCOPE();
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_launch_kernel", &stream);
    if (st != RILL_OK)
        return st;
    /* Before the kernel is looked up: a wait may park the call. */
    st = rill__stream_make_room(stream, RILL_CALL_OUTERMOST(), "rill_launch_kernel");
    if (st != RILL_OK)
        return st;
    return rill__kernel_launch(stream, kernel_h, launch);
}

RILL_HOT rill_status rill__kernel_launch(rill__stream *stream, rill_kernel *kernel_h,
                                         const rill_launch *launch) {
    return rill__kernel_launch_flags(stream, kernel_h, launch, 0);
}

RILL_HOT rill_status rill__kernel_launch_flags(rill__stream *stream, rill_kernel *kernel_h,
                                               const rill_launch *launch, unsigned flags) {
    static const char fn[] = "rill_launch_kernel";
    /* The built-in ops' launches (a public launch found room already). */
    rill_status st = rill__stream_make_room(stream, false, fn);
    if (st != RILL_OK)
        return st;
    rill__kernel *kernel;
    st = rill__launch_check(kernel_h, launch, fn, &kernel);
    if (st != RILL_OK)
        return st;
    void *loaded;
    st = rill__kernel_load(kernel, stream->q.dev, fn, &loaded);
    if (st != RILL_OK)
        return st;
    if (launch->num_accesses > 0 && kernel->image.op == RILL__OP_NONE &&
        (st = check_reach(stream, kernel, launch, fn)) != RILL_OK)
        return st;
    rill__cmd cmd = {.kind = RILL__CMD_KERNEL};
    /* The sanitizer learns of a command after its submission (below): one
     * run at once on this thread would end before it was known. */
    if ((flags & RILL__CMD_SMALL) && !rill__san_active())
        cmd.flags |= RILL__CMD_SMALL;
    cmd.u.kernel.kernel = kernel; /* see kernel.h: no reference */
    cmd.u.kernel.loaded = loaded;
    cmd.u.kernel.grid = launch->grid;
    cmd.u.kernel.block = launch->block;
    cmd.u.kernel.args = launch->args;
    cmd.u.kernel.args_size = launch->args_size;
    cmd.u.kernel.accesses = launch->accesses;
    cmd.u.kernel.num_accesses = launch->num_accesses;
    size_t extra = launch->args_size + launch->num_accesses * sizeof(rill_access);
    if (extra > RILL__QUEUE_INLINE_BYTES)
        cmd.extra_bytes = extra;
    uint64_t seq;
    st = rill__stream_submit(stream, &cmd, &seq);
    /* Declared accesses are uses of memory: the pool keeps a block that
     * another stream uses from being handed out before that use is done. */
    for (size_t i = 0; st == RILL_OK && i < launch->num_accesses; i++)
        rill__mem_note_use(stream, seq, launch->accesses[i].ptr, launch->accesses[i].bytes);
    if (st == RILL_OK && seq != 0 && rill__san_active())
        rill__san()->command(stream, seq, &cmd, 0);
    return st;
}

rill_status rill_launch_host_func(rill_stream *stream_h, rill_host_fn fn, void *user_data) {
    RILL_CALL_SCOPE();
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_launch_host_func", &stream);
    if (st != RILL_OK)
        return st;
    st = rill__stream_make_room(stream, RILL_CALL_OUTERMOST(), "rill_launch_host_func");
    if (st != RILL_OK)
        return st;
    if (fn == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_launch_host_func: fn is NULL; pass the function to run");
    /* A host function may wait for anything, later work of other streams
     * included: the pool never makes a stream wait behind one. */
    rill__cmd cmd = {.kind = RILL__CMD_HOST, .flags = RILL__CMD_OPAQUE};
    cmd.u.host.fn = fn;
    cmd.u.host.user_data = user_data;
    uint64_t seq;
    st = rill__stream_submit(stream, &cmd, &seq);
    if (st == RILL_OK && seq != 0 && rill__san_active())
        rill__san()->command(stream, seq, &cmd, RILL__SAN_HOST);
    return st;
}

/* A callback in flight: what rill_stream_add_callback was given. */
typedef struct stream_callback {
    rill_stream_callback fn;
    void *user_data;
    rill_stream *stream;
} stream_callback;

static void run_callback(void *p) {
    stream_callback cb = *(stream_callback *)p;
    rill__free(p);
    cb.fn(cb.stream, tls_skipped ? RILL_ERROR_KERNEL_FAILED : RILL_OK, cb.user_data);
}

rill_status rill_stream_add_callback(rill_stream *stream_h, rill_stream_callback fn,
                                     void *user_data) {
    RILL_CALL_SCOPE();
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_stream_add_callback", &stream);
    if (st != RILL_OK)
        return st;
    st = rill__stream_make_room(stream, RILL_CALL_OUTERMOST(), "rill_stream_add_callback");
    if (st != RILL_OK)
        return st;
    if (fn == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_stream_add_callback: fn is NULL; pass the function to run");
    stream_callback *cb = rill__malloc(sizeof *cb);
    if (cb == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "rill_stream_add_callback: out of memory");
    *cb = (stream_callback){.fn = fn, .user_data = user_data, .stream = stream_h};
    /* Opaque as a host function; ALWAYS: it runs on a failing stream too. */
    rill__cmd cmd = {.kind = RILL__CMD_HOST, .flags = RILL__CMD_OPAQUE | RILL__CMD_ALWAYS};
    cmd.u.host.fn = run_callback;
    cmd.u.host.user_data = cb;
    uint64_t seq;
    st = rill__stream_submit(stream, &cmd, &seq);
    if (st != RILL_OK) {
        rill__free(cb);
        return st;
    }
    if (seq != 0 && rill__san_active())
        rill__san()->command(stream, seq, &cmd, RILL__SAN_HOST);
    return RILL_OK;
}
