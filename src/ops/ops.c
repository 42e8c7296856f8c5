/* SPDX-License-Identifier: MIT */
/* The built-in float32 ops: each public rill_op_*_f32 checks every argument
 * before it does anything, picks a grid from the size of the work and the
 * device's compute units (one block for tiny inputs, where launch cost
 * dominates; up to one block per compute unit for large ones), and launches
 * a CPU body from backend/cpu/op_kernels.c with its exact accesses, using
 * only the public API. Each access is checked against the allocation that
 * will hold it (rill__mem_check_access), as copies and fills are. The
 * kernels are created on first use and cached in atomic pointers: racing
 * creators compare-exchange, the loser destroys its copy;
 * rill__ops_shutdown, run by rill_shutdown, forgets them. This layer sits
 * above the core: it uses the public API and the backend's op bodies, and
 * the core knows nothing of it. */
#include "ops/ops.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/cpu/op_kernels.h"
#include "core/runtime.h"
#include "core/stream.h"
#include "mem/memory.h"
#include "util/status.h"

/* ---- cached kernels ---- */

typedef enum op_id {
    OP_FILL,
    OP_ADD,
    OP_MUL,
    OP_ADD_SCALAR,
    OP_SUM_PARTIAL,
    OP_SUM_FINAL,
    OP_MATMUL,
    OP_CONV2D,
    OP_RANDN,
    OP_CAST_F32_F16,
    OP_CAST_F16_F32,
    OP_FILL_F16,
    OP_ADD_F16,
    OP_MUL_F16,
    OP_ADD_SCALAR_F16,
    OP_SUM_PARTIAL_F16,
    OP_SUM_FINAL_F16,
    OP_MATMUL_F16,
    OP_CONV2D_F16,
    OP_COUNT
} op_id;

static const rill_kernel_desc op_descs[OP_COUNT] = {
    [OP_FILL] = {"fill_f32", rill__cpu_op_fill_f32, NULL, NULL},
    [OP_ADD] = {"add_f32", rill__cpu_op_add_f32, NULL, NULL},
    [OP_MUL] = {"mul_f32", rill__cpu_op_mul_f32, NULL, NULL},
    [OP_ADD_SCALAR] = {"add_scalar_f32", rill__cpu_op_add_scalar_f32, NULL, NULL},
    [OP_SUM_PARTIAL] = {"sum_f32_partial", rill__cpu_op_sum_partial_f32, NULL, NULL},
    [OP_SUM_FINAL] = {"sum_f32_final", rill__cpu_op_sum_final_f32, NULL, NULL},
    [OP_MATMUL] = {"matmul_f32", rill__cpu_op_matmul_f32, NULL, NULL},
    [OP_CONV2D] = {"conv2d_f32", rill__cpu_op_conv2d_f32, NULL, NULL},
    [OP_RANDN] = {"randn_f32", rill__cpu_op_randn_f32, NULL, NULL},
    [OP_CAST_F32_F16] = {"cast_f32_f16", rill__cpu_op_cast_f32_f16, NULL, NULL},
    [OP_CAST_F16_F32] = {"cast_f16_f32", rill__cpu_op_cast_f16_f32, NULL, NULL},
    [OP_FILL_F16] = {"fill_f16", rill__cpu_op_fill_f16, NULL, NULL},
    [OP_ADD_F16] = {"add_f16", rill__cpu_op_add_f16, NULL, NULL},
    [OP_MUL_F16] = {"mul_f16", rill__cpu_op_mul_f16, NULL, NULL},
    [OP_ADD_SCALAR_F16] = {"add_scalar_f16", rill__cpu_op_add_scalar_f16, NULL, NULL},
    [OP_SUM_PARTIAL_F16] = {"sum_f16_partial", rill__cpu_op_sum_partial_f16, NULL, NULL},
    [OP_SUM_FINAL_F16] = {"sum_f16_final", rill__cpu_op_sum_final_f16, NULL, NULL},
    [OP_MATMUL_F16] = {"matmul_f16", rill__cpu_op_matmul_f16, NULL, NULL},
    [OP_CONV2D_F16] = {"conv2d_f16", rill__cpu_op_conv2d_f16, NULL, NULL},
};

/* NULL until first use; then owned here until rill__ops_shutdown. */
static _Atomic(rill_kernel *) op_kernels[OP_COUNT];

static rill_status get_kernel(op_id id, rill_kernel **out) {
    /* acquire: pairs with the release of the compare-exchange below, so
     * the kernel's fields are visible to a thread that sees the pointer. */
    rill_kernel *k = atomic_load_explicit(&op_kernels[id], memory_order_acquire);
    if (k != NULL) {
        *out = k;
        return RILL_OK;
    }
    rill_kernel *mine;
    rill_status st = rill_kernel_create(&op_descs[id], &mine);
    if (st != RILL_OK)
        return st;
    rill_kernel *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(&op_kernels[id], &expected, mine,
                                                memory_order_acq_rel, memory_order_acquire)) {
        rill__on_shutdown(rill__ops_shutdown);
        *out = mine;
        return RILL_OK;
    }
    /* Another thread published its kernel first: use that one. */
    rill_kernel_destroy(mine);
    *out = expected;
    return RILL_OK;
}

void rill__ops_shutdown(void) {
    for (int i = 0; i < OP_COUNT; i++) {
        rill_kernel *k = atomic_exchange(&op_kernels[i], NULL);
        if (k != NULL)
            rill_kernel_destroy(k);
    }
}

