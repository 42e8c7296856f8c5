/* SPDX-License-Identifier: MIT */
/* The handles of librill_acl's op API (aclTensor, aclScalar, aclOpExecutor):
 * generation-checked, so that a destroyed one, a spent executor, an object
 * of another kind or one of rill's handles passed in its place is refused
 * with ACLNN_ERR_PARAM_INVALID and a message, and never read; even when a
 * newer object took its place. Every call below is defined behaviour. */
#include <pthread.h>
#include <stdatomic.h>

#include "acl_support.h"

enum { N = 4, K = 16 };

/* A [N] float tensor over device memory *dev holding x (zeros if NULL). */
static aclTensor *vector_of(const float *x, void **dev) {
    float zeros[N] = {0};
    int64_t dims[1] = {N}, strides[1] = {1};
    ACL_OK(aclrtMalloc(dev, sizeof zeros, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMemcpy(*dev, sizeof zeros, x ? x : zeros, sizeof zeros, ACL_MEMCPY_HOST_TO_DEVICE));
    aclTensor *t = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, *dev);
    assert_non_null(t);
    return t;
}

static void read_vector(const void *dev, float *out) {
    ACL_OK(aclrtMemcpy(out, N * sizeof(float), dev, N * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST));
}

/* "Destroying one twice" is refused, and names the destroy. */
static void test_acl_tensor_and_scalar_destroyed_twice_are_refused(void **state) {
    (void)state;
    int64_t dims[1] = {N}, strides[1] = {1};
    float x[N] = {0}, one = 1.0f;
    aclTensor *t = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, x);
    aclScalar *s = aclCreateScalar(&one, ACL_FLOAT);
    assert_true(t && s);
    ACL_OK(aclDestroyTensor(t));
    ACL_OK(aclDestroyScalar(s));
    ACL_FAILS(aclDestroyTensor(t), ACLNN_ERR_PARAM_INVALID, "destroyed by aclDestroyTensor");
    ACL_FAILS(aclDestroyScalar(s), ACLNN_ERR_PARAM_INVALID, "destroyed by aclDestroyScalar");
}

/* A destroyed tensor or scalar passed to an op is refused, naming the
 * argument. */
static void test_acl_destroyed_tensor_and_scalar_in_ops_are_refused(void **state) {
    (void)state;
    void *dx, *dgone;
    aclTensor *x = vector_of(NULL, &dx), *gone = vector_of(NULL, &dgone);
    float one = 1.0f;
    aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT), *dead = aclCreateScalar(&one, ACL_FLOAT);
    ACL_OK(aclDestroyTensor(gone));
    ACL_OK(aclDestroyScalar(dead));
    uint64_t ws;
    aclOpExecutor *ex = NULL;
    ACL_FAILS(aclnnMulGetWorkspaceSize(gone, x, x, &ws, &ex), ACLNN_ERR_PARAM_INVALID, "self (");
    ACL_FAILS(aclnnAddGetWorkspaceSize(x, x, alpha, gone, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "out (");
    ACL_FAILS(aclnnAddGetWorkspaceSize(x, x, dead, x, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "alpha (");
    ACL_FAILS(aclnnMatmulGetWorkspaceSize(x, gone, x, 0, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
              "mat2 (");
    assert_null(ex);
    ACL_OK(aclDestroyTensor(x));
    ACL_OK(aclDestroyScalar(alpha));
    ACL_OK(aclrtFree(dx));
    ACL_OK(aclrtFree(dgone));
}

/* A stale handle never reaches the object that took its place: with K
 * tensors destroyed and K made after them (where an allocator would hand out
 * the same memory again), destroying the old ones again is refused and
 * leaves every new one alive and usable. */
static void test_acl_stale_tensor_leaves_newer_alone(void **state) {
    (void)state;
    int64_t dims[1] = {N}, strides[1] = {1};
    void *dx;
    float x[N] = {1, 2, 3, 4}, r[N];
    aclTensor *old[K], *t[K];
    ACL_OK(aclrtMalloc(&dx, sizeof x, ACL_MEM_MALLOC_HUGE_FIRST));
    for (int i = 0; i < K; i++)
        old[i] = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, dx);
    for (int i = 0; i < K; i++)
        ACL_OK(aclDestroyTensor(old[i]));
    for (int i = 0; i < K; i++) {
        t[i] = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, dx);
        assert_non_null(t[i]);
    }
    for (int i = 0; i < K; i++)
        ACL_FAILS(aclDestroyTensor(old[i]), ACLNN_ERR_PARAM_INVALID, "aclDestroyTensor");
    for (int i = 0; i < K; i++) {
        ACL_OK(aclrtMemcpy(dx, sizeof x, x, sizeof x, ACL_MEMCPY_HOST_TO_DEVICE));
        uint64_t ws;
        aclOpExecutor *ex;
        ACL_OK(aclnnMulGetWorkspaceSize(t[i], t[i], t[i], &ws, &ex));
        ACL_OK(aclnnMul(NULL, ws, ex, NULL));
        ACL_OK(aclrtSynchronizeStream(NULL));
        read_vector(dx, r);
        for (int j = 0; j < N; j++)
            assert_true(r[j] == x[j] * x[j]);
        ACL_OK(aclDestroyTensor(t[i]));
    }
    ACL_OK(aclrtFree(dx));
}

