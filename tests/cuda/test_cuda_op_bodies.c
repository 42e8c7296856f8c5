/* SPDX-License-Identifier: MIT */
/* The CUDA bodies of the built-in ops against the CPU bodies, on a GPU:
 * each op's args struct run by the PTX kernel (or the library call) and by
 * the CPU body, on the same inputs, over several grids. Element-wise ops
 * and casts must give the same bits; sums, randn, products and
 * convolutions the same values within float (or half) rounding. The driver
 * is reached here directly (dlopen of libcuda.so.1, every entry point from
 * cuGetProcAddress), so this checks the bodies alone, apart from the
 * backend. Exits 77 (skipped) where there is no CUDA device. */
#include "fixture.h"

#include <cuda.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/op_kernels.h"
#include "backend/cuda/cuda_libs.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/half_bits.h"

/* ---- the driver ---- */

static struct {
    __typeof__(&cuInit) init;
    __typeof__(&cuDeviceGet) device_get;
    __typeof__(&cuDevicePrimaryCtxRetain) ctx_retain;
    __typeof__(&cuDevicePrimaryCtxRelease) ctx_release;
    __typeof__(&cuCtxSetCurrent) ctx_set_current;
    __typeof__(&cuCtxSynchronize) ctx_synchronize;
    __typeof__(&cuModuleLoadData) module_load;
    __typeof__(&cuModuleGetFunction) module_function;
    __typeof__(&cuMemAlloc) mem_alloc;
    __typeof__(&cuMemFree) mem_free;
    __typeof__(&cuMemcpyHtoD) htod;
    __typeof__(&cuMemcpyDtoH) dtoh;
    __typeof__(&cuLaunchKernel) launch;
    __typeof__(&cuStreamCreate) stream_create;
    __typeof__(&cuStreamDestroy) stream_destroy;
    __typeof__(&cuStreamSynchronize) stream_synchronize;
    __typeof__(&cuStreamBeginCapture) begin_capture;
    __typeof__(&cuStreamEndCapture) end_capture;
    __typeof__(&cuGraphInstantiateWithFlags) instantiate;
    __typeof__(&cuGraphLaunch) graph_launch;
    __typeof__(&cuGraphExecDestroy) exec_destroy;
    __typeof__(&cuGraphDestroy) graph_destroy;
    __typeof__(&cuGetErrorName) error_name;
} drv;

static CUcontext ctx;
static CUdevice dev;
static CUmodule module;
static rill__cuda_libs libs;
static char no_device[256];

static void check_cu(CUresult r, const char *call) {
    if (r != CUDA_SUCCESS) {
        const char *name = "?";
        drv.error_name(r, &name);
        fail_msg("%s: %s", call, name);
    }
}

/* Loads the driver and opens device 0's primary context; false, with the
 * reason in no_device, when there is none. */