/* ---- argument checks ---- */

/* *bytes = elem * d0 * d1 * d2 * d3 (the size of that many elements of
 * elem bytes); false when the product does not fit in a size_t. */
static bool elem_bytes(size_t *bytes, size_t elem, size_t d0, size_t d1, size_t d2, size_t d3) {
    size_t dims[4] = {d0, d1, d2, d3};
    size_t total = elem;
    for (int i = 0; i < 4; i++) {
        if (dims[i] != 0 && total > SIZE_MAX / dims[i])
            return false;
        total *= dims[i];
    }
    *bytes = total;
    return true;
}

static bool float_bytes(size_t *bytes, size_t d0, size_t d1, size_t d2, size_t d3) {
    return elem_bytes(bytes, sizeof(float), d0, d1, d2, d3);
}

static bool overlaps(const void *p, size_t p_bytes, const void *q, size_t q_bytes) {
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a < b + q_bytes && b < a + p_bytes;
}

/* Element-wise ops may write in place (out == in) but not into a shifted
 * copy of an input, which blocks running side by side would race on. */
static rill_status check_elementwise_out(const char *fn, const float *out, const float *in,
                                         const char *in_name, size_t bytes) {
    if (out != in && overlaps(out, bytes, in, bytes))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: out overlaps %s without being equal to it; pass out == %s to "
                          "compute in place, or a buffer that does not overlap it",
                          fn, in_name, in_name);
    return RILL_OK;
}

/* Checks the elements argument shared by the element-wise ops and sum. */
static rill_status check_count(const char *fn, size_t n, size_t *bytes) {
    if (n == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: n is 0; pass the number of floats (at least 1)", fn);
    if (!float_bytes(bytes, n, 1, 1, 1))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: n is %zu, and that many floats do not fit in memory; pass the "
                          "number of floats of the buffers",
                          fn, n);
    return RILL_OK;
}

/* Checks that the access the op will declare for argument `name`, bytes
 * from p, stays inside the allocation that holds p (see
 * rill__mem_check_access; ordinary host memory passes): an op trusts its
 * sizes no more than rill_memset_async does. `shape` names the product
 * that gave bytes ("n floats"). */
static rill_status check_fits(const char *fn, const void *p, const char *name, const char *shape,
                              size_t bytes) {
    rill__device *dev;
    return rill__mem_check_access(fn, name, shape, p, bytes, &dev);
}

static rill_status check_pointer(const char *fn, const void *p, const char *name,
                                 const char *what) {
    if (p == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %s is NULL; pass %s", fn, name, what);
    return RILL_OK;
}

/* ---- grids and launches ---- */

/* Below this many elements per block, launching another block costs more
 * than the work it takes over. */
#define ELEMENTS_PER_BLOCK_MIN ((size_t)1 << 15)
/* Below this many multiply-adds per block (about 10 us of sgemm on one
 * core), a matmul or conv2d uses fewer blocks. */
#define MACS_PER_BLOCK_MIN ((size_t)1 << 18)
/* Largest im2col scratch slot of a conv2d block: bands get fewer rows
 * rather than a bigger slot. */
#define CONV_SLOT_BYTES_MAX ((size_t)4 << 20)

/* The compute units of s's device, which must be a CPU device: the built-in
 * ops have CPU bodies only. Read from the stream's device directly, as
 * rill_stream_get_device and rill_device_get_info would give them, without
 * copying the device's whole description for every op. */
static rill_status stream_compute_units(const char *fn, rill_stream *s, size_t *units) {
    rill__stream *stream;
    rill_status st = rill__stream_resolve(s, fn, &stream);
    if (st != RILL_OK)
        return st;
    const rill_device_info *info = &stream->q.dev->base.info;
    if (info->kind != RILL_DEVICE_CPU)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: the stream belongs to device '%s', and the built-in ops run only "
                          "on CPU devices; pass a stream of the CPU device",
                          fn, info->name);
    *units = info->compute_units > 0 ? (size_t)info->compute_units : 1;
    return RILL_OK;
}

/* Blocks for `work` units when each block should get at least `min` of
 * them: between 1 and `units`. */
static size_t blocks_for(size_t work, size_t min, size_t units) {
    size_t blocks = work / min;
    if (blocks > units)
        blocks = units;
    return blocks > 0 ? blocks : 1;
}

typedef struct access_list {
    rill_access items[4];
    size_t count;
} access_list;

/* Adds an access; a second access to the same pointer merges into the
 * first (read + write = read-write), so an in-place op declares its buffer
 * once. */
static void access_add(access_list *list, const void *ptr, size_t bytes, rill_access_mode mode) {
    for (size_t i = 0; i < list->count; i++) {
        rill_access *a = &list->items[i];
        if (a->ptr == ptr) {
            a->mode = (rill_access_mode)(a->mode | mode);
            if (bytes > a->bytes)
                a->bytes = bytes;
            return;
        }
    }
    list->items[list->count++] = (rill_access){ptr, bytes, mode};
}

static rill_status launch(rill_stream *s, op_id id, size_t blocks, const void *args,
                          size_t args_size, const access_list *accesses) {
    rill_kernel *kernel;
    rill_status st = get_kernel(id, &kernel);
    if (st != RILL_OK)
        return st;
    rill_launch l = {
        .grid = {(uint32_t)blocks, 1, 1},
        .block = {1, 1, 1},
        .args = args,
        .args_size = args_size,
        .accesses = accesses->items,
        .num_accesses = accesses->count,
    };
    return rill_launch_kernel(s, kernel, &l);
}

