// SPDX-License-Identifier: MIT
// Matrix products as rill kernels queued on the current stream: mm, bmm
// (one rill_op_matmul_batched_f32 for the whole batch) and addmm with beta
// and alpha 1 (rill_op_addmm_f32: the product with the bias, broadcast by
// its strides, added in the same launch). A matrix operand of mm or addmm
// that is the transpose of a contiguous one (a linear layer's weight, x.t()
// in its backward) is read in place, as is each operand of bmm whose
// matrices are row-major or transposed with one batch stride (the heads of
// an attention); other strided operands are made contiguous first by
// rill's strided copy on the same stream. Other cases (other dtypes,
// devices, shapes PyTorch refuses, other beta or alpha) go to the
// fallback.
#include <algorithm>
#include <limits>
#include <optional>

#include <ATen/native/CPUFallback.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm_ops.h>
#include <torch/library.h>

#include "fallback.h"
#include "matmul_ops.h"
#include "native_ops.h"
#include "runtime.h"

namespace torch_rill {
namespace {

using at::native::call_fallback_fn;

// How rill_op_matmul_batched_f32 reads x [count, rows, cols] in place:
// flags bit (RILL_MATMUL_A_T for a, RILL_MATMUL_B_T for b) set when x's
// matrices are stored transposed, row stride ld, batch stride; nullopt
// when x is neither (a stride of 0 inside a matrix, a row stride past
// INT_MAX): x is then copied.
struct Layout {
    bool transposed;
    size_t ld, stride;
};

std::optional<Layout> layout_of(const at::Tensor &x) {
    int64_t rows = x.size(1), cols = x.size(2), rs = x.stride(1), cs = x.stride(2);
    size_t stride = x.size(0) > 1 ? static_cast<size_t>(x.stride(0)) : 0;
    auto fits = [](int64_t ld, int64_t len) {
        return ld >= len && ld <= std::numeric_limits<int>::max();
    };
    if (cs == 1 || cols == 1) {
        int64_t ld = rows > 1 ? rs : cols;
        if (fits(ld, cols))
            return Layout{false, static_cast<size_t>(ld), stride};
    }
    if (rs == 1 || rows == 1) {
        int64_t ld = cols > 1 ? cs : rows;
        if (fits(ld, rows))
            return Layout{true, static_cast<size_t>(ld), stride};
    }
    return std::nullopt;
}

// x, or its contiguous copy when layout_of refuses it, with its layout.
at::Tensor readable(const at::Tensor &x, Layout *layout) {
    if (std::optional<Layout> l = layout_of(x)) {
        *layout = *l;
        return x;
    }
    at::Tensor copy = x.contiguous();
    std::optional<Layout> l = layout_of(copy);
    TORCH_CHECK(l.has_value(), "bmm on rill: rows of ", x.size(2),
                " floats are longer than rill_op_matmul_batched_f32 takes (INT_MAX); split the "
                "product");
    *layout = *l;
    return copy;
}

} // namespace

void batched_product_into(at::Tensor &c, const at::Tensor &a, const at::Tensor &b) {
    int64_t count = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
    if (c.numel() == 0)
        return;
    if (k == 0) {
        c.fill_(0.0); // an empty sum
        return;
    }
    Layout la{}, lb{};
    at::Tensor ar = readable(a, &la), br = readable(b, &lb);
    unsigned flags =
        (la.transposed ? RILL_MATMUL_A_T : 0u) | (lb.transposed ? RILL_MATMUL_B_T : 0u);
    rill_matmul_batch batch = {static_cast<size_t>(count), la.ld, lb.ld, la.stride, lb.stride};
    TORCH_RILL_CHECK(rill_op_matmul_batched_f32(
        stream_of(c), c.data_ptr<float>(), ar.const_data_ptr<float>(), br.const_data_ptr<float>(),
        static_cast<size_t>(m), static_cast<size_t>(k), static_cast<size_t>(n), flags, &batch));
}

namespace {

// Whether the kernels take a [.., m, k] times b [.., k, n]: float32 on one
// rill device, dims dimensions each, equal batch sizes.
bool takes(const at::Tensor &a, const at::Tensor &b, int64_t dims) {
    return is_f32(a) && is_f32(b) && a.device() == b.device() && a.dim() == dims &&
           b.dim() == dims && a.size(dims - 1) == b.size(dims - 2) &&
           (dims == 2 || a.size(0) == b.size(0));
}

// Whether the matrix t [rows, cols] is the transpose of a contiguous
// [cols, rows] one (and not contiguous itself).
bool transposed(const at::Tensor &t) {
    return t.dim() == 2 && !t.is_contiguous() && t.stride(0) == 1 &&
           t.stride(1) == std::max<int64_t>(t.size(0), 1);
}

// A bias added to a matrix product: its data and the strides that
// broadcast it to [m, n].
struct Bias {
    const float *data;
    size_t rs, cs;
};

// c = a b (+ bias) for batch products [m, k] x [k, n], c new and
// contiguous; a bias only for matrices.
at::Tensor product(const at::Tensor &a, const at::Tensor &b, const Bias *bias = nullptr) {
    int64_t dims = a.dim();
    int64_t batch = dims == 3 ? a.size(0) : 1;
    int64_t m = a.size(dims - 2), k = a.size(dims - 1), n = b.size(dims - 1);
    at::Tensor c =
        dims == 3 ? at::empty({batch, m, n}, a.options()) : at::empty({m, n}, a.options());
    if (c.numel() == 0)
        return c;
    if (k == 0)
        return c.fill_(0.0); // an empty sum (addmm sends k 0 to the fallback)
    if (dims == 3) {
        batched_product_into(c, a, b);
        return c;
    }
    unsigned flags = 0;
    at::Tensor ac = a, bc = b;
    if (transposed(a))
        flags |= RILL_MATMUL_A_T;
    else
        ac = a.contiguous();
    if (transposed(b))
        flags |= RILL_MATMUL_B_T;
    else
        bc = b.contiguous();
    rill_stream *s = stream_of(c);
    float *cp = c.data_ptr<float>();
    const float *ap = ac.const_data_ptr<float>(), *bp = bc.const_data_ptr<float>();
    size_t um = static_cast<size_t>(m), uk = static_cast<size_t>(k), un = static_cast<size_t>(n);
    if (bias != nullptr)
        TORCH_RILL_CHECK(
            rill_op_addmm_f32(s, cp, ap, bp, bias->data, bias->rs, bias->cs, um, uk, un, flags));
    else
        TORCH_RILL_CHECK(rill_op_matmul_ex_f32(s, cp, ap, bp, um, uk, un, flags));
    return c;
}

at::Tensor mm(const at::Tensor &a, const at::Tensor &b) {
    if (!takes(a, b, 2))
        return call_fallback_fn<&boxed_fallback, at::_ops::mm>::call(a, b);
    return product(a, b);
}

at::Tensor bmm(const at::Tensor &a, const at::Tensor &b) {
    if (!takes(a, b, 3))
        return call_fallback_fn<&boxed_fallback, at::_ops::bmm>::call(a, b);
    return product(a, b);
}

// bias broadcasts to [m, n] (as addmm's self must).
bool broadcasts(const at::Tensor &bias, int64_t m, int64_t n) {
    if (bias.dim() > 2)
        return false;
    int64_t shape[2] = {m, n};
    for (int64_t d = 0; d < bias.dim(); d++) {
        int64_t size = bias.size(bias.dim() - 1 - d), want = shape[1 - d];
        if (size != 1 && size != want)
            return false;
    }
    return true;
}

// bias + a b in one launch (rill_op_addmm_f32). An empty sum (k 0) goes
// to the fallback, which gives the broadcast bias.
at::Tensor addmm(const at::Tensor &bias, const at::Tensor &a, const at::Tensor &b,
                 const at::Scalar &beta, const at::Scalar &alpha) {
    if (!is_one(beta) || !is_one(alpha) || !takes(a, b, 2) || a.size(1) == 0 || !is_f32(bias) ||
        bias.device() != a.device() || !broadcasts(bias, a.size(0), b.size(1)))
        return call_fallback_fn<&boxed_fallback, at::_ops::addmm>::call(bias, a, b, beta, alpha);
    std::vector<size_t> strides = broadcast_strides(bias, {a.size(0), b.size(1)});
    Bias bias_of = {bias.const_data_ptr<float>(), strides[0], strides[1]};
    return product(a, b, &bias_of);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("mm", mm);
    m.impl("bmm", bmm);
    m.impl("addmm", addmm);
}

} // namespace torch_rill
