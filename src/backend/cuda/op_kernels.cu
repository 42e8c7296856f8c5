/* SPDX-License-Identifier: MIT */
/* CUDA bodies of the built-in ops that run as kernels rill ships: compiled
 * into a fatbin at build time (cmake/cuda.cmake) and embedded in the
 * library (rill__cuda_op_image), so a machine with the NVIDIA driver alone
 * runs them. Matrix products and the f32 convolution go to cuBLAS and
 * cuDNN instead (cuda_libs.c). Layer: CUDA backend; the launches are built
 * in src/ops. */

/* Each entry takes its op's argument struct (backend/op_args.h) by value as
 * its only parameter, so the struct is exactly the packed parameter buffer
 * a launch carries. Every kernel is correct for any grid and for any block
 * of up to RILL__OP_BLOCK_THREADS threads (the launch bounds; the driver
 * refuses larger blocks): element-wise work runs in grid-stride loops, and
 * a sum's partial is whatever its block added, stored in
 * partials[blockIdx.x]. Results against the CPU bodies:
 *  - element-wise f32 and f16 ops and casts: the same bits (the element
 *    math of backend/op_math.h, which fuses no multiply-add, and the half
 *    conversions of backend/half_bits.h), except
 *    the payload of a NaN that arithmetic made, which on a GPU is its
 *    canonical NaN;
 *  - sum: a double-precision total of the same values added in another
 *    order, so the same float unless the two totals straddle a float
 *    rounding boundary; the final phase adds the partials in index order,
 *    as the CPU does;
 *  - randn: the same formula in double precision, whose libm differs from
 *    the host's in the last bits of a double, below float's resolution;
 *  - conv2d f16: accumulated in float in (c, r, s) order where the CPU's
 *    sgemm picks its own order, then rounded to a half once, as there. */
#include <type_traits>

#include "backend/half_bits.h"
#include "backend/op_args.h"
#include "backend/op_math.h"
#include "rill.h"

/* The structs are the launches' parameter buffers: their sizes as the
 * host's C compiler lays them out (LP64), which CUDA's ABI shares. */
static_assert(sizeof(rill__op_fill_args) == 24, "fill args");
static_assert(sizeof(rill__op_add_args) == 40, "add args");
static_assert(sizeof(rill__op_mul_args) == 32, "mul args");
static_assert(sizeof(rill__op_add_scalar_args) == 32, "add_scalar args");
static_assert(sizeof(rill__op_add_scalar_i64_args) == 32, "add_scalar i64 args");
static_assert(sizeof(rill__op_fill_bits_args) == 32, "fill bits args");
static_assert(sizeof(rill__op_sum_partial_args) == 32, "sum partial args");
static_assert(sizeof(rill__op_sum_final_args) == 24, "sum final args");
static_assert(sizeof(rill__op_randn_args) == 32, "randn args");
static_assert(sizeof(rill__op_cast_args) == 24, "cast args");
static_assert(sizeof(rill__op_f16_args) == 40, "f16 args");
static_assert(sizeof(rill__op_sum_f16_args) == 32, "sum f16 args");
static_assert(sizeof(rill__op_sum_final_f16_args) == 24, "sum final f16 args");
static_assert(sizeof(rill__op_conv2d_f16_args) == 96, "conv2d f16 args");
static_assert(sizeof(rill__op_strided_args) == 232, "strided args");
static_assert(sizeof(rill__op_map_args) == 32, "map args");
static_assert(sizeof(rill__op_masked_scale_args) == 40, "masked scale args");
static_assert(sizeof(rill__op_select_args) == 312, "select args");
static_assert(sizeof(rill__op_triangle_args) == 56, "triangle args");
static_assert(sizeof(rill__op_reduce_dim_args) == 56, "reduce_dim args");
static_assert(sizeof(rill__op_softmax_args) == 48, "softmax args");
static_assert(sizeof(rill__op_layer_norm_args) == 72, "layer norm args");
static_assert(sizeof(rill__op_layer_norm_backward_args) == 88, "layer norm backward args");
static_assert(sizeof(rill__op_conv2d_ex_args) == 176, "conv2d_ex args");
static_assert(sizeof(rill__op_pool2d_args) == 120, "pool2d args");
static_assert(sizeof(rill__op_embedding_args) == 56, "embedding args");
static_assert(sizeof(rill__op_embedding_backward_args) == 64, "embedding backward args");
static_assert(sizeof(rill__op_max_pool2d_backward_args) == 64, "max_pool2d backward args");
static_assert(sizeof(rill__op_avg_pool2d_backward_args) == 104, "avg_pool2d backward args");
static_assert(sizeof(rill__op_pool2d_ex_args) == 144, "pool2d_ex args");
static_assert(sizeof(rill__op_avg_pool2d_backward_ex_args) == 120, "avg_pool2d backward ex args");
static_assert(sizeof(rill__op_nll_loss_args) == 88, "nll_loss args");
static_assert(sizeof(rill__op_nll_loss_backward_args) == 88, "nll_loss backward args");

#define ENTRY extern "C" __global__ void __launch_bounds__(RILL__OP_BLOCK_THREADS)

/* ---- grid-stride loops ---- */

