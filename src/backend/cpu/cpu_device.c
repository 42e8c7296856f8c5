/* SPDX-License-Identifier: MIT */
/* The CPU device: always present, its worker threads are its compute
 * units (RILL_CPU_WORKERS, default: the processors this process may run
 * on). Its memory is host memory in shared memory segments (memfd), so
 * that any block can be exported to another process (src/mem/ipc.c);
 * segments are page aligned, more than CUDA's 256 bytes. This file holds
 * the backend's ops table, device start and stop, per-stream state and
 * kernels; cpu_memory.c the memory, cpu_queue.c and cpu_exec.c queue and
 * run the commands, cpu_graph.c graphs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/op_kernels.h"
#include "util/alloc.h"
#include "util/status.h"

#define MAX_WORKERS 1024
#define MAX_CPUS    4096 /* processors considered when splitting them into devices */
#define MAX_NODES   64

/* The processors this process may run on, ascending (at most MAX_CPUS),
 * and the NUMA nodes they span (ids ascending; one entry, -1, without NUMA
 * information). Called on the initialising thread only. */
static int all_cpus[MAX_CPUS];
static int cpus_and_nodes(int *node_ids, int *num_nodes) {
    int n = rill__cpu_list(all_cpus, MAX_CPUS);
    if (n > MAX_CPUS)
        n = MAX_CPUS;
    int nodes = 0;
    for (int i = 0; i < n; i++) {
        int node = rill__cpu_node(all_cpus[i]), k = 0;
        while (k < nodes && node_ids[k] < node)
            k++;
        if ((k < nodes && node_ids[k] == node) || nodes == MAX_NODES)
            continue;
        memmove(node_ids + k + 1, node_ids + k, (size_t)(nodes - k) * sizeof *node_ids);
        node_ids[k] = node;
        nodes++;
    }
    *num_nodes = nodes > 0 ? nodes : 1;
    return n;
}

/* The processors of the index-th of num CPU devices. The processors this
 * process may run on are split by NUMA node when there is a device per
 * node (the default), else into num runs of consecutive processors, as
 * even as they divide. Returns how many went into cpus (cap entries). */
static int device_cpus(int index, int num, int *cpus, int cap) {
    int node_ids[MAX_NODES], nodes;
    int n = cpus_and_nodes(node_ids, &nodes), got = 0;
    if (nodes == num && num > 1) {
        for (int i = 0; i < n && got < cap; i++)
            if (rill__cpu_node(all_cpus[i]) == node_ids[index])
                cpus[got++] = all_cpus[i];
        return got;
    }
    for (int i = (int)((long)index * n / num); i < (int)((long)(index + 1) * n / num) && got < cap;
         i++)
        cpus[got++] = all_cpus[i];
    return got;
}

/* How many NUMA nodes the processors this process may run on span (1
 * without NUMA information). */
static int count_nodes(void) {
    int node_ids[MAX_NODES], nodes;
    (void)cpus_and_nodes(node_ids, &nodes);
    return nodes;
}

/* Writes processors as ranges ("0-3,8,10-11") into buf. */
static void format_cpus(const int *cpus, int n, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < size;) {
        int j = i;
        while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
            j++;
        int w =
            j > i ? snprintf(buf + used, size - used, "%s%d-%d", i > 0 ? "," : "", cpus[i], cpus[j])
                  : snprintf(buf + used, size - used, "%s%d", i > 0 ? "," : "", cpus[i]);
        used += w > 0 ? (size_t)w : 0;
        i = j + 1;
    }
}

