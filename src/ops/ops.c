/* SPDX-License-Identifier: MIT */
/* The built-in ops: each public rill_op_* checks every argument before it
 * does anything, picks a grid from the size of the work and the device's
 * compute units (one block for tiny inputs, where launch cost dominates; up
 * to one block per compute unit for large ones), and launches the op's
 * kernel with its exact accesses, whose body each backend provides
 * (backend/op_args.h). Each access is checked against the allocation that
 * will hold it (rill__mem_check_access), as copies and fills are. The
 * kernels are created on first use and cached in atomic pointers: racing
 * creators compare-exchange, the loser destroys its copy; rill_shutdown
 * destroys them (rill__ops_subsystem). The core knows
 * nothing of this layer. */
#include "ops/ops.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/op_args.h"
#include "core/calls.h"
#include "core/event.h"
#include "core/kernel.h"
#include "core/runtime.h"
#include "core/stream.h"
#include "mem/memory.h"
#include "ops/ops_internal.h"
#include "util/status.h"

/* ---- cached kernels ---- */

/* The kernels' names, in errors, traces and graph dumps. */
static const char *const op_names[RILL__OP_COUNT] = {
    [RILL__OP_FILL_F32] = "fill_f32",
    [RILL__OP_ADD_F32] = "add_f32",
    [RILL__OP_MUL_F32] = "mul_f32",
    [RILL__OP_ADD_SCALAR_F32] = "add_scalar_f32",
    [RILL__OP_SUM_PARTIAL_F32] = "sum_f32_partial",
    [RILL__OP_SUM_FINAL_F32] = "sum_f32_final",
    [RILL__OP_MATMUL_F32] = "matmul_f32",
    [RILL__OP_CONV2D_F32] = "conv2d_f32",
    [RILL__OP_RANDN_F32] = "randn_f32",
    [RILL__OP_CAST_F32_F16] = "cast_f32_f16",
    [RILL__OP_CAST_F16_F32] = "cast_f16_f32",
    [RILL__OP_FILL_F16] = "fill_f16",
    [RILL__OP_ADD_F16] = "add_f16",
    [RILL__OP_MUL_F16] = "mul_f16",
    [RILL__OP_ADD_SCALAR_F16] = "add_scalar_f16",
    [RILL__OP_SUM_PARTIAL_F16] = "sum_f16_partial",
    [RILL__OP_SUM_FINAL_F16] = "sum_f16_final",
    [RILL__OP_MATMUL_F16] = "matmul_f16",
    [RILL__OP_CONV2D_F16] = "conv2d_f16",
    [RILL__OP_COPY_STRIDED_F32] = "copy_strided_f32",
    [RILL__OP_BINARY_F32] = "binary_f32",
    [RILL__OP_MAP_F32] = "map_f32",
    [RILL__OP_REDUCE_DIM_F32] = "reduce_dim_f32",
    [RILL__OP_SOFTMAX_F32] = "softmax_f32",
    [RILL__OP_CONV2D_EX_F32] = "conv2d_ex_f32",
    [RILL__OP_POOL2D_F32] = "pool2d_f32",
    [RILL__OP_EMBEDDING_F32] = "embedding_f32",
    [RILL__OP_EMBEDDING_BACKWARD_F32] = "embedding_backward_f32",
    [RILL__OP_CONV2D_BACKWARD_DATA_F32] = "conv2d_backward_data_f32",
    [RILL__OP_CONV2D_BACKWARD_FILTER_F32] = "conv2d_backward_filter_f32",
    [RILL__OP_MAX_POOL2D_BACKWARD_F32] = "max_pool2d_backward_f32",
    [RILL__OP_AVG_POOL2D_BACKWARD_F32] = "avg_pool2d_backward_f32",
    [RILL__OP_POOL2D_EX_F32] = "pool2d_ex_f32",
    [RILL__OP_AVG_POOL2D_BACKWARD_EX_F32] = "avg_pool2d_backward_ex_f32",
    [RILL__OP_MATMUL_BATCHED_F32] = "matmul_batched_f32",
    [RILL__OP_LAYER_NORM_F32] = "layer_norm_f32",
    [RILL__OP_LAYER_NORM_BACKWARD_F32] = "layer_norm_backward_f32",
    [RILL__OP_NLL_LOSS_F32] = "nll_loss_f32",
    [RILL__OP_NLL_LOSS_BACKWARD_F32] = "nll_loss_backward_f32",
    [RILL__OP_ADD_SCALAR_I64] = "add_scalar_i64",
    [RILL__OP_FILL_BITS] = "fill_bits",
    [RILL__OP_MASKED_SCALE_F32] = "masked_scale_f32",
    [RILL__OP_COMPARE] = "compare",
    [RILL__OP_WHERE] = "where",
    [RILL__OP_TRIANGLE] = "triangle",
    [RILL__OP_CONVERT] = "convert",
    [RILL__OP_REDUCE_DIM_BOOL] = "reduce_dim_bool",
    [RILL__OP_ARANGE] = "arange",
};

