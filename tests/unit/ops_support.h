/* SPDX-License-Identifier: MIT */
/* What the tests of the built-in ops share (test_ops.c on floats,
 * test_ops_f16.c on halves): the device they run on, the unit roundoff of
 * float, and the check of a refused argument. */
#ifndef RILL_TESTS_OPS_SUPPORT_H
#define RILL_TESTS_OPS_SUPPORT_H

#include "fixture.h"

#include <string.h>

/* Unit roundoff of float. */
#define U32 (1.0 / 16777216.0)

/* The CPU device, made the calling thread's current one. */
static inline rill_device *cpu_device(void) {
    rill_device *dev = NULL;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &dev));
    RT_OK(rill_set_device(dev));
    return dev;
}

/* Fails unless status is RILL_ERROR_INVALID_ARGUMENT and rill_last_error()
 * contains needle (the function and the argument it names). */
static inline void expect_invalid(rill_status status, const char *needle) {
    if (status != RILL_ERROR_INVALID_ARGUMENT)
        fail_msg("returned %s, expected RILL_ERROR_INVALID_ARGUMENT (%s)", rill_status_name(status),
                 rill_last_error());
    if (strstr(rill_last_error(), needle) == NULL)
        fail_msg("rill_last_error() is \"%s\", which does not mention \"%s\"", rill_last_error(),
                 needle);
}

#endif
