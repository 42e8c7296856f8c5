/* SPDX-License-Identifier: MIT */
/* The rill command-line tool, a user of the public API only: rill info,
 * rill demo (demo.c), rill trace-summary, rill trace-svg and rill
 * trace-merge (docs/tools.md; usage() below). A failing rill call ends the
 * command with its rill_last_error() sentence and exit status 1; a usage
 * error exits with 2. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "demo.h"
#include "rill.h"
#include "trace_view.h"

/* Prints a failed rill call and returns true; false when st is RILL_OK. */
static bool failed(rill_status st, const char *call) {
    if (st == RILL_OK)
        return false;
    const char *why = rill_last_error();
    fprintf(stderr, "rill: %s failed: %s: %s\n", call, rill_status_name(st),
            why[0] ? why : rill_status_string(st));
    return true;
}

/* ---- rill info ---- */

static const char *kind_name(rill_device_kind kind) {
    switch (kind) {
    case RILL_DEVICE_CPU:
        return "cpu";
    case RILL_DEVICE_CUDA:
        return "cuda";
    }
    return "?";
}

/* Prints every device's memory summary (rill_mem_summary). */
static int print_memory(void) {
    int count = 0;
    if (failed(rill_device_count(&count), "rill_device_count"))
        return 1;
    for (int i = 0; i < count; i++) {
        rill_device *dev = NULL;
        printf("\n");
        if (failed(rill_device_get(i, &dev), "rill_device_get") ||
            failed(rill_mem_summary(dev, stdout), "rill_mem_summary"))
            return 1;
    }
    return 0;
}

static int cmd_info(void) {
    int count = 0;
    rill_device *current = NULL;
    if (failed(rill_device_count(&count), "rill_device_count"))
        return 1;
    /* The devices are listed even when RILL_DEVICE names none of them:
     * that is when people run this command. */
    rill_status current_st = rill_get_device(&current);
    char current_error[512];
    snprintf(current_error, sizeof(current_error), "%s", rill_last_error());
    rill_device_info *infos = calloc(count > 0 ? (size_t)count : 1, sizeof(*infos));
    rill_device **devs = calloc(count > 0 ? (size_t)count : 1, sizeof(*devs));
    int rc = 1;
    if (!infos || !devs) {
        fprintf(stderr, "rill: out of memory\n");
        goto out;
    }
    int name_width = (int)strlen("name");
    for (int i = 0; i < count; i++) {
        if (failed(rill_device_get(i, &devs[i]), "rill_device_get") ||
            failed(rill_device_get_info(devs[i], &infos[i]), "rill_device_get_info"))
            goto out;
        int len = (int)strnlen(infos[i].name, sizeof(infos[i].name));
        if (len > name_width)
            name_width = len;
    }
    printf("%d device%s\n", count, count == 1 ? "" : "s");
    printf("  %-7s  %-4s  %-*s  %13s  %10s  %s\n", "ordinal", "kind", name_width, "name",
           "compute units", "memory", "stream priorities (greatest..least)");
    for (int i = 0; i < count; i++) {
        const rill_device_info *in = &infos[i];
        printf("%c %-7d  %-4s  %-*.*s  %13d  %6.1f GiB  %d..%d\n", devs[i] == current ? '*' : ' ',
               in->ordinal, kind_name(in->kind), name_width, (int)sizeof(in->name), in->name,
               in->compute_units, (double)in->memory_bytes / (1024.0 * 1024.0 * 1024.0),
               in->greatest_priority, in->least_priority);
    }
    printf("* the current device (RILL_DEVICE=cpu:N|cuda:N chooses it); RILL_CPU_DEVICES=N splits\n"
           "  the processors into N CPU devices (default: one per NUMA node), RILL_CPU_WORKERS=N\n"
           "  sets each CPU device's compute units; lower priority numbers run first\n");
    /* A kind with no device: what its backend found instead. */
    int cuda_count = 0;
    char cuda_why[512];
    if (failed(rill_device_count_of_kind(RILL_DEVICE_CUDA, &cuda_count, cuda_why, sizeof cuda_why),
               "rill_device_count_of_kind"))
        goto out;
    if (cuda_count == 0)
        printf("  CUDA: %s\n", cuda_why);
    /* The CPU devices' memory is a limit rill sets, not the machine's. */
    for (int i = 0; i < count; i++) {
        if (infos[i].kind != RILL_DEVICE_CPU)
            continue;
        printf("  memory of the CPU devices: %.1f GiB, the most that all of them and host memory\n"
               "  may take together before an allocation fails with RILL_ERROR_OUT_OF_MEMORY;\n"
               "  by default 3/4 of physical memory or of the memory cgroup's limit, whichever\n"
               "  is smaller (rill info --memory says which); RILL_CPU_MEMORY=SIZE[K|M|G|T] or\n"
               "  RILL_CPU_MEMORY=PERCENT%% sets it, rill_mem_set_limit gives one device less\n",
               (double)infos[i].memory_bytes / (1024.0 * 1024.0 * 1024.0));
        break;
    }
    if (current_st != RILL_OK) {
        fprintf(stderr, "rill: rill_get_device failed: %s: %s\n", rill_status_name(current_st),
                current_error);
        goto out;
    }
    rc = 0;
out:
    free(devs);
    free(infos);
    return rc;
}