/* An element-wise op over n elements of bytes in all: reads a (and b, when
 * not NULL), writes out, in blocks of at least ELEMENTS_PER_BLOCK_MIN
 * elements over the stream's units. */
static rill_status launch_elementwise(rill_stream *s, op_id id, void *out, const void *a,
                                      const void *b, size_t bytes, size_t n, size_t units,
                                      const void *args, size_t args_size) {
    access_list acc = {.count = 0};
    access_add(&acc, a, bytes, RILL_READ);
    if (b != NULL)
        access_add(&acc, b, bytes, RILL_READ);
    access_add(&acc, out, bytes, RILL_WRITE);
    return launch(s, id, blocks_for(n, ELEMENTS_PER_BLOCK_MIN, units), args, args_size, &acc);
}

/* ---- element-wise ops ---- */

rill_status rill_op_fill_f32(rill_stream *s, float *x, float value, size_t n) {
    static const char fn[] = "rill_op_fill_f32";
    size_t bytes = 0, units = 0;
    rill_status st;
    if ((st = check_pointer(fn, x, "x", "device memory of n floats")) != RILL_OK ||
        (st = check_count(fn, n, &bytes)) != RILL_OK ||
        (st = check_fits(fn, x, "x", "n floats", bytes)) != RILL_OK ||
        (st = stream_compute_units(fn, s, &units)) != RILL_OK)
        return st;
    rill__op_fill_args args = {x, value, n};
    access_list acc = {.count = 0};
    access_add(&acc, x, bytes, RILL_WRITE);
    return launch(s, OP_FILL, blocks_for(n, ELEMENTS_PER_BLOCK_MIN, units), &args, sizeof args,
                  &acc);
}

rill_status rill_op_add_f32(rill_stream *s, float *out, const float *a, const float *b, float alpha,
                            size_t n) {
    static const char fn[] = "rill_op_add_f32";
    size_t bytes = 0, units = 0;
    rill_status st;
    if ((st = check_pointer(fn, out, "out", "device memory for n floats")) != RILL_OK ||
        (st = check_pointer(fn, a, "a", "device memory of n floats")) != RILL_OK ||
        (st = check_pointer(fn, b, "b", "device memory of n floats")) != RILL_OK ||
        (st = check_count(fn, n, &bytes)) != RILL_OK ||
        (st = check_fits(fn, a, "a", "n floats", bytes)) != RILL_OK ||
        (st = check_fits(fn, b, "b", "n floats", bytes)) != RILL_OK ||
        (st = check_fits(fn, out, "out", "n floats", bytes)) != RILL_OK ||
        (st = check_elementwise_out(fn, out, a, "a", bytes)) != RILL_OK ||
        (st = check_elementwise_out(fn, out, b, "b", bytes)) != RILL_OK ||
        (st = stream_compute_units(fn, s, &units)) != RILL_OK)
        return st;
    rill__op_add_args args = {out, a, b, alpha, n};
    return launch_elementwise(s, OP_ADD, out, a, b, bytes, n, units, &args, sizeof args);
}

rill_status rill_op_mul_f32(rill_stream *s, float *out, const float *a, const float *b, size_t n) {
    static const char fn[] = "rill_op_mul_f32";
    size_t bytes = 0, units = 0;
    rill_status st;
    if ((st = check_pointer(fn, out, "out", "device memory for n floats")) != RILL_OK ||
        (st = check_pointer(fn, a, "a", "device memory of n floats")) != RILL_OK ||
        (st = check_pointer(fn, b, "b", "device memory of n floats")) != RILL_OK ||
        (st = check_count(fn, n, &bytes)) != RILL_OK ||
        (st = check_fits(fn, a, "a", "n floats", bytes)) != RILL_OK ||
        (st = check_fits(fn, b, "b", "n floats", bytes)) != RILL_OK ||
        (st = check_fits(fn, out, "out", "n floats", bytes)) != RILL_OK ||
        (st = check_elementwise_out(fn, out, a, "a", bytes)) != RILL_OK ||
        (st = check_elementwise_out(fn, out, b, "b", bytes)) != RILL_OK ||
        (st = stream_compute_units(fn, s, &units)) != RILL_OK)
        return st;
    rill__op_mul_args args = {out, a, b, n};
    return launch_elementwise(s, OP_MUL, out, a, b, bytes, n, units, &args, sizeof args);
}

rill_status rill_op_add_scalar_f32(rill_stream *s, float *out, const float *a, float value,
                                   size_t n) {
    static const char fn[] = "rill_op_add_scalar_f32";
    size_t bytes = 0, units = 0;
    rill_status st;
    if ((st = check_pointer(fn, out, "out", "device memory for n floats")) != RILL_OK ||
        (st = check_pointer(fn, a, "a", "device memory of n floats")) != RILL_OK ||
        (st = check_count(fn, n, &bytes)) != RILL_OK ||
        (st = check_fits(fn, a, "a", "n floats", bytes)) != RILL_OK ||
        (st = check_fits(fn, out, "out", "n floats", bytes)) != RILL_OK ||
        (st = check_elementwise_out(fn, out, a, "a", bytes)) != RILL_OK ||
        (st = stream_compute_units(fn, s, &units)) != RILL_OK)
        return st;
    rill__op_add_scalar_args args = {out, a, value, n};
    return launch_elementwise(s, OP_ADD_SCALAR, out, a, NULL, bytes, n, units, &args, sizeof args);
}

/* ---- random normal fill ---- */

