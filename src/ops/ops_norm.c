/* SPDX-License-Identifier: MIT */
/* rill_op_layer_norm_f32: a layer norm over the last n floats of each row,
 * with its affine weight and bias and the rows' statistics, in one launch,
 * and rill_op_layer_norm_backward_f32, its gradients in one launch (rill.h).
 * Each checks every argument before it does anything. Layer: ops, on
 * what ops.c provides (ops_internal.h). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/op_args.h"
#include "core/calls.h"
#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "util/status.h"

/* A buffer of an op: NULL when the caller leaves it out. */
typedef struct buffer {
    const void *p;
    size_t bytes;
    const char *name, *shape;
} buffer;

/* The checks of the buffers (inputs ins, outputs outs; those given must
 * fit their allocations), each output apart from each input and each
 * other output. The first output may equal the first input when
 * first_in_place (its rows are read whole before they are written). */
static rill_status check_buffers(const char *fn, rill_stream *s, const buffer *ins, size_t num_ins,
                                 const buffer *outs, size_t num_outs, bool first_in_place) {
    rill_status st;
    for (size_t j = 0; j < num_ins + num_outs; j++) {
        const buffer *b = j < num_ins ? &ins[j] : &outs[j - num_ins];
        if (b->p != NULL &&
            (st = rill__op_check_fits(fn, s, b->p, b->name, b->shape, b->bytes)) != RILL_OK)
            return st;
    }
    if (first_in_place && outs[0].p != ins[0].p &&
        rill__op_overlaps(outs[0].p, outs[0].bytes, ins[0].p, ins[0].bytes))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s overlaps %s without being equal to it; pass %s == %s to work in "
                          "place, or a buffer that does not overlap it",
                          fn, outs[0].name, ins[0].name, outs[0].name, ins[0].name);
    for (size_t i = 0; i < num_outs; i++) {
        if (outs[i].p == NULL)
            continue;
        for (size_t j = i == 0 && first_in_place ? 1 : 0; j < num_ins; j++)
            if (ins[j].p != NULL &&
                (st = rill__op_check_disjoint(fn, outs[i].p, outs[i].bytes, outs[i].name, ins[j].p,
                                              ins[j].bytes, ins[j].name)) != RILL_OK)
                return st;
        for (size_t j = i + 1; j < num_outs; j++)
            if (outs[j].p != NULL &&
                (st = rill__op_check_disjoint(fn, outs[i].p, outs[i].bytes, outs[i].name, outs[j].p,
                                              outs[j].bytes, outs[j].name)) != RILL_OK)
                return st;
    }
    return RILL_OK;
}

/* The accesses of the buffers given: inputs read, outputs written. */
static void declare(access_list *acc, const buffer *ins, size_t num_ins, const buffer *outs,
                    size_t num_outs) {
    for (size_t j = 0; j < num_ins; j++)
        if (ins[j].p != NULL)
            rill__op_access_add(acc, ins[j].p, ins[j].bytes, RILL_READ);
    for (size_t i = 0; i < num_outs; i++)
        if (outs[i].p != NULL)
            rill__op_access_add(acc, outs[i].p, outs[i].bytes, RILL_WRITE);
}

