/* SPDX-License-Identifier: MIT */
/* RILL_ASSERT: broken internal invariants, which no input may reach. In
 * debug builds a failure aborts with the file and line; in release builds
 * the check is compiled out. */
#ifndef RILL_UTIL_ASSERT_H
#define RILL_UTIL_ASSERT_H

#ifdef NDEBUG
#define RILL_ASSERT(cond) ((void)sizeof(cond))
#else
#define RILL_ASSERT(cond) ((cond) ? (void)0 : rill__assert_fail(#cond, __FILE__, __LINE__))
#endif

_Noreturn void rill__assert_fail(const char *cond, const char *file, int line);

#endif
