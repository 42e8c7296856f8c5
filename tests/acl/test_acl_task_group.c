/* SPDX-License-Identifier: MIT */
/* librill_acl's task groups: aclmdlRICaptureTaskGrpBegin/End mark part of
 * a capture, and aclmdlRICaptureTaskUpdateBegin/End capture new work for
 * it, which later executions of the model run; every refusal's code and
 * message. The group holds an aclnnAdd whose alpha the update changes. */
#include <stdatomic.h>

#include "acl_support.h"

static atomic_int runs;

static void count(void *arg) {
    (void)arg;
    atomic_fetch_add(&runs, 1);
}

enum { N = 8 };

struct add {
    void *a, *b, *out;
    aclTensor *ta, *tb, *tout;
};

static void add_setup(struct add *t) {
    int64_t dims[1] = {N}, strides[1] = {1};
    float a[N], b[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)i;
        b[i] = 10.0f;
    }
    ACL_OK(aclrtMalloc(&t->a, sizeof a, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc(&t->b, sizeof b, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc(&t->out, sizeof a, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMemcpy(t->a, sizeof a, a, sizeof a, ACL_MEMCPY_HOST_TO_DEVICE));
    ACL_OK(aclrtMemcpy(t->b, sizeof b, b, sizeof b, ACL_MEMCPY_HOST_TO_DEVICE));
    t->ta = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, t->a);
    t->tb = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, t->b);
    t->tout = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, t->out);
}

static void add_teardown(struct add *t) {
    ACL_OK(aclDestroyTensor(t->ta));
    ACL_OK(aclDestroyTensor(t->tb));
    ACL_OK(aclDestroyTensor(t->tout));
    ACL_OK(aclrtFree(t->a));
    ACL_OK(aclrtFree(t->b));
    ACL_OK(aclrtFree(t->out));
}

/* out = a + alpha * b on stream. */
static void submit_add(const struct add *t, float alpha, aclrtStream stream) {
    aclScalar *s = aclCreateScalar(&alpha, ACL_FLOAT);
    uint64_t ws;
    aclOpExecutor *ex;
    ACL_OK(aclnnAddGetWorkspaceSize(t->ta, t->tb, s, t->tout, &ws, &ex));
    ACL_OK(aclDestroyScalar(s));
    ACL_OK(aclnnAdd(NULL, ws, ex, stream));
}