rill_status rill_op_randn_f32(rill_stream *s, float *x, size_t n, float mean, float std,
                              uint64_t seed) {
    static const char fn[] = "rill_op_randn_f32";
    size_t bytes = 0, units = 0;
    rill_status st;
    if ((st = check_pointer(fn, x, "x", "device memory of n floats")) != RILL_OK ||
        (st = check_count(fn, n, &bytes)) != RILL_OK)
        return st;
    if (!isfinite(mean))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: mean is %g; pass a finite mean", fn,
                          (double)mean);
    if (!isfinite(std) || std < 0.0f)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: std is %g; pass a finite standard deviation, 0 or more", fn,
                          (double)std);
    if ((st = check_fits(fn, x, "x", "n floats", bytes)) != RILL_OK ||
        (st = stream_compute_units(fn, s, &units)) != RILL_OK)
        return st;
    rill__op_randn_args args = {x, n, mean, std, seed};
    access_list acc = {.count = 0};
    access_add(&acc, x, bytes, RILL_WRITE);
    /* About 20 times the work of a fill per element: blocks for fewer. */
    return launch(s, OP_RANDN, blocks_for(n, ELEMENTS_PER_BLOCK_MIN / 16, units), &args,
                  sizeof args, &acc);
}

/* ---- float16 conversions ---- */

static rill_status check_disjoint(const char *fn, const void *out, size_t out_bytes,
                                  const char *out_name, const void *in, size_t in_bytes,
                                  const char *in_name);

static rill_status launch_cast(const char *fn, op_id id, rill_stream *s, void *out, size_t out_size,
                               const void *in, size_t in_size, size_t n) {
    size_t out_bytes = 0, in_bytes = 0, units = 0;
    rill_status st;
    if ((st = check_pointer(fn, out, "out", "device memory for n elements")) != RILL_OK ||
        (st = check_pointer(fn, in, "in", "device memory of n elements")) != RILL_OK ||
        (st = check_count(fn, n, &in_bytes)) != RILL_OK)
        return st;
    /* check_count sized floats; the halves' side is half of that. */
    out_bytes = out_size == sizeof(float) ? in_bytes : in_bytes / 2;
    in_bytes = in_size == sizeof(float) ? in_bytes : in_bytes / 2;
    if ((st = check_fits(fn, in, "in", "n elements", in_bytes)) != RILL_OK ||
        (st = check_fits(fn, out, "out", "n elements", out_bytes)) != RILL_OK ||
        (st = check_disjoint(fn, out, out_bytes, "out", in, in_bytes, "in")) != RILL_OK ||
        (st = stream_compute_units(fn, s, &units)) != RILL_OK)
        return st;
    rill__op_cast_args args = {out, in, n};
    access_list acc = {.count = 0};
    access_add(&acc, in, in_bytes, RILL_READ);
    access_add(&acc, out, out_bytes, RILL_WRITE);
    return launch(s, id, blocks_for(n, ELEMENTS_PER_BLOCK_MIN, units), &args, sizeof args, &acc);
}

rill_status rill_op_cast_f32_f16(rill_stream *s, rill_half *out, const float *in, size_t n) {
    return launch_cast("rill_op_cast_f32_f16", OP_CAST_F32_F16, s, out, sizeof(rill_half), in,
                       sizeof(float), n);
}

rill_status rill_op_cast_f16_f32(rill_stream *s, float *out, const rill_half *in, size_t n) {
    return launch_cast("rill_op_cast_f16_f32", OP_CAST_F16_F32, s, out, sizeof(float), in,
                       sizeof(rill_half), n);
}

/* ---- float16 element-wise ops ---- */

/* The checks of an element-wise op on halves: out, a and b (b may be
 * absent: NULL with b_name NULL) are n halves each, in their allocations,
 * and out equals an input or overlaps none. *bytes is 2n. */
static rill_status check_f16(const char *fn, rill_stream *s, const void *out, const void *a,
                             const char *a_name, const void *b, const char *b_name, size_t n,
                             size_t *bytes, size_t *units) {
    size_t float_bytes_n = 0;
    rill_status st;
    if ((st = check_pointer(fn, out, a_name == NULL ? "x" : "out", "device memory for n halves")) !=
            RILL_OK ||
        (a_name != NULL &&
         (st = check_pointer(fn, a, a_name, "device memory of n halves")) != RILL_OK) ||
        (b_name != NULL &&
         (st = check_pointer(fn, b, b_name, "device memory of n halves")) != RILL_OK) ||
        (st = check_count(fn, n, &float_bytes_n)) != RILL_OK)
        return st;
    *bytes = float_bytes_n / 2;
    if ((a_name != NULL && (st = check_fits(fn, a, a_name, "n halves", *bytes)) != RILL_OK) ||
        (b_name != NULL && (st = check_fits(fn, b, b_name, "n halves", *bytes)) != RILL_OK) ||
        (st = check_fits(fn, out, a_name == NULL ? "x" : "out", "n halves", *bytes)) != RILL_OK ||
        (a_name != NULL && (st = check_elementwise_out(fn, out, a, a_name, *bytes)) != RILL_OK) ||
        (b_name != NULL && (st = check_elementwise_out(fn, out, b, b_name, *bytes)) != RILL_OK) ||
        (st = stream_compute_units(fn, s, units)) != RILL_OK)
        return st;
    return RILL_OK;
}

