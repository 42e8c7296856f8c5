/* SPDX-License-Identifier: MIT */
/* The CUDA backend's devices: discovery, the primary context, the pump
 * thread, streams, and the table of operations (backend.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <unistd.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/op_args.h"
#include "util/alloc.h"
#include "util/status.h"

/* Writes the GPUs' names ("NVIDIA H200, NVIDIA H200") into buf. */
static void gpu_names(const rill__cuda_driver *drv, int count, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < count && used + 1 < size; i++) {
        CUdevice dev;
        char name[128] = "an unnamed GPU";
        if (drv->cuDeviceGet(&dev, i) == CUDA_SUCCESS)
            (void)drv->cuDeviceGetName(name, (int)sizeof name, dev);
        int n = snprintf(buf + used, size - used, "%s%s", i > 0 ? ", " : "", name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* The GPUs the driver lists; they become devices only where RILL_CUDA_ENABLE=1
 * asks for them, and otherwise the sentence says what was found. */
static int cuda_probe(char *why, size_t size) {
    const rill__cuda_driver *drv = rill__cuda_driver_load(why, size);
    if (drv == NULL)
        return 0;
    int count = 0;
    CUresult r = drv->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) {
        char text[160] = "no GPU";
        if (r != CUDA_SUCCESS)
            rill__cuda_result_text(drv, r, text, sizeof text);
        snprintf(why, size, "no CUDA device: the CUDA driver %d.%d lists none (%s)",
                 drv->version / 1000, drv->version % 1000 / 10, text);
        return 0;
    }
    const char *on = getenv("RILL_CUDA_ENABLE");
    if (on != NULL && strcmp(on, "1") == 0)
        return count;
    char names[256];
    gpu_names(drv, count, names, sizeof names);
    snprintf(
        why, size,
        "the CUDA driver %d.%d lists %d GPU%s (%s); rill's CUDA device is off by default "
        "until it has passed its checks on a GPU (docs/cuda.md): set RILL_CUDA_ENABLE=1 to use it",
        drv->version / 1000, drv->version % 1000 / 10, count, count == 1 ? "" : "s", names);
    return 0;
}

/* A device attribute, or fallback when the driver does not say. */
static int attribute(cuda_device *d, CUdevice_attribute a, int fallback) {
    int v = fallback;
    if (d->drv->cuDeviceGetAttribute(&v, a, d->cu_dev) != CUDA_SUCCESS)
        return fallback;
    return v;
}

/* Checks what the backend relies on; a sentence in why when it is missing. */
static bool capable(cuda_device *d, char *why, size_t size) {
    if (!attribute(d, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0))
        snprintf(why, size, "it has no unified addressing");
    else if (!attribute(d, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 0))
        snprintf(why, size,
                 "its driver does not allow 64-bit stream memory operations "
                 "(cuStreamWriteValue64)");
    else if (!attribute(d, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0))
        snprintf(why, size, "it has no virtual memory management (cuMemCreate, cuMemMap)");
    else {
        /* The memory cuda_memory.c commits: no shareable handle type, as
         * nothing exports it. */
        CUmemAllocationProp prop = {
            .type = CU_MEM_ALLOCATION_TYPE_PINNED,
            .requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE,
            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d->ordinal},
        };
        size_t g = 0;
        CUresult r =
            d->drv->cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        if (r != CUDA_SUCCESS) {
            char text[120];
            rill__cuda_result_text(d->drv, r, text, sizeof text);
            snprintf(why, size,
                     "the driver gives no allocation granularity for device memory "
                     "(cuMemGetAllocationGranularity: %.100s)",
                     text);
        } else if (g == 0 || RILL__CUDA_GRANULE % g != 0)
            snprintf(why, size, "its allocation granularity (%zu bytes) does not divide %zu", g,
                     RILL__CUDA_GRANULE);
        else
            return true;
    }
    return false;
}

/* ------------------------------------------------ the devices at exit */

/* The devices whose threads run, so that the process's exit stops them
 * before the driver's own exit handlers tear libcuda down (a pump still
 * polling then would call into a driver that is gone). The handler is
 * registered at the first device's init, after cuInit, so it runs before
 * libcuda's; it runs only in the process that started the threads (a
 * child of fork has none of them). */
static once_flag live_once = ONCE_FLAG_INIT;
static mtx_t live_lock;
static cuda_device *live;

