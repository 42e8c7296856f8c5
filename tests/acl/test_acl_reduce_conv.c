/* SPDX-License-Identifier: MIT */
/* librill_acl's integer arrays, reductions (aclnnReduceSum, aclnnMean,
 * aclnnAmax, aclnnAmin), aclnnConvolution (grouped and dilated too),
 * aclnnAvgPool2d and aclnnMaxPool (with ceil mode, divisors and dilation),
 * against values computed here on the host, and their refusals with
 * ACLNN's codes. */
#include <math.h>

#include "acl_support.h"
#include "aclnnop/aclnn_amax.h"
#include "aclnnop/aclnn_amin.h"
#include "aclnnop/aclnn_avgpool2d.h"
#include "aclnnop/aclnn_convolution.h"
#include "aclnnop/aclnn_max_pool.h"
#include "aclnnop/aclnn_mean.h"
#include "aclnnop/aclnn_reduce_sum.h"

enum { MAX_VALUES = 256 };

/* A contiguous float32 (or dtype) tensor over new device memory holding
 * values (zeros when NULL); *dev receives the memory. */
static aclTensor *tensor_of(const int64_t *dims, uint64_t ndim, aclDataType dtype,
                            const float *values, void **dev) {
    int64_t strides[8], n = 1;
    for (int d = (int)ndim - 1; d >= 0; d--) {
        strides[d] = n;
        n *= dims[d];
    }
    size_t bytes = (size_t)(n ? n : 1) * aclDataTypeSize(dtype);
    assert_true(n <= MAX_VALUES);
    ACL_OK(aclrtMalloc(dev, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    float zeros[MAX_VALUES] = {0};
    ACL_OK(aclrtMemcpy(*dev, bytes, values ? values : zeros, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    aclTensor *t = aclCreateTensor(dims, ndim, dtype, strides, 0, ACL_FORMAT_ND, dims, ndim, *dev);
    assert_non_null(t);
    return t;
}

static void read_back(const void *dev, float *out, size_t count) {
    ACL_OK(aclrtMemcpy(out, count * sizeof(float), dev, count * sizeof(float),
                       ACL_MEMCPY_DEVICE_TO_HOST));
}

static void assert_close(float got, double want) {
    if (!(fabs((double)got - want) <= 1e-5 * (1.0 + fabs(want))))
        fail_msg("got %.9g, want %.9g", (double)got, want);
}

/* Destroys n tensors and frees the memory of each. */
static void release_tensors(aclTensor *const *tensors, void *const *mem, size_t n) {
    for (size_t i = 0; i < n; i++) {
        ACL_OK(aclDestroyTensor(tensors[i]));
        ACL_OK(aclrtFree(mem[i]));
    }
}

/* Destroys n integer arrays. */
static void release_arrays(aclIntArray *const *arrays, size_t n) {
    for (size_t i = 0; i < n; i++)
        ACL_OK(aclDestroyIntArray(arrays[i]));
}

static aclIntArray *ints(const int64_t *v, uint64_t n) {
    aclIntArray *a = aclCreateIntArray(v, n);
    assert_non_null(a);
    return a;
}

static void test_acl_int_arrays(void **state) {
    (void)state;
    int64_t v[17] = {1, 2, 3};
    aclIntArray *a = aclCreateIntArray(v, 3);
    assert_non_null(a);
    assert_null(aclCreateIntArray(NULL, 2));
    assert_string_equal(aclGetRecentErrMsg(), "aclCreateIntArray: value is NULL");
    assert_null(aclCreateIntArray(v, 17));
    assert_non_null(strstr(aclGetRecentErrMsg(), "size 17"));
    aclIntArray *empty = aclCreateIntArray(NULL, 0);
    assert_non_null(empty);
    ACL_OK(aclDestroyIntArray(a));
    ACL_FAILS(aclDestroyIntArray(a), ACLNN_ERR_PARAM_INVALID, "destroyed by aclDestroyIntArray");
    ACL_FAILS(aclDestroyIntArray(NULL), ACLNN_ERR_PARAM_NULLPTR, "array is NULL");
    float one = 1;
    aclScalar *s = aclCreateScalar(&one, ACL_FLOAT);
    ACL_FAILS(aclDestroyIntArray((aclIntArray *)s), ACLNN_ERR_PARAM_INVALID,
              "scalar from aclCreateScalar");
    ACL_FAILS(aclDestroyScalar((aclScalar *)empty), ACLNN_ERR_PARAM_INVALID,
              "array from aclCreateIntArray");
    ACL_OK(aclDestroyScalar(s));
    ACL_OK(aclDestroyIntArray(empty));
}

enum { SUM, MEAN, AMAX, AMIN };

static void reduce(int which, aclTensor *self, const int64_t *dims, uint64_t ndims, bool keep,
                   aclTensor *out) {
    aclIntArray *d = aclCreateIntArray(dims, ndims);
    assert_non_null(d);
    uint64_t ws = 99;
    aclOpExecutor *ex;
    switch (which) {
    case SUM:
        ACL_OK(aclnnReduceSumGetWorkspaceSize(self, d, keep, ACL_FLOAT, out, &ws, &ex));
        ACL_OK(aclnnReduceSum(NULL, ws, ex, NULL));
        break;
    case MEAN:
        ACL_OK(aclnnMeanGetWorkspaceSize(self, d, keep, ACL_FLOAT, out, &ws, &ex));
        ACL_OK(aclnnMean(NULL, ws, ex, NULL));
        break;
    case AMAX:
        ACL_OK(aclnnAmaxGetWorkspaceSize(self, d, keep, out, &ws, &ex));
        ACL_OK(aclnnAmax(NULL, ws, ex, NULL));
        break;
    default:
        ACL_OK(aclnnAminGetWorkspaceSize(self, d, keep, out, &ws, &ex));
        ACL_OK(aclnnAmin(NULL, ws, ex, NULL));
    }
    assert_int_equal(ws, 0);
    ACL_OK(aclDestroyIntArray(d));
    ACL_OK(aclrtSynchronizeStream(NULL));
}

/* The reduction over x[o][l][i] of shape [outer, len, inner]. */
static double host_reduce(int which, const float *x, int o, int len, int inner, int i) {
    double acc = which == AMAX ? -INFINITY : which == AMIN ? INFINITY : 0;
    for (int l = 0; l < len; l++) {
        double v = x[(o * len + l) * inner + i];
        acc = which == AMAX ? fmax(acc, v) : which == AMIN ? fmin(acc, v) : acc + v;
    }
    return which == MEAN ? acc / len : acc;
}

static void test_acl_reductions(void **state) {
    (void)state;
    int64_t d[3] = {2, 3, 4};
    float x[24], r[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)((i * 5) % 13) - 6.5f;
    void *mx, *mo1, *mo2, *mo3;
    aclTensor *tx = tensor_of(d, 3, ACL_FLOAT, x, &mx);
    int64_t d24[2] = {2, 4}, d211[3] = {2, 1, 1}, d34[2] = {3, 4};
    aclTensor *o24 = tensor_of(d24, 2, ACL_FLOAT, NULL, &mo1);
    aclTensor *o211 = tensor_of(d211, 3, ACL_FLOAT, NULL, &mo2);
    aclTensor *o0 = tensor_of(NULL, 0, ACL_FLOAT, NULL, &mo3);
    void *mo4;
    aclTensor *o34 = tensor_of(d34, 2, ACL_FLOAT, NULL, &mo4);
    for (int which = SUM; which <= AMIN; which++) {
        int64_t dim1[1] = {1};
        reduce(which, tx, dim1, 1, false, o24); /* [2, 3, 4] over 1: [2, 4] */
        read_back(mo1, r, 8);
        for (int o = 0; o < 2; o++)
            for (int i = 0; i < 4; i++)
                assert_close(r[o * 4 + i], host_reduce(which, x, o, 3, 4, i));
        int64_t dims12[2] = {-1, 1};
        reduce(which, tx, dims12, 2, true, o211); /* over 1 and 2, kept: [2, 1, 1] */
        read_back(mo2, r, 2);
        for (int o = 0; o < 2; o++)
            assert_close(r[o], host_reduce(which, x, o, 12, 1, 0));
        reduce(which, tx, NULL, 0, false, o0); /* every dimension: a 0-d tensor */
        read_back(mo3, r, 1);
        assert_close(r[0], host_reduce(which, x, 0, 24, 1, 0));
        int64_t dim0[1] = {-3};
        reduce(which, tx, dim0, 1, false, o34); /* over 0: [3, 4] */
        read_back(mo4, r, 12);
        for (int i = 0; i < 12; i++)
            assert_close(r[i], host_reduce(which, x, 0, 2, 12, i));
    }
    release_tensors((aclTensor *[]){tx, o24, o211, o0, o34}, (void *[]){mx, mo1, mo2, mo3, mo4}, 5);
}

static void test_acl_reduction_refusals(void **state) {
    (void)state;
    int64_t d[3] = {2, 3, 4}, d24[2] = {2, 4}, d23[2] = {2, 3};
    void *mx, *mh, *mo, *mw;
    aclTensor *tx = tensor_of(d, 3, ACL_FLOAT, NULL, &mx);
    aclTensor *th = tensor_of(d, 3, ACL_FLOAT16, NULL, &mh);
    aclTensor *o24 = tensor_of(d24, 2, ACL_FLOAT, NULL, &mo);
    aclTensor *o23 = tensor_of(d23, 2, ACL_FLOAT, NULL, &mw);
    int64_t v02[2] = {0, 2}, v3[1] = {3}, v11[2] = {1, 1}, v1[1] = {1}, v2[1] = {2};
    aclIntArray *a02 = ints(v02, 2), *a3 = ints(v3, 1), *a11 = ints(v11, 2), *a1 = ints(v1, 1),
                *a2 = ints(v2, 1);
    uint64_t ws;
    aclOpExecutor *ex;
    ACL_FAILS(aclnnReduceSumGetWorkspaceSize(tx, NULL, false, ACL_FLOAT, o24, &ws, &ex),
              ACLNN_ERR_PARAM_NULLPTR, "dim is NULL");
    ACL_FAILS(aclnnReduceSumGetWorkspaceSize(tx, a02, false, ACL_FLOAT, o24, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "not adjacent");
    ACL_FAILS(aclnnMeanGetWorkspaceSize(tx, a3, false, ACL_FLOAT, o24, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "dim 3 is outside [-3, 2]");
    ACL_FAILS(aclnnAmaxGetWorkspaceSize(tx, a11, false, o24, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "named twice");
    ACL_FAILS(aclnnAminGetWorkspaceSize(tx, a2, false, o24, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "must match");
    ACL_FAILS(aclnnAminGetWorkspaceSize(tx, a1, true, o24, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "[2, 1, 4]");
    ACL_FAILS(aclnnReduceSumGetWorkspaceSize(tx, a1, false, ACL_FLOAT16, o24, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "dtype 1");
    ACL_FAILS(aclnnMeanGetWorkspaceSize(th, a1, false, ACL_FLOAT, o24, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "ACL_FLOAT16");
    ACL_FAILS(aclnnAmaxGetWorkspaceSize(tx, (aclIntArray *)tx, false, o24, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "tensor from aclCreateTensor");
    ACL_OK(aclDestroyIntArray(a2));
    ACL_FAILS(aclnnAmaxGetWorkspaceSize(tx, a2, false, o23, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "destroyed");
    /* The array may go before the second phase; a spent executor is refused. */
    ACL_OK(aclnnReduceSumGetWorkspaceSize(tx, a1, false, ACL_FLOAT, o24, &ws, &ex));
    ACL_OK(aclDestroyIntArray(a1));
    ACL_FAILS(aclnnMean(NULL, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID, "no executor of aclnnMean");
    ACL_OK(aclnnReduceSum(NULL, 0, ex, NULL));
    ACL_FAILS(aclnnReduceSum(NULL, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID, "has run");
    ACL_OK(aclrtSynchronizeStream(NULL));
    ACL_OK(aclDestroyIntArray(a02));
    ACL_OK(aclDestroyIntArray(a3));
    ACL_OK(aclDestroyIntArray(a11));
    release_tensors((aclTensor *[]){tx, th, o24, o23}, (void *[]){mx, mh, mo, mw}, 4);
}

/* A convolution's geometry: channels, image, filters, window, stride,
 * padding, dilation and groups. */
struct conv_shape {
    int C, H, W, K, R, S, stride, pad, dil, groups;
};

/* out[n][k][y][x] = bias[k] + the sum over the channels c of k's group and
 * i, j of in[n][c][y*s-p+i*d][x*s-p+j*d] * w[k][c - group start][i][j]. */
static double host_conv(const float *in, const float *w, const float *bias, struct conv_shape g,
                        int k, int y, int x) {
    int per = g.C / g.groups, first = k / (g.K / g.groups) * per;
    double acc = bias ? bias[k] : 0;
    for (int c = 0; c < per; c++)
        for (int i = 0; i < g.R; i++)
            for (int j = 0; j < g.S; j++) {
                int yy = y * g.stride - g.pad + i * g.dil, xx = x * g.stride - g.pad + j * g.dil;
                if (yy >= 0 && yy < g.H && xx >= 0 && xx < g.W)
                    acc += (double)in[((first + c) * g.H + yy) * g.W + xx] *
                           w[((k * per + c) * g.R + i) * g.S + j];
            }
    return acc;
}

/* Runs aclnnConvolution of in_t by w_t (+ b_t) into out_t (K x oh x ow
 * over out_mem) and checks each output against host_conv. */
static void expect_convolution(const aclTensor *in_t, const aclTensor *w_t, const aclTensor *b_t,
                               const aclIntArray *stride, const aclIntArray *padding,
                               const aclIntArray *dilation, aclTensor *out_t, const void *out_mem,
                               const float *in, const float *w, const float *bias,
                               struct conv_shape g, int oh, int ow) {
    float r[MAX_VALUES];
    uint64_t ws = 99;
    aclOpExecutor *ex;
    ACL_OK(aclnnConvolutionGetWorkspaceSize(in_t, w_t, b_t, stride, padding, dilation, false, NULL,
                                            g.groups, out_t, 0, &ws, &ex));
    assert_int_equal(ws, 0);
    ACL_OK(aclnnConvolution(NULL, ws, ex, NULL));
    ACL_OK(aclrtSynchronizeStream(NULL));
    read_back(out_mem, r, (size_t)(g.K * oh * ow));
    for (int k = 0; k < g.K; k++)
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++)
                assert_close(r[(k * oh + y) * ow + x], host_conv(in, w, bias, g, k, y, x));
}

static void test_acl_convolution(void **state) {
    (void)state;
    int64_t din[4] = {1, 2, 5, 5}, dw[4] = {3, 2, 3, 3}, db[1] = {3}, dout[4] = {1, 3, 3, 3};
    float in[50], w[54], bias[3] = {0.5f, -1.0f, 2.0f};
    for (int i = 0; i < 50; i++)
        in[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
    for (int i = 0; i < 54; i++)
        w[i] = (float)((i * 3) % 7) * 0.5f - 1.5f;
    void *mi, *mw, *mb, *mo;
    aclTensor *ti = tensor_of(din, 4, ACL_FLOAT, in, &mi);
    aclTensor *tw = tensor_of(dw, 4, ACL_FLOAT, w, &mw);
    aclTensor *tb = tensor_of(db, 1, ACL_FLOAT, bias, &mb);
    aclTensor *to = tensor_of(dout, 4, ACL_FLOAT, NULL, &mo);
    int64_t two[1] = {2}, ones[2] = {1, 1}, zeros[2] = {0, 0};
    aclIntArray *stride = ints(two, 1), *padding = ints(ones, 2), *dilation = ints(ones, 2),
                *out_pad = ints(zeros, 2);
    for (int with_bias = 0; with_bias < 2; with_bias++)
        expect_convolution(ti, tw, with_bias ? tb : NULL, stride, padding, dilation, to, mo, in, w,
                           with_bias ? bias : NULL,
                           (struct conv_shape){2, 5, 5, 3, 3, 3, 2, 1, 1, 1}, 3, 3);
    /* Refusals. */
    uint64_t ws;
    aclOpExecutor *ex;
    int64_t twos[2] = {2, 2}, three[3] = {1, 1, 1}, zero[1] = {0}, four[1] = {4};
    aclIntArray *dil2 = ints(twos, 2), *three_vals = ints(three, 3), *stride0 = ints(zero, 1),
                *dil4 = ints(four, 1);
    int64_t dsmall[4] = {1, 2, 1, 1};
    void *msmall;
    aclTensor *tsmall = tensor_of(dsmall, 4, ACL_FLOAT, NULL, &msmall);
    /* Each refusal: the arguments that differ from a good call's, the
     * code and what the message says. */
    const struct {
        const aclTensor *in, *bias;
        const aclIntArray *stride, *padding, *dilation;
        bool transposed;
        int64_t groups;
        int8_t cube;
        int code;
        const char *says;
    } refusals[] = {
        {ti, NULL, stride, padding, dilation, true, 1, 0, ACLNN_ERR_PARAM_INVALID,
         "transposed is true"},
        {ti, NULL, stride, padding, dilation, false, 2, 0, ACLNN_ERR_PARAM_INVALID,
         "groups 2 does not divide"},
        {ti, NULL, stride, padding, dilation, false, 0, 0, ACLNN_ERR_PARAM_INVALID, "groups is 0"},
        {ti, NULL, stride, padding, stride0, false, 1, 0, ACLNN_ERR_PARAM_INVALID,
         "dilation[0] is 0"},
        {ti, NULL, stride, out_pad, dil4, false, 1, 0, ACLNN_ERR_PARAM_INVALID,
         "filter (dilated) is larger"},
        {ti, NULL, three_vals, padding, dilation, false, 1, 0, ACLNN_ERR_PARAM_INVALID,
         "stride has 3 values"},
        {ti, NULL, stride0, padding, dilation, false, 1, 0, ACLNN_ERR_PARAM_INVALID, "at least 1"},
        {ti, NULL, stride, padding, dilation, false, 1, 7, ACLNN_ERR_PARAM_INVALID,
         "cubeMathType 7"},
        {ti, tw, stride, padding, dilation, false, 1, 0, ACLNN_ERR_PARAM_INVALID,
         "bias must have one dimension of 3"},
        {tsmall, NULL, stride, out_pad, dilation, false, 1, 0, ACLNN_ERR_PARAM_INVALID,
         "larger than the padded 1 x 1 input"},
        {ti, NULL, padding, padding, dilation, false, 1, 0, ACLNN_ERR_PARAM_INVALID, "must match"},
        {tb, NULL, stride, padding, dilation, false, 1, 0, ACLNN_ERR_PARAM_INVALID,
         "takes 4 (NCHW)"},
        {ti, NULL, NULL, padding, dilation, false, 1, 0, ACLNN_ERR_PARAM_NULLPTR, "stride is NULL"},
    };
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
        ACL_FAILS(aclnnConvolutionGetWorkspaceSize(
                      refusals[i].in, tw, refusals[i].bias, refusals[i].stride, refusals[i].padding,
                      refusals[i].dilation, refusals[i].transposed, out_pad, refusals[i].groups, to,
                      refusals[i].cube, &ws, &ex),
                  refusals[i].code, refusals[i].says);
    ACL_OK(aclDestroyTensor(tsmall));
    ACL_OK(aclrtFree(msmall));
    ACL_OK(aclDestroyIntArray(dil2));
    ACL_FAILS(aclnnConvolutionGetWorkspaceSize(ti, tw, NULL, stride, padding, dil2, false, out_pad,
                                               1, to, 0, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "destroyed");
    release_arrays((aclIntArray *[]){stride, padding, dilation, out_pad, three_vals, stride0, dil4},
                   7);
    release_tensors((aclTensor *[]){ti, tw, tb, to}, (void *[]){mi, mw, mb, mo}, 4);
}

/* A convolution of 4 channels by 4 filters in 2 groups, the 3 x 3 filters
 * dilated by 2 over the 6 x 6 image padded by 2. */
static void test_acl_grouped_dilated_convolution(void **state) {
    (void)state;
    int64_t din[4] = {1, 4, 6, 6}, dw[4] = {4, 2, 3, 3}, dout[4] = {1, 4, 6, 6};
    float in[144], w[72];
    for (int i = 0; i < 144; i++)
        in[i] = (float)((i * 5) % 13) * 0.25f - 1.5f;
    for (int i = 0; i < 72; i++)
        w[i] = (float)((i * 3) % 7) * 0.5f - 1.5f;
    void *mi, *mw, *mo;
    aclTensor *ti = tensor_of(din, 4, ACL_FLOAT, in, &mi);
    aclTensor *tw = tensor_of(dw, 4, ACL_FLOAT, w, &mw);
    aclTensor *to = tensor_of(dout, 4, ACL_FLOAT, NULL, &mo);
    int64_t one[1] = {1}, two[1] = {2}, zeros[2] = {0, 0};
    aclIntArray *stride = ints(one, 1), *padding = ints(two, 1), *dilation = ints(two, 1),
                *out_pad = ints(zeros, 2);
    expect_convolution(ti, tw, NULL, stride, padding, dilation, to, mo, in, w, NULL,
                       (struct conv_shape){4, 6, 6, 4, 3, 3, 1, 2, 2, 2}, 6, 6);
    uint64_t ws;
    aclOpExecutor *ex;
    /* A weight of 4 input channels is not one of 2 groups of 2. */
    int64_t dw4[4] = {4, 4, 3, 3};
    void *mw4;
    aclTensor *tw4 = tensor_of(dw4, 4, ACL_FLOAT, NULL, &mw4);
    ACL_FAILS(aclnnConvolutionGetWorkspaceSize(ti, tw4, NULL, stride, padding, dilation, false,
                                               out_pad, 2, to, 0, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "in 2 groups (2 each)");
    release_arrays((aclIntArray *[]){stride, padding, dilation, out_pad}, 4);
    release_tensors((aclTensor *[]){ti, tw, to, tw4}, (void *[]){mi, mw, mo, mw4}, 4);
}

/* A pooling's geometry as torch's, one value for both dimensions:
 * window, stride, padding, dilation, divisor (0: none), whether the
 * average leaves the padding out. */
struct pool_shape {
    int H, W, R, stride, pad, dil, divisor;
    bool exclude_pad;
};

/* torch's pooling of one plane x [H][W] at (y, x): the largest tap inside
 * the image, or the sum of those taps over the divisor, the window's taps
 * inside the image, or its size cut at the padded image's end. */
static double host_pool(bool max, const float *x, struct pool_shape g, int y, int xo) {
    double acc = max ? -INFINITY : 0;
    int y0 = y * g.stride - g.pad, x0 = xo * g.stride - g.pad, inside = 0;
    for (int i = 0; i < g.R; i++)
        for (int j = 0; j < g.R; j++) {
            int yy = y0 + i * g.dil, xx = x0 + j * g.dil;
            if (yy < 0 || yy >= g.H || xx < 0 || xx >= g.W)
                continue;
            double v = x[yy * g.W + xx];
            acc = max ? fmax(acc, v) : acc + v;
            inside++;
        }
    if (max)
        return acc;
    int ye = y0 + g.R < g.H + g.pad ? y0 + g.R : g.H + g.pad;
    int xe = x0 + g.R < g.W + g.pad ? x0 + g.R : g.W + g.pad;
    int divisor = g.divisor ? g.divisor : g.exclude_pad ? inside : (ye - y0) * (xe - x0);
    return acc / divisor;
}

/* Reads planes of oh x ow outputs back from mem and checks each against
 * host_pool over its plane of in. */
static void expect_pooled(const void *mem, bool max, const float *in, struct pool_shape g,
                          int planes, int oh, int ow) {
    float r[MAX_VALUES];
    read_back(mem, r, (size_t)(planes * oh * ow));
    for (int p = 0; p < planes; p++)
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++)
                assert_close(r[(p * oh + y) * ow + x], host_pool(max, in + p * g.H * g.W, g, y, x));
}

/* Ceil mode (the last window starting in the padding kept, cut at its
 * end), both of the average's other divisors, and a dilated max, on 2
 * planes of 6 x 6. */
static void test_acl_pooling_options(void **state) {
    (void)state;
    int64_t din[4] = {1, 2, 6, 6}, dout[4] = {1, 2, 4, 4}, dfloor[4] = {1, 2, 3, 3};
    float in[72];
    for (int i = 0; i < 72; i++)
        in[i] = (float)((i * 7) % 13) - 6.0f;
    void *mi, *mo, *mf;
    aclTensor *ti = tensor_of(din, 4, ACL_FLOAT, in, &mi);
    aclTensor *to = tensor_of(dout, 4, ACL_FLOAT, NULL, &mo);
    aclTensor *tf = tensor_of(dfloor, 4, ACL_FLOAT, NULL, &mf);
    int64_t three[1] = {3}, two[1] = {2}, one[1] = {1}, twos[2] = {2, 2};
    aclIntArray *k3 = ints(three, 1), *s2 = ints(two, 1), *p1 = ints(one, 1), *p2 = ints(twos, 2),
                *dil2 = ints(twos, 2);
    uint64_t ws;
    aclOpExecutor *ex;
    /* 3 x 3 windows 2 apart, padding 1: 4 x 4 in ceil mode, the last
     * window of each row starting in the padding. */
    const struct {
        bool include_pad;
        int64_t divisor;
    } avgs[] = {{true, 0}, {false, 0}, {true, 5}, {false, 7}};
    for (size_t c = 0; c < sizeof avgs / sizeof avgs[0]; c++) {
        ACL_OK(aclnnAvgPool2dGetWorkspaceSize(ti, k3, s2, p1, true, avgs[c].include_pad,
                                              avgs[c].divisor, 0, to, &ws, &ex));
        ACL_OK(aclnnAvgPool2d(NULL, ws, ex, NULL));
        ACL_OK(aclrtSynchronizeStream(NULL));
        struct pool_shape g = {6, 6, 3, 2, 1, 1, (int)avgs[c].divisor, !avgs[c].include_pad};
        expect_pooled(mo, false, in, g, 2, 4, 4);
    }
    /* A max of 3 x 3 taps 2 apart (a 5 x 5 window), padding 2, 2 apart:
     * 4 x 4 in ceil mode, 3 x 3 without. */
    for (int ceil = 0; ceil < 2; ceil++) {
        ACL_OK(
            aclnnMaxPoolGetWorkspaceSize(ti, k3, s2, 0, p2, dil2, ceil, ceil ? to : tf, &ws, &ex));
        ACL_OK(aclnnMaxPool(NULL, ws, ex, NULL));
        ACL_OK(aclrtSynchronizeStream(NULL));
        int o = ceil ? 4 : 3;
        expect_pooled(ceil ? mo : mf, true, in, (struct pool_shape){6, 6, 3, 2, 2, 2, 0, false}, 2,
                      o, o);
    }
    /* Refusals: out of the floor size in ceil mode, a negative divisor, a
     * ceilMode of 2, padding past half the dilated window. */
    ACL_FAILS(aclnnAvgPool2dGetWorkspaceSize(ti, k3, s2, p1, true, true, 0, 0, tf, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "must match");
    ACL_FAILS(aclnnAvgPool2dGetWorkspaceSize(ti, k3, s2, p1, true, true, -1, 0, to, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "divisorOverride is -1");
    ACL_FAILS(aclnnMaxPoolGetWorkspaceSize(ti, k3, s2, 0, p2, dil2, 2, to, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "ceilMode is 2");
    ACL_FAILS(aclnnMaxPoolGetWorkspaceSize(ti, k3, s2, 0, p2, NULL, 0, to, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "more than half the window (3)");
    release_arrays((aclIntArray *[]){k3, s2, p1, p2, dil2}, 5);
    release_tensors((aclTensor *[]){ti, to, tf}, (void *[]){mi, mo, mf}, 3);
}

static void test_acl_pooling(void **state) {
    (void)state;
    int64_t din[4] = {1, 2, 5, 5}, dout[4] = {1, 2, 3, 3}, d2[2] = {5, 5};
    float in[50];
    for (int i = 0; i < 50; i++)
        in[i] = (float)((i * 7) % 13) - 6.0f;
    void *mi, *mo, *m2;
    aclTensor *ti = tensor_of(din, 4, ACL_FLOAT, in, &mi);
    aclTensor *to = tensor_of(dout, 4, ACL_FLOAT, NULL, &mo);
    aclTensor *t2 = tensor_of(d2, 2, ACL_FLOAT, NULL, &m2);
    int64_t three[2] = {3, 3}, two[1] = {2}, one[1] = {1}, ones[2] = {1, 1},
            pads4[4] = {1, 1, 1, 1};
    aclIntArray *k3 = ints(three, 2), *s2 = ints(two, 1), *p1 = ints(one, 1), *dil = ints(ones, 2),
                *p4 = ints(pads4, 4);
    uint64_t ws = 99;
    aclOpExecutor *ex;
    /* 3 x 3 windows 2 apart over the 5 x 5 planes padded by 1: 3 x 3. */
    ACL_OK(aclnnAvgPool2dGetWorkspaceSize(ti, k3, s2, p1, false, true, 0, 0, to, &ws, &ex));
    assert_int_equal(ws, 0);
    ACL_OK(aclnnAvgPool2d(NULL, ws, ex, NULL));
    ACL_OK(aclrtSynchronizeStream(NULL));
    struct pool_shape g = {5, 5, 3, 2, 1, 1, 0, false};
    expect_pooled(mo, false, in, g, 2, 3, 3);
    ACL_OK(aclnnMaxPoolGetWorkspaceSize(ti, k3, s2, 0, p4, dil, 0, to, &ws, &ex));
    ACL_OK(aclnnMaxPool(NULL, ws, ex, NULL));
    ACL_OK(aclrtSynchronizeStream(NULL));
    expect_pooled(mo, true, in, g, 2, 3, 3);
    /* Refusals. */
    int64_t asym[4] = {1, 0, 0, 1}, big[1] = {2}, twos[2] = {2, 2};
    aclIntArray *pa = ints(asym, 4), *pbig = ints(big, 1), *dil2 = ints(twos, 2);
    ACL_FAILS(aclnnAvgPool2dGetWorkspaceSize(ti, k3, s2, pbig, false, true, 0, 0, to, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "more than half the window");
    ACL_FAILS(aclnnAvgPool2dGetWorkspaceSize(t2, k3, s2, p1, false, true, 0, 0, to, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "2 dimensions");
    ACL_FAILS(aclnnAvgPool2dGetWorkspaceSize(ti, k3, p1, p1, false, true, 0, 0, to, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "must match");
    ACL_FAILS(aclnnMaxPoolGetWorkspaceSize(ti, k3, s2, 0, pa, dil, 0, to, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "not symmetric");
    ACL_FAILS(aclnnMaxPoolGetWorkspaceSize(ti, k3, s2, 1, p4, dil, 0, to, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "autoPad is not 0");
    ACL_FAILS(aclnnMaxPoolGetWorkspaceSize(ti, k3, s2, 0, p4, dil2, 1, to, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "must match");
    ACL_FAILS(aclnnMaxPoolGetWorkspaceSize(ti, k3, s2, 0, p4, dil, 0, ti, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "must match");
    ACL_FAILS(aclnnMaxPoolGetWorkspaceSize(ti, NULL, s2, 0, p4, dil, 0, to, &ws, &ex),
              ACLNN_ERR_PARAM_NULLPTR, "kernelShape is NULL");
    release_arrays((aclIntArray *[]){k3, s2, p1, dil, p4, pa, pbig, dil2}, 8);
    release_tensors((aclTensor *[]){ti, to, t2}, (void *[]){mi, mo, m2}, 3);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_int_arrays),
        ACL_TEST(test_acl_reductions),
        ACL_TEST(test_acl_reduction_refusals),
        ACL_TEST(test_acl_convolution),
        ACL_TEST(test_acl_grouped_dilated_convolution),
        ACL_TEST(test_acl_pooling_options),
        ACL_TEST(test_acl_pooling),
    };
    return RT_RUN(tests);
}