/* NULL until first use; then owned here until rill__ops_shutdown. */
static _Atomic(rill_kernel *) op_kernels[RILL__OP_COUNT];

static rill_status get_kernel(rill__op id, rill_kernel **out) {
    /* acquire: pairs with the release of the compare-exchange below, so
     * the kernel's fields are visible to a thread that sees the pointer. */
    rill_kernel *k = atomic_load_explicit(&op_kernels[id], memory_order_acquire);
    if (k != NULL) {
        *out = k;
        return RILL_OK;
    }
    rill_kernel *mine;
    rill_status st = rill__kernel_create_op(id, op_names[id], &mine);
    if (st != RILL_OK)
        return st;
    rill_kernel *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(&op_kernels[id], &expected, mine,
                                                memory_order_acq_rel, memory_order_acquire)) {
        *out = mine;
        return RILL_OK;
    }
    /* Another thread published its kernel first: use that one. */
    rill_kernel_destroy(mine);
    *out = expected;
    return RILL_OK;
}

/* rill_shutdown destroys the cached kernels; the next op creates them
 * again. */
static void ops_shutdown(rill__runtime *rt, rill__shutdown_phase phase) {
    (void)rt;
    if (phase != RILL__SHUTDOWN_BEGIN)
        return;
    for (int i = 0; i < RILL__OP_COUNT; i++) {
        rill_kernel *k = atomic_exchange(&op_kernels[i], NULL);
        if (k != NULL)
            rill_kernel_destroy(k);
    }
}

const rill__subsystem rill__ops_subsystem = {
    .name = "ops",
    .shutdown = ops_shutdown,
};

/* ---- argument checks ---- */

/* *bytes = elem * d0 * d1 * d2 * d3 (the size of that many elements of
 * elem bytes); false when the product does not fit in a size_t. */
bool rill__op_elem_bytes(size_t *bytes, size_t elem, size_t d0, size_t d1, size_t d2, size_t d3) {
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
    return rill__op_elem_bytes(bytes, sizeof(float), d0, d1, d2, d3);
}

bool rill__op_overlaps(const void *p, size_t p_bytes, const void *q, size_t q_bytes) {
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a < b + q_bytes && b < a + p_bytes;
}

rill_status rill__op_check_in_place(const char *fn, const void *out, const void *in,
                                    const char *in_name, size_t bytes) {
    if (out != in && rill__op_overlaps(out, bytes, in, bytes))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: out overlaps %s without being equal to it; pass out == %s to "
                          "compute in place, or a buffer that does not overlap it",
                          fn, in_name, in_name);
    return RILL_OK;
}

