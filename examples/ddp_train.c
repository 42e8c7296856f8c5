/* SPDX-License-Identifier: MIT */
/* Data-parallel training of a small MLP over MPI (rill_mpi.h), as
 * PyTorch's DistributedDataParallel does it: every rank holds the whole
 * model and a slice of each batch; forward and backward run per layer on
 * a compute stream, and each layer's weight gradient is averaged over the
 * ranks (rill_allreduce_f32, RILL_REDUCE_AVG) on a communication stream as
 * soon as that layer's backward has made it (an event recorded on the
 * compute stream, which the communication stream waits for), so that the
 * allreduce of the last layers overlaps the backward of the first. As in
 * DDP, the gradients live in one buffer in backward order and are reduced
 * in buckets: a bucket is the gradients of consecutive layers, at least
 * --bucket-kb KiB (the last may be smaller), reduced by one allreduce once
 * its last layer's backward is done. The optimizer step waits for the
 * allreduces' events.
 *
 * It times the step three ways: with the two streams, with everything on
 * one stream, and with the two-stream step captured once into a graph
 * (collectives included) and replayed each step, as CUDA graphs replay
 * NCCL calls (median over repeats of the steps' mean, slowest rank). After
 * each run it checks that every rank holds the same weights, and that they
 * equal, within 1e-5 relative, those of one process that trained on the
 * whole batch (rank 0 trains that reference with rill, on one stream).
 * Exit code 0 when every check passes, 1 otherwise.
 *
 *   mpirun -np 4 ddp_train [--steps N] [--batch B] [--hidden H] [--repeats R]
 *                          [--bucket-kb K] [--device cpu|cuda]
 *
 * It runs on rill's current device, or the first of the kind --device
 * names (exit 77 when there is none), every rank on that one; on a CUDA
 * device without a CUDA-aware MPI the graph's step time is skipped (the
 * collectives are staged through host memory, which a capture cannot hold).
 *
 * The model: y = W3 relu(W2 relu(W1 x)) with W1 [in, hidden], W2 [hidden,
 * hidden], W3 [hidden, out], no biases; loss = sum over the batch of
 * |y - t|^2 / (2 * batch); plain SGD. The data and the first weights come
 * from rill_op_randn_f32 with fixed seeds, the same on every rank. */
#include <math.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rill.h>
#include <rill_mpi.h>

enum { LAYERS = 3 };

#define TOLERANCE     1e-5
#define LEARNING_RATE 0.05f

/* ------------------------------------------------------------- errors */

/* The first failure of a rill call, printed once; later calls still run
 * (rill checks every argument), and the program stops at the next check. */
static rill_status first_error = RILL_OK;
static int my_rank;

static void ck(rill_status st, const char *what) {
    if (st == RILL_OK || first_error != RILL_OK)
        return;
    first_error = st;
    fprintf(stderr, "ddp_train: rank %d: %s: %s: %s\n", my_rank, what, rill_status_name(st),
            rill_last_error());
}

/* ------------------------------------------------------------- kernels */

/* Blocks of a grid over n elements: at most 64, at least 1. */
static rill_dim3 grid_for(size_t n) {
    size_t blocks = n / 4096 + 1;
    return (rill_dim3){(uint32_t)(blocks < 64 ? blocks : 64), 1, 1};
}

/* This block's share [*begin, *end) of n elements. */
static void share(const rill_block_ctx *ctx, size_t n, size_t *begin, size_t *end) {
    size_t b = ctx->block_idx.x, g = ctx->grid_dim.x;
    *begin = n * b / g;
    *end = n * (b + 1) / g;
}

typedef struct relu_args {
    float *out;
    const float *in;   /* forward: z; backward: the gradient of relu(z) */
    const float *gate; /* backward: z; forward: NULL */
    size_t n;
} relu_args;

/* The kernels have a CPU body here and a CUDA body in
 * ddp_train_kernels.cu, whose PTX the build embeds (ddp_train_kernels_ptx;
 * NULL when it had no nvcc), so the example runs on either device. The CPU
 * bodies are also exported under the CUDA entries' names followed by _host,
 * which the stand-in CUDA driver of rill's tests runs in place of PTX. */
