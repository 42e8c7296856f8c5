/* SPDX-License-Identifier: MIT */
/* Status names and sentences, and the per-thread last-error sentence. */
#ifndef RILL_UTIL_STATUS_H
#define RILL_UTIL_STATUS_H

#include <stddef.h>

#include "rill.h"

#if defined(__GNUC__)
#define RILL__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RILL__PRINTF(f, a)
#endif

/* Size of the calling thread's last-error buffer: a sentence is at most
 * RILL__LAST_ERROR_BYTES - 1 bytes long (rill.h says so at rill_last_error). */
#define RILL__LAST_ERROR_BYTES 1024

/* Sets the calling thread's rill_last_error() sentence and returns status.
 * Every failing public call goes through here, so one breakpoint catches
 * every failure. The sentence names the objects involved and says what to
 * do about it. An argument may point into the last-error buffer itself
 * (the sentence is formatted aside, then copied); a sentence too long for
 * the buffer is cut as rill__fit cuts. */
rill_status rill__fail(rill_status status, const char *fmt, ...) RILL__PRINTF(2, 3);
/* Puts "fn: " in front of the sentence that an inner layer left without
 * naming a public call (rill__stream_new, a backend's submit), so that the
 * sentence names the call that failed once; returns status. */
rill_status rill__fail_from(rill_status status, const char *fn);
/* Copies src into dst (size bytes, size >= 1) and returns the length
 * copied. A src too long for dst is cut at the last word boundary that
 * leaves room for "...", which then ends it; a single word longer than
 * that is cut inside, never inside a UTF-8 sequence. Below 4 bytes there
 * is no room for "...": src is cut short. */
size_t rill__fit(char *dst, size_t size, const char *src);
/* Clears the calling thread's sentence (a public call that succeeds leaves
 * the previous sentence in place, as errno does; tests use this). */
void rill__clear_error(void);
/* Moves the calling thread's sentence into saved (RILL__LAST_ERROR_BYTES
 * bytes), leaving it empty; rill__error_restore puts saved back. For a host
 * thread that runs work as a worker would, whose calls must not leave
 * their sentences to the thread's own caller. */
void rill__error_save(char *saved);
void rill__error_restore(const char *saved);

/* Writes bytes for a sentence or a table, in the largest binary unit
 * under which it is at least 1 ("512 B", "17.7 GiB"). */
void rill__format_bytes(char *buf, size_t size, size_t bytes);

#endif