rill_status rill_op_fill_f16(rill_stream *s, rill_half *x, float value, size_t n) {
    static const char fn[] = "rill_op_fill_f16";
    size_t bytes = 0, units = 0;
    rill_status st = check_f16(fn, s, x, NULL, NULL, NULL, NULL, n, &bytes, &units);
    if (st != RILL_OK)
        return st;
    rill__op_f16_args args = {x, NULL, NULL, value, n};
    access_list acc = {.count = 0};
    access_add(&acc, x, bytes, RILL_WRITE);
    return launch(s, OP_FILL_F16, blocks_for(n, ELEMENTS_PER_BLOCK_MIN, units), &args, sizeof args,
                  &acc);
}

rill_status rill_op_add_f16(rill_stream *s, rill_half *out, const rill_half *a, const rill_half *b,
                            float alpha, size_t n) {
    static const char fn[] = "rill_op_add_f16";
    size_t bytes = 0, units = 0;
    rill_status st = check_f16(fn, s, out, a, "a", b, "b", n, &bytes, &units);
    if (st != RILL_OK)
        return st;
    rill__op_f16_args args = {out, a, b, alpha, n};
    return launch_elementwise(s, OP_ADD_F16, out, a, b, bytes, n, units, &args, sizeof args);
}

rill_status rill_op_mul_f16(rill_stream *s, rill_half *out, const rill_half *a, const rill_half *b,
                            size_t n) {
    static const char fn[] = "rill_op_mul_f16";
    size_t bytes = 0, units = 0;
    rill_status st = check_f16(fn, s, out, a, "a", b, "b", n, &bytes, &units);
    if (st != RILL_OK)
        return st;
    rill__op_f16_args args = {out, a, b, 0.0f, n};
    return launch_elementwise(s, OP_MUL_F16, out, a, b, bytes, n, units, &args, sizeof args);
}

rill_status rill_op_add_scalar_f16(rill_stream *s, rill_half *out, const rill_half *a, float value,
                                   size_t n) {
    static const char fn[] = "rill_op_add_scalar_f16";
    size_t bytes = 0, units = 0;
    rill_status st = check_f16(fn, s, out, a, "a", NULL, NULL, n, &bytes, &units);
    if (st != RILL_OK)
        return st;
    rill__op_f16_args args = {out, a, NULL, value, n};
    return launch_elementwise(s, OP_ADD_SCALAR_F16, out, a, NULL, bytes, n, units, &args,
                              sizeof args);
}

/* ---- sum, matmul and conv2d on floats or halves ---- */

/* The f32 op and its f16 twin check the same things; their messages name
 * the element type the caller passed. */
#define ELEMS(half, text) ((half) ? text " halves" : text " floats")

/* ---- sum ---- */

/* One block sums everything and writes out[0] directly; several blocks
 * write double partial sums into a stream-ordered scratch buffer that a
 * one-block launch then adds up in block order. */
static rill_status sum(const char *fn, rill_stream *s, bool half, void *out, const void *a,
                       size_t n) {
    size_t elem = half ? sizeof(rill_half) : sizeof(float);
    size_t bytes = 0, units = 0;
    rill_status st;
    if ((st = check_pointer(fn, out, "out",
                            half ? "device memory for one half" : "device memory for one float")) !=
            RILL_OK ||
        (st = check_pointer(fn, a, "a", ELEMS(half, "device memory of n"))) != RILL_OK ||
        (st = check_count(fn, n, &bytes)) != RILL_OK)
        return st;
    bytes = bytes / sizeof(float) * elem;
    if ((st = check_fits(fn, a, "a", ELEMS(half, "n"), bytes)) != RILL_OK ||
        (st = check_fits(fn, out, "out", half ? "one half" : "one float", elem)) != RILL_OK ||
        (st = stream_compute_units(fn, s, &units)) != RILL_OK)
        return st;
    size_t blocks = blocks_for(n, ELEMENTS_PER_BLOCK_MIN, units);
    access_list acc = {.count = 0};
    access_add(&acc, a, bytes, RILL_READ);
    if (blocks == 1) {
        access_add(&acc, out, elem, RILL_WRITE);
        if (half) {
            rill__op_sum_f16_args args = {a, n, NULL, out};
            return launch(s, OP_SUM_PARTIAL_F16, 1, &args, sizeof args, &acc);
        }
        rill__op_sum_partial_args args = {a, n, NULL, out};
        return launch(s, OP_SUM_PARTIAL, 1, &args, sizeof args, &acc);
    }

    double *partials;
    size_t partial_bytes = blocks * sizeof(double);
    if ((st = rill_malloc_async(partial_bytes, s, (void **)&partials)) != RILL_OK)
        return st;
    access_add(&acc, partials, partial_bytes, RILL_WRITE);
    if (half) {
        rill__op_sum_f16_args pargs = {a, n, partials, NULL};
        st = launch(s, OP_SUM_PARTIAL_F16, blocks, &pargs, sizeof pargs, &acc);
    } else {
        rill__op_sum_partial_args pargs = {a, n, partials, NULL};
        st = launch(s, OP_SUM_PARTIAL, blocks, &pargs, sizeof pargs, &acc);
    }
    if (st == RILL_OK) {
        access_list facc = {.count = 0};
        access_add(&facc, partials, partial_bytes, RILL_READ);
        access_add(&facc, out, elem, RILL_WRITE);
        if (half) {
            rill__op_sum_final_f16_args fargs = {partials, blocks, out};
            st = launch(s, OP_SUM_FINAL_F16, 1, &fargs, sizeof fargs, &facc);
        } else {
            rill__op_sum_final_args fargs = {partials, blocks, out};
            st = launch(s, OP_SUM_FINAL, 1, &fargs, sizeof fargs, &facc);
        }
    }
    rill_status free_st = rill_free_async(partials, s);
    return st != RILL_OK ? st : free_st;
}

