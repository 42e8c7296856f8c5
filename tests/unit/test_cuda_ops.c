/* SPDX-License-Identifier: MIT */
/* The CUDA device's bodies of the built-in ops, as far as a machine
 * without a GPU can check them: the fatbin the build embeds (PTX and an
 * sm_90 cubin), an entry point in both or a library for every op, and
 * cuBLAS and cuDNN loaded (or said to be missing) without a device. What
 * the bodies compute is checked on a GPU, against the CPU device's
 * results. */
#include "fixture.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_libs.h"
#include "backend/cuda/cuda_ops.h"

static const char *const missing_blas[] = {"librill-test-no-cublas.so.13",
                                           "librill-test-no-cublas.so.12", NULL};
static const char *const missing_dnn[] = {"librill-test-no-cudnn.so.9", NULL};

/* Whether the dynamic loader finds one of names. */
static bool loader_finds(const char *const *names) {
    for (size_t i = 0; names[i] != NULL; i++) {
        void *so = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL);
        if (so != NULL) {
            dlclose(so);
            return true;
        }
    }
    return false;
}

static void assert_says(const char *why, const char *part) {
    if (strstr(why, part) == NULL)
        fail_msg("the sentence \"%s\" does not say \"%s\"", why, part);
}

/* ---- the image ---- */

/* One image of a fatbin. The layout is the one the CUDA toolkit writes: a
 * 16-byte header (the magic 0xBA55ED50, a version, the header's size and
 * the size of the images after it), then the images, each a header (its
 * kind at byte 0: 1 PTX, 2 an ELF cubin; the header's size at 4; the
 * payload's at 8; the architecture at 28, 90 for sm_90) and its payload. */
typedef struct image_part {
    unsigned kind, arch;
    const char *payload;
    size_t bytes;
} image_part;

static uint64_t read_le(const char *at, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; i++)
        v |= (uint64_t)(unsigned char)at[i] << (8 * i);
    return v;
}

/* The images of fatbin, at most max of them; fails the test where the
 * layout is not a fatbin's. */
static size_t image_parts(const char *fatbin, image_part *out, size_t max) {
    assert_int_equal(read_le(fatbin, 4), 0xBA55ED50u);
    size_t header = (size_t)read_le(fatbin + 6, 2), total = (size_t)read_le(fatbin + 8, 8);
    assert_int_equal(header, 16);
    size_t n = 0;
    for (const char *at = fatbin + header, *end = at + total; at < end; n++) {
        assert_true(n < max);
        size_t part_header = (size_t)read_le(at + 4, 4), bytes = (size_t)read_le(at + 8, 8);
        assert_true(part_header >= 32 && at + part_header + bytes <= end);
        out[n] = (image_part){(unsigned)read_le(at, 2), (unsigned)read_le(at + 28, 4),
                              at + part_header, bytes};
        at += part_header + bytes;
    }
    return n;
}

/* The one image of kind and arch in the ops' fatbin; NULL without one. */
static const image_part *find_part(const image_part *parts, size_t n, unsigned kind,
                                   unsigned arch) {
    const image_part *found = NULL;
    for (size_t i = 0; i < n; i++) {
        if (parts[i].kind == kind && parts[i].arch == arch) {
            assert_null(found);
            found = &parts[i];
        }
    }
    return found;
}

/* cuda_ops.h: "The fatbin of every op kernel (8-byte aligned, images
 * uncompressed), or NULL when rill was built without nvcc"; it "holds PTX
 * for compute_75 [...] and an sm_90 cubin". */
static void test_fatbin_is_embedded_when_nvcc_was_found(void **state) {
    (void)state;
    const char *image = rill__cuda_op_image();
    if (!RILL_TEST_HAVE_PTX) {
        assert_null(image);
        return;
    }
    assert_non_null(image);
    assert_int_equal((uintptr_t)image % 8, 0);
    image_part parts[8];
    size_t n = image_parts(image, parts, 8);
    assert_int_equal(n, 2);
    const image_part *ptx = find_part(parts, n, 1, 75), *cubin = find_part(parts, n, 2, 90);
    assert_non_null(ptx);
    assert_non_null(cubin);
    static const char elf[4] = {0x7f, 'E', 'L', 'F'};
    assert_memory_equal(cubin->payload, elf, 4);
    /* Uncompressed: the PTX reads as text. */
    assert_non_null(memchr(ptx->payload, '\0', ptx->bytes));
    assert_non_null(strstr(ptx->payload, ".version "));
    assert_non_null(strstr(ptx->payload, ".target sm_75"));
}

/* cuda_ops.h: "The name of op's entry point in rill__cuda_op_image(),
 * whose one parameter is op's argument struct": in the PTX, and in the
 * sm_90 cubin's symbols. */
