# SPDX-License-Identifier: MIT
"""The C declarations of rill.h that the package uses, for cffi: in ABI
mode (rill._ffi, at import) and compiled in API mode (build_cffi.py, at
build time). tests/test_cdef.py compiles them against include/rill.h, so a
change of the header that they miss fails the tests."""

# Types: enums and structs, whose values and layouts tests/test_cdef.py checks.
TYPES = """
typedef enum rill_status {
    RILL_OK = 0,
    RILL_NOT_READY,
    RILL_ERROR_INVALID_ARGUMENT,
    RILL_ERROR_OUT_OF_MEMORY,
    RILL_ERROR_NO_DEVICE,
    RILL_ERROR_DEVICE_MISMATCH,
    RILL_ERROR_NOT_SUPPORTED,
    RILL_ERROR_NOT_PERMITTED,
    RILL_ERROR_TIMING_DISABLED,
    RILL_ERROR_NOT_RECORDED,
    RILL_ERROR_KERNEL_FAILED,
    RILL_ERROR_CAPTURE_UNSUPPORTED,
    RILL_ERROR_CAPTURE_INVALIDATED,
    RILL_ERROR_CAPTURE_UNJOINED,
    RILL_ERROR_CAPTURE_UNMATCHED,
    RILL_ERROR_CAPTURE_ISOLATION,
    RILL_ERROR_CAPTURE_WRONG_THREAD,
    RILL_ERROR_IPC,
    RILL_ERROR_INTERNAL,
    RILL_ERROR_DEVICE_LOST
} rill_status;

typedef enum rill_device_kind {
    RILL_DEVICE_CPU = 1,
    RILL_DEVICE_CUDA = 2
} rill_device_kind;

typedef struct rill_device_info {
    rill_device_kind kind;
    int ordinal;
    char name[128];
    int compute_units;
    size_t memory_bytes;
    int least_priority;
    int greatest_priority;
} rill_device_info;

enum rill_event_flags {
    RILL_EVENT_DEFAULT = 0,
    RILL_EVENT_TIMING = 1,
    RILL_EVENT_BLOCKING_SYNC = 2,
    RILL_EVENT_INTERPROCESS = 4
};

typedef enum rill_capture_mode {
    RILL_CAPTURE_GLOBAL = 0,
    RILL_CAPTURE_THREAD_LOCAL = 1,
    RILL_CAPTURE_RELAXED = 2
} rill_capture_mode;

typedef enum rill_capture_status {
    RILL_CAPTURE_NONE = 0,
    RILL_CAPTURE_ACTIVE = 1,
    RILL_CAPTURE_INVALIDATED = 2
} rill_capture_status;

typedef struct rill_ipc_event_handle { unsigned char bytes[64]; } rill_ipc_event_handle;

typedef struct rill_mem_stats {
    size_t allocated_bytes;
    size_t reserved_bytes;
    size_t peak_allocated_bytes;
    size_t peak_reserved_bytes;
    uint64_t allocations;
    uint64_t frees;
    uint64_t cache_hits;
    uint64_t deferred_frees;
    uint64_t oom_recoveries;
    uint64_t pending_reuses;
    size_t limit_bytes;
} rill_mem_stats;

typedef enum rill_mem_pool {
    RILL_MEM_POOL_SMALL = 0,
    RILL_MEM_POOL_LARGE = 1
} rill_mem_pool;

typedef struct rill_mem_pool_stats {
    size_t segments;
    size_t reserved_bytes;
    size_t allocated_bytes;
    size_t live_blocks;
    size_t free_blocks;
    size_t largest_free_bytes;
    size_t pending_free_blocks;
} rill_mem_pool_stats;
typedef enum rill_binary_op {
    RILL_BINARY_ADD, RILL_BINARY_SUB, RILL_BINARY_MUL, RILL_BINARY_DIV, RILL_BINARY_MAX,
    RILL_BINARY_MIN, RILL_BINARY_POW, RILL_BINARY_RELU_BACKWARD, RILL_BINARY_GELU_BACKWARD,
    RILL_BINARY_GELU_TANH_BACKWARD
} rill_binary_op;
typedef enum rill_map_op {
    RILL_MAP_NEG, RILL_MAP_SCALE, RILL_MAP_DIV, RILL_MAP_RDIV, RILL_MAP_RSUB, RILL_MAP_POW,
    RILL_MAP_MAX, RILL_MAP_MIN, RILL_MAP_RELU, RILL_MAP_LEAKY_RELU, RILL_MAP_GELU,
    RILL_MAP_GELU_TANH, RILL_MAP_SIGMOID, RILL_MAP_TANH, RILL_MAP_SILU, RILL_MAP_EXP,
    RILL_MAP_LOG, RILL_MAP_SQRT, RILL_MAP_ABS
} rill_map_op;
typedef enum rill_reduce_dim_op {
    RILL_REDUCE_DIM_SUM, RILL_REDUCE_DIM_MEAN, RILL_REDUCE_DIM_MAX, RILL_REDUCE_DIM_MIN
} rill_reduce_dim_op;
typedef enum rill_pool_op { RILL_POOL_MAX, RILL_POOL_AVG } rill_pool_op;
"""