/* "An executor runs once and is freed by its run": a second run, making it
 * repeatable or destroying it afterwards are refused; so is a second
 * destroy of one destroyed unrun. */
static void test_acl_spent_executor_is_refused(void **state) {
    (void)state;
    void *dx;
    aclTensor *x = vector_of(NULL, &dx);
    uint64_t ws;
    aclOpExecutor *ex, *unrun;
    ACL_OK(aclnnMulGetWorkspaceSize(x, x, x, &ws, &ex));
    ACL_OK(aclnnMulGetWorkspaceSize(x, x, x, &ws, &unrun));
    ACL_OK(aclnnMul(NULL, ws, ex, NULL));
    ACL_FAILS(aclnnMul(NULL, ws, ex, NULL), ACLNN_ERR_PARAM_INVALID, "has run or was destroyed");
    ACL_FAILS(aclSetAclOpExecutorRepeatable(ex), ACLNN_ERR_PARAM_INVALID,
              "aclSetAclOpExecutorRepeatable");
    ACL_FAILS(aclDestroyAclOpExecutor(ex), ACLNN_ERR_PARAM_INVALID, "aclDestroyAclOpExecutor");
    ACL_OK(aclDestroyAclOpExecutor(unrun));
    ACL_FAILS(aclDestroyAclOpExecutor(unrun), ACLNN_ERR_PARAM_INVALID, "has run or was destroyed");
    ACL_FAILS(aclnnMul(NULL, ws, unrun, NULL), ACLNN_ERR_PARAM_INVALID, "aclnnMul");
    ACL_OK(aclrtSynchronizeStream(NULL));
    ACL_OK(aclDestroyTensor(x));
    ACL_OK(aclrtFree(dx));
}

/* A spent executor's handle does not run (or free) an executor made after
 * it: K executors run (each adds 1 to t), K more are made, the old ones
 * are refused, and the new ones then each run exactly once. */
static void test_acl_stale_executor_leaves_newer_alone(void **state) {
    (void)state;
    void *dt, *dones;
    float x[N] = {1, 2, 3, 4}, ones[N] = {1, 1, 1, 1}, one = 1.0f, r[N];
    aclTensor *t = vector_of(x, &dt), *u = vector_of(ones, &dones);
    aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
    uint64_t ws;
    aclOpExecutor *old[K], *ex[K];
    for (int i = 0; i < K; i++) {
        ACL_OK(aclnnAddGetWorkspaceSize(t, u, alpha, t, &ws, &old[i]));
        ACL_OK(aclnnAdd(NULL, ws, old[i], NULL));
    }
    for (int i = 0; i < K; i++)
        ACL_OK(aclnnAddGetWorkspaceSize(t, u, alpha, t, &ws, &ex[i]));
    for (int i = 0; i < K; i++)
        ACL_FAILS(aclnnAdd(NULL, ws, old[i], NULL), ACLNN_ERR_PARAM_INVALID, "aclnnAdd");
    ACL_OK(aclrtSynchronizeStream(NULL));
    read_vector(dt, r);
    for (int j = 0; j < N; j++)
        assert_true(r[j] == x[j] + K); /* none of the new ones ran */
    for (int i = 0; i < K; i++)
        ACL_OK(aclnnAdd(NULL, ws, ex[i], NULL));
    ACL_OK(aclrtSynchronizeStream(NULL));
    read_vector(dt, r);
    for (int j = 0; j < N; j++)
        assert_true(r[j] == x[j] + 2 * K);
    ACL_OK(aclDestroyScalar(alpha));
    ACL_OK(aclDestroyTensor(t));
    ACL_OK(aclDestroyTensor(u));
    ACL_OK(aclrtFree(dt));
    ACL_OK(aclrtFree(dones));
}

/* rill's handles (streams, events, models) passed as op objects are refused
 * as no object of the op API; the op API's handles passed to the runtime
 * are refused by rill. */
