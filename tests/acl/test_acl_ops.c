/* SPDX-License-Identifier: MIT */
/* librill_acl's op API (aclnn/acl_meta.h, aclnnop/aclnn_*.h): tensors and
 * scalars, aclnnAdd, aclnnMul and aclnnMatmul in float32 and float16 with
 * broadcasting and strided views, executors, and the refusals with
 * ACLNN's codes. */
#include "acl_support.h"
#include "acl_tensors.h"

static void test_acl_tensor_and_scalar_checks(void **state) {
    (void)state;
    int64_t dims[9] = {2, 3, 1, 1, 1, 1, 1, 1, 1}, strides[9] = {3, 1, 1, 1, 1, 1, 1, 1, 1};
    int64_t neg[2] = {2, -1};
    int x;
    aclTensor *t = aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 2, &x);
    assert_non_null(t);
    assert_null(aclCreateTensor(dims, 9, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 2, &x));
    assert_non_null(strstr(aclGetRecentErrMsg(), "aclCreateTensor: more than 8"));
    assert_null(aclCreateTensor(dims, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, dims, 2, &x));
    assert_non_null(strstr(aclGetRecentErrMsg(), "stride is NULL"));
    assert_null(aclCreateTensor(neg, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 2, &x));
    assert_non_null(strstr(aclGetRecentErrMsg(), "negative"));
    assert_null(aclCreateTensor(dims, 2, ACL_STRING, strides, 0, ACL_FORMAT_ND, dims, 2, &x));
    assert_non_null(strstr(aclGetRecentErrMsg(), "dataType"));
    assert_null(aclCreateTensor(dims, 2, ACL_FLOAT, strides, -1, ACL_FORMAT_ND, dims, 2, &x));
    assert_non_null(strstr(aclGetRecentErrMsg(), "offset"));
    assert_null(aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, NULL, 2, &x));
    assert_non_null(strstr(aclGetRecentErrMsg(), "storageDims"));

    float f = 1.5f;
    double dbl = -2.25;
    int32_t i32 = 7;
    aclFloat16 h = aclFloatToFloat16(0.5f);
    aclScalar *sf = aclCreateScalar(&f, ACL_FLOAT), *sd = aclCreateScalar(&dbl, ACL_DOUBLE);
    aclScalar *si = aclCreateScalar(&i32, ACL_INT32), *sh = aclCreateScalar(&h, ACL_FLOAT16);
    assert_true(sf && sd && si && sh);
    assert_null(aclCreateScalar(NULL, ACL_FLOAT));
    assert_non_null(strstr(aclGetRecentErrMsg(), "aclCreateScalar: value is NULL"));
    assert_null(aclCreateScalar(&f, ACL_STRING));
    assert_non_null(strstr(aclGetRecentErrMsg(), "aclCreateScalar"));

    ACL_FAILS(aclDestroyTensor(NULL), ACLNN_ERR_PARAM_NULLPTR, "aclDestroyTensor");
    ACL_FAILS(aclDestroyScalar(NULL), ACLNN_ERR_PARAM_NULLPTR, "aclDestroyScalar");
    ACL_FAILS(aclDestroyTensor((const aclTensor *)sf), ACLNN_ERR_PARAM_INVALID, "no tensor");
    ACL_FAILS(aclDestroyScalar((const aclScalar *)t), ACLNN_ERR_PARAM_INVALID, "no scalar");
    ACL_OK(aclDestroyTensor(t));
    ACL_OK(aclDestroyScalar(sf));
    ACL_OK(aclDestroyScalar(sd));
    ACL_OK(aclDestroyScalar(si));
    ACL_OK(aclDestroyScalar(sh));
}