/* Checks the elements argument shared by the element-wise ops and sum. */
rill_status rill__op_check_count(const char *fn, size_t n, size_t *bytes) {
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
 * from p, stays inside the allocation that holds p (rill__mem_check_access;
 * ordinary host memory passes) and, where the runtime has a GPU, that s's
 * device reaches that memory (rill__mem_reach): an op trusts its sizes no
 * more than rill_memset_async does. `shape` names the product that gave
 * bytes ("n floats"). */
rill_status rill__op_check_fits(const char *fn, rill_stream *s, const void *p, const char *name,
                                const char *shape, size_t bytes) {
    rill__device *dev;
    rill_status st = rill__mem_check_access(fn, name, shape, p, bytes, &dev);
    if (st != RILL_OK || !rill__runtime_has_device_memory())
        return st;
    rill__stream *stream;
    st = rill__stream_resolve(s, fn, &stream);
    if (st != RILL_OK)
        return st;
    return rill__mem_reach(fn, name, -1, p, bytes, dev, stream->q.dev);
}

rill_status rill__op_check_pointer(const char *fn, const void *p, const char *name,
                                   const char *what) {
    if (p == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %s is NULL; pass %s", fn, name, what);
    return RILL_OK;
}

/* ---- grids and launches ---- */

/* The stream that s names, resolved once: every command of the op goes to
 * it (see ops_internal.h); and the compute units of its device, read from
 * the device directly, as rill_stream_get_device and rill_device_get_info
 * would give them, without copying the device's whole description for
 * every op. */
rill_status rill__op_stream(const char *fn, rill_stream *s, rill__stream **stream, size_t *units) {
    rill_status st = rill__stream_resolve(s, fn, stream);
    if (st != RILL_OK)
        return st;
    const rill_device_info *info = &(*stream)->q.dev->base.info;
    *units = info->compute_units > 0 ? (size_t)info->compute_units : 1;
    return RILL_OK;
}

/* Blocks for `work` units when each block should get at least `min` of
 * them: between 1 and `units`. */
size_t rill__op_blocks_for(size_t work, size_t min, size_t units) {
    size_t blocks = work / min;
    if (blocks > units)
        blocks = units;
    return blocks > 0 ? blocks : 1;
}

/* The grid of an op whose kernel loops over its grid (element-wise
 * ops): on a device that sets op_grid_blocks, a block per
 * GRID_ELEMENTS_PER_BLOCK elements up to that many; otherwise
 * rill__op_blocks_for. */
#define GRID_ELEMENTS_PER_BLOCK ((size_t)RILL__OP_BLOCK_THREADS * 4)

size_t rill__op_grid(const rill__stream *stream, size_t work, size_t min, size_t units) {
    size_t most = stream->q.dev->base.op_grid_blocks;
    if (most == 0)
        return rill__op_blocks_for(work, min, units);
    size_t blocks = (work + GRID_ELEMENTS_PER_BLOCK - 1) / GRID_ELEMENTS_PER_BLOCK;
    return blocks < 1 ? 1 : blocks > most ? most : blocks;
}

bool rill__op_matmul_adds_bias(const rill__stream *stream) {
    return stream->q.dev->base.op_matmul_bias;
}

/* Adds an access; a second access to the same pointer merges into the
 * first (read + write = read-write), so an in-place op declares its buffer
 * once. */
void rill__op_access_add(access_list *list, const void *ptr, size_t bytes, rill_access_mode mode) {
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

rill_status rill__op_kernel(rill__op id, rill_kernel **out) {
    return get_kernel(id, out);
}

static rill_status launch_flags(rill__stream *stream, rill__op id, size_t blocks, const void *args,
                                size_t args_size, const access_list *accesses, unsigned flags) {
    rill_kernel *kernel;
    rill_status st = get_kernel(id, &kernel);
    if (st != RILL_OK)
        return st;
    rill_launch l = {
        .grid = {(uint32_t)blocks, 1, 1},
        .block = {RILL__OP_BLOCK_THREADS, 1, 1},
        .args = args,
        .args_size = args_size,
        .accesses = accesses->items,
        .num_accesses = accesses->count,
    };
    return rill__kernel_launch_flags(stream, kernel, &l, flags);
}

rill_status rill__op_launch(rill__stream *stream, rill__op id, size_t blocks, const void *args,
                            size_t args_size, const access_list *accesses) {
    return launch_flags(stream, id, blocks, args, args_size, accesses, 0);
}

rill_status rill__op_launch_n(rill__stream *stream, rill__op id, size_t n, size_t per_block_min,
                              size_t units, const void *args, size_t args_size,
                              const access_list *accesses) {
    return launch_flags(stream, id, rill__op_grid(stream, n, per_block_min, units), args, args_size,
                        accesses, n <= RILL__OP_SMALL_ELEMENTS ? RILL__CMD_SMALL : 0);
}

/* An element-wise op over n elements of bytes in all: reads a (and b, when
 * not NULL), writes out, in blocks of at least ELEMENTS_PER_BLOCK_MIN
 * elements over the stream's units. */
static rill_status launch_elementwise(rill__stream *stream, rill__op id, void *out, const void *a,
                                      const void *b, size_t bytes, size_t n, size_t units,
                                      const void *args, size_t args_size) {
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, a, bytes, RILL_READ);
    if (b != NULL)
        rill__op_access_add(&acc, b, bytes, RILL_READ);
    rill__op_access_add(&acc, out, bytes, RILL_WRITE);
    return rill__op_launch_n(stream, id, n, ELEMENTS_PER_BLOCK_MIN, units, args, args_size, &acc);
}

/* ---- element-wise ops ---- */

/* A fill only stores: a block of it streams memory at the speed of the
 * memory, and a second block on another unit costs the launch its
 * hand-off to that unit (a 1 MiB zero fill, rill.zeros, took twice as long
 * in two blocks as in one on the 2-core VM). So a fill splits only above
 * 1 MiB of floats per block. */
#define FILL_ELEMENTS_PER_BLOCK_MIN (ELEMENTS_PER_BLOCK_MIN * 8)

rill_status rill_op_fill_f32(rill_stream *s, float *x, float value, size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_fill_f32";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, x, "x", "device memory of n floats")) != RILL_OK ||
        (st = rill__op_check_count(fn, n, &bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, x, "x", "n floats", bytes)) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_fill_args args = {x, value, n};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, x, bytes, RILL_WRITE);
    return rill__op_launch_n(stream, RILL__OP_FILL_F32, n, FILL_ELEMENTS_PER_BLOCK_MIN, units,
                             &args, sizeof args, &acc);
}

rill_status rill_op_fill_bits(rill_stream *s, void *x, uint64_t bits, size_t element_bytes,
                              size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_fill_bits";
    size_t units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, x, "x", "device memory of n elements")) != RILL_OK)
        return st;
    if (element_bytes != 1 && element_bytes != 2 && element_bytes != 4 && element_bytes != 8)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: element_bytes is %zu; pass the width of one element: 1, 2, 4 or 8",
                          fn, element_bytes);
    if ((uintptr_t)x % element_bytes != 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: x (%p) is not aligned to its %zu-byte elements; pass the address "
                          "of the first element",
                          fn, x, element_bytes);
    if (n == 0 || n > SIZE_MAX / element_bytes)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: n is %zu; pass the number of elements of x (at least 1)", fn, n);
    size_t bytes = n * element_bytes;
    if ((st = rill__op_check_fits(fn, s, x, "x", "n elements", bytes)) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_fill_bits_args args = {x, bits, element_bytes, n};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, x, bytes, RILL_WRITE);
    /* blocks of as many bytes as rill_op_fill_f32's */
    size_t per_block = FILL_ELEMENTS_PER_BLOCK_MIN * sizeof(float) / element_bytes;
    return rill__op_launch_n(stream, RILL__OP_FILL_BITS, n, per_block, units, &args, sizeof args,
                             &acc);
}