static __device__ size_t first_index() {
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ size_t grid_threads() {
    return (size_t)gridDim.x * blockDim.x;
}

/* ---- element-wise f32 ---- */

ENTRY rill__cuda_op_fill_f32(rill__op_fill_args a) {
    for (size_t i = first_index(); i < a.n; i += grid_threads())
        a.x[i] = a.value;
}

/* a + alpha * b as two rounded operations, as the CPU computes it. */
ENTRY rill__cuda_op_add_f32(rill__op_add_args a) {
    for (size_t i = first_index(); i < a.n; i += grid_threads())
        a.out[i] = __fadd_rn(a.a[i], __fmul_rn(a.alpha, a.b[i]));
}

ENTRY rill__cuda_op_mul_f32(rill__op_mul_args a) {
    for (size_t i = first_index(); i < a.n; i += grid_threads())
        a.out[i] = __fmul_rn(a.a[i], a.b[i]);
}

ENTRY rill__cuda_op_add_scalar_f32(rill__op_add_scalar_args a) {
    for (size_t i = first_index(); i < a.n; i += grid_threads())
        a.out[i] = __fadd_rn(a.a[i], a.value);
}

ENTRY rill__cuda_op_add_scalar_i64(rill__op_add_scalar_i64_args a) {
    for (size_t i = first_index(); i < a.n; i += grid_threads())
        a.out[i] = (int64_t)((uint64_t)a.a[i] + (uint64_t)a.value);
}

/* One switch on the width per launch, a store of that width per element. */
ENTRY rill__cuda_op_fill_bits(rill__op_fill_bits_args a) {
    switch (a.element_bytes) {
    case 1:
        for (size_t i = first_index(); i < a.n; i += grid_threads())
            static_cast<uint8_t *>(a.x)[i] = static_cast<uint8_t>(a.bits);
        break;
    case 2:
        for (size_t i = first_index(); i < a.n; i += grid_threads())
            static_cast<uint16_t *>(a.x)[i] = static_cast<uint16_t>(a.bits);
        break;
    case 4:
        for (size_t i = first_index(); i < a.n; i += grid_threads())
            static_cast<uint32_t *>(a.x)[i] = static_cast<uint32_t>(a.bits);
        break;
    default:
        for (size_t i = first_index(); i < a.n; i += grid_threads())
            static_cast<uint64_t *>(a.x)[i] = a.bits;
        break;
    }
}

/* ---- element-wise f16: computed in float, rounded once ---- */

ENTRY rill__cuda_op_fill_f16(rill__op_f16_args a) {
    uint16_t value = rill__half_from_float(a.value);
    for (size_t i = first_index(); i < a.n; i += grid_threads())
        a.out[i] = value;
}

ENTRY rill__cuda_op_add_f16(rill__op_f16_args a) {
    for (size_t i = first_index(); i < a.n; i += grid_threads()) {
        float x = rill__half_to_float(a.a[i]), y = rill__half_to_float(a.b[i]);
        a.out[i] = rill__half_from_float(__fadd_rn(x, __fmul_rn(a.value, y)));
    }
}

ENTRY rill__cuda_op_mul_f16(rill__op_f16_args a) {
    for (size_t i = first_index(); i < a.n; i += grid_threads()) {
        float x = rill__half_to_float(a.a[i]), y = rill__half_to_float(a.b[i]);
        a.out[i] = rill__half_from_float(__fmul_rn(x, y));
    }
}

ENTRY rill__cuda_op_add_scalar_f16(rill__op_f16_args a) {
    for (size_t i = first_index(); i < a.n; i += grid_threads())
        a.out[i] = rill__half_from_float(__fadd_rn(rill__half_to_float(a.a[i]), a.value));
}

/* ---- casts ---- */

ENTRY rill__cuda_op_cast_f32_f16(rill__op_cast_args a) {
    const float *in = (const float *)a.in;
    uint16_t *out = (uint16_t *)a.out;
    for (size_t i = first_index(); i < a.n; i += grid_threads())
        out[i] = rill__half_from_float(in[i]);
}

ENTRY rill__cuda_op_cast_f16_f32(rill__op_cast_args a) {
    const uint16_t *in = (const uint16_t *)a.in;
    float *out = (float *)a.out;
    for (size_t i = first_index(); i < a.n; i += grid_threads())
        out[i] = rill__half_to_float(in[i]);
}

/* ---- random normal fill ---- */

ENTRY rill__cuda_op_randn_f32(rill__op_randn_args a) {
    double mean = a.mean, std = a.std;
    for (size_t i = first_index(); i < a.n; i += grid_threads())
        a.x[i] = rill__op_randn_element(mean, std, a.seed, i);
}

/* ---- sum ---- */

/* The sum of every thread's v, in thread 0 (the other threads get 0):
 * a tree over shared memory in a fixed order, so a launch with the same
 * block gives the same bits. Every thread of the block must call it. */
static __device__ double block_sum(double v) {
    __shared__ double lane[RILL__OP_BLOCK_THREADS];
    unsigned t = threadIdx.x, threads = blockDim.x;
    lane[t] = v;
    __syncthreads();
    unsigned width = 1;
    while (width < threads)
        width <<= 1;
    for (unsigned half = width / 2; half > 0; half /= 2) {
        if (t < half && t + half < threads)
            lane[t] += lane[t + half];
        __syncthreads();
    }
    return t == 0 ? lane[0] : 0.0;
}

/* The block's share of a[0..n), a grid-stride run over the blocks that
 * take part (all of them with partials, block 0 alone without). */
template <typename T, typename Load>
static __device__ double sum_share(const T *a, size_t n, bool whole_grid, Load load) {
    size_t blocks = whole_grid ? gridDim.x : 1;
    size_t stride = blocks * blockDim.x;
    double acc = 0.0;
    for (size_t i = first_index(); i < n; i += stride)
        acc += (double)load(a[i]);
    return block_sum(acc);
}

struct load_float {
    __device__ float operator()(float x) const {
        return x;
    }
};
struct load_half {
    __device__ float operator()(uint16_t h) const {
        return rill__half_to_float(h);
    }
};

/* Without partials only block 0 works, on all of a: the op layer launches
 * one block then, and more blocks would write out[0] with partial sums. */
ENTRY rill__cuda_op_sum_f32_partial(rill__op_sum_partial_args a) {
    bool whole_grid = a.partials != NULL;
    if (!whole_grid && blockIdx.x != 0)
        return;
    double total = sum_share(a.a, a.n, whole_grid, load_float());
    if (threadIdx.x != 0)
        return;
    if (whole_grid)
        a.partials[blockIdx.x] = total;
    else
        a.out[0] = (float)total;
}

ENTRY rill__cuda_op_sum_f16_partial(rill__op_sum_f16_args a) {
    bool whole_grid = a.partials != NULL;
    if (!whole_grid && blockIdx.x != 0)
        return;
    double total = sum_share(a.a, a.n, whole_grid, load_half());
    if (threadIdx.x != 0)
        return;
    if (whole_grid)
        a.partials[blockIdx.x] = total;
    else
        a.out[0] = rill__half_from_float((float)total);
}

/* The partials one after another, as the CPU adds them: count is the
 * partial phase's block count, a few hundred at most. */
static __device__ double sum_in_order(const double *partials, size_t count) {
    double total = 0.0;
    for (size_t i = 0; i < count; i++)
        total += partials[i];
    return total;
}

ENTRY rill__cuda_op_sum_f32_final(rill__op_sum_final_args a) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        a.out[0] = (float)sum_in_order(a.partials, a.count);
}