static bool open_device(void) {
    void *so = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (so == NULL) {
        snprintf(no_device, sizeof no_device, "libcuda.so.1 not found");
        return false;
    }
    /* POSIX lets dlsym's result become a function pointer: copy it over. */
    __typeof__(&cuGetProcAddress_v2) get = NULL;
    void *sym = dlsym(so, "cuGetProcAddress_v2");
    memcpy(&get, &sym, sizeof get);
    if (get == NULL) {
        snprintf(no_device, sizeof no_device, "the driver has no cuGetProcAddress_v2");
        return false;
    }
    const struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"cuInit", (void **)&drv.init},
        {"cuDeviceGet", (void **)&drv.device_get},
        {"cuDevicePrimaryCtxRetain", (void **)&drv.ctx_retain},
        {"cuDevicePrimaryCtxRelease", (void **)&drv.ctx_release},
        {"cuCtxSetCurrent", (void **)&drv.ctx_set_current},
        {"cuCtxSynchronize", (void **)&drv.ctx_synchronize},
        {"cuModuleLoadData", (void **)&drv.module_load},
        {"cuModuleGetFunction", (void **)&drv.module_function},
        {"cuMemAlloc", (void **)&drv.mem_alloc},
        {"cuMemFree", (void **)&drv.mem_free},
        {"cuMemcpyHtoD", (void **)&drv.htod},
        {"cuMemcpyDtoH", (void **)&drv.dtoh},
        {"cuLaunchKernel", (void **)&drv.launch},
        {"cuStreamCreate", (void **)&drv.stream_create},
        {"cuStreamDestroy", (void **)&drv.stream_destroy},
        {"cuStreamSynchronize", (void **)&drv.stream_synchronize},
        {"cuStreamBeginCapture", (void **)&drv.begin_capture},
        {"cuStreamEndCapture", (void **)&drv.end_capture},
        {"cuGraphInstantiateWithFlags", (void **)&drv.instantiate},
        {"cuGraphLaunch", (void **)&drv.graph_launch},
        {"cuGraphExecDestroy", (void **)&drv.exec_destroy},
        {"cuGraphDestroy", (void **)&drv.graph_destroy},
        {"cuGetErrorName", (void **)&drv.error_name},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        CUdriverProcAddressQueryResult found;
        if (get(syms[i].name, syms[i].slot, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &found) !=
                CUDA_SUCCESS ||
            found != CU_GET_PROC_ADDRESS_SUCCESS) {
            snprintf(no_device, sizeof no_device, "the driver has no %s", syms[i].name);
            return false;
        }
    }
    if (drv.init(0) != CUDA_SUCCESS || drv.device_get(&dev, 0) != CUDA_SUCCESS) {
        snprintf(no_device, sizeof no_device, "cuInit or cuDeviceGet failed: no CUDA device");
        return false;
    }
    return drv.ctx_retain(&ctx, dev) == CUDA_SUCCESS && drv.ctx_set_current(ctx) == CUDA_SUCCESS;
}

static int group_setup(void **state) {
    (void)state;
    const char *image = rill__cuda_op_image();
    if (image == NULL || drv.module_load(&module, image) != CUDA_SUCCESS)
        return -1;
    rill__cuda_libs_init(&libs);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    drv.ctx_set_current(ctx);
    rill__cuda_libs_fini(&libs);
    drv.ctx_release(dev);
    return 0;
}

/* ---- buffers and runs ---- */

/* A host buffer and its device twin. */
typedef struct buf {
    void *host;
    CUdeviceptr dev;
    size_t bytes;
} buf;

static buf buf_new(size_t bytes) {
    buf b = {calloc(1, bytes), 0, bytes};
    assert_non_null(b.host);
    drv.ctx_set_current(ctx);
    check_cu(drv.mem_alloc(&b.dev, bytes), "cuMemAlloc");
    check_cu(drv.htod(b.dev, b.host, bytes), "cuMemcpyHtoD");
    return b;
}

static void buf_upload(buf *b) {
    check_cu(drv.htod(b->dev, b->host, b->bytes), "cuMemcpyHtoD");
}

/* The device's contents, in a new host buffer. */
static void *buf_download(const buf *b) {
    void *copy = malloc(b->bytes);
    assert_non_null(copy);
    check_cu(drv.dtoh(copy, b->dev, b->bytes), "cuMemcpyDtoH");
    return copy;
}

static void buf_free(buf *b) {
    drv.mem_free(b->dev);
    free(b->host);
}

#define DEV(b) ((void *)(uintptr_t)(b).dev)

/* op's CPU body over a grid of blocks blocks, on host pointers. */
static void run_cpu(rill__op op, const void *args, uint32_t blocks) {
    rill_cpu_kernel_fn body = rill__cpu_op_body(op);
    for (uint32_t b = 0; b < blocks; b++) {
        rill_block_ctx c = {{b, 0, 0}, {blocks, 1, 1}, 0, NULL};
        body(&c, args);
    }
}

/* op's CUDA body on device pointers: its kernel over blocks blocks of
 * RILL__OP_BLOCK_THREADS, or its library call; then waits for it. */