/* Stops d's pump and runners, once (live_lock held). At exit the pump
 * leaves at once, work in flight or not, and is joined; the runners are
 * told to stop and not joined, since one may be in a host function that
 * never returns: one that returns calls the driver no more. */
static void stop_threads_locked(cuda_device *d, bool exiting) {
    if (d->threads_stopped)
        return;
    d->threads_stopped = true;
    if (exiting)
        atomic_store(&d->exiting, 1);
    atomic_store(&d->stop, 1);
    rill__cuda_ring(d);
    rill__thread_join(&d->pump);
    if (exiting)
        rill__cuda_runners_wake(d);
    else
        rill__cuda_runners_stop(d);
}

static void stop_at_exit(void) {
    if (mtx_lock(&live_lock) != thrd_success)
        return;
    for (cuda_device *d = live; d != NULL; d = d->next_live)
        if (d->pid == (long)getpid())
            stop_threads_locked(d, true);
    (void)mtx_unlock(&live_lock);
}

static void live_init(void) {
    if (mtx_init(&live_lock, mtx_plain) != thrd_success)
        abort(); /* as a failing pthread primitive does */
    (void)atexit(stop_at_exit);
}

static void live_add(cuda_device *d) {
    call_once(&live_once, live_init);
    d->pid = (long)getpid();
    (void)mtx_lock(&live_lock);
    d->next_live = live;
    live = d;
    (void)mtx_unlock(&live_lock);
}

/* Takes d off the list, with its threads stopped (device_shutdown). */
static void live_remove(cuda_device *d) {
    (void)mtx_lock(&live_lock);
    for (cuda_device **p = &live; *p != NULL; p = &(*p)->next_live)
        if (*p == d) {
            *p = d->next_live;
            break;
        }
    stop_threads_locked(d, false);
    (void)mtx_unlock(&live_lock);
}

