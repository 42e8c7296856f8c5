/* SPDX-License-Identifier: MIT */
/* The CPU device: always present, its worker threads are its compute
 * units (RILL_CPU_WORKERS, default: the processors this process may run
 * on). Its memory is host memory, 256-byte aligned like CUDA's. This file
 * holds the backend's ops table, device start and stop, and per-stream
 * state; cpu_sched.c runs the commands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/alloc.h"
#include "core/status.h"

#define MAX_WORKERS 1024
#define ALIGNMENT 256

static rill_status parse_workers(int *out) {
    const char *env = getenv("RILL_CPU_WORKERS");
    *out = rill__cpu_count();
    if (env == NULL || env[0] == '\0')
        return RILL_OK;
    char *end;
    errno = 0;
    long n = strtol(env, &end, 10);
    if (errno != 0 || *end != '\0' || n < 1 || n > MAX_WORKERS)
        return rill__fail(RILL_ERROR_NO_DEVICE,
                          "the CPU device cannot start: RILL_CPU_WORKERS='%s' is not a number "
                          "from 1 to %d; unset it or set it to the number of worker threads",
                          env, MAX_WORKERS);
    *out = (int)n;
    return RILL_OK;
}

static rill_status cpu_device_init(rill_device *dev) {
    int workers;
    rill_status st = parse_workers(&workers);
    if (st != RILL_OK)
        return st;
    cpu_device *d = rill__calloc(1, sizeof *d);
    cpu_worker *w = rill__calloc((size_t)workers, sizeof *w);
    if (d == NULL || w == NULL) {
        rill__free(d);
        rill__free(w);
        return rill__fail(RILL_ERROR_NO_DEVICE, "the CPU device cannot start: out of memory");
    }
    char model[96];
    rill__cpu_model_name(model, sizeof model);
    dev->info.kind = RILL_DEVICE_CPU;
    snprintf(dev->info.name, sizeof dev->info.name, "CPU (%s)", model);
    dev->info.compute_units = workers;
    dev->info.memory_bytes = rill__physical_memory_bytes();
    dev->info.least_priority = 0;
    dev->info.greatest_priority = -(CPU_PRIORITY_LEVELS - 1);
    d->dev = dev;
    d->num_workers = workers;
    d->num_cpus = rill__cpu_count();
    d->workers = w;
    rill__mutex_init(&d->ready_lock);
    rill__mutex_init(&d->launch_lock);
    dev->backend = d;
    rill__cpu_workers_start(d);
    return RILL_OK;
}

static void cpu_device_shutdown(rill_device *dev) {
    cpu_device *d = cpu_device_of(dev);
    rill__cpu_workers_stop(d);
    rill__mutex_destroy(&d->launch_lock);
    rill__mutex_destroy(&d->ready_lock);
    rill__free(d->workers);
    rill__free(d);
    dev->backend = NULL;
}

static rill_status cpu_stream_init(rill_stream *s) {
    cpu_stream *cs = cpu_stream_of(s);
    cpu_cmd *dummy = rill__calloc(1, sizeof *dummy);
    if (dummy == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "rill_stream_create: out of memory");
    cs->self = s;
    cs->head = cs->tail = dummy;
    return RILL_OK;
}

static void cpu_stream_fini(rill_stream *s) {
    cpu_stream *cs = cpu_stream_of(s);
    rill__cpu_stream_free_nodes(cs);
}

static rill_status cpu_mem_alloc(rill_device *dev, size_t bytes, void **out, void **handle) {
    (void)dev;
    void *p = NULL;
    if (posix_memalign(&p, ALIGNMENT, bytes) != 0)
        return RILL_ERROR_OUT_OF_MEMORY;
    *out = p;
    *handle = NULL;
    return RILL_OK;
}

static void cpu_mem_free(rill_device *dev, void *ptr, size_t bytes, void *handle) {
    (void)dev;
    (void)bytes;
    (void)handle;
    free(ptr);
}

const rill__backend_ops rill__cpu_backend = {
    .name = "cpu",
    .stream_state_bytes = sizeof(cpu_stream),
    .device_init = cpu_device_init,
    .device_shutdown = cpu_device_shutdown,
    .stream_init = cpu_stream_init,
    .stream_fini = cpu_stream_fini,
    .submit = rill__cpu_submit,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
};