static void run_gpu_on(rill__op op, const void *args, size_t args_size, uint32_t blocks,
                       CUstream stream) {
    const char *entry = rill__cuda_op_entry(op);
    if (entry != NULL) {
        CUfunction fn;
        check_cu(drv.module_function(&fn, module, entry), entry);
        size_t size = args_size;
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)args, CU_LAUNCH_PARAM_BUFFER_SIZE,
                         &size, CU_LAUNCH_PARAM_END};
        check_cu(drv.launch(fn, blocks, 1, 1, RILL__OP_BLOCK_THREADS, 1, 1, 0, stream, NULL, extra),
                 "cuLaunchKernel");
    } else {
        char why[512] = "";
        rill_status st = rill__cuda_op_library(&libs, op, stream, args, why, sizeof why);
        if (st != RILL_OK)
            fail_msg("op %d through its library: %s", (int)op, why);
    }
}

static void run_gpu(rill__op op, const void *args, size_t args_size, uint32_t blocks) {
    run_gpu_on(op, args, args_size, blocks, NULL);
    check_cu(drv.ctx_synchronize(), "cuCtxSynchronize");
}

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* A float in [-4, 4). */
static float rng_float(void) {
    return ((float)(rng() & 0xffffff) / (float)(1 << 24) - 0.5f) * 8.0f;
}

static void fill_floats(buf *b) {
    float *f = b->host;
    for (size_t i = 0; i < b->bytes / sizeof(float); i++)
        f[i] = rng_float();
    buf_upload(b);
}

static void fill_halves(buf *b) {
    uint16_t *h = b->host;
    for (size_t i = 0; i < b->bytes / sizeof(uint16_t); i++)
        h[i] = rill__half_from_float(rng_float());
    buf_upload(b);
}

static void assert_same_bytes(const void *gpu, const void *cpu, size_t bytes, const char *what) {
    if (memcmp(gpu, cpu, bytes) != 0) {
        const unsigned char *g = gpu, *c = cpu;
        size_t i = 0;
        while (g[i] == c[i])
            i++;
        fail_msg("%s: GPU and CPU differ first at byte %zu", what, i);
    }
}

/* Grids to run each element-wise op over: one block, a few, and more
 * than a GPU's multiprocessors. */
static const uint32_t grids[] = {1, 7, 264};
#define N_ELEMS ((size_t)1000003)

/* ---- element-wise f32 ---- */

static void test_elementwise_f32_equal_the_cpu_bit_for_bit(void **state) {
    (void)state;
    buf a = buf_new(N_ELEMS * 4), b = buf_new(N_ELEMS * 4), out = buf_new(N_ELEMS * 4);
    fill_floats(&a);
    fill_floats(&b);
    float *cpu = malloc(N_ELEMS * 4);
    for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
        const float alphas[] = {1.0f, -0.3f};
        for (int k = 0; k < 2; k++) {
            rill__op_add_args ga = {DEV(out), DEV(a), DEV(b), alphas[k], N_ELEMS};
            rill__op_add_args ca = {cpu, a.host, b.host, alphas[k], N_ELEMS};
            run_gpu(RILL__OP_ADD_F32, &ga, sizeof ga, grids[g]);
            run_cpu(RILL__OP_ADD_F32, &ca, grids[g]);
            float *got = buf_download(&out);
            assert_same_bytes(got, cpu, N_ELEMS * 4, "add_f32");
            free(got);
        }
        rill__op_mul_args gm = {DEV(out), DEV(a), DEV(b), N_ELEMS};
        rill__op_mul_args cm = {cpu, a.host, b.host, N_ELEMS};
        run_gpu(RILL__OP_MUL_F32, &gm, sizeof gm, grids[g]);
        run_cpu(RILL__OP_MUL_F32, &cm, grids[g]);
        float *got = buf_download(&out);
        assert_same_bytes(got, cpu, N_ELEMS * 4, "mul_f32");
        free(got);
        rill__op_add_scalar_args gs = {DEV(out), DEV(a), 0.7f, N_ELEMS};
        rill__op_add_scalar_args cs = {cpu, a.host, 0.7f, N_ELEMS};
        run_gpu(RILL__OP_ADD_SCALAR_F32, &gs, sizeof gs, grids[g]);
        run_cpu(RILL__OP_ADD_SCALAR_F32, &cs, grids[g]);
        got = buf_download(&out);
        assert_same_bytes(got, cpu, N_ELEMS * 4, "add_scalar_f32");
        free(got);
        rill__op_fill_args gf = {DEV(out), -2.5f, N_ELEMS};
        rill__op_fill_args cf = {cpu, -2.5f, N_ELEMS};
        run_gpu(RILL__OP_FILL_F32, &gf, sizeof gf, grids[g]);
        run_cpu(RILL__OP_FILL_F32, &cf, grids[g]);
        got = buf_download(&out);
        assert_same_bytes(got, cpu, N_ELEMS * 4, "fill_f32");
        free(got);
    }
    free(cpu);
    buf_free(&a);
    buf_free(&b);
    buf_free(&out);
}