ENTRY rill__cuda_op_sum_f16_final(rill__op_sum_final_f16_args a) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        a.out[0] = rill__half_from_float((float)sum_in_order(a.partials, a.count));
}

/* ---- conv2d f16 ---- */

/* Filters per thread: each input value loaded is used this many times. */
#define CONV_FILTERS 8

/* out[img, kk, y, x] = sum over (ci, ri, si) of in[img, ci, y+ri, x+si] *
 * weight[kk, ci, ri, si], in float, rounded to a half once. One work item
 * is one output pixel for CONV_FILTERS consecutive filters, x fastest, so
 * a warp reads neighbouring inputs and (mostly) the same weights. The
 * bands, items and scratch slots of the CPU body are not needed here. */
ENTRY rill__cuda_op_conv2d_f16(rill__op_conv2d_f16_args a) {
    size_t oh = a.h - a.r + 1, ow = a.w - a.s + 1;
    size_t groups = (a.k + CONV_FILTERS - 1) / CONV_FILTERS;
    size_t rs = a.r * a.s, crs = a.c * rs;
    size_t items = a.n * groups * oh * ow;
    for (size_t item = first_index(); item < items; item += grid_threads()) {
        size_t x = item % ow, t = item / ow;
        size_t y = t % oh;
        t /= oh;
        size_t k0 = (t % groups) * CONV_FILTERS, img = t / groups;
        /* Filters past k repeat the last one and are not stored. */
        const float *wrow[CONV_FILTERS];
        for (int j = 0; j < CONV_FILTERS; j++)
            wrow[j] = a.weight + (k0 + j < a.k ? k0 + j : a.k - 1) * crs;
        float acc[CONV_FILTERS];
        for (int j = 0; j < CONV_FILTERS; j++)
            acc[j] = 0.0f;
        const uint16_t *plane = a.in + img * a.c * a.h * a.w + y * a.w + x;
        for (size_t ci = 0; ci < a.c; ci++, plane += a.h * a.w) {
            for (size_t ri = 0; ri < a.r; ri++) {
                for (size_t si = 0; si < a.s; si++) {
                    float v = rill__half_to_float(plane[ri * a.w + si]);
                    size_t wi = ci * rs + ri * a.s + si;
                    for (int j = 0; j < CONV_FILTERS; j++)
                        acc[j] = fmaf(v, wrow[j][wi], acc[j]);
                }
            }
        }
        uint16_t *dst = a.out + ((img * a.k + k0) * oh + y) * ow + x;
        for (int j = 0; j < CONV_FILTERS; j++)
            if (k0 + j < a.k)
                dst[(size_t)j * oh * ow] = rill__half_from_float(acc[j]);
    }
}

/* ---- tensor ops: strided, maps, along one dimension, pooling ----
 *
 * Against the CPU bodies: copies, and the binary ops and maps made of one
 * IEEE operation, give the same bits; the maps of the math library (exp,
 * erf, tanh, pow, ...) use CUDA's, within a few units in the last place of
 * the host's; sums and softmax add in double precision in the CPU's order
 * of d; the strided conv2d accumulates in float in (c, r, s) order, as the
 * f16 kernel does. */

/* The offset of linear index i of p's shape in each operand. */
static __device__ void strided_offsets(const rill__op_strided_args &p, size_t i, size_t *oo,
                                       size_t *ao, size_t *bo) {
    size_t o = 0, a = 0, b = 0;
    for (uint32_t d = p.ndim; d-- > 0;) {
        size_t at = i % p.shape[d];
        i /= p.shape[d];
        o += at * p.out_strides[d];
        a += at * p.a_strides[d];
        b += at * p.b_strides[d];
    }
    *oo = o;
    *ao = a;
    *bo = b;
}

ENTRY rill__cuda_op_copy_strided_f32(rill__op_strided_args p) {
    for (size_t i = first_index(); i < p.n; i += grid_threads()) {
        size_t oo, ao, bo;
        strided_offsets(p, i, &oo, &ao, &bo);
        p.out[oo] = p.a[ao];
    }
}

ENTRY rill__cuda_op_binary_f32(rill__op_strided_args p) {
    for (size_t i = first_index(); i < p.n; i += grid_threads()) {
        size_t oo, ao, bo;
        strided_offsets(p, i, &oo, &ao, &bo);
        p.out[oo] = rill__op_binary_value(p.op, p.a[ao], p.b[bo]);
    }
}

ENTRY rill__cuda_op_map_f32(rill__op_map_args p) {
    for (size_t i = first_index(); i < p.n; i += grid_threads())
        p.out[i] = rill__op_map_value(p.op, p.a[i], p.alpha);
}

