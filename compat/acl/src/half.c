/* SPDX-License-Identifier: MIT */
/* ACL's float16 conversions (acl_base.h), from half.h's inline ones. */
#include "half.h"

#include "acl/acl_base.h"

float aclFloat16ToFloat(aclFloat16 value) {
    return rill__acl_half_to_float(value);
}

aclFloat16 aclFloatToFloat16(float value) {
    return rill__acl_float_to_half(value);
}