/* ---- element-wise f16 and casts ---- */

static void test_elementwise_f16_equal_the_cpu_bit_for_bit(void **state) {
    (void)state;
    buf a = buf_new(N_ELEMS * 2), b = buf_new(N_ELEMS * 2), out = buf_new(N_ELEMS * 2);
    fill_halves(&a);
    fill_halves(&b);
    uint16_t *cpu = malloc(N_ELEMS * 2);
    const rill__op ops[] = {RILL__OP_FILL_F16, RILL__OP_ADD_F16, RILL__OP_MUL_F16,
                            RILL__OP_ADD_SCALAR_F16};
    const float values[] = {1.0f, -0.3f, 1000.0f};
    for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
        for (int o = 0; o < 4; o++) {
            for (int v = 0; v < 3; v++) {
                rill__op_f16_args ga = {DEV(out), DEV(a), DEV(b), values[v], N_ELEMS};
                rill__op_f16_args ca = {cpu, a.host, b.host, values[v], N_ELEMS};
                run_gpu(ops[o], &ga, sizeof ga, grids[g]);
                run_cpu(ops[o], &ca, grids[g]);
                uint16_t *got = buf_download(&out);
                assert_same_bytes(got, cpu, N_ELEMS * 2, "an f16 element-wise op");
                free(got);
            }
        }
    }
    free(cpu);
    buf_free(&a);
    buf_free(&b);
    buf_free(&out);
}

/* Every half to a float, and floats of every exponent (and NaNs and
 * infinities) to halves. */
static void test_casts_equal_the_cpu_bit_for_bit(void **state) {
    (void)state;
    size_t n = 1u << 16;
    buf halves = buf_new(n * 2), floats = buf_new(n * 4);
    for (size_t i = 0; i < n; i++)
        ((uint16_t *)halves.host)[i] = (uint16_t)i;
    buf_upload(&halves);
    rill__op_cast_args g1 = {DEV(floats), DEV(halves), n};
    float *cpu = malloc(n * 4);
    rill__op_cast_args c1 = {cpu, halves.host, n};
    run_gpu(RILL__OP_CAST_F16_F32, &g1, sizeof g1, 7);
    run_cpu(RILL__OP_CAST_F16_F32, &c1, 7);
    void *got = buf_download(&floats);
    assert_same_bytes(got, cpu, n * 4, "cast_f16_f32 of every half");
    free(got);
    free(cpu);

    size_t m = (size_t)1 << 22;
    buf src = buf_new(m * 4), dst = buf_new(m * 2);
    for (size_t i = 0; i < m; i++) {
        uint32_t bits = (uint32_t)(i << 10) | (rng() & 0x3ffu);
        memcpy((float *)src.host + i, &bits, 4);
    }
    buf_upload(&src);
    uint16_t *hcpu = malloc(m * 2);
    rill__op_cast_args g2 = {DEV(dst), DEV(src), m};
    rill__op_cast_args c2 = {hcpu, src.host, m};
    run_gpu(RILL__OP_CAST_F32_F16, &g2, sizeof g2, 264);
    run_cpu(RILL__OP_CAST_F32_F16, &c2, 264);
    got = buf_download(&dst);
    assert_same_bytes(got, hcpu, m * 2, "cast_f32_f16 across every exponent");
    free(got);
    free(hcpu);
    buf_free(&halves);
    buf_free(&floats);
    buf_free(&src);
    buf_free(&dst);
}