static void assert_out(const struct add *t, float alpha) {
    float out[N];
    ACL_OK(aclrtMemcpy(out, sizeof out, t->out, sizeof out, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < N; i++)
        if (out[i] != (float)i + alpha * 10.0f)
            fail_msg("out[%d] = %g, want %g (alpha %g)", i, (double)out[i],
                     (double)((float)i + alpha * 10.0f), (double)alpha);
}

/* A capture with a task group before and after other work: the model runs
 * all of it, and after an update its group runs the new work. */
static void test_acl_task_group_update(void **state) {
    (void)state;
    struct add t;
    add_setup(&t);
    aclrtStream s, upd;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateStream(&upd));
    atomic_store(&runs, 0);
    aclrtTaskGrp group = NULL;
    aclmdlRI model = NULL;
    ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_OK(aclrtLaunchHostFunc(s, count, NULL));
    ACL_OK(aclmdlRICaptureTaskGrpBegin(s));
    aclmdlRICaptureStatus st = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    ACL_OK(aclmdlRICaptureGetInfo(s, &st, NULL));
    assert_int_equal(st, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
    submit_add(&t, 1.0f, s);
    ACL_OK(aclmdlRICaptureTaskGrpEnd(s, &group));
    assert_non_null(group);
    ACL_OK(aclrtLaunchHostFunc(s, count, NULL));
    ACL_FAILS(aclmdlRICaptureTaskUpdateBegin(upd, group), ACL_ERROR_INVALID_PARAM,
              "aclmdlRICaptureEnd first");
    ACL_OK(aclmdlRICaptureEnd(s, &model));
    assert_non_null(model);
    ACL_OK(aclrtSynchronizeStream(s));
    assert_int_equal(atomic_load(&runs), 0); /* nothing ran while captured */

    ACL_OK(aclmdlRIExecuteAsync(model, s));
    ACL_OK(aclrtSynchronizeStream(s));
    assert_int_equal(atomic_load(&runs), 2);
    assert_out(&t, 1.0f);

    ACL_OK(aclmdlRICaptureTaskUpdateBegin(upd, group));
    submit_add(&t, 3.0f, upd);
    ACL_OK(aclmdlRICaptureTaskUpdateEnd(upd));
    ACL_OK(aclrtSynchronizeStream(upd)); /* the update ran nothing itself */
    assert_out(&t, 1.0f);
    ACL_OK(aclmdlRIExecute(model, 5000));
    assert_int_equal(atomic_load(&runs), 4);
    assert_out(&t, 3.0f);

    /* An update of another shape is rill's refusal; the group keeps its work. */
    ACL_OK(aclmdlRICaptureTaskUpdateBegin(upd, group));
    submit_add(&t, 5.0f, upd);
    submit_add(&t, 6.0f, upd);
    ACL_FAILS(aclmdlRICaptureTaskUpdateEnd(upd), ACL_ERROR_RT_PARAM_INVALID,
              "aclmdlRICaptureTaskUpdateEnd");
    ACL_OK(aclmdlRIExecute(model, 5000));
    assert_out(&t, 3.0f);

    /* A group is no model, and a model no group. */
    ACL_FAILS(aclmdlRIExecuteAsync(group, s), ACL_ERROR_INVALID_PARAM, "is a task group");
    ACL_FAILS(aclmdlRIDestroy(group), ACL_ERROR_INVALID_PARAM, "is a task group");
    ACL_FAILS(aclmdlRICaptureTaskUpdateBegin(upd, model), ACL_ERROR_INVALID_PARAM, "is a model");
    /* The group goes with its model. */
    ACL_OK(aclmdlRIDestroy(model));
    ACL_FAILS(aclmdlRICaptureTaskUpdateBegin(upd, group), ACL_ERROR_INVALID_PARAM, "destroyed");
    ACL_FAILS(aclmdlRIExecuteAsync(model, s), ACL_ERROR_INVALID_PARAM, "destroyed");
    ACL_OK(aclrtDestroyStream(s));
    ACL_OK(aclrtDestroyStream(upd));
    add_teardown(&t);
}

/* The update's group dies with its model while the update is captured. */
static void test_acl_task_group_destroyed_during_update(void **state) {
    (void)state;
    struct add t;
    add_setup(&t);
    aclrtStream s, upd;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateStream(&upd));
    aclrtTaskGrp group;
    aclmdlRI model;
    ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    ACL_OK(aclmdlRICaptureTaskGrpBegin(s));
    submit_add(&t, 1.0f, s);
    ACL_OK(aclmdlRICaptureTaskGrpEnd(s, &group));
    ACL_OK(aclmdlRICaptureEnd(s, &model));
    ACL_OK(aclmdlRICaptureTaskUpdateBegin(upd, group));
    submit_add(&t, 2.0f, upd);
    ACL_OK(aclmdlRIDestroy(model));
    ACL_FAILS(aclmdlRICaptureTaskUpdateEnd(upd), ACL_ERROR_INVALID_PARAM, "destroyed");
    /* The update's capture is over: the stream runs work again. */
    submit_add(&t, 4.0f, upd);
    ACL_OK(aclrtSynchronizeStream(upd));
    assert_out(&t, 4.0f);
    ACL_OK(aclrtDestroyStream(s));
    ACL_OK(aclrtDestroyStream(upd));
    add_teardown(&t);
}

