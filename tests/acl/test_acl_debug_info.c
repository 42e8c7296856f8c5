/* SPDX-License-Identifier: MIT */
/* librill_acl's debug and system information: aclmdlRIDebugJsonPrint
 * describes a model's rill graphs in JSON (node counts and Graphviz DOT),
 * and aclsysGetVersionStr/Num give librill_acl's version as the
 * "runtime" package's; every refusal's code and message. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "acl_support.h"

enum { N = 16 };

/* The file at path, NUL-terminated (freed by the caller). */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *text = calloc(1, 1 << 20);
    assert_non_null(text);
    size_t got = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    text[got] = '\0';
    return text;
}

/* The value of the n-th (from 0) "nodes": in text, or -1. */
static long nodes_at(const char *text, int n) {
    const char *p = text;
    for (int i = 0; i <= n; i++) {
        p = strstr(p, "\"nodes\": ");
        if (!p)
            return -1;
        p += strlen("\"nodes\": ");
    }
    return strtol(p, NULL, 10);
}

static int count_of(const char *text, const char *what) {
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* Submits k async copies of src to dst on s. */
static void copies(aclrtStream s, void *dst, const void *src, int k) {
    for (int i = 0; i < k; i++)
        ACL_OK(aclrtMemcpyAsync(dst, N, src, N, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
}

/* Makes the file path names (from its XXXXXX), a stream and two buffers
 * of N bytes. */
static void set_up(char *path, aclrtStream *s, void **a, void **b) {
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    ACL_OK(aclrtCreateStream(s));
    ACL_OK(aclrtMalloc(a, N, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc(b, N, ACL_MEM_MALLOC_HUGE_FIRST));
}

/* Undoes set_up. */
static void tear_down(const char *path, aclrtStream s, void *a, void *b) {
    ACL_OK(aclrtFree(a));
    ACL_OK(aclrtFree(b));
    ACL_OK(aclrtDestroyStream(s));
    unlink(path);
}

/* A captured model of k copies: one graph of k nodes, in DOT, inside a
 * JSON object; the file is written again for each call. */
static void test_acl_debug_json_print_describes_captured_model(void **state) {
    (void)state;
    char path[] = "/tmp/rill_acl_model_XXXXXX";
    aclrtStream s;
    void *a, *b;
    set_up(path, &s, &a, &b);
    for (int k = 1; k <= 3; k += 2) {
        aclmdlRI model = NULL;
        ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
        copies(s, b, a, k);
        ACL_OK(aclmdlRICaptureEnd(s, &model));
        ACL_OK(aclmdlRIDebugJsonPrint(model, path, ACL_MDLRI_DEBUG_JSON_PRINT_SUMMARY));
        char *text = slurp(path);
        assert_non_null(strstr(text, "\"kind\": \"captured\""));
        assert_int_equal(count_of(text, "\"index\": "), 1);
        assert_int_equal(nodes_at(text, 0), k);
        assert_non_null(strstr(text, "\"dot\": \"digraph"));
        assert_int_equal(text[0], '{');
        free(text);
        /* The model still runs after its description. */
        ACL_OK(aclmdlRIExecuteAsync(model, s));
        ACL_OK(aclrtSynchronizeStream(s));
        ACL_OK(aclmdlRIDestroy(model));
        ACL_FAILS(aclmdlRIDebugJsonPrint(model, path, 0), ACL_ERROR_INVALID_PARAM,
                  "aclmdlRIDebugJsonPrint");
    }
    tear_down(path, s, a, b);
}

/* A capture with a task group is three graphs (before, the group, after),
 * each described; a model built by hand is one. */
static void test_acl_debug_json_print_describes_every_graph(void **state) {
    (void)state;
    char path[] = "/tmp/rill_acl_model_XXXXXX";
    aclrtStream s;
    void *a, *b;
    set_up(path, &s, &a, &b);

    aclmdlRI model = NULL;
    aclrtTaskGrp group = NULL;
    ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    copies(s, b, a, 1);
    ACL_OK(aclmdlRICaptureTaskGrpBegin(s));
    copies(s, b, a, 2);
    ACL_OK(aclmdlRICaptureTaskGrpEnd(s, &group));
    copies(s, b, a, 3);
    ACL_OK(aclmdlRICaptureEnd(s, &model));
    ACL_OK(aclmdlRIDebugJsonPrint(model, path, ACL_MDLRI_DEBUG_JSON_PRINT_VERBOSE));
    char *text = slurp(path);
    assert_non_null(strstr(text, "\"kind\": \"captured in segments\""));
    assert_int_equal(count_of(text, "\"dot\": \"digraph"), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(nodes_at(text, i), i + 1);
    free(text);
    /* A task group is no model. */
    ACL_FAILS(aclmdlRIDebugJsonPrint(group, path, 0), ACL_ERROR_INVALID_PARAM, "task group");
    ACL_OK(aclmdlRIDestroy(model));

    ACL_OK(aclmdlRIBuildBegin(&model, 0));
    ACL_OK(aclmdlRIBindStream(model, s, 0));
    ACL_FAILS(aclmdlRIDebugJsonPrint(model, path, 0), ACL_ERROR_INVALID_PARAM, "aclmdlRIBuildEnd");
    copies(s, b, a, 2);
    ACL_OK(aclmdlRIEndTask(model, s));
    ACL_OK(aclmdlRIBuildEnd(model, NULL));
    ACL_OK(aclmdlRIDebugJsonPrint(model, path, 0));
    text = slurp(path);
    assert_non_null(strstr(text, "\"kind\": \"built by hand\""));
    assert_int_equal(count_of(text, "\"dot\": \"digraph"), 1);
    assert_true(nodes_at(text, 0) >= 2);
    free(text);
    ACL_OK(aclmdlRIUnbindStream(model, s));
    ACL_OK(aclmdlRIDestroy(model));

    tear_down(path, s, a, b);
}

static void test_acl_debug_json_print_refusals(void **state) {
    (void)state;
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    void *a;
    ACL_OK(aclrtMalloc(&a, N, ACL_MEM_MALLOC_HUGE_FIRST));
    aclmdlRI model = NULL;
    ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_OK(aclrtMemsetAsync(a, N, 0, N, s));
    ACL_OK(aclmdlRICaptureEnd(s, &model));
    ACL_FAILS(aclmdlRIDebugJsonPrint(NULL, "/tmp/x.json", 0), ACL_ERROR_INVALID_PARAM, "modelRI");
    ACL_FAILS(aclmdlRIDebugJsonPrint(model, NULL, 0), ACL_ERROR_INVALID_PARAM, "path");
    ACL_FAILS(aclmdlRIDebugJsonPrint(model, "", 0), ACL_ERROR_INVALID_PARAM, "path");
    ACL_FAILS(aclmdlRIDebugJsonPrint(model, "/tmp/x.json", 2), ACL_ERROR_INVALID_PARAM, "flags");
    ACL_FAILS(aclmdlRIDebugJsonPrint(model, "/nonexistent-folder/m.json", 0),
              ACL_ERROR_INVALID_PARAM, "/nonexistent-folder/m.json");
    int not_a_model = 0;
    ACL_FAILS(aclmdlRIDebugJsonPrint(&not_a_model, "/tmp/x.json", 0), ACL_ERROR_INVALID_PARAM,
              "aclmdlRICaptureEnd");
    ACL_OK(aclmdlRIDestroy(model));
    ACL_OK(aclrtFree(a));
    ACL_OK(aclrtDestroyStream(s));
}

/* "runtime" is librill_acl: its string and number agree (major * 1000000
 * + minor * 10000 + patch * 100) and compare older than any CANN release
 * (whose major version is 1 or more); other packages are not installed. */
static void test_acl_sys_version_of_runtime(void **state) {
    (void)state;
    char name[] = "runtime";
    char version[ACL_PKG_VERSION_MAX_SIZE];
    memset(version, 'x', sizeof version);
    int32_t num = -1;
    ACL_OK(aclsysGetVersionStr(name, version));
    ACL_OK(aclsysGetVersionNum(name, &num));
    assert_non_null(memchr(version, '\0', sizeof version));
    int major = -1, minor = -1, patch = -1;
    assert_int_equal(sscanf(version, "%d.%d.%d", &major, &minor, &patch), 3);
    assert_int_equal(num, major * 1000000 + minor * 10000 + patch * 100);
    assert_true(num < 1000000);
    char driver[] = "driver";
    ACL_FAILS(aclsysGetVersionStr(driver, version), ACL_ERROR_INVALID_PARAM, "'driver'");
    ACL_FAILS(aclsysGetVersionNum(driver, &num), ACL_ERROR_INVALID_PARAM, "'driver'");
    ACL_FAILS(aclsysGetVersionStr(NULL, version), ACL_ERROR_INVALID_PARAM, "pkgName");
    ACL_FAILS(aclsysGetVersionStr(name, NULL), ACL_ERROR_INVALID_PARAM, "versionStr");
    ACL_FAILS(aclsysGetVersionNum(name, NULL), ACL_ERROR_INVALID_PARAM, "versionNum");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_debug_json_print_describes_captured_model),
        ACL_TEST(test_acl_debug_json_print_describes_every_graph),
        ACL_TEST(test_acl_debug_json_print_refusals),
        ACL_TEST(test_acl_sys_version_of_runtime),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