# Opaque handles and functions: tests/test_cdef.py declares them again after
# rill.h, which a C compiler refuses unless they agree.
FUNCS = """
typedef struct rill_device rill_device;
typedef struct rill_stream rill_stream;
typedef struct rill_event rill_event;
typedef void (*rill_host_fn)(void *user_data);
typedef void (*rill_stream_callback)(rill_stream *stream, rill_status status, void *user_data);

const char *rill_status_name(rill_status status);
const char *rill_status_string(rill_status status);
const char *rill_last_error(void);
rill_status rill_shutdown(void);

rill_status rill_device_count(int *count);
rill_status rill_device_count_of_kind(rill_device_kind kind, int *count, char *why, size_t size);
rill_status rill_device_get(int ordinal, rill_device **out);
rill_status rill_device_get_by_kind(rill_device_kind kind, int index, rill_device **out);
rill_status rill_device_get_info(rill_device *dev, rill_device_info *out);
rill_status rill_set_device(rill_device *dev);
rill_status rill_get_device(rill_device **out);
rill_status rill_device_synchronize(rill_device *dev);
rill_status rill_device_synchronize_for(rill_device *dev, uint64_t timeout_ns);

rill_status rill_stream_create(rill_device *dev, int priority, rill_stream **out);
rill_status rill_stream_destroy(rill_stream *stream);
rill_status rill_stream_set_name(rill_stream *stream, const char *name);
rill_status rill_stream_get_priority(rill_stream *stream, int *priority);
rill_status rill_stream_get_device(rill_stream *stream, rill_device **out);
rill_status rill_stream_native(rill_stream *stream, void **out);
rill_stream *rill_default_stream(rill_device *dev);
rill_stream *rill_current_stream(rill_device *dev);
rill_stream *rill_set_current_stream(rill_stream *stream);
rill_status rill_stream_query(rill_stream *stream);
rill_status rill_stream_synchronize(rill_stream *stream);
rill_status rill_stream_synchronize_for(rill_stream *stream, uint64_t timeout_ns);
rill_status rill_set_queue_limit(size_t commands, size_t bytes);
rill_status rill_get_queue_limit(rill_device *dev, size_t *commands, size_t *bytes);
rill_status rill_stream_make_room_for(rill_stream *stream, uint64_t timeout_ns);
rill_status rill_stream_wait_event(rill_stream *stream, rill_event *event);
rill_status rill_stream_wait_stream(rill_stream *stream, rill_stream *other);
rill_status rill_stream_clear_error(rill_stream *stream);
rill_status rill_stream_get_tagged(rill_device *dev, const char *tag, int priority,
                                   rill_stream **out);

rill_status rill_event_create(unsigned flags, rill_event **out);
rill_status rill_event_destroy(rill_event *event);
rill_status rill_event_record(rill_event *event, rill_stream *stream);
rill_status rill_event_query(rill_event *event);
rill_status rill_event_synchronize(rill_event *event);
rill_status rill_event_synchronize_for(rill_event *event, uint64_t timeout_ns);
rill_status rill_event_elapsed_ms(rill_event *start, rill_event *end, float *ms);
rill_status rill_event_get_tagged(const char *tag, rill_event **out);
rill_status rill_event_get_device(rill_event *event, rill_device **out);
rill_status rill_event_native(rill_event *event, void **out);
rill_status rill_event_ipc_handle(rill_event *event, rill_ipc_event_handle *out);
rill_status rill_event_open_ipc_handle(const rill_ipc_event_handle *handle, rill_event **out);

rill_status rill_launch_host_func(rill_stream *stream, rill_host_fn fn, void *user_data);
rill_status rill_host_func_fail(const char *message);
rill_status rill_stream_add_callback(rill_stream *stream, rill_stream_callback fn, void *user_data);

rill_status rill_op_fill_f32(rill_stream *s, float *x, float value, size_t n);
rill_status rill_op_add_f32(rill_stream *s, float *out, const float *a, const float *b,
                            float alpha, size_t n);
rill_status rill_op_mul_f32(rill_stream *s, float *out, const float *a, const float *b, size_t n);
rill_status rill_op_add_scalar_f32(rill_stream *s, float *out, const float *a, float value,
                                   size_t n);
rill_status rill_op_add_f32_new(rill_stream *s, const float *a, const float *b, float alpha,
                                size_t n, rill_event *event, float **out);
rill_status rill_op_mul_f32_new(rill_stream *s, const float *a, const float *b, size_t n,
                                rill_event *event, float **out);
rill_status rill_op_add_scalar_f32_new(rill_stream *s, const float *a, float value, size_t n,
                                       rill_event *event, float **out);
rill_status rill_op_sum_f32(rill_stream *s, float *out, const float *a, size_t n);
rill_status rill_op_matmul_f32(rill_stream *s, float *c, const float *a, const float *b,
                               size_t m, size_t k, size_t n);
rill_status rill_op_conv2d_f32(rill_stream *s, float *out, const float *in, const float *weight,
                               size_t n, size_t c, size_t h, size_t w,
                               size_t k, size_t r, size_t sz);

rill_status rill_op_randn_f32(rill_stream *s, float *x, size_t n, float mean, float std,
                              uint64_t seed);
typedef uint16_t rill_half;
rill_status rill_op_cast_f32_f16(rill_stream *s, rill_half *out, const float *in, size_t n);
rill_status rill_op_cast_f16_f32(rill_stream *s, float *out, const rill_half *in, size_t n);
rill_status rill_op_fill_f16(rill_stream *s, rill_half *x, float value, size_t n);
rill_status rill_op_add_f16(rill_stream *s, rill_half *out, const rill_half *a, const rill_half *b,
                            float alpha, size_t n);
rill_status rill_op_mul_f16(rill_stream *s, rill_half *out, const rill_half *a, const rill_half *b,
                            size_t n);
rill_status rill_op_add_scalar_f16(rill_stream *s, rill_half *out, const rill_half *a, float value,
                                   size_t n);
rill_status rill_op_sum_f16(rill_stream *s, rill_half *out, const rill_half *a, size_t n);
rill_status rill_op_matmul_f16(rill_stream *s, rill_half *c, const rill_half *a, const rill_half *b,
                               size_t m, size_t k, size_t n);
rill_status rill_op_conv2d_f16(rill_stream *s, rill_half *out, const rill_half *in,
                               const rill_half *weight, size_t n, size_t c, size_t h, size_t w,
                               size_t k, size_t r, size_t sz);
rill_status rill_op_copy_strided_f32(rill_stream *s, float *out, const size_t *out_strides,
                                     const float *in, const size_t *in_strides,
                                     const size_t *shape, size_t ndim);
rill_status rill_op_binary_f32(rill_stream *s, rill_binary_op op, float *out, const float *a,
                               const size_t *a_strides, const float *b, const size_t *b_strides,
                               const size_t *shape, size_t ndim);
rill_status rill_op_map_f32(rill_stream *s, rill_map_op op, float *out, const float *a,
                            float alpha, size_t n);
rill_status rill_op_map_f32_new(rill_stream *s, rill_map_op op, const float *a, float alpha,
                                size_t n, rill_event *event, float **out);
rill_status rill_op_reduce_dim_f32(rill_stream *s, rill_reduce_dim_op op, float *out,
                                   int64_t *indices, const float *a, size_t outer, size_t dim,
                                   size_t inner);
rill_status rill_op_softmax_f32(rill_stream *s, float *out, const float *a, size_t outer,
                                size_t dim, size_t inner);
rill_status rill_op_log_softmax_f32(rill_stream *s, float *out, const float *a, size_t outer,
                                    size_t dim, size_t inner);
rill_status rill_op_conv2d_ex_f32(rill_stream *s, float *out, const float *in,
                                  const float *weight, size_t n, size_t c, size_t h, size_t w,
                                  size_t k, size_t r, size_t sz, size_t stride_h, size_t stride_w,
                                  size_t pad_h, size_t pad_w);
rill_status rill_op_pool2d_f32(rill_stream *s, rill_pool_op op, float *out, const float *in,
                               size_t planes, size_t h, size_t w, size_t r, size_t sz,
                               size_t stride_h, size_t stride_w, size_t pad_h, size_t pad_w);
rill_status rill_memcpy_async(void *dst, const void *src, size_t bytes, rill_stream *stream);
typedef struct rill_graph rill_graph;
typedef struct rill_graph_exec rill_graph_exec;
rill_status rill_stream_begin_capture(rill_stream *stream, rill_capture_mode mode);
rill_status rill_stream_end_capture(rill_stream *stream, rill_graph **out);
rill_status rill_stream_get_capture_status(rill_stream *stream, rill_capture_status *out);
rill_status rill_thread_exchange_capture_mode(rill_capture_mode *mode);
rill_status rill_graph_destroy(rill_graph *graph);
rill_status rill_graph_node_count(rill_graph *graph, size_t *out);
rill_status rill_graph_instantiate(rill_graph *graph, rill_graph_exec **out);
rill_status rill_graph_exec_destroy(rill_graph_exec *exec);
rill_status rill_graph_launch(rill_graph_exec *exec, rill_stream *stream);
rill_status rill_malloc(rill_device *dev, size_t bytes, void **out);
rill_status rill_free(void *ptr);
rill_status rill_malloc_async(size_t bytes, rill_stream *stream, void **out);
rill_status rill_free_async(void *ptr, rill_stream *stream);
rill_status rill_record_stream(void *ptr, rill_stream *stream);
rill_status rill_memcpy(void *dst, const void *src, size_t bytes);

rill_status rill_mem_get_stats(rill_device *dev, rill_mem_stats *out);
rill_status rill_mem_get_pool_stats(rill_device *dev, rill_mem_pool pool, rill_mem_pool_stats *out);
rill_status rill_mem_reset_peak_stats(rill_device *dev);
rill_status rill_mem_empty_cache(rill_device *dev);
rill_status rill_mem_set_limit(rill_device *dev, size_t max_reserved_bytes);
rill_status rill_mem_get_limit(rill_device *dev, size_t *max_reserved_bytes);
rill_status rill_mem_summary(rill_device *dev, FILE *out);
"""

# What rill_mem_summary writes into: a memory stream of the C library.
LIBC = """
FILE *open_memstream(char **ptr, size_t *sizeloc);
int fclose(FILE *stream);
void free(void *ptr);
"""

# DLPack's C structures (dlpack.h, version 0.8, the "dltensor" capsule that
# numpy.from_dlpack and torch.from_dlpack take), for Tensor.__dlpack__. Not
# part of rill.h: build_cffi.py compiles them as they are written here.
DLPACK = """
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
"""