static void test_every_kernel_entry_is_in_the_image(void **state) {
    (void)state;
    const char *image = rill__cuda_op_image();
    if (image == NULL)
        skip();
    image_part parts[8];
    size_t n = image_parts(image, parts, 8);
    const image_part *ptx_part = find_part(parts, n, 1, 75), *cubin = find_part(parts, n, 2, 90);
    assert_non_null(ptx_part);
    assert_non_null(cubin);
    const char *ptx = ptx_part->payload;
    assert_non_null(memchr(ptx, '\0', ptx_part->bytes));
    for (int op = RILL__OP_NONE + 1; op < RILL__OP_COUNT; op++) {
        const char *entry = rill__cuda_op_entry((rill__op)op);
        if (entry == NULL)
            continue;
        if (memmem(cubin->payload, cubin->bytes, entry, strlen(entry) + 1) == NULL)
            fail_msg("op %d's entry point %s is not in the sm_90 cubin", op, entry);
        char decl[128];
        snprintf(decl, sizeof decl, ".entry %s(", entry);
        if (strstr(ptx, decl) == NULL)
            fail_msg("op %d's entry point %s is not in the PTX", op, entry);
        /* One parameter: the argument struct, by value. */
        const char *params = strstr(ptx, decl) + strlen(decl);
        const char *close = strchr(params, ')');
        assert_non_null(close);
        char param[128];
        snprintf(param, sizeof param, "%s_param_1", entry);
        const char *second = strstr(params, param);
        if (second != NULL && second < close)
            fail_msg("op %d's entry point %s takes more than one parameter", op, entry);
    }
}

/* ---- one body per op ---- */

/* cuda_ops.c: "every op but RILL__OP_NONE has exactly one of the two." */
static void test_every_op_has_one_cuda_body(void **state) {
    (void)state;
    assert_null(rill__cuda_op_entry(RILL__OP_NONE));
    assert_false(rill__cuda_op_uses_library(RILL__OP_NONE));
    assert_null(rill__cuda_op_entry(RILL__OP_COUNT));
    assert_false(rill__cuda_op_uses_library(RILL__OP_COUNT));
    for (int op = RILL__OP_NONE + 1; op < RILL__OP_COUNT; op++) {
        const char *entry = rill__cuda_op_entry((rill__op)op);
        bool library = rill__cuda_op_uses_library((rill__op)op);
        if ((entry != NULL) == library)
            fail_msg("op %d has %s", op, library ? "both a kernel and a library" : "no body");
        for (int other = RILL__OP_NONE + 1; entry != NULL && other < op; other++) {
            const char *e = rill__cuda_op_entry((rill__op)other);
            if (e != NULL && strcmp(e, entry) == 0)
                fail_msg("ops %d and %d share the entry point %s", other, op, entry);
        }
    }
    /* The products go to cuBLAS and the f32 convolution to cuDNN. */
    assert_true(rill__cuda_op_uses_library(RILL__OP_MATMUL_F32));
    assert_true(rill__cuda_op_uses_library(RILL__OP_MATMUL_F16));
    assert_true(rill__cuda_op_uses_library(RILL__OP_CONV2D_F32));
}

/* cuda_libs.h: rill__cuda_op_library runs "op, one that
 * rill__cuda_op_uses_library names", and returns "RILL_ERROR_INTERNAL (op
 * runs as a kernel, not here)". With the libraries missing, every library
 * op stops at loading, so this needs no device. */
static void test_library_runs_exactly_the_library_ops(void **state) {
    (void)state;
    rill__cuda_libs libs;
    rill__cuda_libs_init_names(&libs, missing_blas, missing_dnn);
    /* Large enough for every op's argument struct; never read. */
    rill__op_conv2d_args args;
    memset(&args, 0, sizeof args);
    for (int op = RILL__OP_NONE; op < RILL__OP_COUNT; op++) {
        char why[512] = "";
        rill_status st = rill__cuda_op_library(&libs, (rill__op)op, NULL, &args, why, sizeof why);
        if (rill__cuda_op_uses_library((rill__op)op)) {
            assert_int_equal(st, RILL_ERROR_NOT_SUPPORTED);
            bool dnn = op == RILL__OP_CONV2D_F32 || op == RILL__OP_CONV2D_BACKWARD_DATA_F32 ||
                       op == RILL__OP_CONV2D_BACKWARD_FILTER_F32;
            assert_says(why, dnn ? "cuDNN" : "cuBLAS");
            assert_int_equal(rill__cuda_libs_prepare(&libs, (rill__op)op, why, sizeof why),
                             RILL_ERROR_NOT_SUPPORTED);
        } else {
            assert_int_equal(st, RILL_ERROR_INTERNAL);
            assert_says(why, "runs as a kernel");
            assert_int_equal(rill__cuda_libs_prepare(&libs, (rill__op)op, why, sizeof why),
                             RILL_OK);
        }
    }
    rill__cuda_libs_fini(&libs);
}

/* ---- loading ---- */

/* cuda_libs.h: "else RILL_ERROR_NOT_SUPPORTED with the sentence saying why
 * in why (truncated to why_size bytes), again at every later call." */