/* rows and n at least 1, and rows*n floats' bytes in *bytes. */
static rill_status check_shape(const char *fn, size_t rows, size_t n, size_t *bytes) {
    if (rows == 0 || n == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s is 0; pass the number of rows and the length of each (at "
                          "least 1)",
                          fn, rows == 0 ? "rows" : "n");
    if (!rill__op_elem_bytes(bytes, sizeof(float), rows, n, 1, 1))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: rows*n floats do not fit in memory; pass smaller dimensions", fn);
    return RILL_OK;
}

rill_status rill_op_layer_norm_f32(rill_stream *s, float *out, float *mean, float *rstd,
                                   const float *x, const float *weight, const float *bias,
                                   size_t rows, size_t n, float eps) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_layer_norm_f32";
    rill_status st;
    size_t bytes = 0;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for rows*n floats")) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, x, "x", "device memory of rows*n floats")) != RILL_OK ||
        (st = check_shape(fn, rows, n, &bytes)) != RILL_OK)
        return st;
    if (isnan(eps) || eps < 0.0f)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: eps is %g; pass a number of 0 or more (PyTorch's default is 1e-5)",
                          fn, (double)eps);
    size_t row_bytes = rows * sizeof(float), n_bytes = n * sizeof(float);
    const buffer ins[] = {{x, bytes, "x", "rows*n floats"},
                          {weight, n_bytes, "weight", "n floats"},
                          {bias, n_bytes, "bias", "n floats"}},
                 outs[] = {{out, bytes, "out", "rows*n floats"},
                           {mean, row_bytes, "mean", "rows floats"},
                           {rstd, row_bytes, "rstd", "rows floats"}};
    rill__stream *stream = NULL;
    size_t units = 0;
    if ((st = check_buffers(fn, s, ins, 3, outs, 3, true)) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_layer_norm_args args = {out, mean, rstd, x, weight, bias, rows, n, eps};
    access_list acc = {.count = 0};
    declare(&acc, ins, 3, outs, 3);
    size_t blocks = rill__op_blocks_for(rows * n, ELEMENTS_PER_BLOCK_MIN / 4, units);
    return rill__op_launch(stream, RILL__OP_LAYER_NORM_F32, blocks < rows ? blocks : rows, &args,
                           sizeof args, &acc);
}

rill_status rill_op_layer_norm_backward_f32(rill_stream *s, float *dx, float *dweight, float *dbias,
                                            const float *dy, const float *x, const float *mean,
                                            const float *rstd, const float *weight, size_t rows,
                                            size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_layer_norm_backward_f32";
    rill_status st;
    size_t bytes = 0;
    if ((st = rill__op_check_pointer(fn, dy, "dy", "device memory of rows*n floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, x, "x", "device memory of rows*n floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, mean, "mean", "the forward's row means")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, rstd, "rstd", "the forward's row rstd")) != RILL_OK)
        return st;
    if (dx == NULL && dweight == NULL && dbias == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: dx, dweight and dbias are all NULL; pass the gradients to compute",
                          fn);
    if ((st = check_shape(fn, rows, n, &bytes)) != RILL_OK)
        return st;
    size_t row_bytes = rows * sizeof(float), n_bytes = n * sizeof(float);
    const buffer ins[] = {{dy, bytes, "dy", "rows*n floats"},
                          {x, bytes, "x", "rows*n floats"},
                          {mean, row_bytes, "mean", "rows floats"},
                          {rstd, row_bytes, "rstd", "rows floats"},
                          {weight, n_bytes, "weight", "n floats"}},
                 outs[] = {{dx, bytes, "dx", "rows*n floats"},
                           {dweight, n_bytes, "dweight", "n floats"},
                           {dbias, n_bytes, "dbias", "n floats"}};
    rill__stream *stream = NULL;
    size_t units = 0;
    if ((st = check_buffers(fn, s, ins, 5, outs, 3, false)) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    /* The rows' blocks (dx) and the columns' (dweight, dbias), each as
     * many as the work takes, side by side in one grid. */
    size_t per = rill__op_blocks_for(rows * n, ELEMENTS_PER_BLOCK_MIN / 4, units);
    size_t row_blocks = dx != NULL ? (per < rows ? per : rows) : 0;
    size_t col_blocks = dweight != NULL || dbias != NULL ? (per < n ? per : n) : 0;
    rill__op_layer_norm_backward_args args = {dx,   dweight, dbias, dy, x,         mean,
                                              rstd, weight,  rows,  n,  row_blocks};
    access_list acc = {.count = 0};
    declare(&acc, ins, 5, outs, 3);
    return rill__op_launch(stream, RILL__OP_LAYER_NORM_BACKWARD_F32, row_blocks + col_blocks, &args,
                           sizeof args, &acc);
}
