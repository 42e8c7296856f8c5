/* SPDX-License-Identifier: MIT */
/*
 * ACL's contexts on rill: rill has devices and a current device per
 * thread, no contexts, so a context here is a handle of this layer's table
 * (handle.c) naming one device by its ordinal. Making a context current
 * makes its device current (rill_set_device). Each device has one default
 * context, made at its first use and kept for the process's life (it holds
 * only an ordinal, which stays valid across aclFinalize and aclInit).
 *
 * A thread's current context is the one it last set or created, while its
 * current device is still that context's device (an aclrtSetDevice of
 * another device, or the context's destruction, gives the current device's
 * default context again, as in ACL).
 */
#include "context.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "error.h"
#include "handle.h"

struct context {
    int ordinal;     /* immutable: the device's rill ordinal */
    bool is_default; /* immutable: made by this file, never destroyed */
};

enum { MAX_DEFAULTS = 64 };

static pthread_mutex_t defaults_lock = PTHREAD_MUTEX_INITIALIZER;
/* guarded by defaults_lock: the default context of each ordinal, or NULL */
static void *defaults[MAX_DEFAULTS];

static _Thread_local void *current; /* the handle last set on this thread */

/* The ordinal of the calling thread's current device. */
static aclError current_ordinal(const char *call, int *ordinal) {
    rill_device *dev;
    rill_device_info info;
    aclError err = rill__acl_check(rill_get_device(&dev), call);
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_device_get_info(dev, &info), call);
    if (err == ACL_SUCCESS)
        *ordinal = info.ordinal;
    return err;
}

/* rill's device of ordinal, checked as aclrtSetDevice checks a device id. */
static aclError device_of(const char *call, int32_t ordinal, rill_device **out) {
    int count;
    aclError err = rill__acl_check(rill_device_count(&count), call);
    if (err != ACL_SUCCESS)
        return err;
    if (ordinal < 0 || ordinal >= count)
        return rill__acl_fail(ACL_ERROR_RT_INVALID_DEVICEID,
                              "%s: deviceId %d names no device; there are %d (0 to %d)", call,
                              (int)ordinal, count, count - 1);
    return rill__acl_check(rill_device_get(ordinal, out), call);
}

/* A new context handle of ordinal, or NULL (memory or table full). */
static void *context_open(int ordinal, bool is_default) {
    struct context *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    *c = (struct context){.ordinal = ordinal, .is_default = is_default};
    void *h = rill__acl_handle_open(RILL_ACL_CONTEXT, c);
    if (!h)
        free(c);
    return h;
}

static aclError default_context(const char *call, int ordinal, void **out) {
    if (ordinal >= MAX_DEFAULTS)
        return rill__acl_fail(ACL_ERROR_RT_INTERNAL_ERROR,
                              "%s: device %d is past the %d devices that have contexts here", call,
                              ordinal, MAX_DEFAULTS);
    if (pthread_mutex_lock(&defaults_lock) != 0)
        abort();
    if (!defaults[ordinal])
        defaults[ordinal] = context_open(ordinal, true);
    void *h = defaults[ordinal];
    if (pthread_mutex_unlock(&defaults_lock) != 0)
        abort();
    if (!h)
        return rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory for a context", call);
    *out = h;
    return ACL_SUCCESS;
}

/* The context context names, copied: false (and the refusal's message set)
 * when it names none. */
static bool context_get(const char *call, const char *name, const void *context,
                        struct context *out) {
    rill__acl_handles_lock();
    const struct context *c = rill__acl_handle_get_locked(context, RILL_ACL_CONTEXT);
    if (c)
        *out = *c;
    rill__acl_handles_unlock();
    if (!c)
        rill__acl_handle_fail(call, name, context, RILL_ACL_CONTEXT);
    return c != NULL;
}

aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId) {
    if (!context)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateContext: context is NULL");
    *context = NULL;
    rill_device *dev;
    aclError err = device_of("aclrtCreateContext", deviceId, &dev);
    if (err != ACL_SUCCESS)
        return err;
    void *h = context_open(deviceId, false);
    if (!h)
        return rill__acl_fail(ACL_ERROR_BAD_ALLOC, "aclrtCreateContext: no memory for a context");
    err = rill__acl_check(rill_set_device(dev), "aclrtCreateContext");
    if (err != ACL_SUCCESS) {
        free(rill__acl_handle_take(h, RILL_ACL_CONTEXT));
        return err;
    }
    current = h;
    *context = h;
    return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext context) {
    struct context c;
    if (!context_get("aclrtDestroyContext", "context", context, &c))
        return ACL_ERROR_INVALID_PARAM;
    if (c.is_default)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtDestroyContext: context (%p) is device %d's default "
                              "context, which is not destroyed; destroy only contexts from "
                              "aclrtCreateContext",
                              context, c.ordinal);
    struct context *owned = rill__acl_handle_take(context, RILL_ACL_CONTEXT);
    if (!owned) { /* another thread destroyed it meanwhile */
        rill__acl_handle_fail("aclrtDestroyContext", "context", context, RILL_ACL_CONTEXT);
        return ACL_ERROR_INVALID_PARAM;
    }
    free(owned);
    if (current == context)
        current = NULL;
    return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
    struct context c;
    if (!context_get("aclrtSetCurrentContext", "context", context, &c))
        return ACL_ERROR_INVALID_PARAM;
    rill_device *dev;
    aclError err = device_of("aclrtSetCurrentContext", c.ordinal, &dev);
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_set_device(dev), "aclrtSetCurrentContext");
    if (err == ACL_SUCCESS)
        current = context;
    return err;
}

aclError aclrtGetCurrentContext(aclrtContext *context) {
    if (!context)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext: context is NULL");
    *context = NULL;
    int ordinal;
    aclError err = current_ordinal("aclrtGetCurrentContext", &ordinal);
    if (err != ACL_SUCCESS)
        return err;
    if (current) {
        rill__acl_handles_lock();
        const struct context *c = rill__acl_handle_get_locked(current, RILL_ACL_CONTEXT);
        bool still = c && c->ordinal == ordinal;
        rill__acl_handles_unlock();
        if (still) {
            *context = current;
            return ACL_SUCCESS;
        }
        current = NULL;
    }
    return default_context("aclrtGetCurrentContext", ordinal, context);
}

aclError aclrtGetRunMode(aclrtRunMode *runMode) {
    if (!runMode)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetRunMode: runMode is NULL");
    *runMode = ACL_HOST;
    return ACL_SUCCESS;
}
