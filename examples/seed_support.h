/* SPDX-License-Identifier: MIT */
/* What the seed examples share: stopping with rill's sentence when a call
 * fails, deterministic stand-ins for np.random / torch.randn (values on a
 * coarse binary grid, so the sums and products the examples check are
 * exact in float), and printing whole-number arrays the way numpy does. */
#ifndef RILL_EXAMPLES_SEED_SUPPORT_H
#define RILL_EXAMPLES_SEED_SUPPORT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rill.h"

/* Exits with status 1 and rill's explanation unless status is RILL_OK. */
static inline void check(rill_status status, const char *what) {
    if (status != RILL_OK) {
        fprintf(stderr, "%s failed: %s: %s\n", what, rill_status_name(status), rill_last_error());
        exit(1);
    }
}

/* Host memory, or exit. */
static inline float *host_floats(size_t n) {
    float *p = malloc(n * sizeof(float));
    if (p == NULL) {
        fprintf(stderr, "out of host memory for %zu floats\n", n);
        exit(1);
    }
    return p;
}

/* Device memory on the current device, or exit. */
static inline float *device_floats(size_t n) {
    void *p = NULL;
    check(rill_malloc(NULL, n * sizeof(float), &p), "rill_malloc");
    return p;
}

/* x[i] = (k - span/2) * scale with k in [0, span) drawn from a linear
 * congruential generator started at seed. */
static inline void fill_lcg(float *x, size_t n, uint32_t seed, uint32_t span, float scale) {
    uint32_t state = seed;
    for (size_t i = 0; i < n; i++) {
        state = state * 1664525u + 1013904223u;
        /* The high 24 bits, scaled to [0, span): an LCG's low bits repeat. */
        uint32_t draw = (uint32_t)(((uint64_t)(state >> 8) * span) >> 24);
        int32_t k = (int32_t)draw - (int32_t)(span / 2);
        x[i] = (float)k * scale;
    }
}

/* Prints a rows x cols array as numpy's print() does for whole numbers:
 * "[[5. 5. 5.]\n [5. 5. 5.]]", each value right-aligned to the widest.
 * Every value must be a whole number and each row must fit numpy's line
 * of 75 characters; returns 0, or -1 (printing nothing) otherwise. */
static inline int print_whole_array(const float *x, size_t rows, size_t cols) {
    int width = 0;
    for (size_t i = 0; i < rows * cols; i++) {
        if (!(x[i] > -1e15f && x[i] < 1e15f) || x[i] != (float)(long long)x[i])
            return -1;
        int len = snprintf(NULL, 0, "%lld.", (long long)x[i]);
        width = len > width ? len : width;
    }
    if (cols * (size_t)(width + 1) + 2 > 75)
        return -1;
    for (size_t i = 0; i < rows; i++) {
        fputs(i == 0 ? "[[" : " [", stdout);
        for (size_t j = 0; j < cols; j++) {
            char cell[32];
            snprintf(cell, sizeof cell, "%lld.", (long long)x[i * cols + j]);
            printf("%s%*s", j == 0 ? "" : " ", width, cell);
        }
        fputs(i + 1 == rows ? "]]\n" : "]\n", stdout);
    }
    return 0;
}

/* "True" or "False", as Python prints a bool. */
static inline const char *py_bool(int value) {
    return value ? "True" : "False";
}

#endif
