/* SPDX-License-Identifier: MIT */
/*
 * acl/acl_base.h: the base types of Ascend ACL's C API as rill implements
 * them (librill_acl, docs/acl.md): error codes with ACL's own values, data
 * types, tensor formats, float16 and the recent-error message. Names and
 * values follow CANN's documentation so that ACL programs build unchanged.
 */
#ifndef RILL_ACL_ACL_BASE_H
#define RILL_ACL_ACL_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ACL_FUNC_VISIBILITY
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#endif

typedef int aclError;
typedef uint16_t aclFloat16;

/* ACL's codes. Codes 1xxxxx are the caller's mistakes found by ACL itself,
 * 107xxx and 207xxx/507xxx the runtime's (rill's) answers passed through. */
enum {
    ACL_SUCCESS = 0,
    ACL_ERROR_NONE = 0,

    ACL_ERROR_INVALID_PARAM = 100000,
    ACL_ERROR_UNINITIALIZE = 100001,
    ACL_ERROR_REPEAT_INITIALIZE = 100002,
    ACL_ERROR_INVALID_FILE = 100003,
    ACL_ERROR_REPEAT_FINALIZE = 100037,
    ACL_ERROR_BAD_ALLOC = 200000,
    ACL_ERROR_API_NOT_SUPPORT = 200001,
    ACL_ERROR_INVALID_DEVICE = 200002,
    ACL_ERROR_FEATURE_UNSUPPORTED = 200006,
    ACL_ERROR_INTERNAL_ERROR = 500000,
    ACL_ERROR_FAILURE = 500001,

    ACL_ERROR_RT_PARAM_INVALID = 107000,
    ACL_ERROR_RT_INVALID_DEVICEID = 107001,
    ACL_ERROR_RT_CONTEXT_NULL = 107002,
    ACL_ERROR_RT_STREAM_CONTEXT = 107003,
    ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID = 107006,
    ACL_ERROR_RT_STREAM_SUBSCRIBE = 107011,
    ACL_ERROR_RT_THREAD_SUBSCRIBE = 107012,
    ACL_ERROR_RT_STREAM_NO_CB_REG = 107015,
    ACL_ERROR_RT_INVALID_HANDLE = 107017,
    ACL_ERROR_RT_STREAM_UNJOINED = 107025,
    ACL_ERROR_RT_STREAM_NOT_CAPTURED = 107029,
    ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT = 107030,
    ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT = 107031,
    ACL_ERROR_STREAM_CAPTURE_CONFLICT = 107032,
    ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED = 107036,
    ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD = 107038,
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000,
    ACL_ERROR_RT_MEMORY_ALLOCATION = 207001,
    ACL_ERROR_RT_NO_DEVICE = 207004,
    ACL_ERROR_RT_NO_PERMISSION = 207006,
    ACL_ERROR_RT_INTERNAL_ERROR = 507000,
    ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006,
    ACL_ERROR_RT_REPORT_TIMEOUT = 507012,
    ACL_ERROR_RT_AICORE_EXCEPTION = 507015,
    ACL_ERROR_RT_IPC_ERROR = 507022,
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507046,
    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT = 507047,
    ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED = 507903
};

typedef enum {
    ACL_DT_UNDEFINED = -1,
    ACL_FLOAT = 0,
    ACL_FLOAT16 = 1,
    ACL_INT8 = 2,
    ACL_INT32 = 3,
    ACL_UINT8 = 4,
    ACL_INT16 = 6,
    ACL_UINT16 = 7,
    ACL_UINT32 = 8,
    ACL_INT64 = 9,
    ACL_UINT64 = 10,
    ACL_DOUBLE = 11,
    ACL_BOOL = 12,
    ACL_STRING = 13,
    ACL_COMPLEX64 = 16,
    ACL_COMPLEX128 = 17,
    ACL_BF16 = 27
} aclDataType;

