/* SPDX-License-Identifier: MIT */
/* librill_acl's ops beyond add, mul and matmul: aclnnSub and aclnnDiv
 * (broadcasting and float16 as aclnnAdd), the activations, softmax and
 * log-softmax, aclnnCast and aclnnInplaceCopy, each against values
 * computed here on the host, and their refusals with ACLNN's codes. */
#include <math.h>

#include "acl_support.h"
#include "acl_tensors.h"
#include "aclnnop/aclnn_cast.h"
#include "aclnnop/aclnn_copy.h"
#include "aclnnop/aclnn_div.h"
#include "aclnnop/aclnn_gelu.h"
#include "aclnnop/aclnn_logsoftmax.h"
#include "aclnnop/aclnn_relu.h"
#include "aclnnop/aclnn_sigmoid.h"
#include "aclnnop/aclnn_silu.h"
#include "aclnnop/aclnn_softmax.h"
#include "aclnnop/aclnn_sub.h"
#include "aclnnop/aclnn_tanh.h"

static void assert_close(float got, double want, double tol) {
    double err = fabs((double)got - want);
    if (!(err <= tol * (1.0 + fabs(want))))
        fail_msg("got %.9g, want %.9g (error %.3g)", (double)got, want, err);
}

/* The value a float16 tensor holds for v. */
static float as_half(float v) {
    return aclFloat16ToFloat(aclFloatToFloat16(v));
}

static void sub(aclTensor *self, aclTensor *other, float alpha, aclTensor *out) {
    aclScalar *a = aclCreateScalar(&alpha, ACL_FLOAT);
    uint64_t ws = 99;
    aclOpExecutor *ex;
    ACL_OK(aclnnSubGetWorkspaceSize(self, other, a, out, &ws, &ex));
    assert_int_equal(ws, 0);
    ACL_OK(aclDestroyScalar(a));
    ACL_OK(aclnnSub(NULL, 0, ex, NULL));
    ACL_OK(aclrtSynchronizeStream(NULL));
}

static void divide(aclTensor *self, aclTensor *other, aclTensor *out) {
    uint64_t ws = 99;
    aclOpExecutor *ex;
    ACL_OK(aclnnDivGetWorkspaceSize(self, other, out, &ws, &ex));
    assert_int_equal(ws, 0);
    ACL_OK(aclnnDiv(NULL, 0, ex, NULL));
    ACL_OK(aclrtSynchronizeStream(NULL));
}

/* self - alpha * other and self / other, contiguous (rill's ops) and
 * broadcast (this layer's kernel), in float32 and float16. */
static void test_acl_sub_div(void **state) {
    (void)state;
    int64_t d23[2] = {2, 3}, d3[1] = {3};
    float x[6] = {1, -2, 3.5f, 4, 5, -6}, y[6] = {0.5f, 2, -1, 8, 0.25f, 3}, r[6];
    aclDataType types[2] = {ACL_FLOAT, ACL_FLOAT16};
    for (int t = 0; t < 2; t++) {
        aclDataType dt = types[t];
        void *mx, *my, *mo, *mb;
        aclTensor *tx = tensor_of(d23, 2, NULL, dt, x, 6, &mx);
        aclTensor *ty = tensor_of(d23, 2, NULL, dt, y, 6, &my);
        aclTensor *to = tensor_of(d23, 2, NULL, dt, NULL, 6, &mo);
        aclTensor *tb = tensor_of(d3, 1, NULL, dt, y, 3, &mb); /* broadcast along rows */
        float tol = dt == ACL_FLOAT ? 1e-6f : 1e-3f;
        sub(tx, ty, 2.0f, to);
        read_back(mo, dt, r, 6);
        for (int i = 0; i < 6; i++)
            assert_close(r[i], (double)x[i] - 2.0 * y[i], tol);
        divide(tx, ty, to);
        read_back(mo, dt, r, 6);
        for (int i = 0; i < 6; i++)
            assert_close(r[i], dt == ACL_FLOAT ? (double)(x[i] / y[i]) : (double)x[i] / y[i], tol);
        divide(tx, tb, to);
        read_back(mo, dt, r, 6);
        for (int i = 0; i < 6; i++)
            assert_close(r[i], (double)x[i] / y[i % 3], tol);
        sub(tx, tb, 1.0f, to);
        read_back(mo, dt, r, 6);
        for (int i = 0; i < 6; i++)
            assert_close(r[i], (double)x[i] - y[i % 3], tol);
        ACL_OK(aclDestroyTensor(tx));
        ACL_OK(aclDestroyTensor(ty));
        ACL_OK(aclDestroyTensor(to));
        ACL_OK(aclDestroyTensor(tb));
        ACL_OK(aclrtFree(mx));
        ACL_OK(aclrtFree(my));
        ACL_OK(aclrtFree(mo));
        ACL_OK(aclrtFree(mb));
    }
}