/* ---- main ---- */

static void usage(void) {
    fprintf(stderr,
            "usage: rill <command> [options]\n"
            "commands:\n"
            "  info [--memory]   list the devices: ordinal, kind, name, compute units, memory,\n"
            "                    stream priority range; --memory adds each device's memory\n"
            "                    summary (rill_mem_summary)\n"
            "  demo [--trace PATH | --no-trace] [--memory]\n"
            "                    a small-batch inference pipeline on the CPU device (decode and\n"
            "                    post-process as host functions, a small model of one-block ops)\n"
            "                    run eagerly on one stream, on several streams and as a captured\n"
            "                    graph replayed: the three times and the two speedups; writes a\n"
            "                    trace of one run of each to PATH (default rill-demo-trace.json);\n"
            "                    --memory prints the memory summary afterwards\n"
            "  trace-summary TRACE\n"
            "                    per-stream busy time, the overlap between streams, the\n"
            "                    longest idle gaps and the critical path of a trace written by\n"
            "                    rill_trace_start or RILL_TRACE=path\n"
            "  trace-svg TRACE OUT.svg\n"
            "                    draw the trace's timeline as an SVG picture\n"
            "  trace-merge OUT.json TRACE TRACE...\n"
            "                    one trace of several processes' traces (each its own tracks),\n"
            "                    where the arrows of interprocess events join the processes\n"
            "environment: RILL_DEVICE=cpu|cuda:N, RILL_CPU_DEVICES=N, RILL_CPU_WORKERS=N,\n"
            "  RILL_CPU_MEMORY=SIZE[K|M|G|T]|PERCENT%%, RILL_TRACE=path\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage();
        return 2;
    }
    int rc;
    bool memory = false;
    /* the trace views read a file: no device, no runtime */
    if (strcmp(argv[1], "trace-summary") == 0) {
        if (argc != 3) {
            usage();
            return 2;
        }
        return rill_tool_trace_summary(argv[2], stdout);
    }
    if (strcmp(argv[1], "trace-svg") == 0) {
        if (argc != 4) {
            usage();
            return 2;
        }
        return rill_tool_trace_svg(argv[2], argv[3]);
    }
    if (strcmp(argv[1], "trace-merge") == 0) {
        if (argc < 4) {
            usage();
            return 2;
        }
        return rill_tool_trace_merge(argv[2], argv + 3, argc - 3);
    }
    if (strcmp(argv[1], "info") == 0 &&
        (argc == 2 || (argc == 3 && strcmp(argv[2], "--memory") == 0))) {
        rc = cmd_info();
        if (rc == 0 && argc == 3)
            rc = print_memory();
    } else if (strcmp(argv[1], "demo") == 0) {
        const char *trace = "rill-demo-trace.json";
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc) {
                trace = argv[++i];
            } else if (strcmp(argv[i], "--no-trace") == 0) {
                trace = NULL;
            } else if (strcmp(argv[i], "--memory") == 0) {
                memory = true;
            } else {
                usage();
                return 2;
            }
        }
        rc = rill_tool_demo(trace);
        if (rc == 0 && memory)
            rc = print_memory();
    } else {
        usage();
        return 2;
    }
    if (failed(rill_shutdown(), "rill_shutdown"))
        rc = 1;
    return rc;
}