static rill_status parse_workers(int cpus, int *out) {
    const char *env = getenv("RILL_CPU_WORKERS");
    *out = cpus;
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

/* How many CPU devices RILL_CPU_DEVICES asks for (0, with why, when it
 * names no possible count), else one per NUMA node the process may run
 * on (one without NUMA information). */
static int probe_count(char *why, size_t size) {
    const char *env = getenv("RILL_CPU_DEVICES");
    int cpus = rill__cpu_count();
    if (env == NULL || env[0] == '\0') {
        /* Each node counted has a processor of ours; past 16 nodes (the
         * devices a runtime holds), 16 even runs of processors instead. */
        int nodes = count_nodes();
        return nodes < 16 ? nodes : 16;
    }
    char *end;
    errno = 0;
    long n = strtol(env, &end, 10);
    if (errno != 0 || *end != '\0' || n < 1 || n > cpus || n > 16) {
        snprintf(why, size,
                 "RILL_CPU_DEVICES='%s' is not a number of CPU devices from 1 to %d (the "
                 "processors this process may run on, at most 16); unset it for one device per "
                 "NUMA node",
                 env, cpus < 16 ? cpus : 16);
        return 0;
    }
    return (int)n;
}

/* How many devices the last probe found: the devices device_init splits
 * the processors into (probe runs first, on the initialising thread). */
static int probed_devices;

/* RILL_CPU_PIN=1, as the last probe read it: each worker of a device with
 * a worker per processor runs on a processor of its own (cpu_device's
 * pin_each). */
static bool probed_pin;

/* Reads RILL_CPU_PIN: 1 pins, unset or 0 does not; false, with why, for
 * any other value. */
static bool probe_pin(char *why, size_t size) {
    const char *env = getenv("RILL_CPU_PIN");
    probed_pin = env != NULL && strcmp(env, "1") == 0;
    if (env == NULL || env[0] == '\0' || strcmp(env, "0") == 0 || probed_pin)
        return true;
    snprintf(why, size,
             "RILL_CPU_PIN='%s' is neither 0 nor 1; set it to 1 to pin each worker to a "
             "processor of its own, or unset it",
             env);
    return false;
}

/* The backend's probe (backend.h). */
static int cpu_probe(char *why, size_t size) {
    probed_devices = probe_count(why, size);
    if (probed_devices > 0 && (!probe_pin(why, size) || !rill__cpu_memory_probe(why, size)))
        probed_devices = 0;
    return probed_devices;
}

static rill_status cpu_device_init(rill__device *dev, int index) {
    rill_device_info *info = &rill__device_base_of(dev)->info;
    int num = probed_devices;
    int *cpus = rill__calloc(MAX_CPUS, sizeof *cpus);
    if (cpus == NULL)
        return rill__fail(RILL_ERROR_NO_DEVICE, "the CPU device cannot start: out of memory");
    int num_cpus = device_cpus(index, num, cpus, MAX_CPUS);
    int workers;
    rill_status st = parse_workers(num_cpus, &workers);
    if (st != RILL_OK) {
        rill__free(cpus);
        return st;
    }
    cpu_device *d = rill__malloc_lines(sizeof *d);
    if (d != NULL)
        memset(d, 0, sizeof *d);
    cpu_worker *w = rill__calloc((size_t)workers, sizeof *w);
    _Atomic uint64_t *units = rill__calloc((size_t)(workers + 63) / 64, sizeof *units);
    if (d == NULL || w == NULL || units == NULL) {
        rill__free(d);
        rill__free(w);
        rill__free((void *)units);
        rill__free(cpus);
        return rill__fail(RILL_ERROR_NO_DEVICE, "the CPU device cannot start: out of memory");
    }
    /* The node of the device's processors, when they share one. */
    int node = rill__cpu_node(cpus[0]);
    for (int i = 1; i < num_cpus; i++)
        if (rill__cpu_node(cpus[i]) != node)
            node = -1;
    char model[96];
    rill__cpu_model_name(model, sizeof model);
    info->kind = RILL_DEVICE_CPU;
    if (num == 1) {
        snprintf(info->name, sizeof info->name, "CPU (%s)", model);
    } else {
        /* Which processors and node: what tells the devices apart. */
        char list[48];
        format_cpus(cpus, num_cpus, list, sizeof list);
        char where[112];
        if (node >= 0)
            snprintf(where, sizeof where, "processors %s, NUMA node %d", list, node);
        else
            snprintf(where, sizeof where, "processors %s", list);
        char full[256];
        snprintf(full, sizeof full, "CPU (%s; %s)", where, model);
        rill__fit(info->name, sizeof info->name, full);
    }
    info->compute_units = workers;
    info->memory_bytes = rill__cpu_memory_bytes(); /* shared by the CPU devices (cpu_memory.c) */
    info->least_priority = 0;
    info->greatest_priority = -(CPU_PRIORITY_LEVELS - 1);
    d->dev = dev;
    d->num_workers = workers;
    d->num_cpus = num_cpus;
    d->cpus = cpus;
    d->pinned = num > 1; /* one device: the system places the workers, unless pin_each */
    d->pin_each = probed_pin && num == 1 && workers == num_cpus;
    d->node = num > 1 ? node : -1;
    d->workers = w;
    d->free_units = units;
    rill__spinlock_init(&d->ready_lock, RILL__RANK_LAUNCH);
    rill__mutex_init_ranked(&d->launch_lock, RILL__RANK_LAUNCH);
    rill__device_base_of(dev)->state = d;
    rill__device_base_of(dev)->op_matmul_bias = true; /* op_kernels.c's matmul body */
    rill__cpu_workers_start(d);
    return RILL_OK;
}

static void cpu_device_shutdown(rill__device *dev) {
    cpu_device *d = cpu_device_of(dev);
    rill__cpu_workers_stop(d);
    rill__mutex_destroy(&d->launch_lock);
    rill__free(d->workers);
    rill__free((void *)d->free_units);
    rill__free(d->cpus);
    rill__free(d);
    rill__device_base_of(dev)->state = NULL;
}

static uint64_t cpu_timestamp_ns(rill__device *dev) {
    (void)dev;
    return rill__now_ns();
}

/* Kernels: what a launch carries (loaded) is the image whose fn the
 * device runs: the kernel's own, or, for a built-in op, one made here
 * with the op's CPU body (freed by cpu_kernel_unload). */
static rill_status cpu_kernel_load(rill__device *dev, const rill__kernel_image *k,
                                   const rill_kernel_image *image, void **loaded) {
    (void)dev;
    if (image != NULL) {
        *loaded = (void *)image; /* the kernel's: it outlives its launches */
        return RILL_OK;
    }
    rill_kernel_image *op = rill__malloc(sizeof *op);
    if (op == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory loading op '%s'", k->name);
    *op = (rill_kernel_image){.format = RILL_KERNEL_IMAGE_CPU_FN, .fn = rill__cpu_op_body(k->op)};
    *loaded = op;
    return RILL_OK;
}

static void cpu_kernel_unload(rill__device *dev, const rill__kernel_image *k, void *loaded) {
    (void)dev;
    if (k->op != RILL__OP_NONE)
        rill__free(loaded);
}

static const rill__image_format cpu_image_formats[] = {
    {RILL_KERNEL_IMAGE_CPU_FN, "a CPU function"},
    {0, NULL},
};

static rill_status cpu_stream_init(rill__stream *s) {
    cpu_stream *cs = cpu_stream_of(s);
    cs->self = s;
    rill__spinlock_init(&cs->lock, RILL__RANK_QUEUE);
    if (!rill__cpu_stream_init_queue(s))
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory creating a stream");
    return RILL_OK;
}

static void cpu_stream_fini(rill__stream *s) {
    rill__cpu_stream_free_queue(cpu_stream_of(s));
}

const rill__backend_ops rill__cpu_backend = {
    .name = "cpu",
    .kind = RILL_DEVICE_CPU,
    .mem_caps = RILL__MEMCAP_HOST,
    .image_formats = cpu_image_formats,
    .stream_state_bytes = sizeof(cpu_stream),
    /* a slot and its share of its block; kernels' large arguments are
     * counted apart (rill__cmd.extra_bytes) */
    .cmd_bytes = sizeof(cpu_block) / CPU_BLOCK_SLOTS,
    .probe = cpu_probe,
    .device_init = cpu_device_init,
    .device_shutdown = cpu_device_shutdown,
    .timestamp_ns = cpu_timestamp_ns,
    .stream_init = cpu_stream_init,
    .stream_fini = cpu_stream_fini,
    .submit = rill__cpu_submit,
    .host_help = rill__cpu_host_help,
    .kick = rill__cpu_kick,
    .kernel_load = cpu_kernel_load,
    .kernel_unload = cpu_kernel_unload,
    .graph_prepare = rill__cpu_graph_prepare,
    .graph_update = NULL, /* each launch's set is read as it runs (cpu_graph.c) */
    .graph_release = rill__cpu_graph_release,
    .mem_alloc = rill__cpu_mem_alloc,
    .mem_free = rill__cpu_mem_free,
    .mem_granule = (size_t)16 << 10, /* a few pages: a segment grows in place */
    .mem_commit =
        rill__cpu_mem_commit, /* counts against the budget; pages back it at first touch */
    .mem_decommit = rill__cpu_mem_decommit,
    .mem_describe = rill__cpu_mem_describe,
    .host_alloc = rill__cpu_host_alloc,
    .host_free = rill__cpu_host_free,
    .ipc_export = rill__cpu_ipc_export,
    .ipc_map = rill__cpu_ipc_map,
    .ipc_unmap = rill__cpu_ipc_unmap,
};