static double host_act(int which, double v) {
    switch (which) {
    case 0:
        return v > 0 ? v : 0;
    case 1:
        return v / 2 * (1 + erf(v / sqrt(2.0)));
    case 2:
        return 1 / (1 + exp(-v));
    case 3:
        return tanh(v);
    default:
        return v / (1 + exp(-v));
    }
}

static void test_acl_activations(void **state) {
    (void)state;
    int64_t d[2] = {3, 4};
    float x[12], r[12];
    for (int i = 0; i < 12; i++)
        x[i] = -3.0f + 0.55f * (float)i;
    for (int which = 0; which < 5; which++) {
        void *mx, *mo;
        aclTensor *tx = tensor_of(d, 2, NULL, ACL_FLOAT, x, 12, &mx);
        aclTensor *to = tensor_of(d, 2, NULL, ACL_FLOAT, NULL, 12, &mo);
        uint64_t ws = 99;
        aclOpExecutor *ex;
        switch (which) {
        case 0:
            ACL_OK(aclnnReluGetWorkspaceSize(tx, to, &ws, &ex));
            ACL_OK(aclnnRelu(NULL, ws, ex, NULL));
            break;
        case 1:
            ACL_OK(aclnnGeluGetWorkspaceSize(tx, to, &ws, &ex));
            ACL_OK(aclnnGelu(NULL, ws, ex, NULL));
            break;
        case 2:
            ACL_OK(aclnnSigmoidGetWorkspaceSize(tx, to, &ws, &ex));
            ACL_OK(aclnnSigmoid(NULL, ws, ex, NULL));
            break;
        case 3:
            ACL_OK(aclnnTanhGetWorkspaceSize(tx, to, &ws, &ex));
            ACL_OK(aclnnTanh(NULL, ws, ex, NULL));
            break;
        default:
            ACL_OK(aclnnSiluGetWorkspaceSize(tx, to, &ws, &ex));
            ACL_OK(aclnnSilu(NULL, ws, ex, NULL));
        }
        assert_int_equal(ws, 0);
        ACL_OK(aclrtSynchronizeStream(NULL));
        read_back(mo, ACL_FLOAT, r, 12);
        for (int i = 0; i < 12; i++)
            assert_close(r[i], host_act(which, x[i]), 1e-5);
        /* In place. */
        ACL_OK(aclnnReluGetWorkspaceSize(tx, tx, &ws, &ex));
        ACL_OK(aclnnRelu(NULL, ws, ex, NULL));
        ACL_OK(aclrtSynchronizeStream(NULL));
        read_back(mx, ACL_FLOAT, r, 12);
        for (int i = 0; i < 12; i++)
            assert_true(r[i] == (x[i] > 0 ? x[i] : 0.0f));
        ACL_OK(aclDestroyTensor(tx));
        ACL_OK(aclDestroyTensor(to));
        ACL_OK(aclrtFree(mx));
        ACL_OK(aclrtFree(mo));
    }
}

/* Softmax (and its logarithm) of a [2, 3, 4] tensor along each dimension,
 * negative ones among them. */
static void test_acl_softmax_log_softmax(void **state) {
    (void)state;
    int64_t d[3] = {2, 3, 4};
    float x[24], r[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)((i * 7) % 11) * 0.3f - 1.0f;
    void *mx, *mo;
    aclTensor *tx = tensor_of(d, 3, NULL, ACL_FLOAT, x, 24, &mx);
    aclTensor *to = tensor_of(d, 3, NULL, ACL_FLOAT, NULL, 24, &mo);
    int64_t dims[4] = {0, 1, -1, -3};
    for (int take_log = 0; take_log < 2; take_log++)
        for (int k = 0; k < 4; k++) {
            int64_t dim = dims[k] < 0 ? dims[k] + 3 : dims[k];
            uint64_t ws;
            aclOpExecutor *ex;
            if (take_log) {
                ACL_OK(aclnnLogSoftmaxGetWorkspaceSize(tx, dims[k], to, &ws, &ex));
                ACL_OK(aclnnLogSoftmax(NULL, ws, ex, NULL));
            } else {
                ACL_OK(aclnnSoftmaxGetWorkspaceSize(tx, dims[k], to, &ws, &ex));
                ACL_OK(aclnnSoftmax(NULL, ws, ex, NULL));
            }
            ACL_OK(aclrtSynchronizeStream(NULL));
            read_back(mo, ACL_FLOAT, r, 24);
            int64_t stride = dim == 0 ? 12 : dim == 1 ? 4 : 1;
            for (int i = 0; i < 24; i++) {
                int64_t c = (i / stride) % d[dim], base = i - c * stride;
                double sum = 0;
                for (int64_t j = 0; j < d[dim]; j++)
                    sum += exp((double)x[base + j * stride]);
                double want = take_log ? (double)x[i] - log(sum) : exp((double)x[i]) / sum;
                assert_close(r[i], want, 1e-5);
            }
        }
    ACL_OK(aclDestroyTensor(tx));
    ACL_OK(aclDestroyTensor(to));
    ACL_OK(aclrtFree(mx));
    ACL_OK(aclrtFree(mo));
}

