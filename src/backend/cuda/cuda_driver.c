/* SPDX-License-Identifier: MIT */
/* Loading the CUDA driver API at run time (cuda_driver.h). */
#include "backend/cuda/cuda_driver.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

static once_flag load_once = ONCE_FLAG_INIT;
static rill__cuda_driver driver;
static const rill__cuda_driver *loaded; /* &driver once every step succeeded */
static char load_why[384];

typedef CUresult (*get_proc_fn)(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                CUdriverProcAddressQueryResult *status);

static const char *result_name(CUresult r) {
    const char *name = NULL;
    if (driver.cuGetErrorName == NULL || driver.cuGetErrorName(r, &name) != CUDA_SUCCESS ||
        name == NULL)
        return "an unknown CUresult";
    return name;
}

void rill__cuda_result_text(const rill__cuda_driver *drv, CUresult r, char *buf, size_t size) {
    const char *text = NULL;
    if (drv == NULL || drv->cuGetErrorString == NULL ||
        drv->cuGetErrorString(r, &text) != CUDA_SUCCESS || text == NULL)
        text = "no description";
    snprintf(buf, size, "%s %d (%s)", result_name(r), (int)r, text);
}

/* Asks the driver for every entry point of the table; false, with
 * load_why set, when one is missing. */
static bool resolve(get_proc_fn get, const char *path) {
    struct entry {
        const char *name;
        void **slot;
    } entries[] = {
#define RILL__CUDA_ENTRY(fn) {#fn, (void **)&driver.fn},
        RILL__CUDA_DRIVER_FUNCS(RILL__CUDA_ENTRY)
#undef RILL__CUDA_ENTRY
    };
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CUresult r = get(entries[i].name, entries[i].slot, CUDA_VERSION,
                         CU_GET_PROC_ADDRESS_DEFAULT, &found);
        if (r == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS && *entries[i].slot != NULL)
            continue;
        if (r == CUDA_ERROR_STUB_LIBRARY) {
            snprintf(load_why, sizeof load_why,
                     "no CUDA driver: %s is the CUDA toolkit's stub library, not a driver; "
                     "install the NVIDIA driver",
                     path);
            return false;
        }
        snprintf(load_why, sizeof load_why,
                 "the CUDA driver %s has no %s%s; rill needs a driver for CUDA %d.%d or later "
                 "(update the NVIDIA driver)",
                 path, entries[i].name,
                 found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? " in the version rill needs"
                                                                     : "",
                 CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
        return false;
    }
    return true;
}

static void load(void) {
    const char *env = getenv("RILL_CUDA_DRIVER");
    const char *path = env != NULL && env[0] != '\0' ? env : "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *err = dlerror();
        snprintf(load_why, sizeof load_why,
                 "no CUDA driver: %s could not be loaded (%s); install the NVIDIA driver, or set "
                 "RILL_CUDA_DRIVER to the path of its libcuda.so.1",
                 path, err != NULL ? err : "no reason given");
        return;
    }
    /* The process keeps the driver loaded to its end, as the CUDA runtime
     * does: its threads and the memory it mapped outlive any runtime. */
    get_proc_fn get;
    void *sym = dlsym(lib, "cuGetProcAddress_v2");
    if (sym == NULL) {
        snprintf(load_why, sizeof load_why,
                 "the CUDA driver %s is older than CUDA 12.0 (it has no cuGetProcAddress_v2); "
                 "rill needs a driver for CUDA %d.%d or later (update the NVIDIA driver)",
                 path, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
        return;
    }
    memcpy(&get, &sym, sizeof get);
    if (!resolve(get, path))
        return;
    CUresult r = driver.cuInit(0);
    if (r != CUDA_SUCCESS) {
        char text[160];
        rill__cuda_result_text(&driver, r, text, sizeof text);
        if (r == CUDA_ERROR_NO_DEVICE)
            snprintf(load_why, sizeof load_why,
                     "no CUDA device: the CUDA driver found no GPU this process may use (cuInit: "
                     "%s); check CUDA_VISIBLE_DEVICES and nvidia-smi",
                     text);
        else if (r == CUDA_ERROR_STUB_LIBRARY)
            snprintf(load_why, sizeof load_why,
                     "no CUDA driver: %s is the CUDA toolkit's stub library, not a driver "
                     "(cuInit: %s); install the NVIDIA driver",
                     path, text);
        else
            snprintf(load_why, sizeof load_why,
                     "the CUDA driver %s did not start (cuInit: %s); nvidia-smi shows whether "
                     "the GPU and its driver are working",
                     path, text);
        return;
    }
    if ((r = driver.cuDriverGetVersion(&driver.version)) != CUDA_SUCCESS) {
        char text[160];
        rill__cuda_result_text(&driver, r, text, sizeof text);
        snprintf(load_why, sizeof load_why, "the CUDA driver %s gave no version (%s)", path, text);
        return;
    }
    loaded = &driver;
}

const rill__cuda_driver *rill__cuda_driver_load(char *why, size_t size) {
    call_once(&load_once, load);
    if (loaded == NULL && size > 0)
        snprintf(why, size, "%s", load_why);
    return loaded;
}