static void test_missing_library_says_why_every_time(void **state) {
    (void)state;
    rill__cuda_libs libs;
    rill__cuda_libs_init_names(&libs, missing_blas, missing_dnn);
    for (int round = 0; round < 2; round++) {
        char why[512] = "";
        assert_int_equal(rill__cuda_libs_load_blas(&libs, why, sizeof why),
                         RILL_ERROR_NOT_SUPPORTED);
        assert_says(why, "cuBLAS is not available");
        assert_says(why, "librill-test-no-cublas.so.13 or librill-test-no-cublas.so.12");
        assert_says(why, "matmul");
        assert_int_equal(rill__cuda_libs_load_dnn(&libs, why, sizeof why),
                         RILL_ERROR_NOT_SUPPORTED);
        if (RILL_TEST_HAVE_CUDNN) {
            assert_says(why, "cuDNN is not available");
            assert_says(why, "librill-test-no-cudnn.so.9");
        } else {
            assert_says(why, "this build of rill has no cuDNN"); /* no cudnn.h at build */
        }
        assert_says(why, "conv2d_f32");
    }
    /* Cut to the buffer, and still a string. */
    char small[8];
    memset(small, 'x', sizeof small);
    assert_int_equal(rill__cuda_libs_load_blas(&libs, small, sizeof small),
                     RILL_ERROR_NOT_SUPPORTED);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_int_equal(rill__cuda_libs_load_blas(&libs, NULL, 0), RILL_ERROR_NOT_SUPPORTED);
    rill__cuda_libs_fini(&libs);
}

/* cuda_libs.h: "Loads the library and its entry points only: it
 * initialises nothing and needs no device." The toolkit's libraries load
 * wherever the loader finds them, GPU or not. */
static void test_present_libraries_load_without_a_device(void **state) {
    (void)state;
    static const char *const blas[] = {"libcublas.so.13", "libcublas.so.12", NULL};
    static const char *const dnn[] = {"libcudnn.so.9", NULL};
    rill__cuda_libs libs;
    rill__cuda_libs_init(&libs);
    char why[512] = "";
    rill_status st = rill__cuda_libs_load_blas(&libs, why, sizeof why);
    if (loader_finds(blas)) {
        if (st != RILL_OK)
            fail_msg("cuBLAS is on the loader's path, and loading it said: %s", why);
    } else {
        assert_int_equal(st, RILL_ERROR_NOT_SUPPORTED);
        assert_says(why, "cuBLAS is not available");
    }
    st = rill__cuda_libs_load_dnn(&libs, why, sizeof why);
    if (!RILL_TEST_HAVE_CUDNN) {
        assert_int_equal(st, RILL_ERROR_NOT_SUPPORTED);
        assert_says(why, "this build of rill has no cuDNN");
    } else if (loader_finds(dnn)) {
        if (st != RILL_OK)
            fail_msg("cuDNN is on the loader's path, and loading it said: %s", why);
    } else {
        assert_int_equal(st, RILL_ERROR_NOT_SUPPORTED);
        assert_says(why, "cuDNN is not available");
    }
    rill__cuda_libs_fini(&libs);
}

typedef struct loader_arg {
    rill__cuda_libs *libs;
    rill_status blas, dnn;
} loader_arg;

static void *load_both(void *p) {
    loader_arg *a = p;
    char why[512];
    a->blas = rill__cuda_libs_load_blas(a->libs, why, sizeof why);
    a->dnn = rill__cuda_libs_load_dnn(a->libs, why, sizeof why);
    return NULL;
}

/* cuda_libs.h: "Loads cuBLAS (cuDNN), once per libs ... Any thread." */
static void test_libraries_load_once_from_racing_threads(void **state) {
    (void)state;
    rill__cuda_libs libs;
    rill__cuda_libs_init_names(&libs, missing_blas, missing_dnn);
    pthread_t threads[4];
    loader_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (loader_arg){&libs, RILL_OK, RILL_OK};
        assert_int_equal(pthread_create(&threads[i], NULL, load_both, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(threads[i], NULL), 0);
        assert_int_equal(args[i].blas, RILL_ERROR_NOT_SUPPORTED);
        assert_int_equal(args[i].dnn, RILL_ERROR_NOT_SUPPORTED);
    }
    assert_true(libs.blas_tried);
    assert_true(libs.dnn_tried);
    rill__cuda_libs_fini(&libs);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fatbin_is_embedded_when_nvcc_was_found),
        cmocka_unit_test(test_every_kernel_entry_is_in_the_image),
        cmocka_unit_test(test_every_op_has_one_cuda_body),
        cmocka_unit_test(test_library_runs_exactly_the_library_ops),
        cmocka_unit_test(test_missing_library_says_why_every_time),
        cmocka_unit_test(test_present_libraries_load_without_a_device),
        cmocka_unit_test(test_libraries_load_once_from_racing_threads),
    };
    return RT_RUN(tests);
}
