/* SPDX-License-Identifier: MIT */
/* librill_acl's memory calls (acl/acl_rt.h): allocation with its policy,
 * copies whose kind is checked against where the pointers lie, fills and
 * the memory figures. */
#include <stdint.h>

#include "acl_support.h"

enum { N = 64 };

static void test_acl_malloc_accepts_every_policy(void **state) {
    (void)state;
    const unsigned pages[] = {ACL_MEM_MALLOC_HUGE_FIRST,    ACL_MEM_MALLOC_HUGE_ONLY,
                              ACL_MEM_MALLOC_NORMAL_ONLY,   ACL_MEM_MALLOC_HUGE_FIRST_P2P,
                              ACL_MEM_MALLOC_HUGE_ONLY_P2P, ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
                              ACL_MEM_MALLOC_HUGE1G_ONLY,   ACL_MEM_MALLOC_HUGE1G_ONLY_P2P};
    const unsigned bands[] = {0, ACL_MEM_TYPE_LOW_BAND_WIDTH, ACL_MEM_TYPE_HIGH_BAND_WIDTH};
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++)
        for (size_t j = 0; j < 3; j++) {
            void *p = NULL;
            ACL_OK(aclrtMalloc(&p, 100, (aclrtMemMallocPolicy)(pages[i] | bands[j])));
            assert_non_null(p);
            ACL_OK(aclrtFree(p));
        }
}