const char *ddp_train_kernels_ptx(void);
void relu_host(const rill_block_ctx *ctx, const void *args);
void transpose_host(const rill_block_ctx *ctx, const void *args);

/* Threads per block on a GPU (the CPU device ignores it). */
enum { BLOCK_THREADS = 256 };

/* Forward: out = max(in, 0). Backward: out = gate > 0 ? in : 0. */
void relu_host(const rill_block_ctx *ctx, const void *args) {
    const relu_args *a = args;
    size_t begin, end;
    share(ctx, a->n, &begin, &end);
    for (size_t i = begin; i < end; i++) {
        if (a->gate == NULL)
            a->out[i] = a->in[i] > 0.0f ? a->in[i] : 0.0f;
        else
            a->out[i] = a->gate[i] > 0.0f ? a->in[i] : 0.0f;
    }
}

typedef struct transpose_args {
    float *out;      /* [cols, rows] */
    const float *in; /* [rows, cols] */
    size_t rows, cols;
} transpose_args;

void transpose_host(const rill_block_ctx *ctx, const void *args) {
    const transpose_args *a = args;
    size_t begin, end;
    share(ctx, a->rows, &begin, &end);
    for (size_t i = begin; i < end; i++)
        for (size_t j = 0; j < a->cols; j++)
            a->out[j * a->rows + i] = a->in[i * a->cols + j];
}

static rill_kernel *relu_kernel, *transpose_kernel;

static void relu(rill_stream *s, float *out, const float *in, const float *gate, size_t n) {
    relu_args args = {out, in, gate, n};
    rill_access acc[3] = {{out, n * sizeof(float), RILL_WRITE},
                          {in, n * sizeof(float), RILL_READ},
                          {gate, n * sizeof(float), RILL_READ}};
    rill_launch l = {.grid = grid_for(n),
                     .block = {BLOCK_THREADS, 1, 1},
                     .args = &args,
                     .args_size = sizeof args,
                     .accesses = acc,
                     .num_accesses = gate != NULL ? 3 : 2};
    ck(rill_launch_kernel(s, relu_kernel, &l), "relu");
}

static void transpose(rill_stream *s, float *out, const float *in, size_t rows, size_t cols) {
    transpose_args args = {out, in, rows, cols};
    rill_access acc[2] = {{out, rows * cols * sizeof(float), RILL_WRITE},
                          {in, rows * cols * sizeof(float), RILL_READ}};
    rill_launch l = {.grid = grid_for(rows * cols),
                     .block = {BLOCK_THREADS, 1, 1},
                     .args = &args,
                     .args_size = sizeof args,
                     .accesses = acc,
                     .num_accesses = 2};
    ck(rill_launch_kernel(s, transpose_kernel, &l), "transpose");
}

/* --------------------------------------------------------------- model */

/* One replica of the model with its activations for a batch of `batch`
 * rows. Layer l maps dim[l] features to dim[l + 1]. */
typedef struct mlp {
    size_t dim[LAYERS + 1];
    size_t batch;
    float *w[LAYERS];  /* [dim[l], dim[l + 1]] */
    float *dw[LAYERS]; /* the gradients, same shapes, in grads */
    float *grads;      /* every gradient, last layer first (backward order) */
    /* the buckets: bucket_end[l] when layer l's backward closes a bucket
     * that starts at bucket_begin[l] (a layer with a higher index), else
     * NULL; bucket_of[l]: the layer whose event says l's bucket is reduced */
    float *bucket_begin[LAYERS], *bucket_end[LAYERS];
    int bucket_of[LAYERS];
    float *z[LAYERS]; /* pre-activations [batch, dim[l + 1]]; z[LAYERS - 1] is y */
    float *a[LAYERS]; /* relu(z[l]) for l < LAYERS - 1: the next layer's input */
    float *dz, *da;   /* scratch gradients [batch, max dim] */
    float *xt;        /* scratch transposed input [max dim, batch] */
    float *wt;        /* scratch transposed weights [max dim, max dim] */
    rill_event *grad_ready[LAYERS], *reduced[LAYERS];
} mlp;

static size_t max_dim(const mlp *m) {
    size_t d = 0;
    for (int l = 0; l <= LAYERS; l++)
        d = m->dim[l] > d ? m->dim[l] : d;
    return d;
}