rill_status rill_op_sum_f32(rill_stream *s, float *out, const float *a, size_t n) {
    return sum("rill_op_sum_f32", s, false, out, a, n);
}

rill_status rill_op_sum_f16(rill_stream *s, rill_half *out, const rill_half *a, size_t n) {
    return sum("rill_op_sum_f16", s, true, out, a, n);
}

/* ---- matmul ---- */

static rill_status check_dim(const char *fn, size_t value, const char *name, const char *what) {
    if (value == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %s is 0; pass %s (at least 1)", fn,
                          name, what);
    if (value > RILL__OP_MAX_DIM)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: %s is %zu, above %zu, the largest dimension the CPU sgemm "
                          "takes; split the op into smaller ones",
                          fn, name, value, RILL__OP_MAX_DIM);
    return RILL_OK;
}

/* shape names the product and its elements ("m*k floats"). */
static rill_status check_size(const char *fn, bool fits, const char *name, const char *shape) {
    if (!fits)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s has %s, more than fit in memory; pass smaller dimensions", fn,
                          name, shape);
    return RILL_OK;
}

static rill_status check_disjoint(const char *fn, const void *out, size_t out_bytes,
                                  const char *out_name, const void *in, size_t in_bytes,
                                  const char *in_name) {
    if (overlaps(out, out_bytes, in, in_bytes))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s overlaps %s; pass an output buffer separate from the inputs", fn,
                          out_name, in_name);
    return RILL_OK;
}

/* Tiles: row panels of at least 16 rows (OpenBLAS's register blocking)
 * while m allows, then column panels of at least 64 columns to reach the
 * block count when m is small. */
static void matmul_tiles(size_t m, size_t k, size_t n, size_t units, size_t *row_panels,
                         size_t *col_panels) {
    size_t macs = m * k;
    macs = n != 0 && macs > SIZE_MAX / n ? SIZE_MAX : macs * n;
    size_t blocks = blocks_for(macs, MACS_PER_BLOCK_MIN, units);
    size_t rp = m / 16 > 0 ? m / 16 : 1;
    *row_panels = rp < blocks ? rp : blocks;
    size_t cp = n / 64 > 0 ? n / 64 : 1;
    size_t want = blocks / *row_panels;
    *col_panels = cp < want ? cp : want;
}

/* The checks of matmul on floats or halves; bytes[] gets the sizes of a,
 * b and c, and the accesses a read, b read, c write. */
static rill_status check_matmul(const char *fn, rill_stream *s, bool half, const void *c,
                                const void *a, const void *b, size_t m, size_t k, size_t n,
                                access_list *acc, size_t *units) {
    size_t elem = half ? sizeof(rill_half) : sizeof(float);
    size_t a_bytes = 0, b_bytes = 0, c_bytes = 0;
    rill_status st;
    if ((st = check_pointer(fn, c, "c", ELEMS(half, "device memory for m*n"))) != RILL_OK ||
        (st = check_pointer(fn, a, "a", ELEMS(half, "device memory of m*k"))) != RILL_OK ||
        (st = check_pointer(fn, b, "b", ELEMS(half, "device memory of k*n"))) != RILL_OK ||
        (st = check_dim(fn, m, "m", "the number of rows of a and c")) != RILL_OK ||
        (st = check_dim(fn, k, "k", "the number of columns of a and rows of b")) != RILL_OK ||
        (st = check_dim(fn, n, "n", "the number of columns of b and c")) != RILL_OK ||
        (st = check_size(fn, elem_bytes(&a_bytes, elem, m, k, 1, 1), "a", ELEMS(half, "m*k"))) !=
            RILL_OK ||
        (st = check_size(fn, elem_bytes(&b_bytes, elem, k, n, 1, 1), "b", ELEMS(half, "k*n"))) !=
            RILL_OK ||
        (st = check_size(fn, elem_bytes(&c_bytes, elem, m, n, 1, 1), "c", ELEMS(half, "m*n"))) !=
            RILL_OK ||
        (st = check_fits(fn, a, "a", ELEMS(half, "m*k"), a_bytes)) != RILL_OK ||
        (st = check_fits(fn, b, "b", ELEMS(half, "k*n"), b_bytes)) != RILL_OK ||
        (st = check_fits(fn, c, "c", ELEMS(half, "m*n"), c_bytes)) != RILL_OK ||
        (st = check_disjoint(fn, c, c_bytes, "c", a, a_bytes, "a")) != RILL_OK ||
        (st = check_disjoint(fn, c, c_bytes, "c", b, b_bytes, "b")) != RILL_OK ||
        (st = stream_compute_units(fn, s, units)) != RILL_OK)
        return st;
    access_add(acc, a, a_bytes, RILL_READ);
    access_add(acc, b, b_bytes, RILL_READ);
    access_add(acc, c, c_bytes, RILL_WRITE);
    return RILL_OK;
}

rill_status rill_op_matmul_f32(rill_stream *s, float *c, const float *a, const float *b, size_t m,
                               size_t k, size_t n) {
    size_t units = 0;
    access_list acc = {.count = 0};
    rill_status st = check_matmul("rill_op_matmul_f32", s, false, c, a, b, m, k, n, &acc, &units);
    if (st != RILL_OK)
        return st;
    rill__op_matmul_args args = {c, a, b, m, k, n, 1, 1};
    matmul_tiles(m, k, n, units, &args.row_panels, &args.col_panels);
    return launch(s, OP_MATMUL, args.row_panels * args.col_panels, &args, sizeof args, &acc);
}