static void test_acl_malloc_bad_input(void **state) {
    (void)state;
    void *p = (void *)1;
    ACL_FAILS(aclrtMalloc(NULL, 8, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM, "devPtr");
    ACL_FAILS(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM, "size");
    assert_null(p);
    ACL_FAILS(aclrtMalloc(&p, 8, (aclrtMemMallocPolicy)8), ACL_ERROR_INVALID_PARAM, "policy");
    ACL_FAILS(aclrtMalloc(&p, 8,
                          (aclrtMemMallocPolicy)(ACL_MEM_TYPE_LOW_BAND_WIDTH |
                                                 ACL_MEM_TYPE_HIGH_BAND_WIDTH)),
              ACL_ERROR_INVALID_PARAM, "policy");
    /* More than the device has: rill's refusal, with rill's sentence. */
    ACL_FAILS(aclrtMalloc(&p, SIZE_MAX / 2, ACL_MEM_MALLOC_HUGE_FIRST),
              ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc");
    assert_null(p);
    ACL_FAILS(aclrtFree(NULL), ACL_ERROR_INVALID_PARAM, "aclrtFree");
    ACL_FAILS(aclrtMallocHost(NULL, 8), ACL_ERROR_INVALID_PARAM, "aclrtMallocHost");
    ACL_FAILS(aclrtMallocHost(&p, 0), ACL_ERROR_INVALID_PARAM, "aclrtMallocHost");
    ACL_FAILS(aclrtFreeHost(NULL), ACL_ERROR_INVALID_PARAM, "aclrtFreeHost");
}

static void test_acl_free_checks_the_kind_of_memory(void **state) {
    (void)state;
    void *dev, *host;
    ACL_OK(aclrtMalloc(&dev, 256, ACL_MEM_MALLOC_NORMAL_ONLY));
    ACL_OK(aclrtMallocHost(&host, 256));
    ACL_FAILS(aclrtFree(host), ACL_ERROR_INVALID_PARAM, "aclrtFreeHost");
    ACL_FAILS(aclrtFreeHost(dev), ACL_ERROR_INVALID_PARAM, "aclrtFree");
    ACL_OK(aclrtFree(dev));
    ACL_OK(aclrtFreeHost(host));
    ACL_FAILS(aclrtFree(dev), ACL_ERROR_RT_PARAM_INVALID, "aclrtFree");
    ACL_FAILS(aclrtFreeHost(host), ACL_ERROR_RT_PARAM_INVALID, "aclrtFreeHost");
}

static void test_acl_memcpy_every_kind(void **state) {
    (void)state;
    float *host, *back, other[N];
    void *d1, *d2;
    ACL_OK(aclrtMallocHost((void **)&host, N * sizeof(float)));
    ACL_OK(aclrtMallocHost((void **)&back, N * sizeof(float)));
    ACL_OK(aclrtMalloc(&d1, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc(&d2, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    for (int i = 0; i < N; i++)
        host[i] = (float)i;
    size_t bytes = N * sizeof(float);
    ACL_OK(aclrtMemcpy(d1, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    ACL_OK(aclrtMemcpy(d2, bytes, d1, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE));
    ACL_OK(aclrtMemcpy(back, bytes, d2, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    ACL_OK(aclrtMemcpy(other, sizeof other, back, bytes, ACL_MEMCPY_HOST_TO_HOST));
    for (int i = 0; i < N; i++)
        assert_true(other[i] == (float)i);
    /* ACL_MEMCPY_DEFAULT takes the direction from the pointers. */
    ACL_OK(aclrtMemset(d2, bytes, 0, bytes));
    ACL_OK(aclrtMemcpy(d2, bytes, host, bytes, ACL_MEMCPY_DEFAULT));
    ACL_OK(aclrtMemcpy(back, bytes, d2, bytes, ACL_MEMCPY_DEFAULT));
    assert_true(back[N - 1] == (float)(N - 1));
    /* Inside an allocation is device memory too. */
    ACL_OK(aclrtMemcpy(back, 4, (char *)d1 + 8, 4, ACL_MEMCPY_DEVICE_TO_HOST));
    assert_true(back[0] == 2.0f);

    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtMemsetAsync(d2, bytes, 0, bytes, s));
    ACL_OK(aclrtMemcpyAsync(d2, bytes, host, bytes / 2, ACL_MEMCPY_HOST_TO_DEVICE, s));
    ACL_OK(aclrtMemcpyAsync(back, bytes, d2, bytes, ACL_MEMCPY_DEVICE_TO_HOST, s));
    ACL_OK(aclrtSynchronizeStream(s));
    assert_true(back[N / 2 - 1] == (float)(N / 2 - 1));
    assert_true(back[N / 2] == 0.0f);
    ACL_OK(aclrtMemcpyAsync(d2, bytes, host, 0, ACL_MEMCPY_HOST_TO_DEVICE, s)); /* nothing */
    ACL_OK(aclrtDestroyStream(s));
    ACL_OK(aclrtFree(d1));
    ACL_OK(aclrtFree(d2));
    ACL_OK(aclrtFreeHost(host));
    ACL_OK(aclrtFreeHost(back));
}

static void test_acl_memcpy_bad_input(void **state) {
    (void)state;
    void *dev, *host;
    ACL_OK(aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMallocHost(&host, 64));
    char plain[64];
    /* The kind must say where dst and src are. */
    ACL_FAILS(aclrtMemcpy(dev, 64, host, 64, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM,
              "ACL_MEMCPY_DEVICE_TO_HOST");
    ACL_FAILS(aclrtMemcpy(plain, 64, dev, 64, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM,
              "ACL_MEMCPY_HOST_TO_HOST");
    ACL_FAILS(aclrtMemcpy(dev, 64, plain, 64, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_ERROR_INVALID_PARAM,
              "kind");
    ACL_FAILS(aclrtMemcpyAsync(plain, 64, host, 64, ACL_MEMCPY_HOST_TO_DEVICE, NULL),
              ACL_ERROR_INVALID_PARAM, "aclrtMemcpyAsync");
    ACL_FAILS(aclrtMemcpy(dev, 64, host, 64, (aclrtMemcpyKind)7), ACL_ERROR_INVALID_PARAM,
              "kind 7");
    ACL_FAILS(aclrtMemcpy(dev, 32, host, 64, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM,
              "destMax");
    ACL_FAILS(aclrtMemcpy(NULL, 64, host, 64, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM,
              "dst");
    ACL_FAILS(aclrtMemcpyAsync(dev, 64, NULL, 64, ACL_MEMCPY_HOST_TO_DEVICE, NULL),
              ACL_ERROR_INVALID_PARAM, "src");
    /* Past the end of the device memory: rill's check. */
    ACL_FAILS(aclrtMemcpy((char *)dev + 32, 64, plain, 64, ACL_MEMCPY_HOST_TO_DEVICE),
              ACL_ERROR_RT_PARAM_INVALID, "aclrtMemcpy");
    ACL_OK(aclrtFree(dev));
    ACL_OK(aclrtFreeHost(host));
}

static void test_acl_memset(void **state) {
    (void)state;
    unsigned char *dev, *host, back[32];
    ACL_OK(aclrtMalloc((void **)&dev, 32, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMallocHost((void **)&host, 32));
    /* Synchronous on device memory; value's low byte. */
    ACL_OK(aclrtMemset(dev, 32, 0x1ab, 32));
    ACL_OK(aclrtMemcpy(back, 32, dev, 32, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < 32; i++)
        assert_int_equal(back[i], 0xab);
    /* On host memory from aclrtMallocHost it runs at once. */
    ACL_OK(aclrtMemset(host, 32, 7, 16));
    assert_int_equal(host[15], 7);
    ACL_OK(aclrtMemset(dev, 32, 1, 0)); /* nothing */
    ACL_FAILS(aclrtMemset(dev, 16, 0, 32), ACL_ERROR_INVALID_PARAM, "maxCount");
    ACL_FAILS(aclrtMemset(NULL, 16, 0, 8), ACL_ERROR_INVALID_PARAM, "aclrtMemset");
    ACL_FAILS(aclrtMemsetAsync(dev, 16, 0, 32, NULL), ACL_ERROR_INVALID_PARAM, "aclrtMemsetAsync");
    ACL_FAILS(aclrtMemsetAsync(NULL, 16, 0, 8, NULL), ACL_ERROR_INVALID_PARAM, "devPtr");
    ACL_FAILS(aclrtMemsetAsync(dev + 16, 32, 0, 32, NULL), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtMemsetAsync");
    ACL_OK(aclrtFree(dev));
    ACL_OK(aclrtFreeHost(host));
}

/* aclrtMemset fills only memory of aclrtMalloc and aclrtMallocHost not yet
 * freed: other memory (a program's own, an address never mapped, device
 * memory already freed) is refused, and nothing is written. */
static void test_acl_memset_refuses_memory_acl_did_not_give(void **state) {
    (void)state;
    unsigned char plain[32] = {0}, *host;
    void *freed;
    ACL_OK(aclrtMalloc(&freed, 32, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtFree(freed));
    ACL_OK(aclrtMallocHost((void **)&host, 32));
    ACL_FAILS(aclrtMemset(freed, 32, 1, 32), ACL_ERROR_INVALID_PARAM, "or freed");
    ACL_FAILS(aclrtMemset(plain, 32, 1, 32), ACL_ERROR_INVALID_PARAM,
              "no memory from aclrtMalloc or aclrtMallocHost");
    assert_int_equal(plain[0], 0);
    ACL_FAILS(aclrtMemset((void *)(uintptr_t)4096, 32, 1, 32), ACL_ERROR_INVALID_PARAM,
              "aclrtMemset");
    /* Host memory from aclrtMallocHost, past its end. */
    ACL_FAILS(aclrtMemset(host + 16, 32, 1, 32), ACL_ERROR_INVALID_PARAM,
              "16 bytes left of 32 from aclrtMallocHost");
    ACL_OK(aclrtFreeHost(host));
}

static void test_acl_get_mem_info(void **state) {
    (void)state;
    size_t free_before, total, free_after, total_after;
    ACL_OK(aclrtGetMemInfo(ACL_HBM_MEM, &free_before, &total));
    assert_true(total > 0 && free_before <= total);
    void *p;
    ACL_OK(aclrtMalloc(&p, 8u << 20, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtGetMemInfo(ACL_DDR_MEM, &free_after, &total_after));
    assert_int_equal(total_after, total);
    assert_true(free_after + (8u << 20) <= free_before);
    ACL_OK(aclrtFree(p));
    ACL_FAILS(aclrtGetMemInfo(ACL_HBM_MEM, NULL, &total), ACL_ERROR_INVALID_PARAM, "free");
    ACL_FAILS(aclrtGetMemInfo(ACL_HBM_MEM, &free_after, NULL), ACL_ERROR_INVALID_PARAM, "total");
    ACL_FAILS(aclrtGetMemInfo((aclrtMemAttr)10, &free_after, &total), ACL_ERROR_INVALID_PARAM,
              "attr");
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_malloc_accepts_every_policy),
        ACL_TEST(test_acl_malloc_bad_input),
        ACL_TEST(test_acl_free_checks_the_kind_of_memory),
        ACL_TEST(test_acl_memcpy_every_kind),
        ACL_TEST(test_acl_memcpy_bad_input),
        ACL_TEST(test_acl_memset),
        ACL_TEST(test_acl_memset_refuses_memory_acl_did_not_give),
        ACL_TEST(test_acl_get_mem_info),
    };
    return RT_RUN(tests);
}