static void test_acl_task_group_refusals(void **state) {
    (void)state;
    aclrtStream s, other;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateStream(&other));
    aclrtTaskGrp group = NULL;
    aclmdlRI model = NULL;
    ACL_FAILS(aclmdlRICaptureTaskGrpBegin(s), ACL_ERROR_INVALID_PARAM, "did not begin a capture");
    ACL_FAILS(aclmdlRICaptureTaskGrpBegin(NULL), ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureBegin");
    ACL_FAILS(aclmdlRICaptureTaskGrpEnd(s, &group), ACL_ERROR_INVALID_PARAM, "no task group");
    ACL_FAILS(aclmdlRICaptureTaskGrpEnd(s, NULL), ACL_ERROR_INVALID_PARAM, "handle is NULL");
    ACL_FAILS(aclmdlRICaptureTaskUpdateEnd(s), ACL_ERROR_INVALID_PARAM, "no update was begun");
    ACL_FAILS(aclmdlRICaptureTaskUpdateBegin(NULL, group), ACL_ERROR_INVALID_PARAM,
              "stream is NULL");
    ACL_FAILS(aclmdlRICaptureTaskUpdateBegin(s, NULL), ACL_ERROR_INVALID_PARAM, "handle is NULL");
    ACL_FAILS(aclmdlRICaptureTaskUpdateBegin(s, s), ACL_ERROR_INVALID_PARAM,
              "nor any other object");
    ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_OK(aclmdlRICaptureTaskGrpBegin(s));
    ACL_FAILS(aclmdlRICaptureTaskGrpBegin(s), ACL_ERROR_INVALID_PARAM, "open already");
    ACL_FAILS(aclmdlRICaptureTaskGrpBegin(other), ACL_ERROR_INVALID_PARAM,
              "did not begin a capture");
    ACL_FAILS(aclmdlRICaptureEnd(s, &model), ACL_ERROR_INVALID_PARAM,
              "aclmdlRICaptureTaskGrpEnd first");
    ACL_OK(aclmdlRICaptureTaskGrpEnd(s, &group));
    ACL_OK(aclmdlRICaptureEnd(s, &model));
    /* An update cannot take a stream that is capturing. */
    ACL_OK(aclmdlRICaptureBegin(other, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_FAILS(aclmdlRICaptureTaskUpdateBegin(other, group), ACL_ERROR_RT_PARAM_INVALID,
              "aclmdlRICaptureTaskUpdateBegin");
    aclmdlRI plain;
    ACL_OK(aclmdlRICaptureEnd(other, &plain));
    ACL_OK(aclmdlRIDestroy(plain));
    ACL_OK(aclmdlRIDestroy(model));
    ACL_OK(aclrtDestroyStream(s));
    ACL_OK(aclrtDestroyStream(other));
}

/* aclFinalize releases a capture with task groups still open, and a model
 * with them (the ASan build finds anything left behind). */
static void test_acl_finalize_releases_task_groups(void **state) {
    (void)state;
    aclrtStream s, t;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateStream(&t));
    aclrtTaskGrp group;
    aclmdlRI model;
    ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    ACL_OK(aclmdlRICaptureTaskGrpBegin(s));
    ACL_OK(aclrtLaunchHostFunc(s, count, NULL));
    ACL_OK(aclmdlRICaptureTaskGrpEnd(s, &group));
    ACL_OK(aclmdlRICaptureTaskGrpBegin(s));
    ACL_OK(aclmdlRICaptureBegin(t, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    ACL_OK(aclmdlRICaptureTaskGrpBegin(t));
    ACL_OK(aclmdlRICaptureTaskGrpEnd(t, &group));
    ACL_OK(aclmdlRICaptureEnd(t, &model));
    ACL_OK(aclFinalize());
    ACL_OK(aclInit(NULL));
    ACL_FAILS(aclmdlRIDestroy(model), ACL_ERROR_INVALID_PARAM, "destroyed");
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_task_group_update),
        ACL_TEST(test_acl_task_group_destroyed_during_update),
        ACL_TEST(test_acl_task_group_refusals),
        ACL_TEST(test_acl_finalize_releases_task_groups),
    };
    return RT_RUN(tests);
}
