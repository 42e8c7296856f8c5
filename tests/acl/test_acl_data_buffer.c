/* SPDX-License-Identifier: MIT */
/* aclDataBuffer (acl/acl_base.h): a buffer describes an op's output
 * memory and reads back the address and size it was given; updates; empty
 * buffers; and the refusals of NULL, destroyed and other-kind handles. */
#include "acl_support.h"

enum { N = 6 };

/* An op's output described by a data buffer, in the order a program of
 * CANN's samples uses one: the tensor's memory goes into the buffer, the
 * op writes through the tensor, and the result is read back from the
 * buffer's address. */
static void test_acl_data_buffer_describes_op_output(void **state) {
    (void)state;
    aclrtStream stream;
    ACL_OK(aclrtCreateStream(&stream));
    float a[N], b[N], got[N];
    for (int i = 0; i < N; i++) {
        a[i] = 0.25f * (float)(i + 1);
        b[i] = 3.0f - (float)i;
    }
    int64_t shape[1] = {N}, strides[1] = {1};
    void *dev_a, *dev_b, *dev_out;
    size_t bytes = sizeof a;
    ACL_OK(aclrtMalloc(&dev_a, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc(&dev_b, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc(&dev_out, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMemcpy(dev_a, bytes, a, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    ACL_OK(aclrtMemcpy(dev_b, bytes, b, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    aclTensor *ta =
        aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, dev_a);
    aclTensor *tb =
        aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, dev_b);
    aclTensor *tout =
        aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, dev_out);
    float two = 2.0f;
    aclScalar *alpha = aclCreateScalar(&two, ACL_FLOAT);
    assert_non_null(ta);
    assert_non_null(tb);
    assert_non_null(tout);
    assert_non_null(alpha);

    aclDataBuffer *out = aclCreateDataBuffer(dev_out, bytes);
    assert_non_null(out);
    assert_ptr_equal(aclGetDataBufferAddr(out), dev_out);
    assert_int_equal(aclGetDataBufferSizeV2(out), bytes);
    assert_int_equal(aclGetDataBufferSize(out), (uint32_t)bytes);

    uint64_t ws = 0;
    aclOpExecutor *exec = NULL;
    ACL_OK(aclnnAddGetWorkspaceSize(ta, tb, alpha, tout, &ws, &exec));
    assert_int_equal(ws, 0);
    ACL_OK(aclnnAdd(NULL, ws, exec, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    ACL_OK(aclrtMemcpy(got, sizeof got, aclGetDataBufferAddr(out), aclGetDataBufferSizeV2(out),
                       ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < N; i++)
        assert_float_equal(got[i], a[i] + 2.0f * b[i], 0.0f);

    /* The buffer now describes the first input; its memory stays put. */
    ACL_OK(aclUpdateDataBuffer(out, dev_a, bytes / 2));
    assert_ptr_equal(aclGetDataBufferAddr(out), dev_a);
    assert_int_equal(aclGetDataBufferSizeV2(out), bytes / 2);
    ACL_OK(aclDestroyDataBuffer(out));
    ACL_OK(aclrtMemcpy(got, sizeof got, dev_out, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    assert_float_equal(got[N - 1], a[N - 1] + 2.0f * b[N - 1], 0.0f);

    ACL_OK(aclDestroyTensor(ta));
    ACL_OK(aclDestroyTensor(tb));
    ACL_OK(aclDestroyTensor(tout));
    ACL_OK(aclDestroyScalar(alpha));
    ACL_OK(aclrtFree(dev_a));
    ACL_OK(aclrtFree(dev_b));
    ACL_OK(aclrtFree(dev_out));
    ACL_OK(aclrtDestroyStream(stream));
}

static void test_acl_data_buffer_empty_and_host(void **state) {
    (void)state;
    aclDataBuffer *empty = aclCreateDataBuffer(NULL, 0);
    assert_non_null(empty);
    assert_null(aclGetDataBufferAddr(empty));
    assert_int_equal(aclGetDataBufferSizeV2(empty), 0);
    double host[3] = {1.0, 2.0, 3.0};
    ACL_OK(aclUpdateDataBuffer(empty, host, sizeof host));
    assert_ptr_equal(aclGetDataBufferAddr(empty), host);
    assert_int_equal(aclGetDataBufferSizeV2(empty), sizeof host);
    ACL_OK(aclUpdateDataBuffer(empty, NULL, 0));
    assert_null(aclGetDataBufferAddr(empty));
    ACL_OK(aclDestroyDataBuffer(empty));
    /* Past 32 bits the old size call cannot answer; the V2 one can. */
    static char big_base;
    size_t big = (size_t)UINT32_MAX + 2;
    aclDataBuffer *wide = aclCreateDataBuffer(&big_base, big);
    assert_non_null(wide);
    assert_int_equal(aclGetDataBufferSizeV2(wide), big);
    assert_int_equal(aclGetDataBufferSize(wide), 0);
    assert_non_null(strstr(aclGetRecentErrMsg(), "aclGetDataBufferSizeV2"));
    ACL_OK(aclDestroyDataBuffer(wide));
}

static void test_acl_data_buffer_bad_input(void **state) {
    (void)state;
    int word = 7;
    assert_null(aclCreateDataBuffer(NULL, 16));
    assert_non_null(strstr(aclGetRecentErrMsg(), "aclCreateDataBuffer: data is NULL"));
    ACL_FAILS(aclDestroyDataBuffer(NULL), ACL_ERROR_INVALID_PARAM, "dataBuffer is NULL");
    assert_null(aclGetDataBufferAddr(NULL));
    assert_int_equal(aclGetDataBufferSizeV2(NULL), 0);

    aclDataBuffer *buf = aclCreateDataBuffer(&word, sizeof word);
    assert_non_null(buf);
    ACL_FAILS(aclUpdateDataBuffer(buf, NULL, 4), ACL_ERROR_INVALID_PARAM, "data is NULL");
    assert_ptr_equal(aclGetDataBufferAddr(buf), &word);
    ACL_OK(aclDestroyDataBuffer(buf));
    /* Destroyed: refused, never read, even once a new buffer exists. */
    aclDataBuffer *next = aclCreateDataBuffer(&word, 1);
    assert_non_null(next);
    ACL_FAILS(aclDestroyDataBuffer(buf), ACL_ERROR_INVALID_PARAM, "aclDestroyDataBuffer");
    ACL_FAILS(aclUpdateDataBuffer(buf, &word, 1), ACL_ERROR_INVALID_PARAM, "destroyed");
    assert_null(aclGetDataBufferAddr(buf));
    assert_int_equal(aclGetDataBufferSizeV2(buf), 0);
    assert_non_null(strstr(aclGetRecentErrMsg(), "destroyed by aclDestroyDataBuffer"));

    /* A scalar, a stream, or an address in a buffer's place. */
    float one = 1.0f;
    aclScalar *scalar = aclCreateScalar(&one, ACL_FLOAT);
    ACL_FAILS(aclDestroyDataBuffer((aclDataBuffer *)scalar), ACL_ERROR_INVALID_PARAM,
              "scalar from aclCreateScalar");
    aclrtStream stream;
    ACL_OK(aclrtCreateStream(&stream));
    assert_null(aclGetDataBufferAddr((aclDataBuffer *)stream));
    assert_non_null(strstr(aclGetRecentErrMsg(), "no data buffer from aclCreateDataBuffer"));
    ACL_FAILS(aclDestroyDataBuffer((aclDataBuffer *)&word), ACL_ERROR_INVALID_PARAM,
              "no data buffer");
    /* And a buffer is no scalar. */
    ACL_FAILS(aclDestroyScalar((aclScalar *)next), ACLNN_ERR_PARAM_INVALID,
              "data buffer from aclCreateDataBuffer");
    ACL_OK(aclDestroyDataBuffer(next));
    ACL_OK(aclDestroyScalar(scalar));
    ACL_OK(aclrtDestroyStream(stream));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_data_buffer_describes_op_output),
        ACL_TEST(test_acl_data_buffer_empty_and_host),
        ACL_TEST(test_acl_data_buffer_bad_input),
    };
    return RT_RUN(tests);
}