static rill_status cuda_device_init(rill__device *dev, int index) {
    char why[256] = "";
    const rill__cuda_driver *drv = rill__cuda_driver_load(why, sizeof why);
    if (drv == NULL)
        return rill__fail(RILL_ERROR_NO_DEVICE, "CUDA device %d: %s", index, why);
    cuda_device *d = rill__calloc(1, sizeof *d);
    if (d == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory creating a CUDA device");
    d->drv = drv;
    d->ordinal = index;
    rill_device_info *info = &rill__device_base_of(dev)->info;
    CUresult r = drv->cuDeviceGet(&d->cu_dev, index);
    if (r == CUDA_SUCCESS)
        r = drv->cuDeviceGetName(info->name, (int)sizeof info->name, d->cu_dev);
    if (r != CUDA_SUCCESS) {
        rill__cuda_describe(d, r, "cuDeviceGet", why, sizeof why);
        rill__free(d);
        return rill__fail(RILL_ERROR_NO_DEVICE, "CUDA device %d: %s", index, why);
    }
    if (!capable(d, why, sizeof why)) {
        rill__free(d);
        return rill__fail(RILL_ERROR_NO_DEVICE,
                          "CUDA device %d (%s) cannot be used: %s; update the NVIDIA driver or "
                          "use another GPU",
                          index, info->name, why);
    }
    if ((r = drv->cuDevicePrimaryCtxRetain(&d->ctx, d->cu_dev)) != CUDA_SUCCESS) {
        rill__cuda_describe(d, r, "cuDevicePrimaryCtxRetain", why, sizeof why);
        rill__free(d);
        return rill__fail(RILL_ERROR_NO_DEVICE, "CUDA device %d (%s) did not start: %s", index,
                          info->name, why);
    }
    CUcontext prev = rill__cuda_enter(d);
    int least = 0, greatest = 0;
    size_t total = 0;
    if ((r = drv->cuCtxGetStreamPriorityRange(&least, &greatest)) != CUDA_SUCCESS ||
        (r = drv->cuDeviceTotalMem(&total, d->cu_dev)) != CUDA_SUCCESS ||
        (r = drv->cuStreamCreate(&d->aside, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS ||
        (r = drv->cuEventCreate(&d->anchor, CU_EVENT_DEFAULT)) != CUDA_SUCCESS ||
        (r = drv->cuEventRecord(d->anchor, d->aside)) != CUDA_SUCCESS ||
        (r = drv->cuEventSynchronize(d->anchor)) != CUDA_SUCCESS) {
        rill__cuda_describe(d, r, "the context", why, sizeof why);
        if (d->anchor != NULL)
            (void)drv->cuEventDestroy(d->anchor);
        if (d->aside != NULL)
            (void)drv->cuStreamDestroy(d->aside);
        rill__cuda_leave(d, prev);
        (void)drv->cuDevicePrimaryCtxRelease(d->cu_dev);
        rill__free(d);
        return rill__fail(RILL_ERROR_NO_DEVICE, "CUDA device %d (%s) did not start: %s", index,
                          info->name, why);
    }
    rill__cuda_leave(d, prev);
    d->anchor_ns = rill__now_ns();
    /* The launch bounds (the values of every GPU rill takes, where the
     * driver does not say). */
    d->max_block_threads = (unsigned)attribute(d, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024);
    d->max_block[0] = (unsigned)attribute(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024);
    d->max_block[1] = (unsigned)attribute(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024);
    d->max_block[2] = (unsigned)attribute(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64);
    d->max_grid[0] = (unsigned)attribute(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 0x7fffffff);
    d->max_grid[1] = (unsigned)attribute(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535);
    d->max_grid[2] = (unsigned)attribute(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535);
    info->kind = RILL_DEVICE_CUDA;
    info->compute_units = attribute(d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1);
    /* The built-in ops' grids: as many blocks as the multiprocessors hold
     * at once, four times over. */
    int per_sm = attribute(d, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048);
    rill__device_base_of(dev)->op_grid_blocks =
        (size_t)info->compute_units *
        (size_t)(per_sm > RILL__OP_BLOCK_THREADS ? per_sm / RILL__OP_BLOCK_THREADS : 1) * 4;
    info->memory_bytes = total;
    info->least_priority = least;
    info->greatest_priority = greatest;
    rill__mutex_init(&d->lock);
    rill__mutex_init(&d->run_lock);
    rill__mutex_init(&d->stamp_lock);
    rill__mutex_init(&d->stage_lock);
    rill__cuda_libs_init(&d->libs);
    atomic_store(&d->refs, 1);
    rill__device_base_of(dev)->state = d;
    rill__thread_start(&d->pump, "rill-cuda-pump", rill__cuda_pump, d);
    live_add(d);
    return RILL_OK;
}

/* Stops the pump; the memory rill frees after this keeps the rest. */
static void cuda_device_shutdown(rill__device *dev) {
    cuda_device *d = cuda_device_of(dev);
    live_remove(d);
    rill__cuda_unref(d);
}

/* The device's clock: the host's, which GPU events are stamped in by their
 * distance from the last one stamped (rill__cuda_stamp). */
static uint64_t cuda_timestamp_ns(rill__device *dev) {
    (void)dev;
    return rill__now_ns();
}

static rill_status cuda_stream_init(rill__stream *s) {
    cuda_device *d = cuda_device_of(rill__queue_of(s)->dev);
    cuda_stream *cs = cuda_stream_of(s);
    const rill__cuda_driver *drv = d->drv;
    char why[256];
    memset(cs, 0, sizeof *cs);
    cs->self = s;
    CUcontext prev = rill__cuda_enter(d);
    void *word = NULL;
    CUresult r = drv->cuStreamCreateWithPriority(&cs->cu, CU_STREAM_NON_BLOCKING,
                                                 rill__queue_of(s)->priority);
    if (r == CUDA_SUCCESS &&
        (r = drv->cuEventCreate(&cs->mark, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
        (void)drv->cuStreamDestroy(cs->cu);
    if (r != CUDA_SUCCESS) {
        rill__cuda_describe(d, r, "cuStreamCreateWithPriority", why, sizeof why);
        rill__cuda_leave(d, prev);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "the GPU could not make a stream (%s)", why);
    }
    if ((r = drv->cuMemHostAlloc(&word, sizeof(uint64_t),
                                 CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)) !=
            CUDA_SUCCESS ||
        (r = drv->cuMemHostGetDevicePointer(&cs->done_dev, word, 0)) != CUDA_SUCCESS) {
        rill__cuda_describe(d, r, "cuMemHostAlloc", why, sizeof why);
        if (word != NULL)
            (void)drv->cuMemFreeHost(word);
        (void)drv->cuEventDestroy(cs->mark);
        (void)drv->cuStreamDestroy(cs->cu);
        rill__cuda_leave(d, prev);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "no page-locked host memory for a stream's done word (%s)", why);
    }
    rill__cuda_leave(d, prev);
    cs->done_word = word;
    atomic_store(cs->done_word, 0);
    rill__mutex_init(&cs->lock);
    rill__mutex_init(&cs->mark_lock);
    atomic_fetch_add(&d->refs, 1);
    return RILL_OK;
}

static void cuda_stream_fini(rill__stream *s) {
    cuda_device *d = cuda_device_of(rill__queue_of(s)->dev);
    cuda_stream *cs = cuda_stream_of(s);
    CUcontext prev = rill__cuda_enter(d);
    (void)d->drv->cuStreamDestroy(cs->cu);
    (void)d->drv->cuEventDestroy(cs->mark);
    (void)d->drv->cuMemFreeHost((void *)cs->done_word);
    rill__cuda_leave(d, prev);
    rill__cuda_cmds_fini(cs);
    rill__mutex_destroy(&cs->lock);
    rill__mutex_destroy(&cs->mark_lock);
    rill__cuda_unref(d);
}

static void *cuda_stream_native(rill__stream *s) {
    return cuda_stream_of(s)->cu;
}

/* A rill event's CUevent, made by its first rill_event_native: without
 * timing, as CUDA's events for ordering are. It holds a reference to the
 * device, so that it outlives device_shutdown until the event is freed. */
static rill_status cuda_native_event_create(rill__device *dev, void **out) {
    cuda_device *d = cuda_device_of(dev);
    CUevent ev = NULL;
    CUcontext prev = rill__cuda_enter(d);
    CUresult r = d->drv->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    rill__cuda_leave(d, prev);
    if (r != CUDA_SUCCESS) {
        char why[256];
        rill__cuda_describe(d, r, "cuEventCreate", why, sizeof why);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "no CUDA event for the event (%s)", why);
    }
    atomic_fetch_add(&d->refs, 1);
    *out = ev;
    return RILL_OK;
}

static void cuda_native_event_destroy(rill__device *dev, void *native) {
    cuda_device *d = cuda_device_of(dev);
    CUcontext prev = rill__cuda_enter(d);
    (void)d->drv->cuEventDestroy(native);
    rill__cuda_leave(d, prev);
    rill__cuda_unref(d);
}

static const rill__image_format cuda_image_formats[] = {
    {RILL_KERNEL_IMAGE_PTX, "PTX"},
    {0, NULL},
};

const rill__backend_ops rill__cuda_backend = {
    .name = "cuda",
    .kind = RILL_DEVICE_CUDA,
    .mem_caps = RILL__MEMCAP_CUDA,
    .image_formats = cuda_image_formats,
    .stream_state_bytes = sizeof(cuda_stream),
    /* a command and its arguments (allocated together); large ones are
     * counted apart (rill__cmd.extra_bytes) */
    .cmd_bytes = CUDA_CMD_BYTES + RILL__QUEUE_INLINE_BYTES,
    .probe = cuda_probe,
    .device_init = cuda_device_init,
    .device_shutdown = cuda_device_shutdown,
    .timestamp_ns = cuda_timestamp_ns,
    .stream_init = cuda_stream_init,
    .stream_fini = cuda_stream_fini,
    .stream_native = cuda_stream_native,
    .native_event_create = cuda_native_event_create,
    .native_event_destroy = cuda_native_event_destroy,
    .submit = rill__cuda_submit,
    .host_help = rill__cuda_host_help,
    .kick = rill__cuda_kick,
    .kernel_load = rill__cuda_kernel_load,
    .kernel_unload = rill__cuda_kernel_unload,
    .graph_prepare = rill__cuda_graph_prepare,
    .graph_update = rill__cuda_graph_update,
    .graph_release = rill__cuda_graph_release,
    .mem_alloc = rill__cuda_mem_alloc,
    .mem_free = rill__cuda_mem_free,
    .mem_granule = RILL__CUDA_GRANULE,
    .mem_commit = rill__cuda_mem_commit,
    .mem_decommit = rill__cuda_mem_decommit,
    .mem_describe = NULL,
    .mem_reachable = rill__cuda_mem_reachable,
    .host_alloc = rill__cuda_host_alloc,
    .host_free = rill__cuda_host_free,
    .ipc_export = NULL,
    .ipc_map = NULL,
    .ipc_unmap = NULL,
};
