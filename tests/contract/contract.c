/* SPDX-License-Identifier: MIT */
/* The contract tests' device and kernels (contract.h). */
#include "contract.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The PTX of kernels.cu (generated; NULL when built without nvcc). */
const char *contract_kernels_ptx(void);

/* What the contract expects of each kind's devices, by the kind's name
 * (rill_device_kind_from_name): whether its memory is host memory (which
 * every device of host memory reaches, and pageable host memory with it),
 * and whether a fault can lose it. A new backend adds its line. */
static const struct {
    const char *name;
    bool host_memory;
    bool can_be_lost;
} kinds[] = {
    {"cpu", true, false}, {"cuda", false, true}, {"null", true, false}, /* tests/backend_null */
};

/* The line of kinds for dev's kind (it must have one). */
static size_t kind_line(rill_device *dev) {
    rill_device_kind kind = contract_kind(dev);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        rill_device_kind k;
        if (rill_device_kind_from_name(kinds[i].name, &k) == RILL_OK && k == kind)
            return i;
    }
    fail_msg("kind %d has no line in contract.c's kinds", (int)kind);
    return 0;
}

bool contract_host_memory(rill_device *dev) {
    return kinds[kind_line(dev)].host_memory;
}

bool contract_can_be_lost(rill_device *dev) {
    return kinds[kind_line(dev)].can_be_lost;
}

rill_device *contract_device(void) {
    const char *env = getenv("RILL_TEST_DEVICE");
    const char *name = env != NULL && env[0] != '\0' ? env : "cpu";
    rill_device_kind kind;
    if (rill_device_kind_from_name(name, &kind) != RILL_OK) {
        printf("skipped: %s\n", rill_last_error());
        fflush(stdout);
        exit(77);
    }
    int count = 0;
    char why[512] = "";
    RT_OK(rill_device_count_of_kind(kind, &count, why, sizeof why));
    if (count == 0) {
        printf("skipped: no %s device: %s\n", name, why);
        fflush(stdout);
        exit(77);
    }
    rill_device *dev = NULL;
    RT_OK(rill_device_get_by_kind(kind, 0, &dev));
    RT_OK(rill_set_device(dev));
    return dev;
}

rill_device_kind contract_kind(rill_device *dev) {
    rill_device_info info;
    RT_OK(rill_device_get_info(dev, &info));
    return info.kind;
}

int contract_run(const char *file, const struct CMUnitTest *tests, size_t count, int argc,
                 char **argv) {
    (void)contract_device();
    return rt_run(file, tests, count, argc, argv);
}

/* ---- CPU bodies: block b of G takes the b-th of G slices ---- */

static void slice(const rill_block_ctx *ctx, uint64_t n, uint64_t *begin, uint64_t *end) {
    uint64_t blocks = ctx->grid_dim.x, b = ctx->block_idx.x;
    *begin = n * b / blocks;
    *end = n * (b + 1) / blocks;
}

void contract_add_host(const rill_block_ctx *ctx, const void *args) {
    const contract_add_args *a = args;
    uint64_t begin, end;
    slice(ctx, a->n, &begin, &end);
    for (uint64_t i = begin; i < end; i++)
        a->x[i] += a->value;
}

void contract_scale_host(const rill_block_ctx *ctx, const void *args) {
    const contract_scale_args *a = args;
    uint64_t begin, end;
    slice(ctx, a->n, &begin, &end);
    for (uint64_t i = begin; i < end; i++)
        a->out[i] = a->in[i] * a->factor;
}

void contract_spin_host(const rill_block_ctx *ctx, const void *args) {
    const contract_spin_args *a = args;
    if (ctx->block_idx.x != 0)
        return;
    uint64_t end = rt_now_ns() + a->ns;
    while (rt_now_ns() < end) {
    }
    a->x[0] += 1;
}

/* ---- kernels ---- */

/* Kernels live until the group's teardown shuts the runtime down; the
 * tests of a group share them. */
static rill_kernel *make(rill_kernel **slot, const char *name, rill_cpu_kernel_fn cpu) {
    if (*slot == NULL) {
        rill_kernel_desc desc = {name, cpu, contract_kernels_ptx(), NULL};
        desc.cuda_entry = desc.cuda_ptx != NULL ? name : NULL;
        RT_OK(rill_kernel_create(&desc, slot));
    }
    return *slot;
}

/* The same from a list of images (rill_kernel_create_from_images), the PTX
 * first: each device takes the image in its own format. */
static rill_kernel *make_from_images(rill_kernel **slot, const char *name, rill_cpu_kernel_fn cpu) {
    if (*slot == NULL) {
        rill_kernel_image images[2] = {
            {.format = RILL_KERNEL_IMAGE_PTX, .bytes = contract_kernels_ptx(), .entry = name},
            {.format = RILL_KERNEL_IMAGE_CPU_FN, .fn = cpu},
        };
        bool ptx = images[0].bytes != NULL;
        rill_kernel_image_desc desc = {.struct_size = sizeof desc,
                                       .name = name,
                                       .images = ptx ? images : images + 1,
                                       .num_images = ptx ? 2 : 1};
        RT_OK(rill_kernel_create_from_images(&desc, slot));
    }
    return *slot;
}

static rill_kernel *add_k, *scale_k, *spin_k, *fault_k;