static void run_cast(aclTensor *self, aclDataType dt, aclTensor *out) {
    uint64_t ws;
    aclOpExecutor *ex;
    ACL_OK(aclnnCastGetWorkspaceSize(self, dt, out, &ws, &ex));
    ACL_OK(aclnnCast(NULL, ws, ex, NULL));
    ACL_OK(aclrtSynchronizeStream(NULL));
}

static void run_copy(aclTensor *dst, aclTensor *src) {
    uint64_t ws;
    aclOpExecutor *ex;
    ACL_OK(aclnnInplaceCopyGetWorkspaceSize(dst, src, &ws, &ex));
    assert_int_equal(ws, 0);
    ACL_OK(aclnnInplaceCopy(NULL, ws, ex, NULL));
    ACL_OK(aclrtSynchronizeStream(NULL));
}

/* float32 to float16 rounds as aclFloatToFloat16 does, and back is exact;
 * a cast to the same type copies. */
static void test_acl_cast(void **state) {
    (void)state;
    int64_t d[1] = {6};
    float x[6] = {1.0f, 0.1f, -3.14159f, 65504.0f, 70000.0f, 1e-6f}, r[6];
    void *mx, *mh, *mf;
    aclTensor *tx = tensor_of(d, 1, NULL, ACL_FLOAT, x, 6, &mx);
    aclTensor *th = tensor_of(d, 1, NULL, ACL_FLOAT16, NULL, 6, &mh);
    aclTensor *tf = tensor_of(d, 1, NULL, ACL_FLOAT, NULL, 6, &mf);
    run_cast(tx, ACL_FLOAT16, th);
    read_back(mh, ACL_FLOAT16, r, 6);
    for (int i = 0; i < 6; i++)
        assert_true(memcmp(&r[i], &(float){as_half(x[i])}, sizeof(float)) == 0);
    run_cast(th, ACL_FLOAT, tf);
    read_back(mf, ACL_FLOAT, r, 6);
    for (int i = 0; i < 6; i++)
        assert_true(memcmp(&r[i], &(float){as_half(x[i])}, sizeof(float)) == 0);
    run_cast(tx, ACL_FLOAT, tf);
    read_back(mf, ACL_FLOAT, r, 6);
    assert_memory_equal(r, x, sizeof x);
    ACL_OK(aclDestroyTensor(tx));
    ACL_OK(aclDestroyTensor(th));
    ACL_OK(aclDestroyTensor(tf));
    ACL_OK(aclrtFree(mx));
    ACL_OK(aclrtFree(mh));
    ACL_OK(aclrtFree(mf));
}

/* A transposed view made contiguous, a row broadcast into a matrix, a
 * float16 copy and a float32 to float16 conversion. */
