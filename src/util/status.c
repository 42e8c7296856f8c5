/* SPDX-License-Identifier: MIT */
/* The status table: one row per rill_status, read by rill_status_name and
 * rill_status_string. The last-error sentence is thread-local, so a failure
 * on one thread never overwrites another thread's explanation. */
#include "util/status.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/thread.h"
#include "util/assert.h"

/* A table, aligned by hand. */
/* clang-format off */
#define RILL_STATUS_TABLE(X)                                                                     \
    X(RILL_OK, "success")                                                                        \
    X(RILL_NOT_READY, "the work is still pending; this is not an error")                         \
    X(RILL_ERROR_INVALID_ARGUMENT, "an argument is invalid (NULL where a value is needed, a "    \
                                   "bad flag, a size of zero, or a destroyed handle)")           \
    X(RILL_ERROR_OUT_OF_MEMORY, "out of memory: the pool cannot serve the request, even from "   \
                                "its emptied cache")                                             \
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
    X(RILL_ERROR_INTERNAL, "an internal error occurred in rill")                                 \
    X(RILL_ERROR_DEVICE_LOST, "the device failed as a whole; shut rill down and start again")
/* clang-format on */

static const struct {
    const char *name;
    const char *text;
} status_table[] = {
#define X(name, text) {#name, text},
    RILL_STATUS_TABLE(X)
#undef X
};

static_assert(sizeof(status_table) / sizeof(status_table[0]) == RILL_ERROR_DEVICE_LOST + 1,
              "status_table must have one row per rill_status");

static _Thread_local char last_error[RILL__LAST_ERROR_BYTES];

const char *rill_status_name(rill_status status) {
    if ((unsigned)status > (unsigned)RILL_ERROR_DEVICE_LOST)
        return "RILL_STATUS_UNKNOWN";
    return status_table[status].name;
}

const char *rill_status_string(rill_status status) {
    if ((unsigned)status > (unsigned)RILL_ERROR_DEVICE_LOST)
        return "unknown status code";
    return status_table[status].text;
}

const char *rill_last_error(void) {
    return last_error;
}

/* How far back from a cut rill__fit looks for a space: further than any
 * word, closer than the start of a long path or number, which is cut
 * inside instead of dropped whole. */
#define WORD_BYTES 48

size_t rill__fit(char *dst, size_t size, const char *src) {
    static const char ellipsis[] = "...";
    size_t n = strlen(src);
    if (n < size) {
        memmove(dst, src, n + 1);
        return n;
    }
    if (size < sizeof ellipsis) { /* no room for "...": a plain cut */
        memmove(dst, src, size - 1);
        dst[size - 1] = '\0';
        return size - 1;
    }
    size_t keep = size - sizeof ellipsis; /* src[keep] is the first byte that cannot stay */
    size_t cut = keep;
    while (cut > 0 && keep - cut < WORD_BYTES && src[cut] != ' ')
        cut--;
    if (src[cut] == ' ') {
        /* Nothing dangles before the ellipsis: no space, comma or colon. */
        while (cut > 0 && strchr(" ,;:(", src[cut - 1]) != NULL)
            cut--;
    } else {
        cut = keep;
        while (cut > 0 && ((unsigned char)src[cut] & 0xc0u) == 0x80u)
            cut--; /* src[cut] starts a character: keep none of it */
    }
    memmove(dst, src, cut);
    memcpy(dst + cut, ellipsis, sizeof ellipsis);
    return cut + sizeof ellipsis - 1;
}

rill_status rill__fail(rill_status status, const char *fmt, ...) {
    /* Formatted aside: an argument may be rill_last_error() itself. Twice
     * the buffer, so that a long sentence is cut by rill__fit, at a word. */
    char text[2 * RILL__LAST_ERROR_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    rill__fit(last_error, sizeof last_error, text);
    return status;
}

rill_status rill__fail_from(rill_status status, const char *fn) {
    size_t n = strlen(fn);
    if (strncmp(last_error, fn, n) == 0 && last_error[n] == ':')
        return status; /* already names fn */
    return rill__fail(status, "%s: %s", fn, last_error);
}

void rill__clear_error(void) {
    last_error[0] = '\0';
}

/* Usually there is no message: then neither copies (nor calls the C
 * library, whose pages a launch after a pause would otherwise touch). */
RILL_HOT void rill__error_save(char *saved) {
    if (last_error[0] == '\0') {
        saved[0] = '\0';
        return;
    }
    memcpy(saved, last_error, strlen(last_error) + 1);
    last_error[0] = '\0';
}

RILL_HOT void rill__error_restore(const char *saved) {
    if (saved[0] == '\0') {
        last_error[0] = '\0';
        return;
    }
    memcpy(last_error, saved, strlen(saved) + 1);
}

_Noreturn void rill__assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "rill: internal error: %s:%d: assertion '%s' failed\n", file, line, cond);
    abort();
}

void rill__format_bytes(char *buf, size_t size, size_t bytes) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, size, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
}