static float *dev_alloc(size_t floats) {
    void *p = NULL;
    ck(rill_malloc(NULL, floats * sizeof(float), &p), "rill_malloc");
    return p;
}

/* Lays the gradients out in backward order and cuts them into buckets of
 * at least bucket_bytes. */
static void mlp_buckets(mlp *m, size_t bucket_bytes) {
    size_t total = 0;
    for (int l = 0; l < LAYERS; l++)
        total += m->dim[l] * m->dim[l + 1];
    m->grads = dev_alloc(total);
    size_t at = 0, open = 0;
    float *begin = m->grads;
    int members[LAYERS], n = 0;
    for (int l = LAYERS - 1; l >= 0; l--) {
        size_t k = m->dim[l] * m->dim[l + 1];
        m->dw[l] = m->grads + at;
        at += k;
        open += k * sizeof(float);
        members[n++] = l;
        if (open >= bucket_bytes || l == 0) {
            m->bucket_begin[l] = begin;
            m->bucket_end[l] = m->grads + at;
            for (int i = 0; i < n; i++)
                m->bucket_of[members[i]] = l;
            begin = m->grads + at;
            open = 0;
            n = 0;
        }
    }
}

static void mlp_create(mlp *m, const size_t dim[LAYERS + 1], size_t batch, size_t bucket_bytes) {
    memset(m, 0, sizeof *m);
    memcpy(m->dim, dim, sizeof m->dim);
    m->batch = batch;
    size_t d = max_dim(m);
    mlp_buckets(m, bucket_bytes);
    for (int l = 0; l < LAYERS; l++) {
        m->w[l] = dev_alloc(dim[l] * dim[l + 1]);
        m->z[l] = dev_alloc(batch * dim[l + 1]);
        if (l < LAYERS - 1)
            m->a[l] = dev_alloc(batch * dim[l + 1]);
        ck(rill_event_create(RILL_EVENT_DEFAULT, &m->grad_ready[l]), "rill_event_create");
        ck(rill_event_create(RILL_EVENT_DEFAULT, &m->reduced[l]), "rill_event_create");
    }
    m->dz = dev_alloc(batch * d);
    m->da = dev_alloc(batch * d);
    m->xt = dev_alloc(batch * d);
    m->wt = dev_alloc(d * d);
}

static void mlp_destroy(mlp *m) {
    for (int l = 0; l < LAYERS; l++) {
        rill_free(m->w[l]);
        rill_free(m->z[l]);
        rill_free(m->a[l]);
        rill_event_destroy(m->grad_ready[l]);
        rill_event_destroy(m->reduced[l]);
    }
    rill_free(m->grads);
    rill_free(m->dz);
    rill_free(m->da);
    rill_free(m->xt);
    rill_free(m->wt);
}

/* The first weights: normal, scaled by 1/sqrt(fan in), one seed per layer. */
static void mlp_init(mlp *m, rill_stream *s) {
    for (int l = 0; l < LAYERS; l++)
        ck(rill_op_randn_f32(s, m->w[l], m->dim[l] * m->dim[l + 1], 0.0f,
                             1.0f / sqrtf((float)m->dim[l]), 1000 + (uint64_t)l),
           "rill_op_randn_f32");
}

/* One SGD step on x [batch, dim[0]] and targets t [batch, dim[LAYERS]].
 * The forward, the backward and the update run on cs. With comm, each
 * bucket of gradients is averaged over the ranks on ms (which may be cs:
 * everything on one stream) as soon as the backward has made its last
 * layer's, and the update of a layer waits for its bucket's average. The step is LEARNING_RATE /
 * batch times the gradient of the loss summed over the local rows: averaged
 * over the ranks, that is LEARNING_RATE times the gradient of the mean over
 * the whole batch, as the one process on the whole batch computes it. */