/* ---- randn ---- */

/* The same normals within a float's last bit (the GPU's double libm
 * differs from the host's in the last bits of a double). */
static void test_randn_equals_the_cpu_within_a_float_ulp(void **state) {
    (void)state;
    size_t n = (size_t)1 << 20;
    buf x = buf_new(n * 4);
    float *cpu = malloc(n * 4);
    rill__op_randn_args ga = {DEV(x), n, 0.5f, 2.0f, 12345};
    rill__op_randn_args ca = {cpu, n, 0.5f, 2.0f, 12345};
    run_gpu(RILL__OP_RANDN_F32, &ga, sizeof ga, 100);
    run_cpu(RILL__OP_RANDN_F32, &ca, 3);
    float *got = buf_download(&x);
    size_t exact = 0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] == cpu[i]) {
            exact++;
            continue;
        }
        if (nextafterf(cpu[i], got[i]) != got[i])
            fail_msg("randn element %zu: GPU %.9g, CPU %.9g", i, (double)got[i], (double)cpu[i]);
    }
    assert_true(exact >= n - n / 1000);
    free(got);
    free(cpu);
    buf_free(&x);
}

/* ---- sum ---- */

static void test_sum_equals_the_cpu(void **state) {
    (void)state;
    size_t n = 3000001;
    buf a = buf_new(n * 4), ah = buf_new(n * 2), out = buf_new(8);
    fill_floats(&a);
    fill_halves(&ah);
    const uint32_t blocks[] = {1, 5, 132, 1000};
    for (size_t g = 0; g < sizeof blocks / sizeof blocks[0]; g++) {
        buf partials = buf_new(blocks[g] * sizeof(double));
        double *cpu_partials = malloc(blocks[g] * sizeof(double));
        float cpu_out;
        uint16_t cpu_half;
        /* Two phases, f32 and f16. */
        rill__op_sum_partial_args gp = {DEV(a), n, DEV(partials), NULL};
        rill__op_sum_partial_args cp = {a.host, n, cpu_partials, NULL};
        rill__op_sum_final_args gf = {DEV(partials), blocks[g], DEV(out)};
        rill__op_sum_final_args cf = {cpu_partials, blocks[g], &cpu_out};
        run_gpu(RILL__OP_SUM_PARTIAL_F32, &gp, sizeof gp, blocks[g]);
        run_gpu(RILL__OP_SUM_FINAL_F32, &gf, sizeof gf, 1);
        run_cpu(RILL__OP_SUM_PARTIAL_F32, &cp, blocks[g]);
        run_cpu(RILL__OP_SUM_FINAL_F32, &cf, 1);
        float *got = buf_download(&out);
        if (!(got[0] == cpu_out || nextafterf(cpu_out, got[0]) == got[0]))
            fail_msg("sum_f32 over %u blocks: GPU %.9g, CPU %.9g", blocks[g], (double)got[0],
                     (double)cpu_out);
        free(got);
        rill__op_sum_f16_args hp = {DEV(ah), n, DEV(partials), NULL};
        rill__op_sum_f16_args chp = {ah.host, n, cpu_partials, NULL};
        rill__op_sum_final_f16_args hf = {DEV(partials), blocks[g], DEV(out)};
        rill__op_sum_final_f16_args chf = {cpu_partials, blocks[g], &cpu_half};
        run_gpu(RILL__OP_SUM_PARTIAL_F16, &hp, sizeof hp, blocks[g]);
        run_gpu(RILL__OP_SUM_FINAL_F16, &hf, sizeof hf, 1);
        run_cpu(RILL__OP_SUM_PARTIAL_F16, &chp, blocks[g]);
        run_cpu(RILL__OP_SUM_FINAL_F16, &chf, 1);
        uint16_t *goth = buf_download(&out);
        if (abs((int)goth[0] - (int)cpu_half) > 1)
            fail_msg("sum_f16 over %u blocks: GPU %#x, CPU %#x", blocks[g], goth[0], cpu_half);
        free(goth);
        /* One phase: partials NULL; any grid, only block 0 works. */
        rill__op_sum_partial_args g1 = {DEV(a), n, NULL, DEV(out)};
        run_gpu(RILL__OP_SUM_PARTIAL_F32, &g1, sizeof g1, blocks[g]);
        got = buf_download(&out);
        if (!(got[0] == cpu_out || nextafterf(cpu_out, got[0]) == got[0]))
            fail_msg("one-phase sum_f32 on a grid of %u: GPU %.9g, CPU %.9g", blocks[g],
                     (double)got[0], (double)cpu_out);
        free(got);
        free(cpu_partials);
        buf_free(&partials);
    }
    buf_free(&a);
    buf_free(&ah);
    buf_free(&out);
}

