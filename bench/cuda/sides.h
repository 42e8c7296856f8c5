/* SPDX-License-Identifier: MIT */
/* The two sides of bench_cuda_baseline and the rows they share. Every row
 * is one operation (cb_op) that each side measures its own way: the CUDA
 * runtime side (cuda_side.c) with cudart and cuBLAS, the rill side
 * (rill_side.c) through rill's public API on a rill device. The table and
 * the order of the rows live in bench_cuda_baseline.c; a side knows only
 * how to prepare, sample and release each operation. */
#ifndef RILL_BENCH_CUDA_SIDES_H
#define RILL_BENCH_CUDA_SIDES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cb_op {
    CB_LAUNCH,      /* us per empty-kernel launch call, the call alone */
    CB_LAUNCH_SYNC, /* us per launch + stream synchronize */
    CB_EVENT_HOP,   /* us per hop: kernel on A, record, B waits, and back */
    CB_GRAPH_CHAIN, /* ns per node: replay of a chain of empty kernels */
    CB_GRAPH_FAN,   /* ns per node: replay of root -> independent -> sink */
    CB_ALLOC_PAIR,  /* ns per stream-ordered allocate + free pair */
    CB_HOST_FUNC,   /* us per empty host function, enqueue + execute */
    CB_TWO_STREAMS, /* x: one stream's time for spin kernels over two streams' */
    CB_IDLE_LAUNCH, /* us per launch + synchronize after an idle pause */
    CB_MATMUL_F32,  /* TFLOP/s, square f32 matrix product */
    CB_MATMUL_F16,  /* TFLOP/s, square f16 matrix product, f32 accumulation */
    CB_NUM_OPS
} cb_op;

/* How much each sample does; the same for both sides. */
typedef struct cb_config {
    int launch_batches; /* CB_LAUNCH: batches of launch_batch launches per sample, */
    int launch_batch;   /* each batch timed alone, then synchronized untimed */
    int sync_rounds;    /* CB_LAUNCH_SYNC */
    int hops;           /* CB_EVENT_HOP, even */
    int graph_nodes;    /* CB_GRAPH_*: nodes per graph, >= 3 */
    int graph_runs;     /* replays per sample */
    int alloc_pairs;    /* CB_ALLOC_PAIR */
    int host_funcs;     /* CB_HOST_FUNC */
    int spin_kernels;   /* CB_TWO_STREAMS: kernels per sample, even */
    uint64_t spin_ns;   /* each kernel's length */
    unsigned idle_ms;   /* CB_IDLE_LAUNCH: the pause before each sample */
    size_t mm_f32_n;    /* CB_MATMUL_F32: n for n x n times n x n */
    size_t mm_f16_n;    /* CB_MATMUL_F16 */
    int mm_runs;        /* products per sample */
    int repeats;        /* samples per row (median of these) */
    int idle_repeats;   /* CB_IDLE_LAUNCH's samples */
} cb_config;

/* The sizes of CB_ALLOC_PAIR's pairs, used in turn (bench_memory m1's). */
extern const size_t cb_pair_sizes[];
extern const int cb_num_pair_sizes;

/* One side. Each function returns 0, or -1 after printing why on stderr. */
typedef struct cb_side {
    const char *name; /* "CUDA runtime", "rill" */
    void *state;      /* the side's own */
    /* Creates what op's samples need (graphs, buffers) and runs one
     * untimed warm-up sample; release undoes it, also after a prepare that
     * did not return 0. Returns 0, 1 when this side cannot measure op (why,
     * for its column, in note), or -1 after printing why it failed. */
    int (*prepare)(void *state, cb_op op, char *note, size_t note_size);
    /* Measures one sample of op into *value, in the row's unit. */
    int (*sample)(void *state, cb_op op, double *value);
    void (*release)(void *state, cb_op op);
} cb_side;

/* ---- the CUDA runtime side (cuda_side.c) ---- */

/* Whether the CUDA runtime sees a device; when not, why (a sentence with
 * the runtime's error name) goes to why. Makes no context. */
bool cuda_side_has_device(char *why, size_t why_size);
/* Opens device 0 for cfg (borrowed: outlives the side): streams, events,
 * the kernels, cuBLAS. Fills name and mps, and platform with the versions
 * of the runtime, the driver and cuBLAS. */
int cuda_side_open(cb_side *side, const cb_config *cfg, char *name, size_t name_size, int *mps,
                   char *platform, size_t platform_size);
/* Releases what open made; the side may be half-open. Returns 0 or -1. */
int cuda_side_close(cb_side *side);

/* ---- the rill side (rill_side.c) ---- */

/* Opens the rill device the row's rill column is measured on: the current
 * device when RILL_DEVICE is set (a CPU device too, which measures the rill
 * side's code without a GPU), else rill's first CUDA device. Returns 1 when
 * there is none, with the sentence for the column in note ("no CUDA device
 * in rill"); 0 when open, with the device's name; -1 on an error. */
int rill_side_open(cb_side *side, const cb_config *cfg, char *name, size_t name_size, char *note,
                   size_t note_size);
/* Releases what open made and shuts rill down. Returns 0 or -1. */
int rill_side_close(cb_side *side);

#endif