static void mlp_step(mlp *m, rill_stream *cs, rill_stream *ms, rill_comm *comm, const float *x,
                     const float *t) {
    size_t b = m->batch;
    /* forward */
    const float *in = x;
    for (int l = 0; l < LAYERS; l++) {
        ck(rill_op_matmul_f32(cs, m->z[l], in, m->w[l], b, m->dim[l], m->dim[l + 1]), "matmul");
        if (l < LAYERS - 1) {
            relu(cs, m->a[l], m->z[l], NULL, b * m->dim[l + 1]);
            in = m->a[l];
        }
    }
    /* d loss / d y, up to the factor 1/batch that the step applies */
    ck(rill_op_add_f32(cs, m->dz, m->z[LAYERS - 1], t, -1.0f, b * m->dim[LAYERS]), "add");
    /* backward, last layer first */
    for (int l = LAYERS - 1; l >= 0; l--) {
        const float *layer_in = l > 0 ? m->a[l - 1] : x;
        size_t din = m->dim[l], dout = m->dim[l + 1];
        transpose(cs, m->xt, layer_in, b, din);
        ck(rill_op_matmul_f32(cs, m->dw[l], m->xt, m->dz, din, b, dout), "matmul");
        if (comm != NULL && m->bucket_end[l] != NULL) {
            if (ms != cs) {
                ck(rill_event_record(m->grad_ready[l], cs), "rill_event_record");
                ck(rill_stream_wait_event(ms, m->grad_ready[l]), "rill_stream_wait_event");
            }
            float *bucket = m->bucket_begin[l];
            ck(rill_allreduce_f32(ms, comm, bucket, bucket, (size_t)(m->bucket_end[l] - bucket),
                                  RILL_REDUCE_AVG),
               "rill_allreduce_f32");
            if (ms != cs)
                ck(rill_event_record(m->reduced[l], ms), "rill_event_record");
        }
        if (l > 0) {
            transpose(cs, m->wt, m->w[l], din, dout);
            ck(rill_op_matmul_f32(cs, m->da, m->dz, m->wt, b, dout, din), "matmul");
            relu(cs, m->dz, m->da, m->z[l - 1], b * din);
        }
    }
    /* the update: w -= lr / batch * dw, each layer once its average is in */
    for (int l = 0; l < LAYERS; l++) {
        if (comm != NULL && ms != cs && m->bucket_of[l] == l)
            ck(rill_stream_wait_event(cs, m->reduced[l]), "rill_stream_wait_event");
        ck(rill_op_add_f32(cs, m->w[l], m->w[l], m->dw[l], -LEARNING_RATE / (float)b,
                           m->dim[l] * m->dim[l + 1]),
           "add");
    }
}

/* All weights of m, layer after layer, copied to host (n floats). */
static float *mlp_read(const mlp *m, size_t *n) {
    size_t total = 0;
    for (int l = 0; l < LAYERS; l++)
        total += m->dim[l] * m->dim[l + 1];
    float *h = malloc(total * sizeof(float));
    if (h == NULL)
        return NULL;
    size_t at = 0;
    for (int l = 0; l < LAYERS; l++) {
        size_t k = m->dim[l] * m->dim[l + 1];
        ck(rill_memcpy(h + at, m->w[l], k * sizeof(float)), "rill_memcpy");
        at += k;
    }
    *n = total;
    return h;
}

/* ----------------------------------------------------------------- main */

typedef struct options {
    int steps, repeats;
    size_t batch, hidden, bucket_kb;
    const char *device; /* "cpu", "cuda", or NULL: rill's current device */
} options;

static bool parse(int argc, char **argv, options *o) {
    *o = (options){.steps = 5, .repeats = 3, .batch = 64, .hidden = 256, .bucket_kb = 256};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc &&
            (strcmp(argv[i + 1], "cpu") == 0 || strcmp(argv[i + 1], "cuda") == 0)) {
            o->device = argv[++i];
            continue;
        }
        long v = i + 1 < argc ? strtol(argv[i + 1], NULL, 10) : 0;
        if (v <= 0) {
            fprintf(stderr, "usage: ddp_train [--steps N] [--batch B] [--hidden H] [--repeats R] "
                            "[--bucket-kb K] [--device cpu|cuda]\n");
            return false;
        }
        if (strcmp(argv[i], "--steps") == 0)
            o->steps = (int)v;
        else if (strcmp(argv[i], "--repeats") == 0)
            o->repeats = (int)v;
        else if (strcmp(argv[i], "--batch") == 0)
            o->batch = (size_t)v;
        else if (strcmp(argv[i], "--hidden") == 0)
            o->hidden = (size_t)v;
        else if (strcmp(argv[i], "--bucket-kb") == 0)
            o->bucket_kb = (size_t)v;
        else {
            fprintf(stderr, "ddp_train: unknown option %s\n", argv[i]);
            return false;
        }
        i++;
    }
    return true;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Trains the replica `steps` steps from the first weights and returns the
 * mean step time of the slowest rank, in seconds (negative on failure).
 * graph: the step is captured once (before the clock starts: capturing
 * runs nothing) and replayed. */
