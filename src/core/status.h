/* SPDX-License-Identifier: MIT */
/* Status names and sentences, and the per-thread last-error sentence. */
#ifndef RILL_CORE_STATUS_H
#define RILL_CORE_STATUS_H

#include "rill.h"

#if defined(__GNUC__)
#define RILL__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RILL__PRINTF(f, a)
#endif

/* Sets the calling thread's rill_last_error() sentence and returns status.
 * Every failing public call goes through here, so one breakpoint catches
 * every failure. The sentence names the objects involved and says what to
 * do about it. */
rill_status rill__fail(rill_status status, const char *fmt, ...) RILL__PRINTF(2, 3);
/* Clears the calling thread's sentence (a public call that succeeds leaves
 * the previous sentence in place, as errno does; tests use this). */
void rill__clear_error(void);

#endif
