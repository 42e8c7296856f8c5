/* SPDX-License-Identifier: MIT */
/* The built-in negative log likelihood loss and its backward, of [n,
 * classes] inputs (rill_op_nll_loss_f32) and of [n, classes, inner] ones
 * (rill_op_nll_loss_nd_f32, which the first is with inner 1): the checks
 * of the sizes, the targets' width and the buffers, and the launches, on
 * what ops.c provides (ops_internal.h). The targets are device memory that
 * may not be written yet: their range is checked by the kernels, which
 * fail their launch on a target out of range. */
#include <stdbool.h>
#include <stdint.h>

#include "backend/op_args.h"
#include "core/calls.h"
#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "util/status.h"

/* The shapes of a loss's buffers as its sentences name them: [n, classes]
 * or [n, classes, inner] (positions). */
typedef struct loss_words {
    const char *rows, *targets, *per_row;
    bool positions;
} loss_words;

static const loss_words words_2d = {"n*classes floats", "n integers", "n floats", false};
static const loss_words words_nd = {"n*classes*inner floats", "n*inner integers", "n*inner floats",
                                    true};

/* The sizes of a loss's buffers, checked once for the forward and the
 * backward. */
typedef struct loss_sizes {
    size_t rows_bytes;    /* n x classes x inner floats: the input, or its gradient */
    size_t target_bytes;  /* n x inner targets */
    size_t weight_bytes;  /* classes floats, or 0 without a weight */
    size_t per_row_bytes; /* the forward's out, the backward's grad_out */
} loss_sizes;

/* The checks the forward and the backward share: everything but the
 * pointers of rows and per_row, which the caller checks before, and their
 * overlaps, which it checks after. rows_name and per_row_name name the
 * [n, classes, inner] and the per-row (or single) buffers in sentences. */
static rill_status check_loss(const char *fn, const loss_words *words, rill_stream *s,
                              rill_loss_reduction reduction, const float *rows,
                              const char *rows_name, const float *per_row, const char *per_row_name,
                              const void *targets, size_t index_bytes, const float *weight,
                              size_t n, size_t classes, size_t inner, loss_sizes *sz) {
    rill_status st;
    if ((st = rill__op_check_pointer(fn, targets, "targets", "device memory of the targets")) !=
        RILL_OK)
        return st;
    if (reduction != RILL_LOSS_NONE && reduction != RILL_LOSS_SUM && reduction != RILL_LOSS_MEAN)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: reduction is %d; pass RILL_LOSS_NONE, RILL_LOSS_SUM or "
                          "RILL_LOSS_MEAN",
                          fn, (int)reduction);
    if (index_bytes != 4 && index_bytes != 8)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: index_bytes is %zu; pass 4 (int32_t targets) or 8 (int64_t)", fn,
                          index_bytes);
    if (n == 0 || classes == 0 || inner == 0)
        return words->positions ? rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                                             "%s: n is %zu, classes %zu and inner %zu; pass sizes "
                                             "of at least 1 (a loss of no rows needs no op)",
                                             fn, n, classes, inner)
                                : rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                                             "%s: n is %zu and classes %zu; pass sizes of at "
                                             "least 1 (a loss of no rows needs no op)",
                                             fn, n, classes);
    if (!rill__op_elem_bytes(&sz->rows_bytes, sizeof(float), n, classes, inner, 1) ||
        !rill__op_elem_bytes(&sz->target_bytes, index_bytes, n, inner, 1, 1))
        return words->positions ? rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                                             "%s: n %zu, classes %zu and inner %zu give more "
                                             "elements than fit in memory; pass smaller sizes",
                                             fn, n, classes, inner)
                                : rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                                             "%s: n %zu and classes %zu give more elements than "
                                             "fit in memory; pass smaller sizes",
                                             fn, n, classes);
    sz->weight_bytes = weight != NULL ? classes * sizeof(float) : 0;
    sz->per_row_bytes = (reduction == RILL_LOSS_NONE ? n * inner : 1) * sizeof(float);
    const char *per_row_shape = reduction == RILL_LOSS_NONE ? words->per_row : "1 float";
    if ((st = rill__op_check_fits(fn, s, rows, rows_name, words->rows, sz->rows_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_fits(fn, s, per_row, per_row_name, per_row_shape,
                                  sz->per_row_bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, targets, "targets", words->targets, sz->target_bytes)) !=
            RILL_OK)
        return st;
    if (weight != NULL && (st = rill__op_check_fits(fn, s, weight, "weight", "classes floats",
                                                    sz->weight_bytes)) != RILL_OK)
        return st;
    return RILL_OK;
}