static void test_acl_rill_handles_as_op_objects_are_refused(void **state) {
    (void)state;
    aclrtStream s;
    aclrtEvent e;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateEvent(&e));
    void *dx;
    aclTensor *x = vector_of(NULL, &dx);
    uint64_t ws;
    aclOpExecutor *ex = NULL;
    ACL_FAILS(aclDestroyTensor((const aclTensor *)s), ACLNN_ERR_PARAM_INVALID, "no tensor");
    ACL_FAILS(aclDestroyScalar((const aclScalar *)e), ACLNN_ERR_PARAM_INVALID, "no scalar");
    ACL_FAILS(aclnnMulGetWorkspaceSize((const aclTensor *)e, x, x, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "self");
    ACL_FAILS(aclnnAddGetWorkspaceSize(x, x, (const aclScalar *)s, x, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID, "alpha");
    ACL_FAILS(aclnnAdd(NULL, 0, (aclOpExecutor *)s, NULL), ACLNN_ERR_PARAM_INVALID, "no executor");
    ACL_FAILS(aclSetAclOpExecutorRepeatable((aclOpExecutor *)e), ACLNN_ERR_PARAM_INVALID,
              "no executor");
    ACL_FAILS(aclDestroyAclOpExecutor((aclOpExecutor *)s), ACLNN_ERR_PARAM_INVALID, "no executor");
    /* An address is no handle either. */
    ACL_FAILS(aclDestroyTensor((const aclTensor *)dx), ACLNN_ERR_PARAM_INVALID, "no tensor");
    assert_null(ex);
    /* The other way round: rill refuses them. */
    ACL_FAILS(aclrtSynchronizeStream((aclrtStream)x), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtSynchronizeStream");
    ACL_FAILS(aclrtDestroyEvent((aclrtEvent)x), ACL_ERROR_RT_PARAM_INVALID, "aclrtDestroyEvent");
    ACL_OK(aclDestroyTensor(x));
    ACL_OK(aclrtFree(dx));
    ACL_OK(aclrtDestroyEvent(e));
    ACL_OK(aclrtDestroyStream(s));
}

/* Threads that make, use and destroy handles at once, while one destroys a
 * tensor the others keep passing to an op: each call finds the tensor whole
 * or refuses it (the table's lock orders them), and every handle a thread
 * made works for it until it destroys it. */
enum { THREADS = 4, ROUNDS = 200 };

struct worker {
    int id;
    aclTensor *shared;  /* destroyed by worker 0 half-way */
    _Atomic int *wrong; /* calls that returned what they must not */
    float data[N];
};

static void *handle_worker(void *arg) {
    struct worker *w = arg;
    int64_t dims[1] = {N}, strides[1] = {1};
    for (int i = 0; i < ROUNDS; i++) {
        aclTensor *t =
            aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, w->data);
        uint64_t ws;
        aclOpExecutor *ex;
        if (!t || aclnnMulGetWorkspaceSize(t, t, t, &ws, &ex) != 0 ||
            aclDestroyAclOpExecutor(ex) != 0 || aclDestroyTensor(t) != 0 ||
            aclDestroyTensor(t) != ACLNN_ERR_PARAM_INVALID)
            atomic_fetch_add(w->wrong, 1);
        int rc = aclnnMulGetWorkspaceSize(w->shared, w->shared, w->shared, &ws, &ex);
        if (rc == 0)
            rc = aclDestroyAclOpExecutor(ex);
        else if (rc != ACLNN_ERR_PARAM_INVALID)
            atomic_fetch_add(w->wrong, 1);
        if (w->id == 0 && i == ROUNDS / 2 && aclDestroyTensor(w->shared) != 0)
            atomic_fetch_add(w->wrong, 1);
    }
    return NULL;
}

static void test_acl_handles_from_many_threads(void **state) {
    (void)state;
    int64_t dims[1] = {N}, strides[1] = {1};
    float data[N] = {0};
    _Atomic int wrong = 0;
    aclTensor *shared =
        aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, data);
    assert_non_null(shared);
    struct worker workers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (struct worker){.id = i, .shared = shared, .wrong = &wrong};
        assert_int_equal(pthread_create(&threads[i], NULL, handle_worker, &workers[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    assert_int_equal(atomic_load(&wrong), 0);
    ACL_FAILS(aclDestroyTensor(shared), ACLNN_ERR_PARAM_INVALID, "destroyed");
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_tensor_and_scalar_destroyed_twice_are_refused),
        ACL_TEST(test_acl_destroyed_tensor_and_scalar_in_ops_are_refused),
        ACL_TEST(test_acl_stale_tensor_leaves_newer_alone),
        ACL_TEST(test_acl_spent_executor_is_refused),
        ACL_TEST(test_acl_stale_executor_leaves_newer_alone),
        ACL_TEST(test_acl_rill_handles_as_op_objects_are_refused),
        ACL_TEST(test_acl_handles_from_many_threads),
    };
    return RT_RUN(tests);
}