static void test_acl_inplace_copy(void **state) {
    (void)state;
    int64_t d23[2] = {2, 3}, d32[2] = {3, 2}, t_strides[2] = {1, 3}, d3[1] = {3};
    float x[6] = {1, 2, 3, 4, 5, 6}, r[6];
    void *mx, *mo, *mr, *mh;
    aclTensor *tx = tensor_of(d23, 2, NULL, ACL_FLOAT, x, 6, &mx);
    aclTensor *tt = aclCreateTensor(d32, 2, ACL_FLOAT, t_strides, 0, ACL_FORMAT_ND, d23, 2, mx);
    aclTensor *to = tensor_of(d32, 2, NULL, ACL_FLOAT, NULL, 6, &mo);
    run_copy(to, tt); /* to = x transposed */
    read_back(mo, ACL_FLOAT, r, 6);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            assert_true(r[i * 2 + j] == x[j * 3 + i]);
    aclTensor *trow = tensor_of(d3, 1, NULL, ACL_FLOAT, x, 3, &mr);
    aclTensor *to23 = aclCreateTensor(d23, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, d23, 2, mo);
    assert_null(to23); /* strides are required */
    int64_t c_strides[2] = {3, 1};
    to23 = aclCreateTensor(d23, 2, ACL_FLOAT, c_strides, 0, ACL_FORMAT_ND, d23, 2, mo);
    run_copy(to23, trow);
    read_back(mo, ACL_FLOAT, r, 6);
    for (int i = 0; i < 6; i++)
        assert_true(r[i] == x[i % 3]);
    aclTensor *th = tensor_of(d23, 2, NULL, ACL_FLOAT16, NULL, 6, &mh);
    run_copy(th, tx);
    read_back(mh, ACL_FLOAT16, r, 6);
    for (int i = 0; i < 6; i++)
        assert_true(r[i] == x[i]);
    ACL_OK(aclDestroyTensor(tx));
    ACL_OK(aclDestroyTensor(tt));
    ACL_OK(aclDestroyTensor(to));
    ACL_OK(aclDestroyTensor(trow));
    ACL_OK(aclDestroyTensor(to23));
    ACL_OK(aclDestroyTensor(th));
    ACL_OK(aclrtFree(mx));
    ACL_OK(aclrtFree(mo));
    ACL_OK(aclrtFree(mr));
    ACL_OK(aclrtFree(mh));
}