/* The checks of an element-wise op out = a (op) b over n floats, and the
 * bytes and compute units it runs with. */
static rill_status check_binary(const char *fn, rill_stream *s, const float *out, const float *a,
                                const float *b, size_t n, size_t *bytes, rill__stream **stream,
                                size_t *units) {
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for n floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, a, "a", "device memory of n floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, b, "b", "device memory of n floats")) != RILL_OK ||
        (st = rill__op_check_count(fn, n, bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, a, "a", "n floats", *bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, b, "b", "n floats", *bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", "n floats", *bytes)) != RILL_OK ||
        (st = rill__op_check_in_place(fn, out, a, "a", *bytes)) != RILL_OK ||
        (st = rill__op_check_in_place(fn, out, b, "b", *bytes)) != RILL_OK)
        return st;
    return rill__op_stream(fn, s, stream, units);
}

rill_status rill_op_add_f32(rill_stream *s, float *out, const float *a, const float *b, float alpha,
                            size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_add_f32";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = check_binary(fn, s, out, a, b, n, &bytes, &stream, &units)) != RILL_OK)
        return st;
    rill__op_add_args args = {out, a, b, alpha, n};
    return launch_elementwise(stream, RILL__OP_ADD_F32, out, a, b, bytes, n, units, &args,
                              sizeof args);
}

rill_status rill_op_mul_f32(rill_stream *s, float *out, const float *a, const float *b, size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_mul_f32";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = check_binary(fn, s, out, a, b, n, &bytes, &stream, &units)) != RILL_OK)
        return st;
    rill__op_mul_args args = {out, a, b, n};
    return launch_elementwise(stream, RILL__OP_MUL_F32, out, a, b, bytes, n, units, &args,
                              sizeof args);
}

rill_status rill_op_add_scalar_f32(rill_stream *s, float *out, const float *a, float value,
                                   size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_add_scalar_f32";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for n floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, a, "a", "device memory of n floats")) != RILL_OK ||
        (st = rill__op_check_count(fn, n, &bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, a, "a", "n floats", bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", "n floats", bytes)) != RILL_OK ||
        (st = rill__op_check_in_place(fn, out, a, "a", bytes)) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_add_scalar_args args = {out, a, value, n};
    return launch_elementwise(stream, RILL__OP_ADD_SCALAR_F32, out, a, NULL, bytes, n, units, &args,
                              sizeof args);
}

rill_status rill_op_add_scalar_i64(rill_stream *s, int64_t *out, const int64_t *a, int64_t value,
                                   size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_add_scalar_i64";
    size_t bytes = n * sizeof(int64_t), units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for n int64s")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, a, "a", "device memory of n int64s")) != RILL_OK)
        return st;
    if (n == 0 || n > SIZE_MAX / sizeof(int64_t))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: n is %zu; pass the number of int64s of the buffers (at least 1)", fn,
                          n);
    if ((st = rill__op_check_fits(fn, s, a, "a", "n int64s", bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", "n int64s", bytes)) != RILL_OK ||
        (st = rill__op_check_in_place(fn, out, a, "a", bytes)) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_add_scalar_i64_args args = {out, a, value, n};
    return launch_elementwise(stream, RILL__OP_ADD_SCALAR_I64, out, a, NULL, bytes, n, units, &args,
                              sizeof args);
}

/* ---- element-wise ops into new memory ----
 *
 * rill_malloc_async, the op and rill_event_record in one call, the per-op
 * sequence of an eager tensor library: the same checks (every argument
 * before anything happens), the same commands on s. The output is fresh
 * memory, so it cannot overlap an input and fits by construction. */

/* Checks the inputs (a, and b unless the op takes a number instead:
 * has_b false), n, s and event, then allocates the output's bytes on s
 * into *mem; *out is NULL until the op finishes (finish_new). The new op
 * has its own handles resolved once: *stream and *ev (NULL without an
 * event), which its launch and record use. */
static rill_status begin_new(const char *fn, rill_stream *s, const float *a, bool has_b,
                             const float *b, size_t n, rill_event *event, float **out,
                             size_t *bytes, rill__stream **stream, size_t *units, rill__event **ev,
                             void **mem) {
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: out is NULL; pass where to store the new memory's address", fn);
    *out = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, a, "a", "device memory of n floats")) != RILL_OK ||
        (has_b &&
         (st = rill__op_check_pointer(fn, b, "b", "device memory of n floats")) != RILL_OK) ||
        (st = rill__op_check_count(fn, n, bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, a, "a", "n floats", *bytes)) != RILL_OK ||
        (has_b && (st = rill__op_check_fits(fn, s, b, "b", "n floats", *bytes)) != RILL_OK) ||
        (st = rill__op_stream(fn, s, stream, units)) != RILL_OK)
        return st;
    *ev = NULL;
    if (event != NULL && (st = rill__event_resolve(event, fn, ev)) != RILL_OK)
        return st;
    return rill__mem_alloc_async(*stream, *bytes, mem);
}

/* Records ev after the op that launch_st reports and hands mem out; when
 * either failed, mem goes back in stream order (after the op, when it was
 * launched) and *out stays NULL. */
static rill_status finish_new(rill__stream *stream, rill_status launch_st, void *mem,
                              rill__event *ev, float **out) {
    rill_status st = launch_st;
    if (st == RILL_OK && ev != NULL)
        st = rill__event_record(ev, stream);
    if (st != RILL_OK) {
        /* Cannot fail: mem is a live allocation of stream. */
        (void)rill__mem_free_async(mem, stream);
        return st;
    }
    *out = mem;
    return RILL_OK;
}

rill_status rill_op_add_f32_new(rill_stream *s, const float *a, const float *b, float alpha,
                                size_t n, rill_event *event, float **out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_add_f32_new";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill__event *ev = NULL;
    void *mem = NULL;
    rill_status st =
        begin_new(fn, s, a, true, b, n, event, out, &bytes, &stream, &units, &ev, &mem);
    if (st != RILL_OK)
        return st;
    rill__op_add_args args = {mem, a, b, alpha, n};
    st = launch_elementwise(stream, RILL__OP_ADD_F32, mem, a, b, bytes, n, units, &args,
                            sizeof args);
    return finish_new(stream, st, mem, ev, out);
}

rill_status rill_op_mul_f32_new(rill_stream *s, const float *a, const float *b, size_t n,
                                rill_event *event, float **out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_mul_f32_new";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill__event *ev = NULL;
    void *mem = NULL;
    rill_status st =
        begin_new(fn, s, a, true, b, n, event, out, &bytes, &stream, &units, &ev, &mem);
    if (st != RILL_OK)
        return st;
    rill__op_mul_args args = {mem, a, b, n};
    st = launch_elementwise(stream, RILL__OP_MUL_F32, mem, a, b, bytes, n, units, &args,
                            sizeof args);
    return finish_new(stream, st, mem, ev, out);
}

rill_status rill_op_add_scalar_f32_new(rill_stream *s, const float *a, float value, size_t n,
                                       rill_event *event, float **out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_add_scalar_f32_new";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill__event *ev = NULL;
    void *mem = NULL;
    rill_status st =
        begin_new(fn, s, a, false, NULL, n, event, out, &bytes, &stream, &units, &ev, &mem);
    if (st != RILL_OK)
        return st;
    rill__op_add_scalar_args args = {mem, a, value, n};
    st = launch_elementwise(stream, RILL__OP_ADD_SCALAR_F32, mem, a, NULL, bytes, n, units, &args,
                            sizeof args);
    return finish_new(stream, st, mem, ev, out);
}

rill_status rill_op_map_f32_new(rill_stream *s, rill_map_op op, const float *a, float alpha,
                                size_t n, rill_event *event, float **out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_map_f32_new";
    if ((unsigned)op > (unsigned)RILL_MAP_ABS) {
        if (out != NULL)
            *out = NULL;
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: op is %d, not a rill_map_op; pass RILL_MAP_NEG to RILL_MAP_ABS", fn,
                          (int)op);
    }
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill__event *ev = NULL;
    void *mem = NULL;
    rill_status st =
        begin_new(fn, s, a, false, NULL, n, event, out, &bytes, &stream, &units, &ev, &mem);
    if (st != RILL_OK)
        return st;
    rill__op_map_args args = {mem, a, alpha, (uint32_t)op, n};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, a, bytes, RILL_READ);
    rill__op_access_add(&acc, mem, bytes, RILL_WRITE);
    /* The grid of rill_op_map_f32. */
    st = rill__op_launch(stream, RILL__OP_MAP_F32,
                         rill__op_grid(stream, n, ELEMENTS_PER_BLOCK_MIN / 4, units), &args,
                         sizeof args, &acc);
    return finish_new(stream, st, mem, ev, out);
}

