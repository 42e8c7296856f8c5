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

/* An optional buffer of count floats (NULL: absent): inside its
 * allocation and reachable from s. */
static rill_status check_optional(const char *fn, rill_stream *s, const void *p, const char *name,
                                  const char *shape, size_t bytes) {
    return p == NULL ? RILL_OK : rill__op_check_fits(fn, s, p, name, shape, bytes);
}

rill_status rill_op_layer_norm_f32(rill_stream *s, float *out, float *mean, float *rstd,
                                   const float *x, const float *weight, const float *bias,
                                   size_t rows, size_t n, float eps) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_layer_norm_f32";
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for rows*n floats")) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, x, "x", "device memory of rows*n floats")) != RILL_OK)
        return st;
    if (rows == 0 || n == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s is 0; pass the number of rows and the length of each (at "
                          "least 1)",
                          fn, rows == 0 ? "rows" : "n");
    size_t bytes = 0, row_bytes = rows * sizeof(float), n_bytes = n * sizeof(float);
    if (!rill__op_elem_bytes(&bytes, sizeof(float), rows, n, 1, 1))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: rows*n floats do not fit in memory; pass smaller dimensions", fn);
    if (isnan(eps) || eps < 0.0f)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: eps is %g; pass a number of 0 or more (PyTorch's default is 1e-5)",
                          fn, (double)eps);
    if ((st = rill__op_check_fits(fn, s, x, "x", "rows*n floats", bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", "rows*n floats", bytes)) != RILL_OK ||
        (st = check_optional(fn, s, weight, "weight", "n floats", n_bytes)) != RILL_OK ||
        (st = check_optional(fn, s, bias, "bias", "n floats", n_bytes)) != RILL_OK ||
        (st = check_optional(fn, s, mean, "mean", "rows floats", row_bytes)) != RILL_OK ||
        (st = check_optional(fn, s, rstd, "rstd", "rows floats", row_bytes)) != RILL_OK)
        return st;
    /* Each output apart from the inputs and the other outputs; out may
     * equal x (each row is read whole before it is written). */
    if (out != x && rill__op_overlaps(out, bytes, x, bytes))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: out overlaps x without being equal to it; pass out == x to "
                          "normalize in place, or a buffer that does not overlap it",
                          fn);
    const struct {
        const void *p;
        size_t bytes;
        const char *name;
    } outs[] = {{out, bytes, "out"}, {mean, row_bytes, "mean"}, {rstd, row_bytes, "rstd"}},
      ins[] = {{x, bytes, "x"}, {weight, n_bytes, "weight"}, {bias, n_bytes, "bias"}};
    for (size_t i = 0; i < 3; i++) {
        if (outs[i].p == NULL)
            continue;
        for (size_t j = i == 0 ? 1 : 0; j < 3; j++)
            if (ins[j].p != NULL &&
                (st = rill__op_check_disjoint(fn, outs[i].p, outs[i].bytes, outs[i].name, ins[j].p,
                                              ins[j].bytes, ins[j].name)) != RILL_OK)
                return st;
        for (size_t j = i + 1; j < 3; j++)
            if (outs[j].p != NULL &&
                (st = rill__op_check_disjoint(fn, outs[i].p, outs[i].bytes, outs[i].name, outs[j].p,
                                              outs[j].bytes, outs[j].name)) != RILL_OK)
                return st;
    }
    rill__stream *stream = NULL;
    size_t units = 0;
    if ((st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_layer_norm_args args = {out, mean, rstd, x, weight, bias, rows, n, eps};
    access_list acc = {.count = 0};
    for (size_t j = 0; j < 3; j++)
        if (ins[j].p != NULL)
            rill__op_access_add(&acc, ins[j].p, ins[j].bytes, RILL_READ);
    for (size_t i = 0; i < 3; i++)
        if (outs[i].p != NULL)
            rill__op_access_add(&acc, outs[i].p, outs[i].bytes, RILL_WRITE);
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
    if ((st = rill__op_check_pointer(fn, dy, "dy", "device memory of rows*n floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, x, "x", "device memory of rows*n floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, mean, "mean", "the forward's rows means")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, rstd, "rstd", "the forward's rows rstd")) != RILL_OK)
        return st;
    if (dx == NULL && dweight == NULL && dbias == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: dx, dweight and dbias are all NULL; pass the gradients to compute",
                          fn);
    if (rows == 0 || n == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s is 0; pass the number of rows and the length of each (at "
                          "least 1)",
                          fn, rows == 0 ? "rows" : "n");
    size_t bytes = 0, row_bytes = rows * sizeof(float), n_bytes = n * sizeof(float);
    if (!rill__op_elem_bytes(&bytes, sizeof(float), rows, n, 1, 1))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: rows*n floats do not fit in memory; pass smaller dimensions", fn);
    const struct {
        const void *p;
        size_t bytes;
        const char *name, *shape;
    } outs[] = {{dx, bytes, "dx", "rows*n floats"},
                {dweight, n_bytes, "dweight", "n floats"},
                {dbias, n_bytes, "dbias", "n floats"}},
      ins[] = {{dy, bytes, "dy", "rows*n floats"},
               {x, bytes, "x", "rows*n floats"},
               {mean, row_bytes, "mean", "rows floats"},
               {rstd, row_bytes, "rstd", "rows floats"},
               {weight, n_bytes, "weight", "n floats"}};
    const size_t num_ins = sizeof ins / sizeof ins[0];
    for (size_t j = 0; j < num_ins; j++)
        if ((st = check_optional(fn, s, ins[j].p, ins[j].name, ins[j].shape, ins[j].bytes)) !=
            RILL_OK)
            return st;
    for (size_t i = 0; i < 3; i++)
        if ((st = check_optional(fn, s, outs[i].p, outs[i].name, outs[i].shape, outs[i].bytes)) !=
            RILL_OK)
            return st;
    /* Each output apart from the inputs and the other outputs. */
    for (size_t i = 0; i < 3; i++) {
        if (outs[i].p == NULL)
            continue;
        for (size_t j = 0; j < num_ins; j++)
            if (ins[j].p != NULL &&
                (st = rill__op_check_disjoint(fn, outs[i].p, outs[i].bytes, outs[i].name, ins[j].p,
                                              ins[j].bytes, ins[j].name)) != RILL_OK)
                return st;
        for (size_t j = i + 1; j < 3; j++)
            if (outs[j].p != NULL &&
                (st = rill__op_check_disjoint(fn, outs[i].p, outs[i].bytes, outs[i].name, outs[j].p,
                                              outs[j].bytes, outs[j].name)) != RILL_OK)
                return st;
    }
    rill__stream *stream = NULL;
    size_t units = 0;
    if ((st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    /* The rows' blocks (dx) and the columns' (dweight, dbias), each as
     * many as the work takes, side by side in one grid. */
    size_t per = rill__op_blocks_for(rows * n, ELEMENTS_PER_BLOCK_MIN / 4, units);
    size_t row_blocks = dx != NULL ? (per < rows ? per : rows) : 0;
    size_t col_blocks = dweight != NULL || dbias != NULL ? (per < n ? per : n) : 0;
    rill__op_layer_norm_backward_args args = {dx,   dweight, dbias, dy, x,         mean,
                                              rstd, weight,  rows,  n,  row_blocks};
    access_list acc = {.count = 0};
    for (size_t j = 0; j < num_ins; j++)
        if (ins[j].p != NULL)
            rill__op_access_add(&acc, ins[j].p, ins[j].bytes, RILL_READ);
    for (size_t i = 0; i < 3; i++)
        if (outs[i].p != NULL)
            rill__op_access_add(&acc, outs[i].p, outs[i].bytes, RILL_WRITE);
    return rill__op_launch(stream, RILL__OP_LAYER_NORM_BACKWARD_F32, row_blocks + col_blocks, &args,
                           sizeof args, &acc);
}