/* The tiles and grid of the f32 matmul; each block converts its chunks of
 * a and b to floats in its slot of a stream-ordered scratch buffer. */
rill_status rill_op_matmul_f16(rill_stream *s, rill_half *c, const rill_half *a, const rill_half *b,
                               size_t m, size_t k, size_t n) {
    size_t units = 0;
    access_list acc = {.count = 0};
    rill_status st = check_matmul("rill_op_matmul_f16", s, true, c, a, b, m, k, n, &acc, &units);
    if (st != RILL_OK)
        return st;
    rill__op_matmul_f16_args args = {c, a, b, NULL, m, k, n, 1, 1};
    matmul_tiles(m, k, n, units, &args.row_panels, &args.col_panels);
    size_t blocks = args.row_panels * args.col_panels;
    size_t scratch_bytes = blocks * rill__op_matmul_f16_slot_floats(&args) * sizeof(float);
    if ((st = rill_malloc_async(scratch_bytes, s, (void **)&args.scratch)) != RILL_OK)
        return st;
    access_add(&acc, args.scratch, scratch_bytes, RILL_READ_WRITE);
    st = launch(s, OP_MATMUL_F16, blocks, &args, sizeof args, &acc);
    rill_status free_st = rill_free_async(args.scratch, s);
    return st != RILL_OK ? st : free_st;
}

/* ---- conv2d ---- */

/* Work items are (image, band of output rows). Large inputs get about four
 * items per block for balance; bands shrink further when one band's slot
 * (slot_floats_per_row floats per output row) would exceed
 * CONV_SLOT_BYTES_MAX. Sets p->band_rows and returns the number of
 * blocks. */
static size_t conv_plan(rill__op_conv2d_args *p, size_t units, size_t slot_floats_per_row) {
    size_t oh = p->h - p->r + 1;
    size_t crs = p->c * p->r * p->s;
    size_t macs = p->n * p->k;
    size_t factors[3] = {crs, oh, p->w - p->s + 1};
    for (int i = 0; i < 3; i++)
        macs = macs > SIZE_MAX / factors[i] ? SIZE_MAX : macs * factors[i];
    size_t blocks = blocks_for(macs, MACS_PER_BLOCK_MIN, units);

    size_t bands = blocks > 1 ? (4 * blocks + p->n - 1) / p->n : 1;
    if (bands > oh)
        bands = oh;
    size_t band_rows = (oh + bands - 1) / bands;
    size_t row_bytes = slot_floats_per_row * sizeof(float);
    if (band_rows * row_bytes > CONV_SLOT_BYTES_MAX)
        band_rows = CONV_SLOT_BYTES_MAX / row_bytes > 0 ? CONV_SLOT_BYTES_MAX / row_bytes : 1;
    p->band_rows = band_rows;

    size_t items = p->n * rill__op_conv2d_bands(p);
    return blocks < items ? blocks : items;
}

/* The checks of conv2d on floats or halves; adds the accesses in read,
 * weight read, out write, and sets *w_bytes to the weight's size. */
static rill_status check_conv2d(const char *fn, rill_stream *s, bool half, const void *out,
                                const void *in, const void *weight, const rill__op_conv2d_args *g,
                                access_list *acc, size_t *w_bytes, size_t *units) {
    size_t elem = half ? sizeof(rill_half) : sizeof(float);
    size_t in_bytes = 0, out_bytes = 0;
    rill_status st;
    if ((st = check_pointer(fn, out, "out",
                            ELEMS(half, "device memory for n*k*(h-r+1)*(w-sz+1)"))) != RILL_OK ||
        (st = check_pointer(fn, in, "in", ELEMS(half, "device memory of n*c*h*w"))) != RILL_OK ||
        (st = check_pointer(fn, weight, "weight", ELEMS(half, "device memory of k*c*r*sz"))) !=
            RILL_OK ||
        (st = check_dim(fn, g->n, "n", "the number of images")) != RILL_OK ||
        (st = check_dim(fn, g->c, "c", "the number of input channels")) != RILL_OK ||
        (st = check_dim(fn, g->h, "h", "the input height")) != RILL_OK ||
        (st = check_dim(fn, g->w, "w", "the input width")) != RILL_OK ||
        (st = check_dim(fn, g->k, "k", "the number of filters (output channels)")) != RILL_OK ||
        (st = check_dim(fn, g->r, "r", "the filter height")) != RILL_OK ||
        (st = check_dim(fn, g->s, "sz", "the filter width")) != RILL_OK)
        return st;
    if (g->r > g->h)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the filter height r (%zu) exceeds the input height h (%zu); pass "
                          "a filter no taller than the input",
                          fn, g->r, g->h);
    if (g->s > g->w)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the filter width sz (%zu) exceeds the input width w (%zu); pass "
                          "a filter no wider than the input",
                          fn, g->s, g->w);
    size_t oh = g->h - g->r + 1, ow = g->w - g->s + 1;
    if ((st = check_size(fn, elem_bytes(&in_bytes, elem, g->n, g->c, g->h, g->w), "in",
                         ELEMS(half, "n*c*h*w"))) != RILL_OK ||
        (st = check_size(fn, elem_bytes(w_bytes, elem, g->k, g->c, g->r, g->s), "weight",
                         ELEMS(half, "k*c*r*sz"))) != RILL_OK ||
        (st = check_size(fn, elem_bytes(&out_bytes, elem, g->n, g->k, oh, ow), "out",
                         ELEMS(half, "n*k*(h-r+1)*(w-sz+1)"))) != RILL_OK)
        return st;
    /* The sgemm of one band is k x (rows*ow) x (c*r*sz) with leading
     * dimensions up to h*w; both products fit in a size_t because the
     * weight and the input do, and must fit sgemm's integer dimensions. */
    if ((st = check_dim(fn, g->c * g->r * g->s, "c*r*sz", "")) != RILL_OK ||
        (st = check_dim(fn, g->h * g->w, "h*w", "")) != RILL_OK ||
        (st = check_fits(fn, in, "in", ELEMS(half, "n*c*h*w"), in_bytes)) != RILL_OK ||
        (st = check_fits(fn, weight, "weight", ELEMS(half, "k*c*r*sz"), *w_bytes)) != RILL_OK ||
        (st = check_fits(fn, out, "out", ELEMS(half, "n*k*(h-r+1)*(w-sz+1)"), out_bytes)) !=
            RILL_OK ||
        (st = check_disjoint(fn, out, out_bytes, "out", in, in_bytes, "in")) != RILL_OK ||
        (st = check_disjoint(fn, out, out_bytes, "out", weight, *w_bytes, "weight")) != RILL_OK ||
        (st = stream_compute_units(fn, s, units)) != RILL_OK)
        return st;
    access_add(acc, in, in_bytes, RILL_READ);
    access_add(acc, weight, *w_bytes, RILL_READ);
    access_add(acc, out, out_bytes, RILL_WRITE);
    return RILL_OK;
}