/* ---- random normal fill ---- */

rill_status rill_op_randn_f32(rill_stream *s, float *x, size_t n, float mean, float std,
                              uint64_t seed) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_randn_f32";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, x, "x", "device memory of n floats")) != RILL_OK ||
        (st = rill__op_check_count(fn, n, &bytes)) != RILL_OK)
        return st;
    if (!isfinite(mean))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: mean is %g; pass a finite mean", fn,
                          (double)mean);
    if (!isfinite(std) || std < 0.0f)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: std is %g; pass a finite standard deviation, 0 or more", fn,
                          (double)std);
    if ((st = rill__op_check_fits(fn, s, x, "x", "n floats", bytes)) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_randn_args args = {x, n, mean, std, seed};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, x, bytes, RILL_WRITE);
    /* About 20 times the work of a fill per element: blocks for fewer. */
    return rill__op_launch(stream, RILL__OP_RANDN_F32,
                           rill__op_blocks_for(n, ELEMENTS_PER_BLOCK_MIN / 16, units), &args,
                           sizeof args, &acc);
}

/* ---- float16 conversions ---- */

/* out may not overlap in at all (an op whose blocks read what others write). */
rill_status rill__op_check_disjoint(const char *fn, const void *out, size_t out_bytes,
                                    const char *out_name, const void *in, size_t in_bytes,
                                    const char *in_name) {
    if (rill__op_overlaps(out, out_bytes, in, in_bytes))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s overlaps %s; pass an output buffer separate from the inputs", fn,
                          out_name, in_name);
    return RILL_OK;
}

