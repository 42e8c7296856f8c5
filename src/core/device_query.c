/* SPDX-License-Identifier: MIT */
/* The calls that list the devices and describe them: ordinals in the order
 * of the backends, the first device of a kind, a device's info. */
#include <string.h>

#include "core/calls.h"
#include "core/runtime.h"
#include "util/status.h"

rill__device *rill__device_of_kind(rill_device_kind kind) {
    rill__runtime *rt;
    rill__runtime_get(&rt);
    for (int i = 0; i < rt->num_devices; i++)
        if (rt->devices[i]->base.info.kind == kind)
            return rt->devices[i];
    return NULL;
}

rill_status rill_device_count(int *count) {
    RILL_CALL_SCOPE();
    rill__runtime *rt;
    if (count == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "rill_device_count: count is NULL; pass the address of an int to receive the count");
    rill__runtime_get(&rt);
    *count = rt->num_devices;
    return RILL_OK;
}

rill_status rill_device_count_of_kind(rill_device_kind kind, int *count, char *why, size_t size) {
    RILL_CALL_SCOPE();
    rill__runtime *rt;
    if (kind != RILL_DEVICE_CPU && kind != RILL_DEVICE_CUDA)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_device_count_of_kind: kind %d is not a rill_device_kind; pass "
                          "RILL_DEVICE_CPU or RILL_DEVICE_CUDA",
                          (int)kind);
    if (count == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_device_count_of_kind: count is NULL; pass the address of an int "
                          "to receive the count");
    if (why == NULL && size > 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_device_count_of_kind: why is NULL but size is %zu; pass a buffer "
                          "of size bytes, or size 0",
                          size);
    rill__runtime_get(&rt);
    int n = 0;
    for (int i = 0; i < rt->num_devices; i++)
        n += rt->devices[i]->base.info.kind == kind;
    *count = n;
    if (size > 0) {
        const char *text = rt->none_why[kind];
        if (n == 0 && text[0] == '\0')
            text = kind == RILL_DEVICE_CUDA
                       ? "this build of rill has no CUDA backend (built without the CUDA "
                         "toolkit's headers; see cmake/cuda.cmake)"
                       : "no device of this kind";
        rill__fit(why, size, n > 0 ? "" : text);
    }
    return RILL_OK;
}

rill_status rill_device_get(int ordinal, rill_device **out) {
    RILL_CALL_SCOPE();
    rill__runtime *rt;
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_device_get: out is NULL; pass the address of a rill_device * to "
                          "receive the device");
    *out = NULL;
    rill__runtime_get(&rt);
    if (ordinal < 0 || ordinal >= rt->num_devices) {
        if (rt->num_devices == 0)
            return rill__no_device(rt, "rill_device_get");
        return rill__fail(RILL_ERROR_NO_DEVICE,
                          "rill_device_get: there is no device %d; ordinals run from 0 to %d "
                          "(see rill_device_count or `rill info`)",
                          ordinal, rt->num_devices - 1);
    }
    *out = rt->devices[ordinal]->handle;
    return RILL_OK;
}

rill_status rill_device_get_by_kind(rill_device_kind kind, int index, rill_device **out) {
    RILL_CALL_SCOPE();
    rill__runtime *rt;
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_device_get_by_kind: out is NULL; pass the address of a rill_device "
                          "* to receive the device");
    *out = NULL;
    if (kind != RILL_DEVICE_CPU && kind != RILL_DEVICE_CUDA)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_device_get_by_kind: kind %d is neither RILL_DEVICE_CPU nor "
                          "RILL_DEVICE_CUDA",
                          (int)kind);
    rill__runtime_get(&rt);
    int seen = 0;
    for (int i = 0; i < rt->num_devices; i++) {
        if (rt->devices[i]->base.info.kind == kind && seen++ == index) {
            *out = rt->devices[i]->handle;
            return RILL_OK;
        }
    }
    return rill__fail(RILL_ERROR_NO_DEVICE,
                      "rill_device_get_by_kind: there is no %s device with index %d here (%d "
                      "such device(s)); see `rill info`",
                      kind == RILL_DEVICE_CPU ? "CPU" : "CUDA", index, seen);
}

rill_status rill_device_get_info(rill_device *handle, rill_device_info *out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_device_get_info: out is NULL; pass the address of a "
                          "rill_device_info to receive the description");
    rill__device *dev;
    rill_status st = rill__device_resolve(handle, "rill_device_get_info", &dev);
    if (st != RILL_OK) {
        memset(out, 0, sizeof *out);
        return st;
    }
    *out = dev->base.info;
    return RILL_OK;
}
