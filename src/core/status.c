/* SPDX-License-Identifier: MIT */
/* The status table: one row per rill_status, read by rill_status_name and
 * rill_status_string. The last-error sentence is thread-local, so a failure
 * on one thread never overwrites another thread's explanation. */
#include "core/status.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/assert.h"

#define RILL_STATUS_TABLE(X)                                                                     \
    X(RILL_OK, "success")                                                                        \
    X(RILL_NOT_READY, "the work is still pending; this is not an error")                         \
    X(RILL_ERROR_INVALID_ARGUMENT, "an argument is invalid (NULL where a value is needed, a "    \
                                   "bad flag, a size of zero, or a destroyed handle)")           \
    X(RILL_ERROR_OUT_OF_MEMORY, "out of memory, after the cache was emptied and pending frees "  \
                                "were waited for")                                               \
    X(RILL_ERROR_NO_DEVICE, "no such device, or its backend is not available here")              \
    X(RILL_ERROR_DEVICE_MISMATCH, "the objects belong to different devices")                     \
    X(RILL_ERROR_NOT_SUPPORTED, "the device or this build lacks the feature")                    \
    X(RILL_ERROR_NOT_PERMITTED, "the call is not permitted here (for example a blocking call "   \
                                "from inside a host function or kernel)")                        \
    X(RILL_ERROR_TIMING_DISABLED, "the event was created without RILL_EVENT_TIMING")            \
    X(RILL_ERROR_NOT_RECORDED, "the event was never recorded")                                   \
    X(RILL_ERROR_KERNEL_FAILED, "a kernel or host function failed; the stream's later work was " \
                                "skipped until rill_stream_clear_error")                         \
    X(RILL_ERROR_CAPTURE_UNSUPPORTED, "the call is not allowed while a capture is active; the "  \
                                      "capture is invalidated")                                  \
    X(RILL_ERROR_CAPTURE_INVALIDATED, "the capture was invalidated by an unsupported call or "   \
                                      "a destroyed stream")                                      \
    X(RILL_ERROR_CAPTURE_UNJOINED, "a stream forked into the capture was not joined back to "    \
                                   "the origin stream")                                          \
    X(RILL_ERROR_CAPTURE_UNMATCHED, "the stream is not the origin of its capture")               \
    X(RILL_ERROR_CAPTURE_ISOLATION, "a dependency links captured and uncaptured work, or two "   \
                                    "captures")                                                  \
    X(RILL_ERROR_CAPTURE_WRONG_THREAD, "the capture was ended from another thread than the "     \
                                       "one that began it")                                      \
    X(RILL_ERROR_IPC, "an inter-process handle could not be exported or opened")                 \
    X(RILL_ERROR_INTERNAL, "an internal error occurred in rill")

static const struct {
    const char *name;
    const char *text;
} status_table[] = {
#define X(name, text) {#name, text},
    RILL_STATUS_TABLE(X)
#undef X
};

static_assert(sizeof(status_table) / sizeof(status_table[0]) == RILL_ERROR_INTERNAL + 1,
              "status_table must have one row per rill_status");

static _Thread_local char last_error[1024];

const char *rill_status_name(rill_status status) {
    if ((unsigned)status > (unsigned)RILL_ERROR_INTERNAL)
        return "RILL_STATUS_UNKNOWN";
    return status_table[status].name;
}

const char *rill_status_string(rill_status status) {
    if ((unsigned)status > (unsigned)RILL_ERROR_INTERNAL)
        return "unknown status code";
    return status_table[status].text;
}

const char *rill_last_error(void) {
    return last_error;
}

rill_status rill__fail(rill_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

void rill__clear_error(void) {
    last_error[0] = '\0';
}

_Noreturn void rill__assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "rill: internal error: %s:%d: assertion '%s' failed\n", file, line, cond);
    abort();
}