static void test_acl_nn_ops_refusals(void **state) {
    (void)state;
    int64_t d23[2] = {2, 3}, d32[2] = {3, 2}, d3[1] = {3}, d2[1] = {2};
    int64_t t_strides[2] = {1, 3}, zero_strides[2] = {0, 1};
    float x[6] = {1, 2, 3, 4, 5, 6};
    void *mf, *mh, *mi, *mo, *m3, *m2;
    aclTensor *tf = tensor_of(d23, 2, NULL, ACL_FLOAT, x, 6, &mf);
    aclTensor *th = tensor_of(d23, 2, NULL, ACL_FLOAT16, x, 6, &mh);
    aclTensor *ti = tensor_of(d23, 2, NULL, ACL_INT32, NULL, 6, &mi);
    aclTensor *to = tensor_of(d23, 2, NULL, ACL_FLOAT, NULL, 6, &mo);
    aclTensor *t3 = tensor_of(d3, 1, NULL, ACL_FLOAT, x, 3, &m3);
    aclTensor *t2 = tensor_of(d2, 1, NULL, ACL_FLOAT, x, 2, &m2);
    aclTensor *tt = aclCreateTensor(d32, 2, ACL_FLOAT, t_strides, 0, ACL_FORMAT_ND, d23, 2, mf);
    aclTensor *tz = aclCreateTensor(d23, 2, ACL_FLOAT, zero_strides, 0, ACL_FORMAT_ND, d3, 1, m3);
    float one = 1.0f;
    aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
    uint64_t ws;
    aclOpExecutor *ex = NULL;
    /* NULL arguments. */
    ACL_FAILS(aclnnSubGetWorkspaceSize(tf, tf, NULL, to, &ws, &ex), ACLNN_ERR_PARAM_NULLPTR,
              "alpha is NULL");
    ACL_FAILS(aclnnDivGetWorkspaceSize(tf, NULL, to, &ws, &ex), ACLNN_ERR_PARAM_NULLPTR,
              "other is NULL");
    ACL_FAILS(aclnnReluGetWorkspaceSize(tf, to, NULL, &ex), ACLNN_ERR_PARAM_NULLPTR,
              "workspaceSize is NULL");
    ACL_FAILS(aclnnSoftmaxGetWorkspaceSize(NULL, 0, to, &ws, &ex), ACLNN_ERR_PARAM_NULLPTR,
              "self is NULL");
    ACL_FAILS(aclnnCastGetWorkspaceSize(tf, ACL_FLOAT, to, &ws, NULL), ACLNN_ERR_PARAM_NULLPTR,
              "executor is NULL");
    ACL_FAILS(aclnnInplaceCopyGetWorkspaceSize(NULL, tf, &ws, &ex), ACLNN_ERR_PARAM_NULLPTR,
              "selfRef is NULL");
    /* Data types. */
    ACL_FAILS(aclnnSubGetWorkspaceSize(tf, ti, alpha, to, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "data type 3");
    ACL_FAILS(aclnnDivGetWorkspaceSize(tf, th, to, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "data types differ");
    ACL_FAILS(aclnnGeluGetWorkspaceSize(th, th, &ws, &ex), ACLNN_ERR_PARAM_INVALID, "aclnnCast");
    ACL_FAILS(aclnnLogSoftmaxGetWorkspaceSize(th, 0, th, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "ACL_FLOAT16");
    ACL_FAILS(aclnnCastGetWorkspaceSize(tf, ACL_INT32, ti, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "dtype 3");
    ACL_FAILS(aclnnCastGetWorkspaceSize(tf, ACL_FLOAT16, to, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "not dtype 1");
    ACL_FAILS(aclnnInplaceCopyGetWorkspaceSize(ti, tf, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "data type 3");
    /* Shapes and layouts. */
    ACL_FAILS(aclnnSubGetWorkspaceSize(tf, t2, alpha, to, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "do not broadcast");
    ACL_FAILS(aclnnSigmoidGetWorkspaceSize(tf, t3, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "must match");
    ACL_FAILS(aclnnTanhGetWorkspaceSize(tt, tt, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "not contiguous");
    ACL_FAILS(aclnnSoftmaxGetWorkspaceSize(tf, 2, to, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "dim 2 is outside [-2, 1]");
    ACL_FAILS(aclnnSoftmaxGetWorkspaceSize(tf, -3, to, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "dim -3");
    ACL_FAILS(aclnnCastGetWorkspaceSize(tf, ACL_FLOAT, tf, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "overlap");
    ACL_FAILS(aclnnCastGetWorkspaceSize(tt, ACL_FLOAT, tt, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "not contiguous");
    ACL_FAILS(aclnnInplaceCopyGetWorkspaceSize(to, t2, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "does not broadcast");
    ACL_FAILS(aclnnInplaceCopyGetWorkspaceSize(tz, t3, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "stride 0");
    ACL_FAILS(aclnnInplaceCopyGetWorkspaceSize(to, to, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "overlap");
    ACL_FAILS(aclnnInplaceCopyGetWorkspaceSize(th, tt, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "must match");
    /* Executors: spent, of another op, and a tensor in their place. */
    ACL_OK(aclnnReluGetWorkspaceSize(tf, to, &ws, &ex));
    ACL_FAILS(aclnnSilu(NULL, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID, "no executor of aclnnSilu");
    ACL_OK(aclnnRelu(NULL, 0, ex, NULL));
    ACL_FAILS(aclnnRelu(NULL, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID, "has run");
    ACL_FAILS(aclnnCast(NULL, 0, (aclOpExecutor *)tf, NULL), ACLNN_ERR_PARAM_INVALID,
              "tensor from aclCreateTensor");
    ACL_FAILS(aclnnInplaceCopy(NULL, 0, NULL, NULL), ACLNN_ERR_PARAM_NULLPTR, "executor is NULL");
    /* Destroyed tensors; a destroyed stream at the second phase. */
    ACL_OK(aclDestroyTensor(t2));
    ACL_FAILS(aclnnSubGetWorkspaceSize(t2, t2, alpha, t2, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "destroyed");
    ACL_FAILS(aclnnGeluGetWorkspaceSize(t2, to, &ws, &ex), ACLNN_ERR_PARAM_INVALID, "destroyed");
    ACL_FAILS(aclnnCastGetWorkspaceSize(tf, ACL_FLOAT, t2, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "destroyed");
    ACL_FAILS(aclnnInplaceCopyGetWorkspaceSize(to, t2, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "destroyed");
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtDestroyStream(s));
    ACL_OK(aclnnSoftmaxGetWorkspaceSize(tf, 1, to, &ws, &ex));
    ACL_FAILS(aclnnSoftmax(NULL, 0, ex, s), ACLNN_ERR_PARAM_INVALID, "aclnnSoftmax");
    ACL_FAILS(aclnnSoftmax(NULL, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID, "has run");
    ACL_OK(aclrtSynchronizeStream(NULL));
    ACL_OK(aclDestroyScalar(alpha));
    aclTensor *all[] = {tf, th, ti, to, t3, tt, tz};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ACL_OK(aclDestroyTensor(all[i]));
    void *mem[] = {mf, mh, mi, mo, m3, m2};
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
        ACL_OK(aclrtFree(mem[i]));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_sub_div),
        ACL_TEST(test_acl_activations),
        ACL_TEST(test_acl_softmax_log_softmax),
        ACL_TEST(test_acl_cast),
        ACL_TEST(test_acl_inplace_copy),
        ACL_TEST(test_acl_nn_ops_refusals),
    };
    return RT_RUN(tests);
}