/* Runs out = self + alpha*other (or self*other) and returns out's values. */
static void add_or_mul(bool add, aclTensor *self, aclTensor *other, float alpha, aclTensor *out,
                       aclrtStream stream) {
    uint64_t ws = 99;
    aclOpExecutor *ex = NULL;
    if (add) {
        aclScalar *a = aclCreateScalar(&alpha, ACL_FLOAT);
        ACL_OK(aclnnAddGetWorkspaceSize(self, other, a, out, &ws, &ex));
        ACL_OK(aclDestroyScalar(a));
        assert_int_equal(ws, 0);
        ACL_OK(aclnnAdd(NULL, ws, ex, stream));
    } else {
        ACL_OK(aclnnMulGetWorkspaceSize(self, other, out, &ws, &ex));
        assert_int_equal(ws, 0);
        ACL_OK(aclnnMul(NULL, ws, ex, stream));
    }
    ACL_OK(aclrtSynchronizeStream(stream));
}

static void test_acl_add_mul_contiguous_f32_f16(void **state) {
    (void)state;
    const aclDataType types[] = {ACL_FLOAT, ACL_FLOAT16};
    int64_t dims[2] = {4, 2};
    float a[8], b[8], r[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (float)i;
        b[i] = 0.5f * (float)i + 1.0f;
    }
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    for (int k = 0; k < 2; k++) {
        void *da, *db, *dout;
        aclTensor *ta = tensor_of(dims, 2, NULL, types[k], a, 8, &da);
        aclTensor *tb = tensor_of(dims, 2, NULL, types[k], b, 8, &db);
        aclTensor *to = tensor_of(dims, 2, NULL, types[k], NULL, 8, &dout);
        add_or_mul(true, ta, tb, 2.0f, to, s);
        read_back(dout, types[k], r, 8);
        for (int i = 0; i < 8; i++)
            assert_true(r[i] == a[i] + 2.0f * b[i]);
        add_or_mul(false, ta, tb, 0.0f, to, s);
        read_back(dout, types[k], r, 8);
        for (int i = 0; i < 8; i++)
            assert_true(r[i] == a[i] * b[i]);
        /* In place: self is out. */
        add_or_mul(true, ta, tb, 1.0f, ta, s);
        read_back(da, types[k], r, 8);
        for (int i = 0; i < 8; i++)
            assert_true(r[i] == a[i] + b[i]);
        ACL_OK(aclDestroyTensor(ta));
        ACL_OK(aclDestroyTensor(tb));
        ACL_OK(aclDestroyTensor(to));
        ACL_OK(aclrtFree(da));
        ACL_OK(aclrtFree(db));
        ACL_OK(aclrtFree(dout));
    }
    ACL_OK(aclrtDestroyStream(s));
}

/* Broadcasting ([4,2] with [2], [4,1] and [1]) and strided views (a
 * transposed [2,4] read as [4,2]; an offset into memory). */