/* ---- matmul and conv2d ---- */

/* |got - want| <= tol * (1 + |want|) for each of n floats. */
static void assert_close(const float *got, const float *want, size_t n, double tol,
                         const char *what) {
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= tol * (1.0 + fabs((double)want[i]))))
            fail_msg("%s: element %zu is %.9g on the GPU, %.9g on the CPU", what, i, (double)got[i],
                     (double)want[i]);
    }
}

static void halves_to_floats(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = rill__half_to_float(src[i]);
}

static void test_matmul_equals_the_cpu(void **state) {
    (void)state;
    const size_t shapes[][3] = {{129, 257, 65}, {512, 512, 512}, {1, 1000, 3}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        size_t m = shapes[t][0], k = shapes[t][1], n = shapes[t][2];
        buf a = buf_new(m * k * 4), b = buf_new(k * n * 4), c = buf_new(m * n * 4);
        fill_floats(&a);
        fill_floats(&b);
        float *cpu = malloc(m * n * 4);
        /* Plain, then with a, b and both read as stored transposed. */
        for (uint32_t trans = 0; trans <= (RILL_MATMUL_A_T | RILL_MATMUL_B_T); trans++) {
            rill__op_matmul_args ga = {DEV(c), DEV(a), DEV(b), m, k, n, 1, 1, trans, NULL, 0, 0};
            rill__op_matmul_args ca = {cpu, a.host, b.host, m, k, n, 1, 1, trans, NULL, 0, 0};
            run_gpu(RILL__OP_MATMUL_F32, &ga, sizeof ga, 1);
            run_cpu(RILL__OP_MATMUL_F32, &ca, 1);
            float *got = buf_download(&c);
            assert_close(got, cpu, m * n, 1e-5 * (double)k, "matmul_f32");
            free(got);
        }
        free(cpu);
        buf_free(&a);
        buf_free(&b);
        buf_free(&c);

        buf ha = buf_new(m * k * 2), hb = buf_new(k * n * 2), hc = buf_new(m * n * 2);
        fill_halves(&ha);
        fill_halves(&hb);
        uint16_t *hcpu = malloc(m * n * 2);
        rill__op_matmul_f16_args hga = {DEV(hc), DEV(ha), DEV(hb), NULL, m, k, n, 1, 1};
        rill__op_matmul_f16_args hca = {hcpu, ha.host, hb.host, NULL, m, k, n, 1, 1};
        hca.scratch = malloc(rill__op_matmul_f16_slot_floats(&hca) * sizeof(float));
        run_gpu(RILL__OP_MATMUL_F16, &hga, sizeof hga, 1);
        run_cpu(RILL__OP_MATMUL_F16, &hca, 1);
        uint16_t *hgot = buf_download(&hc);
        float *fg = malloc(m * n * 4), *fc = malloc(m * n * 4);
        halves_to_floats(fg, hgot, m * n);
        halves_to_floats(fc, hcpu, m * n);
        assert_close(fg, fc, m * n, 2e-3, "matmul_f16");
        free(fg);
        free(fc);
        free(hgot);
        free(hca.scratch);
        free(hcpu);
        buf_free(&ha);
        buf_free(&hb);
        buf_free(&hc);
    }
}