rill_kernel *contract_add_kernel(void) {
    return make_from_images(&add_k, "contract_add", contract_add_host);
}
rill_kernel *contract_scale_kernel(void) {
    return make_from_images(&scale_k, "contract_scale", contract_scale_host);
}
rill_kernel *contract_spin_kernel(void) {
    return make(&spin_k, "contract_spin", contract_spin_host);
}
rill_kernel *contract_fault_kernel(void) {
    return make(&fault_k, "contract_fault", contract_fault_host);
}

/* The stand-in driver's fault (tests/cuda_fake), from the library that
 * RILL_CUDA_DRIVER names when it is loaded and has one; nothing else. */
void contract_fault_host(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
    const char *driver = getenv("RILL_CUDA_DRIVER");
    void *so = driver != NULL ? dlopen(driver, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (so == NULL)
        return;
    void (*fault)(void);
    *(void **)&fault = dlsym(so, "fake_cuda_fault");
    if (fault != NULL)
        fault();
    dlclose(so);
}

static rill_status launch(rill_stream *s, rill_kernel *k, uint32_t blocks, const void *args,
                          size_t args_size, const rill_access *acc, size_t num_acc) {
    rill_launch l = {{blocks, 1, 1}, {128, 1, 1}, args, args_size, acc, num_acc};
    return rill_launch_kernel(s, k, &l);
}

static uint32_t blocks_for(size_t n) {
    return n < 4096 ? 1 : 4;
}

rill_status contract_add(rill_stream *s, uint32_t *x, uint32_t value, size_t n) {
    contract_add_args a = {x, value, n};
    rill_access acc[] = {{x, n * sizeof *x, RILL_READ_WRITE}};
    return launch(s, contract_add_kernel(), blocks_for(n), &a, sizeof a, acc, 1);
}

rill_status contract_scale(rill_stream *s, uint32_t *out, const uint32_t *in, uint32_t factor,
                           size_t n) {
    contract_scale_args a = {out, in, factor, n};
    rill_access acc[] = {{in, n * sizeof *in, RILL_READ}, {out, n * sizeof *out, RILL_WRITE}};
    if (out == in)
        acc[0].mode = RILL_READ_WRITE;
    return launch(s, contract_scale_kernel(), blocks_for(n), &a, sizeof a, acc, out == in ? 1 : 2);
}

rill_status contract_fault(rill_stream *s) {
    contract_fault_args a = {16};
    return launch(s, contract_fault_kernel(), 1, &a, sizeof a, NULL, 0);
}

rill_status contract_spin(rill_stream *s, uint32_t *x, uint64_t ns) {
    contract_spin_args a = {x, ns};
    rill_access acc[] = {{x, sizeof *x, RILL_READ_WRITE}};
    return launch(s, contract_spin_kernel(), 1, &a, sizeof a, acc, 1);
}

uint32_t *contract_words(rill_stream *s, size_t n, uint32_t value) {
    void *p = NULL;
    RT_OK(rill_malloc_async(n * sizeof(uint32_t), s, &p));
    RT_OK(rill_memset_async(p, 0, n * sizeof(uint32_t), s));
    if (value != 0)
        RT_OK(contract_add(s, p, value, n));
    return p;
}

void contract_read(uint32_t *host, const uint32_t *dev, size_t n) {
    RT_OK(rill_memcpy(host, dev, n * sizeof *host));
}

void *contract_alloc(rill_stream *s, size_t bytes) {
    void *p = NULL;
    RT_OK(rill_malloc_async(bytes, s, &p));
    return p;
}

rill_stream *contract_stream(void) {
    rill_stream *s;
    RT_OK(rill_stream_create(contract_device(), 0, &s));
    return s;
}

float *contract_floats(rill_stream *s, const float *host, size_t n) {
    float *p = contract_alloc(s, n * sizeof(float));
    if (host != NULL)
        contract_upload(s, p, host, n * sizeof(float));
    return p;
}

void *contract_indices(rill_stream *s, const int64_t *host, size_t n, size_t index_bytes) {
    void *p = contract_alloc(s, n * index_bytes);
    if (index_bytes == 8) {
        contract_upload(s, p, host, n * sizeof *host);
        return p;
    }
    int32_t *narrow = malloc(n * sizeof *narrow);
    assert_non_null(narrow);
    for (size_t i = 0; i < n; i++)
        narrow[i] = (int32_t)host[i];
    contract_upload(s, p, narrow, n * sizeof *narrow);
    free(narrow);
    return p;
}

void contract_expect_error(rill_status want, rill_status got, const char *fn, const char *words) {
    if (got != want)
        fail_msg("status %d, want %d, for the case that should say '%s'", (int)got, (int)want,
                 words);
    const char *e = rill_last_error();
    if (strstr(e, fn) == NULL || strstr(e, words) == NULL)
        fail_msg("the sentence should name %s and say '%s': %s", fn, words, e);
}

void contract_upload(rill_stream *s, void *dst, const void *src, size_t bytes) {
    RT_OK(rill_memcpy_async(dst, src, bytes, s));
    RT_OK(rill_stream_synchronize(s));
}

void contract_download(rill_stream *s, void *dst, const void *src, size_t bytes) {
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_memcpy(dst, src, bytes));
}

void contract_expect_close(const char *what, size_t i, double got, double want, double tol) {
    if (isnan(want) && isnan(got))
        return;
    if (!(fabs(got - want) <= tol * (1.0 + fabs(want))))
        fail_msg("%s[%zu] = %.9g, want %.9g", what, i, got, want);
}