static double train(mlp *m, rill_stream *cs, rill_stream *ms, rill_comm *comm, const float *x,
                    const float *t, int steps, bool graph) {
    mlp_init(m, cs);
    ck(rill_stream_synchronize(cs), "rill_stream_synchronize");
    rill_graph *g = NULL;
    rill_graph_exec *exec = NULL;
    if (graph) {
        ck(rill_stream_begin_capture(cs, RILL_CAPTURE_THREAD_LOCAL), "rill_stream_begin_capture");
        mlp_step(m, cs, ms, comm, x, t);
        ck(rill_stream_end_capture(cs, &g), "rill_stream_end_capture");
        ck(rill_graph_instantiate(g, &exec), "rill_graph_instantiate");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < steps && first_error == RILL_OK; i++) {
        if (graph)
            ck(rill_graph_launch(exec, cs), "rill_graph_launch");
        else
            mlp_step(m, cs, ms, comm, x, t);
    }
    ck(rill_stream_synchronize(cs), "rill_stream_synchronize");
    double mine = (MPI_Wtime() - t0) / steps, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (exec != NULL)
        ck(rill_graph_exec_destroy(exec), "rill_graph_exec_destroy");
    if (g != NULL)
        ck(rill_graph_destroy(g), "rill_graph_destroy");
    return first_error == RILL_OK ? slowest : -1.0;
}

/* Checks the replica's weights: the same on every rank (gathered with
 * rill_allgather and compared bit for bit) and, on rank 0, within
 * TOLERANCE of ref's relative to each layer's largest weight. Returns
 * whether both hold on every rank; *diff gets the largest relative
 * difference (rank 0). */