static rill_status nll_loss(const char *fn, const loss_words *words, rill_stream *s,
                            rill_loss_reduction reduction, float *out, float *total_weight,
                            const float *input, const void *targets, size_t index_bytes,
                            const float *weight, size_t n, size_t classes, size_t inner,
                            int64_t ignore_index) {
    loss_sizes sz = {0};
    size_t tw_bytes = total_weight != NULL ? sizeof(float) : 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, input, "input",
                                     "device memory of the log-probabilities")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, out, "out", "device memory for the loss")) != RILL_OK ||
        (st = check_loss(fn, words, s, reduction, input, "input", out, "out", targets, index_bytes,
                         weight, n, classes, inner, &sz)) != RILL_OK)
        return st;
    if (total_weight != NULL && (st = rill__op_check_fits(fn, s, total_weight, "total_weight",
                                                          "1 float", tw_bytes)) != RILL_OK)
        return st;
    const struct {
        const void *p;
        size_t bytes;
        const char *name;
    } reads[] = {{input, sz.rows_bytes, "input"},
                 {targets, sz.target_bytes, "targets"},
                 {weight, sz.weight_bytes, "weight"}};
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++)
        if ((st = rill__op_check_disjoint(fn, out, sz.per_row_bytes, "out", reads[i].p,
                                          reads[i].bytes, reads[i].name)) != RILL_OK ||
            (st = rill__op_check_disjoint(fn, total_weight, tw_bytes, "total_weight", reads[i].p,
                                          reads[i].bytes, reads[i].name)) != RILL_OK)
            return st;
    if ((st = rill__op_check_disjoint(fn, out, sz.per_row_bytes, "out", total_weight, tw_bytes,
                                      "total_weight")) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_nll_loss_args args = {.out = out,
                                   .total_weight = total_weight,
                                   .input = input,
                                   .targets = targets,
                                   .weight = weight,
                                   .index_bytes = index_bytes,
                                   .n = n,
                                   .classes = classes,
                                   .inner = inner,
                                   .ignore_index = ignore_index,
                                   .reduction = (uint32_t)reduction};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, input, sz.rows_bytes, RILL_READ);
    rill__op_access_add(&acc, targets, sz.target_bytes, RILL_READ);
    if (weight != NULL)
        rill__op_access_add(&acc, weight, sz.weight_bytes, RILL_READ);
    rill__op_access_add(&acc, out, sz.per_row_bytes, RILL_WRITE);
    if (total_weight != NULL)
        rill__op_access_add(&acc, total_weight, tw_bytes, RILL_WRITE);
    /* A sum is added in one order, by one block. */
    size_t blocks = 1;
    if (reduction == RILL_LOSS_NONE) {
        blocks = rill__op_grid(stream, n * inner, ELEMENTS_PER_BLOCK_MIN, units);
        blocks = blocks < n * inner ? blocks : n * inner;
    }
    return rill__op_launch(stream, RILL__OP_NLL_LOSS_F32, blocks, &args, sizeof args, &acc);
}

rill_status rill_op_nll_loss_f32(rill_stream *s, rill_loss_reduction reduction, float *out,
                                 float *total_weight, const float *input, const void *targets,
                                 size_t index_bytes, const float *weight, size_t n, size_t classes,
                                 int64_t ignore_index) {
    RILL_CALL_SCOPE();
    return nll_loss("rill_op_nll_loss_f32", &words_2d, s, reduction, out, total_weight, input,
                    targets, index_bytes, weight, n, classes, 1, ignore_index);
}

rill_status rill_op_nll_loss_nd_f32(rill_stream *s, rill_loss_reduction reduction, float *out,
                                    float *total_weight, const float *input, const void *targets,
                                    size_t index_bytes, const float *weight, size_t n,
                                    size_t classes, size_t inner, int64_t ignore_index) {
    RILL_CALL_SCOPE();
    return nll_loss("rill_op_nll_loss_nd_f32", &words_nd, s, reduction, out, total_weight, input,
                    targets, index_bytes, weight, n, classes, inner, ignore_index);
}