typedef enum {
    ACL_FORMAT_UNDEFINED = -1,
    ACL_FORMAT_NCHW = 0,
    ACL_FORMAT_NHWC = 1,
    ACL_FORMAT_ND = 2,
    ACL_FORMAT_NC1HWC0 = 3,
    ACL_FORMAT_FRACTAL_Z = 4,
    ACL_FORMAT_NC1HWC0_C04 = 12,
    ACL_FORMAT_HWCN = 16,
    ACL_FORMAT_NDHWC = 27,
    ACL_FORMAT_FRACTAL_NZ = 29,
    ACL_FORMAT_NCDHW = 30,
    ACL_FORMAT_NDC1HWC0 = 32,
    ACL_FRACTAL_Z_3D = 33,
    ACL_FORMAT_NC = 35,
    ACL_FORMAT_NCL = 47
} aclFormat;

/* A data buffer: an address and a size in bytes that describe memory the
 * caller owns (on the device or the host); creating and destroying one
 * never allocates or frees that memory. A handle of this layer's table
 * (docs/acl.md): a destroyed one is refused. */
typedef struct aclDataBuffer aclDataBuffer;

/* A buffer of data and size (NULL and 0 make an empty one); NULL, with
 * aclGetRecentErrMsg's sentence, when data is NULL and size is not 0. */
ACL_FUNC_VISIBILITY aclDataBuffer *aclCreateDataBuffer(void *data, size_t size);
ACL_FUNC_VISIBILITY aclError aclDestroyDataBuffer(const aclDataBuffer *dataBuffer);
/* Points dataBuffer at other memory. */
ACL_FUNC_VISIBILITY aclError aclUpdateDataBuffer(aclDataBuffer *dataBuffer, void *data,
                                                 size_t size);
/* The buffer's address and size; NULL and 0 for NULL or a destroyed one.
 * aclGetDataBufferSize answers 0 for a size beyond 32 bits (use the V2). */
ACL_FUNC_VISIBILITY void *aclGetDataBufferAddr(const aclDataBuffer *dataBuffer);
ACL_FUNC_VISIBILITY size_t aclGetDataBufferSizeV2(const aclDataBuffer *dataBuffer);
ACL_FUNC_VISIBILITY uint32_t aclGetDataBufferSize(const aclDataBuffer *dataBuffer);

/* Takes the message of the calling thread's last failing ACL call: the
 * call's name, then what went wrong; for a failure that rill reported,
 * rill's own sentence (rill_last_error). A successful call leaves the
 * message; reading it clears it, as in CANN, so that the next read is NULL
 * until another call fails. NULL while there is none. The string stays
 * valid until the thread's next aclGetRecentErrMsg. */
ACL_FUNC_VISIBILITY const char *aclGetRecentErrMsg(void);

/* IEEE 754 binary16 conversions: to half rounds to nearest, ties to even. */
ACL_FUNC_VISIBILITY float aclFloat16ToFloat(aclFloat16 value);
ACL_FUNC_VISIBILITY aclFloat16 aclFloatToFloat16(float value);
/* Bytes of one element of dataType; 0 for ACL_DT_UNDEFINED, ACL_STRING and
 * values that are no data type. */
ACL_FUNC_VISIBILITY size_t aclDataTypeSize(aclDataType dataType);

#define ACL_PKG_VERSION_MAX_SIZE 128
/* The version of a software package. No CANN package is installed with
 * rill: the one package that answers is "runtime", which is librill_acl
 * itself, and its version is rill's ("0.1.0"; as a number
 * major * 1000000 + minor * 10000 + patch * 100, so that every CANN release
 * compares newer). Any other name: ACL_ERROR_INVALID_PARAM. versionStr
 * takes ACL_PKG_VERSION_MAX_SIZE bytes at most. */
ACL_FUNC_VISIBILITY aclError aclsysGetVersionStr(char *pkgName, char *versionStr);
ACL_FUNC_VISIBILITY aclError aclsysGetVersionNum(char *pkgName, int32_t *versionNum);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACL_BASE_H */