static bool check(const mlp *m, const float *ref, rill_stream *ms, rill_comm *comm, int size,
                  double *diff) {
    size_t n = 0;
    float *mine = mlp_read(m, &n);
    float *dev = dev_alloc(n), *all_dev = dev_alloc(n * (size_t)size);
    float *all = malloc(n * (size_t)size * sizeof(float));
    int ok = mine != NULL && all != NULL;
    if (ok) {
        ck(rill_memcpy(dev, mine, n * sizeof(float)), "rill_memcpy");
        ck(rill_allgather(ms, comm, all_dev, dev, n * sizeof(float)), "rill_allgather");
        ck(rill_stream_synchronize(ms), "rill_stream_synchronize");
        ck(rill_memcpy(all, all_dev, n * (size_t)size * sizeof(float)), "rill_memcpy");
        ok = first_error == RILL_OK;
    }
    for (int r = 0; ok && r < size; r++) {
        if (memcmp(all + (size_t)r * n, mine, n * sizeof(float)) != 0) {
            fprintf(stderr, "ddp_train: rank %d holds other weights than rank %d\n", r, my_rank);
            ok = 0;
        }
    }
    *diff = 0;
    if (ok && ref != NULL) {
        size_t at = 0;
        for (int l = 0; l < LAYERS; l++) {
            size_t k = m->dim[l] * m->dim[l + 1];
            double largest = 0, worst = 0;
            for (size_t i = at; i < at + k; i++) {
                largest = fmax(largest, fabs((double)ref[i]));
                worst = fmax(worst, fabs((double)mine[i] - (double)ref[i]));
            }
            double rel = largest > 0 ? worst / largest : worst;
            *diff = fmax(*diff, rel);
            at += k;
        }
        if (!(*diff <= TOLERANCE)) {
            fprintf(stderr,
                    "ddp_train: the weights differ from one process on the whole batch by %.3g "
                    "(relative), more than %g\n",
                    *diff, TOLERANCE);
            ok = 0;
        }
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    free(all);
    free(mine);
    rill_free(all_dev);
    rill_free(dev);
    return all_ok != 0;
}

int main(int argc, char **argv) {
    int provided = 0, size = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    options o;
    if (!parse(argc, argv, &o)) {
        MPI_Finalize();
        return 2;
    }
    if (o.device != NULL) {
        /* The first device of the kind; every rank on it (two ranks may
         * share one GPU). None: exit 77, which the tests take as skipped. */
        rill_device_kind kind = strcmp(o.device, "cuda") == 0 ? RILL_DEVICE_CUDA : RILL_DEVICE_CPU;
        char why[256] = "";
        int count = 0;
        rill_device *dev = NULL;
        ck(rill_device_count_of_kind(kind, &count, why, sizeof why), "rill_device_count_of_kind");
        if (count == 0) {
            if (my_rank == 0)
                printf("ddp_train: skipped: no %s device: %s\n", o.device, why);
            MPI_Finalize();
            return 77;
        }
        ck(rill_device_get_by_kind(kind, 0, &dev), "rill_device_get_by_kind");
        ck(rill_set_device(dev), "rill_set_device");
    }
    if (o.batch % (size_t)size != 0) {
        if (my_rank == 0)
            fprintf(stderr, "ddp_train: --batch %zu is not a multiple of the %d ranks\n", o.batch,
                    size);
        MPI_Finalize();
        return 2;
    }
    const size_t dim[LAYERS + 1] = {64, o.hidden, o.hidden, 16};
    size_t local = o.batch / (size_t)size;

    rill_comm *comm = NULL;
    rill_stream *cs = NULL, *ms = NULL;
    const char *ptx = ddp_train_kernels_ptx();
    rill_kernel_desc relu_desc = {"relu", relu_host, ptx, ptx != NULL ? "relu" : NULL};
    rill_kernel_desc transpose_desc = {"transpose", transpose_host, ptx,
                                       ptx != NULL ? "transpose" : NULL};
    ck(rill_comm_create_mpi(MPI_COMM_WORLD, &comm), "rill_comm_create_mpi");
    ck(rill_stream_create(NULL, 0, &cs), "rill_stream_create");
    ck(rill_stream_create(NULL, 0, &ms), "rill_stream_create");
    ck(rill_kernel_create(&relu_desc, &relu_kernel), "rill_kernel_create");
    ck(rill_kernel_create(&transpose_desc, &transpose_kernel), "rill_kernel_create");
    if (first_error != RILL_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
    ck(rill_stream_set_name(cs, "compute"), "rill_stream_set_name");
    ck(rill_stream_set_name(ms, "communication"), "rill_stream_set_name");
    /* A graph holds collectives that MPI runs on the device's memory: on a
     * CUDA device, those of a CUDA-aware MPI only (others are staged
     * through host memory, which a capture cannot hold). */
    rill_device *dev = NULL;
    rill_device_info info = {0};
    int aware = 0;
    ck(rill_stream_get_device(cs, &dev), "rill_stream_get_device");
    ck(rill_device_get_info(dev, &info), "rill_device_get_info");
    ck(rill_comm_cuda_aware(comm, &aware), "rill_comm_cuda_aware");
    bool capture = info.kind == RILL_DEVICE_CPU || aware;

    /* The whole batch on every rank (the same seeds); each trains on its
     * rows, rank r on rows [r * local, (r + 1) * local). */
    float *x = dev_alloc(o.batch * dim[0]), *t = dev_alloc(o.batch * dim[LAYERS]);
    ck(rill_op_randn_f32(cs, x, o.batch * dim[0], 0.0f, 1.0f, 1), "rill_op_randn_f32");
    ck(rill_op_randn_f32(cs, t, o.batch * dim[LAYERS], 0.0f, 1.0f, 2), "rill_op_randn_f32");
    const float *my_x = x + (size_t)my_rank * local * dim[0];
    const float *my_t = t + (size_t)my_rank * local * dim[LAYERS];

    /* The reference: one process, the whole batch, no communication. */
    float *ref = NULL;
    if (my_rank == 0 && first_error == RILL_OK) {
        mlp whole;
        size_t n = 0;
        mlp_create(&whole, dim, o.batch, o.bucket_kb * 1024);
        if (first_error == RILL_OK) {
            mlp_init(&whole, cs);
            for (int i = 0; i < o.steps; i++)
                mlp_step(&whole, cs, cs, NULL, x, t);
            ck(rill_stream_synchronize(cs), "rill_stream_synchronize");
            ref = mlp_read(&whole, &n);
        }
        mlp_destroy(&whole);
    }

    mlp m;
    mlp_create(&m, dim, local, o.bucket_kb * 1024);
    double overlap[64], single[64], graphed[64] = {0}, diff = 0;
    int repeats = o.repeats < 64 ? o.repeats : 64;
    int ready = first_error == RILL_OK && (my_rank != 0 || ref != NULL), all_ready = 0;
    MPI_Allreduce(&ready, &all_ready, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    bool ok = all_ready != 0;
    /* Alternated, so that both see the same machine; each run starts
     * from the first weights and is checked. */
    for (int r = 0; ok && r < repeats; r++) {
        double d = 0;
        overlap[r] = train(&m, cs, ms, comm, my_x, my_t, o.steps, false);
        ok = overlap[r] >= 0 && check(&m, ref, ms, comm, size, &d);
        diff = fmax(diff, d);
        single[r] = ok ? train(&m, cs, cs, comm, my_x, my_t, o.steps, false) : -1;
        ok = ok && single[r] >= 0 && check(&m, ref, ms, comm, size, &d);
        diff = fmax(diff, d);
        if (!capture)
            continue;
        graphed[r] = ok ? train(&m, cs, ms, comm, my_x, my_t, o.steps, true) : -1;
        ok = ok && graphed[r] >= 0 && check(&m, ref, ms, comm, size, &d);
        diff = fmax(diff, d);
    }
    if (ok && my_rank == 0) {
        qsort(overlap, (size_t)repeats, sizeof overlap[0], compare_doubles);
        qsort(single, (size_t)repeats, sizeof single[0], compare_doubles);
        if (capture)
            qsort(graphed, (size_t)repeats, sizeof graphed[0], compare_doubles);
        double to = overlap[repeats / 2] * 1e3, ts = single[repeats / 2] * 1e3;
        double tg = graphed[repeats / 2] * 1e3;
        int buckets = 0;
        for (int l = 0; l < LAYERS; l++)
            buckets += m.bucket_end[l] != NULL;
        printf("ddp_train: %d ranks on %s, MLP %zu-%zu-%zu-%zu, batch %zu (%zu per rank), %d "
               "steps, %d gradient buckets (--bucket-kb %zu), median of %d\n",
               size, info.name, dim[0], dim[1], dim[2], dim[3], o.batch, local, o.steps, buckets,
               o.bucket_kb, repeats);
        printf("step time, compute and communication streams: %.3f ms\n", to);
        printf("step time, everything on one stream:          %.3f ms\n", ts);
        if (capture) {
            printf("step time, two streams captured in a graph:   %.3f ms\n", tg);
            printf("two streams / one stream: %.2f; graph / two streams: %.2f\n", to / ts, tg / to);
        } else {
            printf("step time, two streams captured in a graph:   skipped: MPI is not CUDA-aware, "
                   "and collectives staged through host memory cannot be captured\n");
            printf("two streams / one stream: %.2f\n", to / ts);
        }
        printf("weights: the same on all %d ranks, and within %.2g (<= %g relative) of one "
               "process on the whole batch\n",
               size, diff, TOLERANCE);
    } else if (!ok && my_rank == 0) {
        printf("ddp_train: FAILED\n");
    }

    free(ref);
    mlp_destroy(&m);
    rill_free(x);
    rill_free(t);
    rill_kernel_destroy(relu_kernel);
    rill_kernel_destroy(transpose_kernel);
    rill_stream_destroy(ms);
    rill_stream_destroy(cs);
    ck(rill_comm_destroy(comm), "rill_comm_destroy");
    ck(rill_shutdown(), "rill_shutdown");
    MPI_Finalize();
    return ok && first_error == RILL_OK ? 0 : 1;
}