static void test_acl_add_mul_broadcast_and_strides(void **state) {
    (void)state;
    const aclDataType types[] = {ACL_FLOAT, ACL_FLOAT16};
    int64_t d42[2] = {4, 2}, d2[1] = {2}, d41[2] = {4, 1}, d1[1] = {1};
    float a[8] = {0, 1, 2, 3, 4, 5, 6, 7}, row[2] = {10, 20}, col[4] = {1, 2, 3, 4}, one = 0.5f;
    float r[8];
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    for (int k = 0; k < 2; k++) {
        aclDataType t = types[k];
        void *da, *drow, *dcol, *done, *dout;
        aclTensor *ta = tensor_of(d42, 2, NULL, t, a, 8, &da);
        aclTensor *trow = tensor_of(d2, 1, NULL, t, row, 2, &drow);
        aclTensor *tcol = tensor_of(d41, 2, NULL, t, col, 4, &dcol);
        aclTensor *tone = tensor_of(d1, 1, NULL, t, &one, 1, &done);
        aclTensor *to = tensor_of(d42, 2, NULL, t, NULL, 8, &dout);
        add_or_mul(true, ta, trow, 1.0f, to, s);
        read_back(dout, t, r, 8);
        for (int i = 0; i < 8; i++)
            assert_true(r[i] == a[i] + row[i % 2]);
        add_or_mul(false, tcol, ta, 0.0f, to, s); /* [4,1] * [4,2] */
        read_back(dout, t, r, 8);
        for (int i = 0; i < 8; i++)
            assert_true(r[i] == a[i] * col[i / 2]);
        add_or_mul(true, ta, tone, -2.0f, to, s);
        read_back(dout, t, r, 8);
        for (int i = 0; i < 8; i++)
            assert_true(r[i] == a[i] - 1.0f);
        /* a's memory as a [2,4] matrix, viewed transposed: element (i,j) is a[j*4+i]. */
        int64_t tstrides[2] = {1, 4};
        aclTensor *tt = aclCreateTensor(d42, 2, t, tstrides, 0, ACL_FORMAT_ND, d42, 2, da);
        add_or_mul(true, tt, trow, 1.0f, to, s);
        read_back(dout, t, r, 8);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
                assert_true(r[i * 2 + j] == a[j * 4 + i] + row[j]);
        /* An offset: the last 2 elements of a as a [2]. */
        int64_t unit[1] = {1};
        aclTensor *tail = aclCreateTensor(d2, 1, t, unit, 6, ACL_FORMAT_ND, d42, 2, da);
        add_or_mul(false, tail, trow, 0.0f, trow, s);
        read_back(drow, t, r, 2);
        assert_true(r[0] == 60.0f && r[1] == 140.0f);
        aclTensor *all[] = {ta, trow, tcol, tone, to, tt, tail};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            ACL_OK(aclDestroyTensor(all[i]));
        void *mem[] = {da, drow, dcol, done, dout};
        for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
            ACL_OK(aclrtFree(mem[i]));
    }
    ACL_OK(aclrtDestroyStream(s));
}