rill_status rill_op_conv2d_f32(rill_stream *s, float *out, const float *in, const float *weight,
                               size_t n, size_t c, size_t h, size_t w, size_t k, size_t r,
                               size_t sz) {
    static const char fn[] = "rill_op_conv2d_f32";
    rill__op_conv2d_args args = {out, in, weight, NULL, n, c, h, w, k, r, sz, 1};
    size_t w_bytes = 0, units = 0;
    access_list acc = {.count = 0};
    rill_status st = check_conv2d(fn, s, false, out, in, weight, &args, &acc, &w_bytes, &units);
    if (st != RILL_OK)
        return st;
    size_t blocks = conv_plan(&args, units, c * r * sz * (w - sz + 1));
    if (r == 1 && sz == 1)
        return launch(s, OP_CONV2D, blocks, &args, sizeof args, &acc);

    size_t scratch_bytes = blocks * rill__op_conv2d_slot_floats(&args) * sizeof(float);
    if ((st = rill_malloc_async(scratch_bytes, s, (void **)&args.scratch)) != RILL_OK)
        return st;
    access_add(&acc, args.scratch, scratch_bytes, RILL_READ_WRITE);
    st = launch(s, OP_CONV2D, blocks, &args, sizeof args, &acc);
    rill_status free_st = rill_free_async(args.scratch, s);
    return st != RILL_OK ? st : free_st;
}

/* Two launches on one stream-ordered scratch buffer: the weight converted
 * to floats at its start (by the cast body), then the items and bands of
 * the f32 conv2d, whose slots, after the weight, also hold each band's
 * float output (so bands may be shorter than the f32 op's). */
rill_status rill_op_conv2d_f16(rill_stream *s, rill_half *out, const rill_half *in,
                               const rill_half *weight, size_t n, size_t c, size_t h, size_t w,
                               size_t k, size_t r, size_t sz) {
    static const char fn[] = "rill_op_conv2d_f16";
    rill__op_conv2d_args plan = {NULL, NULL, NULL, NULL, n, c, h, w, k, r, sz, 1};
    size_t w_bytes = 0, units = 0;
    access_list acc = {.count = 0};
    rill_status st = check_conv2d(fn, s, true, out, in, weight, &plan, &acc, &w_bytes, &units);
    if (st != RILL_OK)
        return st;
    size_t blocks = conv_plan(&plan, units, (c * r * sz + k) * (w - sz + 1));
    rill__op_conv2d_f16_args args = {out, in, NULL, NULL, n, c, h, w, k, r, sz, plan.band_rows};
    size_t weights = k * c * r * sz;
    size_t scratch_bytes =
        (weights + blocks * rill__op_conv2d_f16_slot_floats(&args)) * sizeof(float);
    float *scratch;
    if ((st = rill_malloc_async(scratch_bytes, s, (void **)&scratch)) != RILL_OK)
        return st;
    args.weight = scratch;
    args.scratch = scratch + weights;

    rill__op_cast_args cargs = {scratch, weight, weights};
    access_list cacc = {.count = 0};
    access_add(&cacc, weight, w_bytes, RILL_READ);
    access_add(&cacc, scratch, weights * sizeof(float), RILL_WRITE);
    st = launch(s, OP_CAST_F16_F32, blocks_for(weights, ELEMENTS_PER_BLOCK_MIN, units), &cargs,
                sizeof cargs, &cacc);
    if (st == RILL_OK) {
        access_add(&acc, scratch, scratch_bytes, RILL_READ_WRITE);
        st = launch(s, OP_CONV2D_F16, blocks, &args, sizeof args, &acc);
    }
    rill_status free_st = rill_free_async(scratch, s);
    return st != RILL_OK ? st : free_st;
}