static rill_status launch_cast(const char *fn, rill__op id, rill_stream *s, void *out,
                               size_t out_size, const void *in, size_t in_size, size_t n) {
    size_t out_bytes = 0, in_bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for n elements")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, in, "in", "device memory of n elements")) != RILL_OK ||
        (st = rill__op_check_count(fn, n, &in_bytes)) != RILL_OK)
        return st;
    /* check_count sized floats; the halves' side is half of that. */
    out_bytes = out_size == sizeof(float) ? in_bytes : in_bytes / 2;
    in_bytes = in_size == sizeof(float) ? in_bytes : in_bytes / 2;
    if ((st = rill__op_check_fits(fn, s, in, "in", "n elements", in_bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", "n elements", out_bytes)) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, out, out_bytes, "out", in, in_bytes, "in")) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_cast_args args = {out, in, n};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, in, in_bytes, RILL_READ);
    rill__op_access_add(&acc, out, out_bytes, RILL_WRITE);
    return rill__op_launch(stream, id, rill__op_grid(stream, n, ELEMENTS_PER_BLOCK_MIN, units),
                           &args, sizeof args, &acc);
}

rill_status rill_op_cast_f32_f16(rill_stream *s, rill_half *out, const float *in, size_t n) {
    RILL_CALL_SCOPE();
    return launch_cast("rill_op_cast_f32_f16", RILL__OP_CAST_F32_F16, s, out, sizeof(rill_half), in,
                       sizeof(float), n);
}

rill_status rill_op_cast_f16_f32(rill_stream *s, float *out, const rill_half *in, size_t n) {
    RILL_CALL_SCOPE();
    return launch_cast("rill_op_cast_f16_f32", RILL__OP_CAST_F16_F32, s, out, sizeof(float), in,
                       sizeof(rill_half), n);
}

/* ---- float16 element-wise ops ---- */

/* The checks of an element-wise op on halves: out, a and b (b may be
 * absent: NULL with b_name NULL) are n halves each, in their allocations,
 * and out equals an input or overlaps none. *bytes is 2n. */
static rill_status check_f16(const char *fn, rill_stream *s, const void *out, const void *a,
                             const char *a_name, const void *b, const char *b_name, size_t n,
                             size_t *bytes, rill__stream **stream, size_t *units) {
    size_t float_bytes_n = 0;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, a_name == NULL ? "x" : "out",
                                     "device memory for n halves")) != RILL_OK ||
        (a_name != NULL &&
         (st = rill__op_check_pointer(fn, a, a_name, "device memory of n halves")) != RILL_OK) ||
        (b_name != NULL &&
         (st = rill__op_check_pointer(fn, b, b_name, "device memory of n halves")) != RILL_OK) ||
        (st = rill__op_check_count(fn, n, &float_bytes_n)) != RILL_OK)
        return st;
    *bytes = float_bytes_n / 2;
    if ((a_name != NULL &&
         (st = rill__op_check_fits(fn, s, a, a_name, "n halves", *bytes)) != RILL_OK) ||
        (b_name != NULL &&
         (st = rill__op_check_fits(fn, s, b, b_name, "n halves", *bytes)) != RILL_OK) ||
        (st = rill__op_check_fits(fn, s, out, a_name == NULL ? "x" : "out", "n halves", *bytes)) !=
            RILL_OK ||
        (a_name != NULL && (st = rill__op_check_in_place(fn, out, a, a_name, *bytes)) != RILL_OK) ||
        (b_name != NULL && (st = rill__op_check_in_place(fn, out, b, b_name, *bytes)) != RILL_OK) ||
        (st = rill__op_stream(fn, s, stream, units)) != RILL_OK)
        return st;
    return RILL_OK;
}