static rill_status nll_loss_backward(const char *fn, const loss_words *words, rill_stream *s,
                                     rill_loss_reduction reduction, float *grad_input,
                                     const float *grad_out, const float *total_weight,
                                     const void *targets, size_t index_bytes, const float *weight,
                                     size_t n, size_t classes, size_t inner, int64_t ignore_index) {
    loss_sizes sz = {0};
    size_t tw_bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, grad_input, "grad_input",
                                     "device memory for the input's gradient")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, grad_out, "grad_out",
                                     "device memory of the loss's gradient")) != RILL_OK ||
        (st = check_loss(fn, words, s, reduction, grad_input, "grad_input", grad_out, "grad_out",
                         targets, index_bytes, weight, n, classes, inner, &sz)) != RILL_OK)
        return st;
    if (reduction == RILL_LOSS_MEAN) {
        tw_bytes = sizeof(float);
        if ((st = rill__op_check_pointer(fn, total_weight, "total_weight",
                                         "the forward's total weight (RILL_LOSS_MEAN divides by "
                                         "it)")) != RILL_OK ||
            (st = rill__op_check_fits(fn, s, total_weight, "total_weight", "1 float", tw_bytes)) !=
                RILL_OK)
            return st;
    }
    const struct {
        const void *p;
        size_t bytes;
        const char *name;
    } reads[] = {{grad_out, sz.per_row_bytes, "grad_out"},
                 {targets, sz.target_bytes, "targets"},
                 {weight, sz.weight_bytes, "weight"},
                 {total_weight, tw_bytes, "total_weight"}};
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++)
        if ((st = rill__op_check_disjoint(fn, grad_input, sz.rows_bytes, "grad_input", reads[i].p,
                                          reads[i].bytes, reads[i].name)) != RILL_OK)
            return st;
    if ((st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_nll_loss_backward_args args = {.grad_input = grad_input,
                                            .grad_out = grad_out,
                                            .total_weight = tw_bytes ? total_weight : NULL,
                                            .targets = targets,
                                            .weight = weight,
                                            .index_bytes = index_bytes,
                                            .n = n,
                                            .classes = classes,
                                            .inner = inner,
                                            .ignore_index = ignore_index,
                                            .reduction = (uint32_t)reduction};
    access_list acc = {.count = 0};
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++)
        if (reads[i].bytes != 0)
            rill__op_access_add(&acc, reads[i].p, reads[i].bytes, RILL_READ);
    rill__op_access_add(&acc, grad_input, sz.rows_bytes, RILL_WRITE);
    size_t blocks =
        rill__op_grid(stream, sz.rows_bytes / sizeof(float), ELEMENTS_PER_BLOCK_MIN, units);
    size_t rows = n * inner;
    return rill__op_launch(stream, RILL__OP_NLL_LOSS_BACKWARD_F32, blocks < rows ? blocks : rows,
                           &args, sizeof args, &acc);
}

rill_status rill_op_nll_loss_backward_f32(rill_stream *s, rill_loss_reduction reduction,
                                          float *grad_input, const float *grad_out,
                                          const float *total_weight, const void *targets,
                                          size_t index_bytes, const float *weight, size_t n,
                                          size_t classes, int64_t ignore_index) {
    RILL_CALL_SCOPE();
    return nll_loss_backward("rill_op_nll_loss_backward_f32", &words_2d, s, reduction, grad_input,
                             grad_out, total_weight, targets, index_bytes, weight, n, classes, 1,
                             ignore_index);
}

rill_status rill_op_nll_loss_backward_nd_f32(rill_stream *s, rill_loss_reduction reduction,
                                             float *grad_input, const float *grad_out,
                                             const float *total_weight, const void *targets,
                                             size_t index_bytes, const float *weight, size_t n,
                                             size_t classes, size_t inner, int64_t ignore_index) {
    RILL_CALL_SCOPE();
    return nll_loss_backward("rill_op_nll_loss_backward_nd_f32", &words_nd, s, reduction,
                             grad_input, grad_out, total_weight, targets, index_bytes, weight, n,
                             classes, inner, ignore_index);
}
