/* SPDX-License-Identifier: MIT */
/* The calls that list the devices and describe them: ordinals in the order
 * of the backends, the first device of a kind, a device's info. Kinds and
 * their names are the backends' (rill__backends): a kind is known when a
 * backend of this build has it, or rill.h names it (a build may leave its
 * backend out). */
#include <stdio.h>
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

const rill__backend_ops *rill__backend_of_kind(rill_device_kind kind, int *index) {
    for (int b = 0; rill__backends[b] != NULL; b++) {
        if (rill__backends[b]->kind == kind) {
            *index = b;
            return rill__backends[b];
        }
    }
    return NULL;
}

const rill__backend_ops *rill__backend_named(const char *name, size_t len) {
    for (int b = 0; rill__backends[b] != NULL; b++)
        if (strlen(rill__backends[b]->name) == len &&
            strncmp(rill__backends[b]->name, name, len) == 0)
            return rill__backends[b];
    return NULL;
}

void rill__backend_names(char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int b = 0; rill__backends[b] != NULL && used < size; b++)
        used += (size_t)snprintf(buf + used, size - used, "%s'%s'", b > 0 ? ", " : "",
                                 rill__backends[b]->name);
}

/* The kinds rill.h names, whose backend a build may leave out. */
static const struct {
    rill_device_kind kind;
    const char *name;
} header_kinds[] = {{RILL_DEVICE_CPU, "CPU"}, {RILL_DEVICE_CUDA, "CUDA"}};

/* Whether kind is one a caller may ask about (see the top). */
static bool kind_is_known(rill_device_kind kind) {
    int index;
    bool known = rill__backend_of_kind(kind, &index) != NULL;
    for (size_t i = 0; i < sizeof header_kinds / sizeof header_kinds[0]; i++)
        known |= header_kinds[i].kind == kind;
    return known;
}

rill_status rill_device_kind_from_name(const char *name, rill_device_kind *out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_device_kind_from_name: out is NULL; pass the address of a "
                          "rill_device_kind to receive the kind");
    *out = 0;
    if (name == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_device_kind_from_name: name is NULL; pass a kind's name, such as "
                          "\"cpu\"");
    const rill__backend_ops *ops = rill__backend_named(name, strlen(name));
    if (ops == NULL) {
        char names[128];
        rill__backend_names(names, sizeof names);
        return rill__fail(RILL_ERROR_NO_DEVICE,
                          "rill_device_kind_from_name: no backend of this build is named '%s'; "
                          "the names are %s",
                          name, names);
    }
    *out = ops->kind;
    return RILL_OK;
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
    if (!kind_is_known(kind)) {
        char names[128];
        rill__backend_names(names, sizeof names);
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_device_count_of_kind: kind %d is not a rill_device_kind of this "
                          "build; pass RILL_DEVICE_CPU, RILL_DEVICE_CUDA or the kind that "
                          "rill_device_kind_from_name gives for one of %s",
                          (int)kind, names);
    }
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
        int b;
        char absent[160];
        const char *text = absent;
        if (rill__backend_of_kind(kind, &b) != NULL) {
            text = rt->none_why[b];
        } else {
            const char *name = "such a";
            for (size_t i = 0; i < sizeof header_kinds / sizeof header_kinds[0]; i++)
                if (header_kinds[i].kind == kind)
                    name = header_kinds[i].name;
            snprintf(absent, sizeof absent,
                     "this build of rill has no %s backend (built without its toolkit's "
                     "headers; see cmake/cuda.cmake)",
                     name);
        }
        if (text[0] == '\0')
            text = "no device of this kind";
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
    if (!kind_is_known(kind)) {
        char names[128];
        rill__backend_names(names, sizeof names);
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_device_get_by_kind: kind %d is not a rill_device_kind of this "
                          "build; pass RILL_DEVICE_CPU, RILL_DEVICE_CUDA or the kind that "
                          "rill_device_kind_from_name gives for one of %s",
                          (int)kind, names);
    }
    rill__runtime_get(&rt);
    int seen = 0;
    for (int i = 0; i < rt->num_devices; i++) {
        if (rt->devices[i]->base.info.kind == kind && seen++ == index) {
            *out = rt->devices[i]->handle;
            return RILL_OK;
        }
    }
    int b;
    const rill__backend_ops *ops = rill__backend_of_kind(kind, &b);
    return rill__fail(RILL_ERROR_NO_DEVICE,
                      "rill_device_get_by_kind: there is no %s device with index %d here (%d "
                      "such device(s)); see `rill info`",
                      ops != NULL ? ops->name : "such", index, seen);
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