static void test_acl_elementwise_bad_input(void **state) {
    (void)state;
    int64_t d42[2] = {4, 2}, d3[1] = {3}, d8[1] = {8}, d41[2] = {4, 1};
    float zeros[8] = {0};
    void *m1, *m2, *m3, *m4, *m5, *m6;
    aclTensor *a = tensor_of(d42, 2, NULL, ACL_FLOAT, zeros, 8, &m1);
    aclTensor *b3 = tensor_of(d3, 1, NULL, ACL_FLOAT, zeros, 3, &m2);
    aclTensor *o8 = tensor_of(d8, 1, NULL, ACL_FLOAT, zeros, 8, &m3);
    aclTensor *h = tensor_of(d42, 2, NULL, ACL_FLOAT16, zeros, 8, &m4);
    aclTensor *i32 = tensor_of(d42, 2, NULL, ACL_INT32, NULL, 8, &m5);
    aclTensor *o41 = tensor_of(d41, 2, NULL, ACL_FLOAT, zeros, 4, &m6);
    float one = 1.0f;
    aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
    uint64_t ws;
    aclOpExecutor *ex;
    ACL_FAILS(aclnnAddGetWorkspaceSize(NULL, a, alpha, a, &ws, &ex), ACLNN_ERR_PARAM_NULLPTR,
              "self");
    ACL_FAILS(aclnnAddGetWorkspaceSize(a, NULL, alpha, a, &ws, &ex), ACLNN_ERR_PARAM_NULLPTR,
              "other");
    ACL_FAILS(aclnnAddGetWorkspaceSize(a, a, NULL, a, &ws, &ex), ACLNN_ERR_PARAM_NULLPTR, "alpha");
    ACL_FAILS(aclnnAddGetWorkspaceSize(a, a, alpha, NULL, &ws, &ex), ACLNN_ERR_PARAM_NULLPTR,
              "out");
    ACL_FAILS(aclnnAddGetWorkspaceSize(a, a, alpha, a, NULL, &ex), ACLNN_ERR_PARAM_NULLPTR,
              "workspaceSize");
    ACL_FAILS(aclnnMulGetWorkspaceSize(a, a, a, &ws, NULL), ACLNN_ERR_PARAM_NULLPTR, "executor");
    ACL_FAILS(aclnnAddGetWorkspaceSize(a, a, (const aclScalar *)a, a, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "alpha");
    ACL_FAILS(aclnnMulGetWorkspaceSize(a, (const aclTensor *)alpha, a, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "other");
    ACL_FAILS(aclnnAddGetWorkspaceSize(a, b3, alpha, a, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "do not broadcast");
    ACL_FAILS(aclnnMulGetWorkspaceSize(a, a, o8, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "out has shape [8]");
    ACL_FAILS(aclnnMulGetWorkspaceSize(a, a, o41, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "aclnnMulGetWorkspaceSize");
    ACL_FAILS(aclnnAddGetWorkspaceSize(a, h, alpha, a, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "data types differ");
    ACL_FAILS(aclnnMulGetWorkspaceSize(i32, i32, i32, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "ACL_FLOAT and ACL_FLOAT16");
    /* Data NULL with elements. */
    aclTensor *nodata =
        aclCreateTensor(d42, 2, ACL_FLOAT, (int64_t[]){2, 1}, 0, ACL_FORMAT_ND, d42, 2, NULL);
    ACL_FAILS(aclnnMulGetWorkspaceSize(nodata, a, a, &ws, &ex), ACLNN_ERR_PARAM_NULLPTR,
              "NULL data");
    ACL_OK(aclDestroyTensor(nodata));

    /* The second phase: NULL and foreign executors, and rill's refusal of a
     * destroyed stream (the executor is spent either way). */
    ACL_FAILS(aclnnAdd(NULL, 0, NULL, NULL), ACLNN_ERR_PARAM_NULLPTR, "aclnnAdd");
    ACL_OK(aclnnAddGetWorkspaceSize(a, a, alpha, a, &ws, &ex));
    ACL_FAILS(aclnnMul(NULL, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID, "aclnnMul");
    ACL_FAILS(aclnnMatmul(NULL, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID, "aclnnMatmul");
    aclrtStream dead;
    ACL_OK(aclrtCreateStream(&dead));
    ACL_OK(aclrtDestroyStream(dead));
    ACL_FAILS(aclnnAdd(NULL, 0, ex, dead), ACLNN_ERR_PARAM_INVALID, "aclnnAdd");
    ACL_FAILS(aclSetAclOpExecutorRepeatable(NULL), ACLNN_ERR_PARAM_NULLPTR,
              "aclSetAclOpExecutorRepeatable");
    ACL_FAILS(aclDestroyAclOpExecutor(NULL), ACLNN_ERR_PARAM_NULLPTR, "aclDestroyAclOpExecutor");
    ACL_FAILS(aclDestroyAclOpExecutor((aclOpExecutor *)a), ACLNN_ERR_PARAM_INVALID, "no executor");

    ACL_OK(aclDestroyScalar(alpha));
    aclTensor *all[] = {a, b3, o8, h, i32, o41};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ACL_OK(aclDestroyTensor(all[i]));
    void *mem[] = {m1, m2, m3, m4, m5, m6};
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
        ACL_OK(aclrtFree(mem[i]));
}

/* A repeatable executor runs any number of times, and is freed by
 * aclDestroyAclOpExecutor; so is one that never ran. */
static void test_acl_executor_repeatable_and_destroy(void **state) {
    (void)state;
    int64_t d[1] = {4};
    float x[4] = {1, 2, 3, 4}, r[4];
    void *mx;
    aclTensor *t = tensor_of(d, 1, NULL, ACL_FLOAT, x, 4, &mx);
    float one = 1.0f;
    aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
    uint64_t ws;
    aclOpExecutor *ex, *unused;
    ACL_OK(aclnnAddGetWorkspaceSize(t, t, alpha, t, &ws, &ex)); /* t = 2t */
    ACL_OK(aclSetAclOpExecutorRepeatable(ex));
    /* The tensors may go before the executor runs. */
    ACL_OK(aclnnMulGetWorkspaceSize(t, t, t, &ws, &unused));
    ACL_OK(aclDestroyTensor(t));
    ACL_OK(aclDestroyScalar(alpha));
    for (int i = 0; i < 3; i++)
        ACL_OK(aclnnAdd(NULL, 0, ex, NULL));
    ACL_OK(aclrtSynchronizeStream(NULL));
    read_back(mx, ACL_FLOAT, r, 4);
    for (int i = 0; i < 4; i++)
        assert_true(r[i] == 8.0f * x[i]);
    ACL_OK(aclDestroyAclOpExecutor(ex));
    ACL_OK(aclDestroyAclOpExecutor(unused));
    ACL_OK(aclrtFree(mx));
}

/* Zero elements: nothing to do, and no data needed. */
static void test_acl_empty_tensors(void **state) {
    (void)state;
    int64_t d[2] = {0, 3}, st[2] = {3, 1};
    aclTensor *e = aclCreateTensor(d, 2, ACL_FLOAT, st, 0, ACL_FORMAT_ND, d, 2, NULL);
    uint64_t ws;
    aclOpExecutor *ex;
    ACL_OK(aclnnMulGetWorkspaceSize(e, e, e, &ws, &ex));
    ACL_OK(aclnnMul(NULL, 0, ex, NULL));
    ACL_OK(aclDestroyTensor(e));
}

static void matmul(aclTensor *a, aclTensor *b, aclTensor *out) {
    uint64_t ws;
    aclOpExecutor *ex;
    ACL_OK(aclnnMatmulGetWorkspaceSize(a, b, out, 0, &ws, &ex));
    assert_int_equal(ws, 0);
    ACL_OK(aclnnMatmul(NULL, ws, ex, NULL));
    ACL_OK(aclrtSynchronizeStream(NULL));
}

/* The product of a[m,k] and b[k,n], row-major, on the host. */
static void host_matmul(const float *a, const float *b, float *c, int m, int k, int n) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float sum = 0;
            for (int p = 0; p < k; p++)
                sum += a[i * k + p] * b[p * n + j];
            c[i * n + j] = sum;
        }
}

static void test_acl_matmul_shapes_f32_f16(void **state) {
    (void)state;
    const aclDataType types[] = {ACL_FLOAT, ACL_FLOAT16};
    float a[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; /* [2,2,3] or [2,3] */
    float b[6] = {1, 0, 2, 1, 0, 3};                       /* [3,2] */
    float v3[3] = {1, 1, 2}, want[8], r[8];
    for (int k = 0; k < 2; k++) {
        aclDataType t = types[k];
        void *ma, *mb, *mv, *mo;
        int64_t d23[2] = {2, 3}, d32[2] = {3, 2}, d3[1] = {3}, d22[2] = {2, 2}, d2[1] = {2};
        int64_t d223[3] = {2, 2, 3}, d222[3] = {2, 2, 2}, d1[1] = {1};
        aclTensor *ta = tensor_of(d23, 2, NULL, t, a, 6, &ma);
        aclTensor *tb = tensor_of(d32, 2, NULL, t, b, 6, &mb);
        aclTensor *tv = tensor_of(d3, 1, NULL, t, v3, 3, &mv);
        aclTensor *to = tensor_of(d22, 2, NULL, t, NULL, 8, &mo);
        matmul(ta, tb, to); /* [2,3] @ [3,2] */
        host_matmul(a, b, want, 2, 3, 2);
        read_back(mo, t, r, 4);
        for (int i = 0; i < 4; i++)
            assert_true(r[i] == want[i]);
        aclTensor *o2 = aclCreateTensor(d2, 1, t, (int64_t[]){1}, 0, ACL_FORMAT_ND, d2, 1, mo);
        matmul(tv, tb, o2); /* [3] @ [3,2] -> [2] */
        host_matmul(v3, b, want, 1, 3, 2);
        read_back(mo, t, r, 2);
        assert_true(r[0] == want[0] && r[1] == want[1]);
        matmul(ta, tv, o2); /* [2,3] @ [3] -> [2] */
        host_matmul(a, v3, want, 2, 3, 1);
        read_back(mo, t, r, 2);
        assert_true(r[0] == want[0] && r[1] == want[1]);
        aclTensor *o0 = aclCreateTensor(NULL, 0, t, NULL, 0, ACL_FORMAT_ND, NULL, 0, mo);
        matmul(tv, tv, o0); /* [3] @ [3] -> a number */
        read_back(mo, t, r, 1);
        assert_true(r[0] == 6.0f);
        aclTensor *o1 = aclCreateTensor(d1, 1, t, (int64_t[]){1}, 0, ACL_FORMAT_ND, d1, 1, mo);
        matmul(tv, tv, o1); /* or a [1] */
        /* Batches: [2,2,3] @ [3,2], b broadcast over the batch. */
        aclTensor *ta3 =
            aclCreateTensor(d223, 3, t, (int64_t[]){6, 3, 1}, 0, ACL_FORMAT_ND, d223, 3, NULL);
        ACL_OK(aclDestroyTensor(ta3));
        void *ma3;
        ta3 = tensor_of(d223, 3, NULL, t, a, 12, &ma3);
        aclTensor *o3 =
            aclCreateTensor(d222, 3, t, (int64_t[]){4, 2, 1}, 0, ACL_FORMAT_ND, d222, 3, mo);
        matmul(ta3, tb, o3);
        host_matmul(a, b, want, 4, 3, 2); /* both batches at once: rows of a */
        read_back(mo, t, r, 8);
        for (int i = 0; i < 8; i++)
            assert_true(r[i] == want[i]);
        aclTensor *all[] = {ta, tb, tv, to, o2, o0, o1, ta3, o3};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            ACL_OK(aclDestroyTensor(all[i]));
        void *mem[] = {ma, mb, mv, mo, ma3};
        for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
            ACL_OK(aclrtFree(mem[i]));
    }
}

static void test_acl_matmul_bad_input(void **state) {
    (void)state;
    int64_t d23[2] = {2, 3}, d22[2] = {2, 2}, d33[2] = {3, 3}, d32[2] = {3, 2};
    float z[9] = {0};
    void *m1, *m2, *m3, *m4;
    aclTensor *a = tensor_of(d23, 2, NULL, ACL_FLOAT, z, 6, &m1);
    aclTensor *o = tensor_of(d22, 2, NULL, ACL_FLOAT, z, 4, &m2);
    aclTensor *sq = tensor_of(d33, 2, NULL, ACL_FLOAT, z, 9, &m3);
    aclTensor *b = tensor_of(d32, 2, NULL, ACL_FLOAT, z, 6, &m4);
    aclTensor *bt = aclCreateTensor(d32, 2, ACL_FLOAT, (int64_t[]){1, 3}, 0, ACL_FORMAT_ND, d23, 2,
                                    m1); /* a transposed: not contiguous */
    aclTensor *scalar = aclCreateTensor(NULL, 0, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, NULL, 0, m1);
    uint64_t ws;
    aclOpExecutor *ex;
    ACL_FAILS(aclnnMatmulGetWorkspaceSize(NULL, b, o, 0, &ws, &ex), ACLNN_ERR_PARAM_NULLPTR,
              "self");
    ACL_FAILS(aclnnMatmulGetWorkspaceSize(a, NULL, o, 0, &ws, &ex), ACLNN_ERR_PARAM_NULLPTR,
              "mat2");
    ACL_FAILS(aclnnMatmulGetWorkspaceSize(a, b, o, 0, &ws, NULL), ACLNN_ERR_PARAM_NULLPTR,
              "executor");
    ACL_FAILS(aclnnMatmulGetWorkspaceSize(a, b, o, 4, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "cubeMathType 4");
    ACL_FAILS(aclnnMatmulGetWorkspaceSize(a, a, o, 0, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "last dimension (3)");
    ACL_FAILS(aclnnMatmulGetWorkspaceSize(a, sq, o, 0, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "out has shape [2, 2]; the product has [2, 3]");
    ACL_FAILS(aclnnMatmulGetWorkspaceSize(a, bt, o, 0, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "mat2 is not contiguous");
    ACL_FAILS(aclnnMatmulGetWorkspaceSize(scalar, b, o, 0, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "no dimensions");
    aclTensor *all[] = {a, o, sq, b, bt, scalar};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ACL_OK(aclDestroyTensor(all[i]));
    void *mem[] = {m1, m2, m3, m4};
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
        ACL_OK(aclrtFree(mem[i]));
}

/* Offsets and strides whose elements lie past 2^63 bytes (in int64_t
 * bytes, or wrapping a 64-bit count) are refused: over host memory, which
 * nothing else checks, the op would write elsewhere and succeed. */
static void test_acl_strides_past_the_end_of_memory_are_refused(void **state) {
    (void)state;
    float host[8] = {0}, one = 1.0f;
    int64_t d1[1] = {1}, d2[1] = {2}, unit[1] = {1};
    int64_t wraps[1] = {(INT64_C(1) << 62) + 1}; /* element 1 at 2^64 + 4 bytes */
    int64_t past[1] = {INT64_C(1) << 61};        /* element 1 at 2^63 bytes */
    aclTensor *x = aclCreateTensor(d2, 1, ACL_FLOAT, unit, 0, ACL_FORMAT_ND, d2, 1, host);
    aclTensor *w = aclCreateTensor(d2, 1, ACL_FLOAT, wraps, 0, ACL_FORMAT_ND, d2, 1, host);
    aclTensor *p = aclCreateTensor(d2, 1, ACL_FLOAT, past, 0, ACL_FORMAT_ND, d2, 1, host);
    aclTensor *far = aclCreateTensor(d1, 1, ACL_FLOAT, unit, INT64_C(1) << 62, ACL_FORMAT_ND, d1, 1,
                                     host); /* offset 2^64 bytes */
    aclTensor *h = aclCreateTensor(d2, 1, ACL_FLOAT16, wraps, 0, ACL_FORMAT_ND, d2, 1, host);
    aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
    assert_true(x && w && p && far && h && alpha);
    uint64_t ws;
    aclOpExecutor *ex = NULL;
    ACL_FAILS(aclnnMulGetWorkspaceSize(x, far, x, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "other's offset and strides");
    ACL_FAILS(aclnnMulGetWorkspaceSize(p, x, x, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "self's offset and strides");
    ACL_FAILS(aclnnAddGetWorkspaceSize(x, x, alpha, w, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "out's offset and strides reach past the end of memory");
    ACL_FAILS(aclnnMatmulGetWorkspaceSize(far, far, far, 0, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "self's offset");
    ACL_FAILS(aclnnMulGetWorkspaceSize(h, h, h, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "self's offset");
    assert_null(ex);
    aclTensor *all[] = {x, w, p, far, h};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ACL_OK(aclDestroyTensor(all[i]));
    ACL_OK(aclDestroyScalar(alpha));
}

/* A tensor over memory from aclrtMalloc may not reach past its allocation:
 * a strided view, which the op's own kernel runs, is refused at the first
 * phase as rill's ops refuse a contiguous one. */
static void test_acl_tensor_past_its_allocation_is_refused(void **state) {
    (void)state;
    void *small, *host;
    ACL_OK(aclrtMalloc(&small, 2 * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMallocHost(&host, 2 * sizeof(float)));
    int64_t d2[1] = {2}, step2[1] = {2}, unit[1] = {1};
    aclTensor *fits = aclCreateTensor(d2, 1, ACL_FLOAT, unit, 0, ACL_FORMAT_ND, d2, 1, small);
    aclTensor *spread = aclCreateTensor(d2, 1, ACL_FLOAT, step2, 0, ACL_FORMAT_ND, d2, 1, small);
    aclTensor *shifted = aclCreateTensor(d2, 1, ACL_FLOAT, unit, 1, ACL_FORMAT_ND, d2, 1, host);
    assert_true(fits && spread && shifted);
    uint64_t ws;
    aclOpExecutor *ex = NULL;
    ACL_FAILS(aclnnMulGetWorkspaceSize(fits, fits, spread, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "out reaches 12 bytes from its data, past the end of its 8-byte allocation from "
              "aclrtMalloc");
    ACL_FAILS(aclnnMulGetWorkspaceSize(shifted, fits, fits, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "8-byte allocation from aclrtMallocHost");
    assert_null(ex);
    ACL_OK(aclnnMulGetWorkspaceSize(fits, fits, fits, &ws, &ex));
    ACL_OK(aclDestroyAclOpExecutor(ex));
    aclTensor *all[] = {fits, spread, shifted};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ACL_OK(aclDestroyTensor(all[i]));
    ACL_OK(aclrtFree(small));
    ACL_OK(aclrtFreeHost(host));
}

/* An op's kernel counts its blocks of 2^14 elements in 32 bits: more than
 * (2^32 - 1) * 2^14 elements (broadcast from one float here) are refused,
 * where the count would otherwise wrap and leave most of out unwritten. */
static void test_acl_op_past_the_kernel_grid_is_refused(void **state) {
    (void)state;
    void *one;
    ACL_OK(aclrtMalloc(&one, sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    const int64_t most = ((INT64_C(1) << 32) - 1) << 14;
    int64_t over[1] = {(INT64_C(1) << 46) + (INT64_C(1) << 14)}, fits[1] = {most}, zero[1] = {0};
    aclTensor *big = aclCreateTensor(over, 1, ACL_FLOAT, zero, 0, ACL_FORMAT_ND, over, 1, one);
    aclTensor *ok = aclCreateTensor(fits, 1, ACL_FLOAT, zero, 0, ACL_FORMAT_ND, fits, 1, one);
    assert_true(big && ok);
    uint64_t ws;
    aclOpExecutor *ex = NULL;
    ACL_FAILS(aclnnMulGetWorkspaceSize(big, big, big, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "self has more than 70368744161280 elements");
    assert_null(ex);
    /* The most it takes passes the first phase (and is not run here). */
    ACL_OK(aclnnMulGetWorkspaceSize(ok, ok, ok, &ws, &ex));
    ACL_OK(aclDestroyAclOpExecutor(ex));
    ACL_OK(aclDestroyTensor(big));
    ACL_OK(aclDestroyTensor(ok));
    ACL_OK(aclrtFree(one));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_tensor_and_scalar_checks),
        ACL_TEST(test_acl_add_mul_contiguous_f32_f16),
        ACL_TEST(test_acl_add_mul_broadcast_and_strides),
        ACL_TEST(test_acl_elementwise_bad_input),
        ACL_TEST(test_acl_executor_repeatable_and_destroy),
        ACL_TEST(test_acl_empty_tensors),
        ACL_TEST(test_acl_matmul_shapes_f32_f16),
        ACL_TEST(test_acl_matmul_bad_input),
        ACL_TEST(test_acl_strides_past_the_end_of_memory_are_refused),
        ACL_TEST(test_acl_tensor_past_its_allocation_is_refused),
        ACL_TEST(test_acl_op_past_the_kernel_grid_is_refused),
    };
    return RT_RUN(tests);
}