static void test_conv2d_equals_the_cpu(void **state) {
    (void)state;
    /* n, c, h, w, k, r, s: a 3x3 filter, a 1x1 one, an odd k for the f16
     * kernel's filter groups. */
    const size_t shapes[][7] = {
        {2, 3, 17, 19, 5, 3, 3}, {3, 8, 9, 7, 16, 1, 1}, {1, 4, 12, 30, 11, 5, 2}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        const size_t *d = shapes[t];
        size_t n = d[0], c = d[1], h = d[2], w = d[3], k = d[4], r = d[5], s = d[6];
        size_t oh = h - r + 1, ow = w - s + 1;
        size_t in_n = n * c * h * w, w_n = k * c * r * s, out_n = n * k * oh * ow;
        buf in = buf_new(in_n * 4), wt = buf_new(w_n * 4), out = buf_new(out_n * 4);
        fill_floats(&in);
        fill_floats(&wt);
        /* One band per image, one block per image on the CPU. */
        rill__op_conv2d_args ca = {NULL, in.host, wt.host, NULL, n, c, h, w, k, r, s, oh};
        size_t slot = rill__op_conv2d_slot_floats(&ca);
        buf scratch = buf_new(n * slot * 4);
        float *cpu = malloc(out_n * 4);
        ca.out = cpu;
        ca.scratch = r == 1 && s == 1 ? NULL : malloc(n * slot * 4);
        rill__op_conv2d_args ga = {
            DEV(out), DEV(in), DEV(wt), r == 1 && s == 1 ? NULL : DEV(scratch), n, c, h, w, k,
            r,        s,       oh};
        if (RILL_TEST_HAVE_CUDNN) /* else the build refuses conv2d_f32 on a GPU */
            run_gpu(RILL__OP_CONV2D_F32, &ga, sizeof ga, (uint32_t)n);
        run_cpu(RILL__OP_CONV2D_F32, &ca, (uint32_t)n);
        float *got = buf_download(&out);
        if (RILL_TEST_HAVE_CUDNN)
            assert_close(got, cpu, out_n, 1e-5 * (double)(c * r * s), "conv2d_f32");
        free(got);
        free(ca.scratch);

        /* f16: halves in and out, the weight as floats (from halves). */
        buf hin = buf_new(in_n * 2), hout = buf_new(out_n * 2), fw = buf_new(w_n * 4);
        fill_halves(&hin);
        for (size_t i = 0; i < w_n; i++)
            ((float *)fw.host)[i] = rill__half_to_float(rill__half_from_float(rng_float()));
        buf_upload(&fw);
        rill__op_conv2d_f16_args hca = {NULL, hin.host, fw.host, NULL, n, c, h, w, k, r, s, oh};
        uint16_t *hcpu = malloc(out_n * 2);
        hca.out = hcpu;
        hca.scratch = malloc(n * rill__op_conv2d_f16_slot_floats(&hca) * sizeof(float));
        rill__op_conv2d_f16_args hga = {DEV(hout), DEV(hin), DEV(fw), NULL, n, c,
                                        h,         w,        k,       r,    s, oh};
        for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
            run_gpu(RILL__OP_CONV2D_F16, &hga, sizeof hga, grids[g]);
            run_cpu(RILL__OP_CONV2D_F16, &hca, (uint32_t)n);
            uint16_t *hgot = buf_download(&hout);
            float *fg = malloc(out_n * 4), *fc = malloc(out_n * 4);
            halves_to_floats(fg, hgot, out_n);
            halves_to_floats(fc, hcpu, out_n);
            assert_close(fg, fc, out_n, 2e-3, "conv2d_f16");
            free(fg);
            free(fc);
            free(hgot);
        }
        free(hca.scratch);
        free(hcpu);
        free(cpu);
        buf_free(&hin);
        buf_free(&hout);
        buf_free(&fw);
        buf_free(&in);
        buf_free(&wt);
        buf_free(&out);
        buf_free(&scratch);
    }
}

/* cuda_libs.h: "a call that finds an idle handle allocates nothing, so it
 * may be captured into a CUDA graph." The library ops captured on a stream
 * (in the strictest mode), then replayed, give what they give run
 * directly. */
