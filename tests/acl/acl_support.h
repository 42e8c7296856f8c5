/* SPDX-License-Identifier: MIT */
/* The ACL tests' helpers: assert an ACL call's code together with its
 * message, and start and finalize ACL around each test (aclFinalize is
 * rill_shutdown, so the sanitizers see anything left behind). */
#ifndef RILL_TEST_ACL_SUPPORT_H
#define RILL_TEST_ACL_SUPPORT_H

#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_add.h"
#include "aclnnop/aclnn_matmul.h"
#include "aclnnop/aclnn_mul.h"
#include "fixture.h"

/* Asserts that `call` returns 0 (ACL_SUCCESS or ACLNN_SUCCESS). */
#define ACL_OK(call)                                                                               \
    do {                                                                                           \
        int acl_rc_ = (call);                                                                      \
        if (acl_rc_ != 0) {                                                                        \
            const char *acl_msg_ = aclGetRecentErrMsg();                                           \
            fail_msg("%s returned %d: %s", #call, acl_rc_, acl_msg_ ? acl_msg_ : "(no message)");  \
        }                                                                                          \
    } while (0)

/* Asserts that `call` returns `code` and leaves a message that names `name`. */
#define ACL_FAILS(call, code, name)                                                                \
    do {                                                                                           \
        int acl_rc_ = (call);                                                                      \
        const char *acl_msg_ = aclGetRecentErrMsg(); /* takes it */                                \
        if (acl_rc_ != (code))                                                                     \
            fail_msg("%s returned %d, not %s (%d): %s", #call, acl_rc_, #code, (int)(code),        \
                     acl_msg_ ? acl_msg_ : "(no message)");                                        \
        assert_non_null(acl_msg_);                                                                 \
        if (strstr(acl_msg_, (name)) == NULL)                                                      \
            fail_msg("%s: message '%s' does not name %s", #call, acl_msg_, (name));                \
    } while (0)

static inline int acl_setup(void **state) {
    (void)state;
    return aclInit(NULL) == ACL_SUCCESS ? 0 : -1;
}

static inline int acl_teardown(void **state) {
    (void)state;
    return aclFinalize() == ACL_SUCCESS ? 0 : -1;
}

#define ACL_TEST(f) cmocka_unit_test_setup_teardown(f, acl_setup, acl_teardown)

#endif /* RILL_TEST_ACL_SUPPORT_H */