rill_status rill_op_fill_f16(rill_stream *s, rill_half *x, float value, size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_fill_f16";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st = check_f16(fn, s, x, NULL, NULL, NULL, NULL, n, &bytes, &stream, &units);
    if (st != RILL_OK)
        return st;
    rill__op_f16_args args = {x, NULL, NULL, value, n};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, x, bytes, RILL_WRITE);
    return rill__op_launch(stream, RILL__OP_FILL_F16,
                           rill__op_grid(stream, n, ELEMENTS_PER_BLOCK_MIN, units), &args,
                           sizeof args, &acc);
}

rill_status rill_op_add_f16(rill_stream *s, rill_half *out, const rill_half *a, const rill_half *b,
                            float alpha, size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_add_f16";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st = check_f16(fn, s, out, a, "a", b, "b", n, &bytes, &stream, &units);
    if (st != RILL_OK)
        return st;
    rill__op_f16_args args = {out, a, b, alpha, n};
    return launch_elementwise(stream, RILL__OP_ADD_F16, out, a, b, bytes, n, units, &args,
                              sizeof args);
}

rill_status rill_op_mul_f16(rill_stream *s, rill_half *out, const rill_half *a, const rill_half *b,
                            size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_mul_f16";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st = check_f16(fn, s, out, a, "a", b, "b", n, &bytes, &stream, &units);
    if (st != RILL_OK)
        return st;
    rill__op_f16_args args = {out, a, b, 0.0f, n};
    return launch_elementwise(stream, RILL__OP_MUL_F16, out, a, b, bytes, n, units, &args,
                              sizeof args);
}

rill_status rill_op_add_scalar_f16(rill_stream *s, rill_half *out, const rill_half *a, float value,
                                   size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_add_scalar_f16";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st = check_f16(fn, s, out, a, "a", NULL, NULL, n, &bytes, &stream, &units);
    if (st != RILL_OK)
        return st;
    rill__op_f16_args args = {out, a, NULL, value, n};
    return launch_elementwise(stream, RILL__OP_ADD_SCALAR_F16, out, a, NULL, bytes, n, units, &args,
                              sizeof args);
}
