/* SPDX-License-Identifier: MIT */
/*
 * aclDataBuffer: an address and a size in bytes, nothing more. The memory
 * stays the caller's: a buffer neither allocates nor frees it, nor checks
 * where it lies. A buffer is a handle of this layer's table (handle.c), so
 * that a destroyed or foreign one is refused instead of being read.
 */
#include "data_buffer.h"

#include <stdint.h>
#include <stdlib.h>

#include "error.h"
#include "handle.h"

struct data_buffer {
    void *data;
    size_t size;
};

aclDataBuffer *aclCreateDataBuffer(void *data, size_t size) {
    if (!data && size != 0) {
        rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                       "aclCreateDataBuffer: data is NULL with size %zu; an empty buffer is "
                       "NULL with size 0",
                       size);
        return NULL;
    }
    struct data_buffer *b = malloc(sizeof *b);
    if (!b) {
        rill__acl_fail(ACL_ERROR_BAD_ALLOC, "aclCreateDataBuffer: out of host memory");
        return NULL;
    }
    *b = (struct data_buffer){data, size};
    aclDataBuffer *handle = rill__acl_handle_open(RILL_ACL_DATA_BUFFER, b);
    if (!handle) {
        free(b);
        rill__acl_fail(ACL_ERROR_BAD_ALLOC, "aclCreateDataBuffer: out of host memory for handles");
    }
    return handle;
}

aclError aclDestroyDataBuffer(const aclDataBuffer *dataBuffer) {
    struct data_buffer *b = rill__acl_handle_take(dataBuffer, RILL_ACL_DATA_BUFFER);
    if (!b) {
        rill__acl_handle_fail("aclDestroyDataBuffer", "dataBuffer", dataBuffer,
                              RILL_ACL_DATA_BUFFER);
        return ACL_ERROR_INVALID_PARAM;
    }
    free(b);
    return ACL_SUCCESS;
}

aclError aclUpdateDataBuffer(aclDataBuffer *dataBuffer, void *data, size_t size) {
    if (!data && size != 0)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclUpdateDataBuffer: data is NULL with size %zu; an empty "
                              "buffer is NULL with size 0",
                              size);
    rill__acl_handles_lock();
    struct data_buffer *b = rill__acl_handle_get_locked(dataBuffer, RILL_ACL_DATA_BUFFER);
    if (b)
        *b = (struct data_buffer){data, size};
    rill__acl_handles_unlock();
    if (!b) {
        rill__acl_handle_fail("aclUpdateDataBuffer", "dataBuffer", dataBuffer,
                              RILL_ACL_DATA_BUFFER);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

/* A copy of the buffer's fields, or false (with the sentence) for a NULL,
 * destroyed or foreign handle. */
static bool read_buffer(const char *call, const aclDataBuffer *dataBuffer,
                        struct data_buffer *out) {
    rill__acl_handles_lock();
    const struct data_buffer *b = rill__acl_handle_get_locked(dataBuffer, RILL_ACL_DATA_BUFFER);
    if (b)
        *out = *b;
    rill__acl_handles_unlock();
    if (!b)
        rill__acl_handle_fail(call, "dataBuffer", dataBuffer, RILL_ACL_DATA_BUFFER);
    return b != NULL;
}

void *aclGetDataBufferAddr(const aclDataBuffer *dataBuffer) {
    struct data_buffer b;
    return read_buffer("aclGetDataBufferAddr", dataBuffer, &b) ? b.data : NULL;
}

size_t aclGetDataBufferSizeV2(const aclDataBuffer *dataBuffer) {
    struct data_buffer b;
    return read_buffer("aclGetDataBufferSizeV2", dataBuffer, &b) ? b.size : 0;
}

uint32_t aclGetDataBufferSize(const aclDataBuffer *dataBuffer) {
    struct data_buffer b;
    if (!read_buffer("aclGetDataBufferSize", dataBuffer, &b))
        return 0;
    if (b.size > UINT32_MAX) {
        rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                       "aclGetDataBufferSize: the size %zu does not fit 32 bits; use "
                       "aclGetDataBufferSizeV2",
                       b.size);
        return 0;
    }
    return (uint32_t)b.size;
}
