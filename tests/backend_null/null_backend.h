/* SPDX-License-Identifier: MIT */
/* The test-only third backend (null_backend.c): linked into a test program,
 * it adds itself to the backend list before main. */
#ifndef RILL_TEST_NULL_BACKEND_H
#define RILL_TEST_NULL_BACKEND_H

/* Sets, before the runtime starts, how many null devices there are and
 * what their memory is (enum rill__mem_caps in src/backend/backend.h;
 * RILL__MEMCAP_HOST by default). */
void null_backend_use(int devices, unsigned mem_caps);

#endif