ENTRY rill__cuda_op_masked_scale_f32(rill__op_masked_scale_args p) {
    for (size_t i = first_index(); i < p.n; i += grid_threads())
        p.out[i] = __fmul_rn(__fmul_rn(p.a[i], p.mask[i] != 0 ? 1.0f : 0.0f), p.scale);
}

/* ---- compare and where: operands of any element type ---- */

/* The element offsets of linear index i of p's shape in out, a, b and cond. */
static __device__ void select_offsets(const rill__op_select_args &p, size_t i, size_t off[4]) {
    off[0] = off[1] = off[2] = off[3] = 0;
    for (uint32_t d = p.ndim; d-- > 0;) {
        size_t at = i % p.shape[d];
        i /= p.shape[d];
        off[0] += at * p.out_strides[d];
        off[1] += at * p.a_strides[d];
        off[2] += at * p.b_strides[d];
        off[3] += at * p.cond_strides[d];
    }
}

/* An operand's element at off, or, where the operand is NULL, the number
 * whose bits are in the low bytes of bits. */
template <typename T> static __device__ T select_load(const void *base, size_t off, uint64_t bits) {
    if (base != NULL)
        return static_cast<const T *>(base)[off];
    T v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

template <typename T> static __device__ uint8_t compare_value(uint32_t op, T x, T y) {
    switch (op) {
    case RILL_COMPARE_EQ:
        return x == y;
    case RILL_COMPARE_NE:
        return x != y;
    case RILL_COMPARE_LT:
        return x < y;
    case RILL_COMPARE_LE:
        return x <= y;
    case RILL_COMPARE_GT:
        return x > y;
    default:
        return x >= y;
    }
}

/* With as_bool, bytes read as bools: 1 where not 0. */
template <typename T, bool as_bool = false>
static __device__ void compare_all(const rill__op_select_args &p) {
    uint8_t *out = static_cast<uint8_t *>(p.out);
    for (size_t i = first_index(); i < p.n; i += grid_threads()) {
        size_t off[4];
        select_offsets(p, i, off);
        T x = select_load<T>(p.a, off[1], 0), y = select_load<T>(p.b, off[2], p.b_bits);
        if (as_bool) {
            x = x != 0;
            y = y != 0;
        }
        out[off[0]] = compare_value(p.op, x, y);
    }
}

ENTRY rill__cuda_op_compare(rill__op_select_args p) {
    switch (p.type) {
    case RILL_ELEMENT_U8:
        compare_all<uint8_t>(p);
        break;
    case RILL_ELEMENT_BOOL:
        compare_all<uint8_t, true>(p);
        break;
    case RILL_ELEMENT_I32:
        compare_all<int32_t>(p);
        break;
    case RILL_ELEMENT_I64:
        compare_all<int64_t>(p);
        break;
    case RILL_ELEMENT_F32:
        compare_all<float>(p);
        break;
    case RILL_ELEMENT_F64:
        compare_all<double>(p);
        break;
    }
}

/* Elements of T's size copied as bits. */
template <typename T> static __device__ void where_all(const rill__op_select_args &p) {
    T *out = static_cast<T *>(p.out);
    for (size_t i = first_index(); i < p.n; i += grid_threads()) {
        size_t off[4];
        select_offsets(p, i, off);
        out[off[0]] = p.cond[off[3]] != 0 ? select_load<T>(p.a, off[1], p.a_bits)
                                          : select_load<T>(p.b, off[2], p.b_bits);
    }
}

ENTRY rill__cuda_op_where(rill__op_select_args p) {
    switch (p.size) {
    case 1:
        where_all<uint8_t>(p);
        break;
    case 2:
        where_all<uint16_t>(p);
        break;
    case 4:
        where_all<uint32_t>(p);
        break;
    default:
        where_all<uint64_t>(p);
        break;
    }
}

/* ---- convert: rill_op_convert's rules ---- */

/* An element read as an integer (a bool as 0 or 1) or as a double. */
struct converted {
    bool floating;
    int64_t i;
    double f;
};

template <typename T, bool as_bool = false>
static __device__ converted convert_load(const void *base, size_t off) {
    T x = static_cast<const T *>(base)[off];
    if (as_bool)
        return {false, x != 0, 0.0};
    if (std::is_floating_point<T>::value)
        return {true, 0, (double)x};
    return {false, (int64_t)x, 0.0};
}

/* A floating value rounded toward zero; NaN and values past the range give
 * the lowest value, as on x86 (CUDA's conversions saturate instead). */
static __device__ int64_t float_to_i64(double x) {
    return x >= -9223372036854775808.0 && x < 9223372036854775808.0 ? (int64_t)x : INT64_MIN;
}
static __device__ int32_t float_to_i32(double x) {
    return x > -2147483649.0 && x < 2147483648.0 ? (int32_t)x : INT32_MIN;
}

static __device__ void convert_store(void *base, size_t off, uint32_t type, converted v) {
    switch (type) {
    case RILL_ELEMENT_U8:
        static_cast<uint8_t *>(base)[off] = (uint8_t)(v.floating ? float_to_i64(v.f) : v.i);
        break;
    case RILL_ELEMENT_I32:
        static_cast<int32_t *>(base)[off] = v.floating ? float_to_i32(v.f) : (int32_t)v.i;
        break;
    case RILL_ELEMENT_I64:
        static_cast<int64_t *>(base)[off] = v.floating ? float_to_i64(v.f) : v.i;
        break;
    case RILL_ELEMENT_F32:
        /* From an integer directly: through a double would round twice. */
        static_cast<float *>(base)[off] = v.floating ? (float)v.f : (float)v.i;
        break;
    case RILL_ELEMENT_F64:
        static_cast<double *>(base)[off] = v.floating ? v.f : (double)v.i;
        break;
    default:
        static_cast<uint8_t *>(base)[off] = v.floating ? v.f != 0.0 : v.i != 0;
        break;
    }
}

template <typename T, bool as_bool = false>
static __device__ void convert_all(const rill__op_select_args &p) {
    for (size_t i = first_index(); i < p.n; i += grid_threads()) {
        size_t off[4];
        select_offsets(p, i, off);
        convert_store(p.out, off[0], p.op, convert_load<T, as_bool>(p.a, off[1]));
    }
}

ENTRY rill__cuda_op_convert(rill__op_select_args p) {
    switch (p.type) {
    case RILL_ELEMENT_U8:
        convert_all<uint8_t>(p);
        break;
    case RILL_ELEMENT_I32:
        convert_all<int32_t>(p);
        break;
    case RILL_ELEMENT_I64:
        convert_all<int64_t>(p);
        break;
    case RILL_ELEMENT_F32:
        convert_all<float>(p);
        break;
    case RILL_ELEMENT_F64:
        convert_all<double>(p);
        break;
    case RILL_ELEMENT_BOOL:
        convert_all<uint8_t, true>(p);
        break;
    }
}

ENTRY rill__cuda_op_arange(rill__op_arange_args p) {
    for (size_t i = first_index(); i < p.n; i += grid_threads()) {
        int64_t v = (int64_t)((uint64_t)p.start + (uint64_t)i * (uint64_t)p.step);
        convert_store(p.out, i, p.type, converted{false, v, 0.0});
    }
}

/* One thread per element; outside the triangle, 0 of the element's width. */
template <typename T> static __device__ void triangle_all(const rill__op_triangle_args &p) {
    T *out = static_cast<T *>(p.out);
    const T *in = static_cast<const T *>(p.in);
    size_t n = p.batch * p.rows * p.cols;
    for (size_t e = first_index(); e < n; e += grid_threads()) {
        int64_t j = (int64_t)(e % p.cols), i = (int64_t)((e / p.cols) % p.rows);
        bool keep = p.upper ? j - i >= p.diagonal : j - i <= p.diagonal;
        out[e] = keep ? in[e] : (T)0;
    }
}

ENTRY rill__cuda_op_triangle(rill__op_triangle_args p) {
    switch (p.size) {
    case 1:
        triangle_all<uint8_t>(p);
        break;
    case 2:
        triangle_all<uint16_t>(p);
        break;
    case 4:
        triangle_all<uint32_t>(p);
        break;
    default:
        triangle_all<uint64_t>(p);
        break;
    }
}

/* One thread per output (o, i): consecutive threads read consecutive i. */
ENTRY rill__cuda_op_reduce_dim_bool(rill__op_reduce_bool_args p) {
    size_t outputs = p.outer * p.inner;
    for (size_t item = first_index(); item < outputs; item += grid_threads()) {
        size_t o = item / p.inner, i = item % p.inner;
        const uint8_t *a = p.a + o * p.dim * p.inner + i;
        int64_t count = 0;
        for (size_t d = 0; d < p.dim; d++)
            count += a[d * p.inner] != 0;
        if (p.op == RILL_REDUCE_BOOL_COUNT)
            static_cast<int64_t *>(p.out)[item] = count;
        else
            static_cast<uint8_t *>(p.out)[item] =
                p.op == RILL_REDUCE_BOOL_ANY ? count > 0 : count == (int64_t)p.dim;
    }
}

/* One thread per output (o, i): consecutive threads read consecutive i. */
ENTRY rill__cuda_op_reduce_dim_f32(rill__op_reduce_dim_args p) {
    size_t outputs = p.outer * p.inner;
    bool is_sum = p.op == RILL_REDUCE_DIM_SUM || p.op == RILL_REDUCE_DIM_MEAN;
    bool is_max = p.op == RILL_REDUCE_DIM_MAX;
    for (size_t item = first_index(); item < outputs; item += grid_threads()) {
        size_t o = item / p.inner, i = item % p.inner;
        const float *a = p.a + o * p.dim * p.inner + i;
        if (is_sum) {
            double total = 0.0;
            for (size_t d = 0; d < p.dim; d++)
                total += (double)a[d * p.inner];
            if (p.op == RILL_REDUCE_DIM_MEAN)
                total /= (double)p.dim;
            p.out[item] = (float)total;
            continue;
        }
        float best = a[0];
        size_t at = 0;
        for (size_t d = 1; d < p.dim && !isnan(best); d++) {
            float v = a[d * p.inner];
            if (isnan(v) || (is_max ? v > best : v < best)) {
                best = v;
                at = d;
            }
        }
        p.out[item] = best;
        if (p.indices != NULL)
            p.indices[item] = (int64_t)at;
    }
}

ENTRY rill__cuda_op_softmax_f32(rill__op_softmax_args p) {
    size_t rows = p.outer * p.inner, step = p.inner;
    for (size_t row = first_index(); row < rows; row += grid_threads()) {
        size_t o = row / p.inner, i = row % p.inner;
        const float *a = p.a + o * p.dim * p.inner + i;
        float *out = p.out + o * p.dim * p.inner + i;
        float m = a[0];
        for (size_t d = 1; d < p.dim; d++)
            if (a[d * step] > m || isnan(a[d * step]))
                m = a[d * step];
        double total = 0.0;
        for (size_t d = 0; d < p.dim; d++)
            total += (double)expf(__fsub_rn(a[d * step], m));
        if (p.is_log) {
            /* (a - m) - log(sum), as the CPU body computes it. */
            float log_total = (float)log(total);
            for (size_t d = 0; d < p.dim; d++)
                out[d * step] = __fsub_rn(__fsub_rn(a[d * step], m), log_total);
        } else {
            float scale = (float)(1.0 / total);
            for (size_t d = 0; d < p.dim; d++)
                out[d * step] = __fmul_rn(expf(__fsub_rn(a[d * step], m)), scale);
        }
    }
}

/* One thread per row: its sums in double precision, then the float
 * arithmetic of the CPU body, each operation rounded (no fused
 * multiply-add). */
ENTRY rill__cuda_op_layer_norm_f32(rill__op_layer_norm_args p) {
    for (size_t row = first_index(); row < p.rows; row += grid_threads()) {
        const float *x = p.x + row * p.n;
        float *out = p.out + row * p.n;
        double total = 0.0;
        for (size_t j = 0; j < p.n; j++)
            total += (double)x[j];
        double mean = total / (double)p.n, squares = 0.0;
        for (size_t j = 0; j < p.n; j++) {
            double d = (double)x[j] - mean;
            squares += d * d;
        }
        float m = (float)mean, r = (float)(1.0 / sqrt(squares / (double)p.n + (double)p.eps));
        if (p.mean != NULL)
            p.mean[row] = m;
        if (p.rstd != NULL)
            p.rstd[row] = r;
        for (size_t j = 0; j < p.n; j++) {
            float v = __fmul_rn(__fsub_rn(x[j], m), r);
            if (p.weight != NULL)
                v = __fmul_rn(v, p.weight[j]);
            if (p.bias != NULL)
                v = __fadd_rn(v, p.bias[j]);
            out[j] = v;
        }
    }
}

/* One thread per row (dx), then one per column (dweight, dbias); the CPU
 * body's arithmetic, each float operation rounded. */
ENTRY rill__cuda_op_layer_norm_backward_f32(rill__op_layer_norm_backward_args p) {
    size_t items = (p.dx != NULL ? p.rows : 0) + p.n;
    for (size_t item = first_index(); item < items; item += grid_threads()) {
        if (p.dx != NULL && item < p.rows) {
            size_t r = item;
            const float *x = p.x + r * p.n, *dy = p.dy + r * p.n;
            float m = p.mean[r], rs = p.rstd[r];
            double sum_g = 0.0, sum_gx = 0.0;
            for (size_t j = 0; j < p.n; j++) {
                float g = p.weight != NULL ? __fmul_rn(dy[j], p.weight[j]) : dy[j];
                float xhat = __fmul_rn(__fsub_rn(x[j], m), rs);
                sum_g += (double)g;
                sum_gx += (double)__fmul_rn(g, xhat);
            }
            float mg = (float)(sum_g / (double)p.n), mgx = (float)(sum_gx / (double)p.n);
            for (size_t j = 0; j < p.n; j++) {
                float g = p.weight != NULL ? __fmul_rn(dy[j], p.weight[j]) : dy[j];
                float xhat = __fmul_rn(__fsub_rn(x[j], m), rs);
                p.dx[r * p.n + j] =
                    __fmul_rn(rs, __fsub_rn(__fsub_rn(g, mg), __fmul_rn(xhat, mgx)));
            }
            continue;
        }
        size_t j = item - (p.dx != NULL ? p.rows : 0);
        if (p.dweight == NULL && p.dbias == NULL)
            continue;
        double dw = 0.0, db = 0.0;
        for (size_t r = 0; r < p.rows; r++) {
            float dy = p.dy[r * p.n + j];
            float xhat = __fmul_rn(__fsub_rn(p.x[r * p.n + j], p.mean[r]), p.rstd[r]);
            dw += (double)__fmul_rn(dy, xhat);
            db += (double)dy;
        }
        if (p.dweight != NULL)
            p.dweight[j] = (float)dw;
        if (p.dbias != NULL)
            p.dbias[j] = (float)db;
    }
}

/* One thread per output pixel and filter, over the c/groups channels of
 * the filter's group and its dilated taps; zero padding by bounds. The
 * CPU body's bands and scratch are not needed here. */
ENTRY rill__cuda_op_conv2d_ex_f32(rill__op_conv2d_ex_args p) {
    size_t items = p.n * p.k * p.oh * p.ow;
    size_t cg = p.c / p.groups, kg = p.k / p.groups;
    for (size_t item = first_index(); item < items; item += grid_threads()) {
        size_t x = item % p.ow, t = item / p.ow;
        size_t y = t % p.oh;
        t /= p.oh;
        size_t kk = t % p.k, img = t / p.k;
        const float *wk = p.weight + kk * cg * p.r * p.s;
        const float *first = p.in + (img * p.c + kk / kg * cg) * p.h * p.w;
        float acc = 0.0f;
        for (size_t ci = 0; ci < cg; ci++) {
            const float *plane = first + ci * p.h * p.w;
            for (size_t ri = 0; ri < p.r; ri++) {
                size_t iy = y * p.stride_h + ri * p.dil_h;
                if (iy < p.pad_h || iy - p.pad_h >= p.h)
                    continue;
                for (size_t si = 0; si < p.s; si++) {
                    size_t ix = x * p.stride_w + si * p.dil_w;
                    if (ix < p.pad_w || ix - p.pad_w >= p.w)
                        continue;
                    acc = fmaf(plane[(iy - p.pad_h) * p.w + ix - p.pad_w],
                               wk[(ci * p.r + ri) * p.s + si], acc);
                }
            }
        }
        p.out[item] = acc;
    }
}

ENTRY rill__cuda_op_pool2d_f32(rill__op_pool2d_args p) {
    size_t items = p.planes * p.oh * p.ow;
    bool is_max = p.op == RILL_POOL_MAX;
    float divisor = (float)(p.r * p.s);
    for (size_t item = first_index(); item < items; item += grid_threads()) {
        size_t x = item % p.ow, t = item / p.ow;
        size_t y = t % p.oh, plane = t / p.oh;
        const float *img = p.in + plane * p.h * p.w;
        size_t top = y * p.stride_h, left = x * p.stride_w;
        size_t y0 = top > p.pad_h ? top - p.pad_h : 0;
        size_t y1 = top + p.r - p.pad_h < p.h ? top + p.r - p.pad_h : p.h;
        size_t x0 = left > p.pad_w ? left - p.pad_w : 0;
        size_t x1 = left + p.s - p.pad_w < p.w ? left + p.s - p.pad_w : p.w;
        float v = is_max ? -INFINITY : 0.0f;
        size_t at = y0 * p.w + x0;
        for (size_t yy = y0; yy < y1; yy++)
            for (size_t xx = x0; xx < x1; xx++) {
                float e = img[yy * p.w + xx];
                if (is_max && p.indices != NULL) {
                    if (e > v || isnan(e)) { /* the first largest, the last NaN */
                        v = e;
                        at = yy * p.w + xx;
                    }
                } else if (is_max) {
                    if (!isnan(v) && (e > v || isnan(e)))
                        v = e; /* the first NaN stays */
                } else
                    v = __fadd_rn(v, e);
            }
        p.out[item] = is_max ? v : __fdiv_rn(v, divisor);
        if (p.indices != NULL)
            p.indices[item] = (int64_t)at;
    }
}

/* An index out of range traps, as PyTorch's device-side assert does: the
 * context fails, and with it every stream of the device (cuda_complete.c),
 * at their next query or synchronize. */
ENTRY rill__cuda_op_embedding_f32(rill__op_embedding_args p) {
    size_t items = p.n * p.dim;
    for (size_t item = first_index(); item < items; item += grid_threads()) {
        size_t i = item / p.dim, d = item % p.dim;
        int64_t r = rill__op_index_at(p.indices, p.index_bytes, i);
        if (r < 0 || (uint64_t)r >= p.rows)
            __trap();
        p.out[item] = p.weight[(size_t)r * p.dim + d];
    }
}

/* Block b takes the b-th slice of the rows, as on the CPU; its threads take
 * the columns, each thread adding its column's values in order of i, so
 * the sums are the CPU's, bit for bit. */
ENTRY rill__cuda_op_embedding_backward_f32(rill__op_embedding_backward_args p) {
    size_t per = (p.rows + gridDim.x - 1) / gridDim.x;
    size_t begin = blockIdx.x * per < p.rows ? blockIdx.x * per : p.rows;
    size_t end = p.rows - begin > per ? begin + per : p.rows;
    for (size_t d = threadIdx.x; d < p.dim; d += blockDim.x) {
        for (size_t r = begin; r < end; r++)
            p.grad_weight[r * p.dim + d] = 0.0f;
        for (size_t i = 0; i < p.n; i++) {
            int64_t r = rill__op_index_at(p.indices, p.index_bytes, i);
            if (r < 0 || (uint64_t)r >= p.rows)
                __trap();
            if ((uint64_t)r < begin || (uint64_t)r >= end || r == p.padding_idx)
                continue;
            p.grad_weight[(size_t)r * p.dim + d] =
                __fadd_rn(p.grad_weight[(size_t)r * p.dim + d], p.grad[i * p.dim + d]);
        }
    }
}

/* ---- the backward of 2-D pooling ---- */

/* One thread per plane, which zeroes it and adds its outputs' gradients in
 * order of (y, x), as the CPU does: the sums are the CPU's, bit for bit,
 * with no atomics. An index out of range traps, as in the embeddings. */
ENTRY rill__cuda_op_max_pool2d_backward_f32(rill__op_max_pool2d_backward_args p) {
    size_t image = p.h * p.w, outputs = p.oh * p.ow;
    for (size_t plane = first_index(); plane < p.planes; plane += grid_threads()) {
        float *gi = p.grad_in + plane * image;
        const float *go = p.grad_out + plane * outputs;
        const int64_t *idx = p.indices + plane * outputs;
        for (size_t i = 0; i < image; i++)
            gi[i] = 0.0f;
        for (size_t i = 0; i < outputs; i++) {
            if (idx[i] < 0 || (uint64_t)idx[i] >= image)
                __trap();
            gi[idx[i]] = __fadd_rn(gi[idx[i]], go[i]);
        }
    }
}

/* One thread per element of grad_in, which gathers the gradients of the
 * windows that hold it in the CPU's order. */
ENTRY rill__cuda_op_avg_pool2d_backward_f32(rill__op_avg_pool2d_backward_args p) {
    size_t items = p.planes * p.h * p.w;
    float divisor = (float)(p.r * p.s);
    for (size_t item = first_index(); item < items; item += grid_threads()) {
        size_t xx = item % p.w, t = item / p.w;
        size_t yy = t % p.h, plane = t / p.h;
        const float *go = p.grad_out + plane * p.oh * p.ow;
        size_t y0, y1, x0, x1;
        rill__op_pool_outputs_of(yy, p.r, p.stride_h, p.pad_h, p.oh, &y0, &y1);
        rill__op_pool_outputs_of(xx, p.s, p.stride_w, p.pad_w, p.ow, &x0, &x1);
        float total = 0.0f;
        for (size_t y = y0; y < y1; y++)
            for (size_t x = x0; x < x1; x++)
                total = __fadd_rn(total, __fdiv_rn(go[y * p.ow + x], divisor));
        p.grad_in[item] = total;
    }
}

/* ---- pooling with dilation, ceil mode and divisor rules ---- */

/* One thread per output, as rill__cuda_op_pool2d_f32; the same choices of
 * maximum and index as the CPU body, and its order of the average's sum. */
ENTRY rill__cuda_op_pool2d_ex_f32(rill__op_pool2d_ex_args p) {
    size_t items = p.planes * p.oh * p.ow;
    for (size_t item = first_index(); item < items; item += grid_threads()) {
        size_t x = item % p.ow, t = item / p.ow;
        size_t y = t % p.oh, plane = t / p.oh;
        const float *img = p.in + plane * p.h * p.w;
        if (p.op == RILL_POOL_MAX) {
            float best = -INFINITY;
            bool found = false;
            size_t at = 0;
            for (size_t i = 0; i < p.r; i++) {
                size_t iy = y * p.stride_h + i * p.dil_h;
                if (iy < p.pad_h || iy - p.pad_h >= p.h)
                    continue;
                for (size_t j = 0; j < p.s; j++) {
                    size_t ix = x * p.stride_w + j * p.dil_w;
                    if (ix < p.pad_w || ix - p.pad_w >= p.w)
                        continue;
                    size_t pos = (iy - p.pad_h) * p.w + ix - p.pad_w;
                    float v = img[pos];
                    if (!found || v > best || isnan(v)) {
                        best = v;
                        at = pos;
                        found = true;
                    }
                }
            }
            p.out[item] = best;
            if (p.indices != NULL)
                p.indices[item] = (int64_t)at;
            continue;
        }
        size_t y0, y1, x0, x1;
        size_t divisor =
            rill__op_avg_pool_window(y, x, p.h, p.w, p.r, p.s, p.stride_h, p.stride_w, p.pad_h,
                                     p.pad_w, p.divisor, p.exclude_pad, &y0, &y1, &x0, &x1);
        float total = 0.0f;
        for (size_t yy = y0; yy < y1; yy++)
            for (size_t xx = x0; xx < x1; xx++)
                total = __fadd_rn(total, img[yy * p.w + xx]);
        p.out[item] = divisor == 0 ? 0.0f : __fdiv_rn(total, (float)divisor);
    }
}

/* One thread per element of grad_in, gathering in the CPU's order. */
ENTRY rill__cuda_op_avg_pool2d_backward_ex_f32(rill__op_avg_pool2d_backward_ex_args p) {
    size_t items = p.planes * p.h * p.w;
    for (size_t item = first_index(); item < items; item += grid_threads()) {
        size_t xx = item % p.w, t = item / p.w;
        size_t yy = t % p.h, plane = t / p.h;
        const float *go = p.grad_out + plane * p.oh * p.ow;
        size_t y0, y1, x0, x1;
        rill__op_pool_outputs_of(yy, p.r, p.stride_h, p.pad_h, p.oh, &y0, &y1);
        rill__op_pool_outputs_of(xx, p.s, p.stride_w, p.pad_w, p.ow, &x0, &x1);
        float total = 0.0f;
        for (size_t y = y0; y < y1; y++)
            for (size_t x = x0; x < x1; x++) {
                size_t a, b, c, d;
                size_t divisor = rill__op_avg_pool_window(y, x, p.h, p.w, p.r, p.s, p.stride_h,
                                                          p.stride_w, p.pad_h, p.pad_w, p.divisor,
                                                          p.exclude_pad, &a, &b, &c, &d);
                total = __fadd_rn(total, __fdiv_rn(go[y * p.ow + x], (float)divisor));
            }
        p.grad_in[item] = total;
    }
}

/* ---- the negative log likelihood loss ---- */

/* A sum is added by one thread in the CPU's order (op_math.h), so its
 * bits are the CPU's; the per-row losses take a thread a row. A target out
 * of range traps, as in the embeddings. */
ENTRY rill__cuda_op_nll_loss_f32(rill__op_nll_loss_args p) {
    size_t rows = p.n * p.inner;
    if (p.reduction != RILL_LOSS_NONE) {
        if (first_index() != 0)
            return;
        float loss = 0.0f, total = 0.0f;
        if (rill__op_nll_loss_reduce(p.input, p.targets, p.index_bytes, p.weight, p.n, p.classes,
                                     p.inner, p.ignore_index, &loss, &total) < rows)
            __trap();
        p.out[0] = p.reduction == RILL_LOSS_MEAN ? __fdiv_rn(loss, total) : loss;
        if (p.total_weight != NULL)
            p.total_weight[0] = total;
        return;
    }
    if (first_index() == 0 && p.total_weight != NULL)
        p.total_weight[0] = 0.0f;
    for (size_t r = first_index(); r < rows; r += grid_threads()) {
        int64_t t = rill__op_index_at(p.targets, p.index_bytes, r);
        if (t == p.ignore_index) {
            p.out[r] = 0.0f;
            continue;
        }
        if (t < 0 || (uint64_t)t >= p.classes)
            __trap();
        size_t b = r / p.inner, e = r - b * p.inner;
        float w = p.weight != NULL ? p.weight[t] : 1.0f;
        p.out[r] = __fmul_rn(-p.input[(b * p.classes + (size_t)t) * p.inner + e], w);
    }
}

/* A thread an element (b, c, e) of grad_input, 0 or its row's gradient. */
ENTRY rill__cuda_op_nll_loss_backward_f32(rill__op_nll_loss_backward_args p) {
    float g = 0.0f;
    if (p.reduction != RILL_LOSS_NONE)
        g = -(p.reduction == RILL_LOSS_MEAN ? __fdiv_rn(p.grad_out[0], p.total_weight[0])
                                            : p.grad_out[0]);
    size_t items = p.n * p.classes * p.inner;
    for (size_t item = first_index(); item < items; item += grid_threads()) {
        size_t e = item % p.inner, c = item / p.inner % p.classes, b = item / p.inner / p.classes;
        size_t r = b * p.inner + e;
        int64_t t = rill__op_index_at(p.targets, p.index_bytes, r);
        if (t != p.ignore_index && (t < 0 || (uint64_t)t >= p.classes))
            __trap();
        float value = 0.0f;
        if (t != p.ignore_index && (uint64_t)t == c) {
            float w = p.weight != NULL ? p.weight[t] : 1.0f;
            value = p.reduction == RILL_LOSS_NONE ? __fmul_rn(-w, p.grad_out[r]) : __fmul_rn(w, g);
        }
        p.grad_input[item] = value;
    }
}