static void test_library_ops_replay_from_a_captured_graph(void **state) {
    (void)state;
    size_t m = 96, k = 80, n = 72;
    rill__op_conv2d_args conv = {NULL, NULL, NULL, NULL, 2, 3, 20, 24, 8, 3, 3, 18};
    size_t in_n = 2 * 3 * 20 * 24, w_n = 8 * 3 * 3 * 3, out_n = 2 * 8 * 18 * 22;
    buf a = buf_new(m * k * 4), b = buf_new(k * n * 4),
        c[2] = {buf_new(m * n * 4), buf_new(m * n * 4)};
    buf in = buf_new(in_n * 4), wt = buf_new(w_n * 4),
        out[2] = {buf_new(out_n * 4), buf_new(out_n * 4)};
    buf scratch = buf_new(rill__op_conv2d_slot_floats(&conv) * 4);
    fill_floats(&a);
    fill_floats(&b);
    fill_floats(&in);
    fill_floats(&wt);
    char why[512] = "";
    assert_int_equal(rill__cuda_libs_prepare(&libs, RILL__OP_MATMUL_F32, why, sizeof why), RILL_OK);
    if (RILL_TEST_HAVE_CUDNN)
        assert_int_equal(rill__cuda_libs_prepare(&libs, RILL__OP_CONV2D_F32, why, sizeof why),
                         RILL_OK);
    CUstream s;
    check_cu(drv.stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    CUgraph graph = NULL;
    for (int captured = 0; captured < 2; captured++) {
        rill__op_matmul_args mm = {DEV(c[captured]), DEV(a), DEV(b), m, k, n, 1, 1, 0, NULL, 0, 0};
        conv.out = DEV(out[captured]);
        conv.in = DEV(in);
        conv.weight = DEV(wt);
        conv.scratch = DEV(scratch);
        if (captured)
            check_cu(drv.begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
        run_gpu_on(RILL__OP_MATMUL_F32, &mm, sizeof mm, 1, s);
        if (RILL_TEST_HAVE_CUDNN)
            run_gpu_on(RILL__OP_CONV2D_F32, &conv, sizeof conv, 1, s);
        if (captured)
            check_cu(drv.end_capture(s, &graph), "cuStreamEndCapture");
    }
    CUgraphExec exec;
    check_cu(drv.instantiate(&exec, graph, 0), "cuGraphInstantiateWithFlags");
    check_cu(drv.graph_launch(exec, s), "cuGraphLaunch");
    check_cu(drv.stream_synchronize(s), "cuStreamSynchronize");
    float *want = buf_download(&c[0]), *got = buf_download(&c[1]);
    assert_close(got, want, m * n, 1e-6, "matmul_f32 replayed from a graph");
    free(want);
    free(got);
    want = buf_download(&out[0]);
    got = buf_download(&out[1]);
    if (RILL_TEST_HAVE_CUDNN)
        assert_close(got, want, out_n, 1e-6, "conv2d_f32 replayed from a graph");
    free(want);
    free(got);
    drv.exec_destroy(exec);
    drv.graph_destroy(graph);
    drv.stream_destroy(s);
    buf *all[] = {&a, &b, &c[0], &c[1], &in, &wt, &out[0], &out[1], &scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

int main(int argc, char **argv) {
    if (!open_device()) {
        printf("skipped: no CUDA device (%s)\n", no_device);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise_f32_equal_the_cpu_bit_for_bit),
        cmocka_unit_test(test_elementwise_f16_equal_the_cpu_bit_for_bit),
        cmocka_unit_test(test_casts_equal_the_cpu_bit_for_bit),
        cmocka_unit_test(test_randn_equals_the_cpu_within_a_float_ulp),
        cmocka_unit_test(test_sum_equals_the_cpu),
        cmocka_unit_test(test_matmul_equals_the_cpu),
        cmocka_unit_test(test_conv2d_equals_the_cpu),
        cmocka_unit_test(test_library_ops_replay_from_a_captured_graph),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
