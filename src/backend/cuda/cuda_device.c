/* SPDX-License-Identifier: MIT */
/* The CUDA backend's discovery: it loads the driver (cuda_driver.h) and
 * finds the GPUs this process may use. Streams, memory and launches on
 * them are not in this version: the assembly lists the backend among the
 * finders (backend.h), whose probe says what it found
 * (rill_device_count_of_kind, `rill info`) and lists no device. */
#include <stdio.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_driver.h"

/* Appends the GPUs' names ("NVIDIA H200, NVIDIA H200") to buf. */
static void gpu_names(const rill__cuda_driver *drv, int count, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < count && used + 1 < size; i++) {
        CUdevice dev;
        char name[128] = "an unnamed GPU";
        if (drv->cuDeviceGet(&dev, i) == CUDA_SUCCESS)
            (void)drv->cuDeviceGetName(name, (int)sizeof name, dev);
        int n = snprintf(buf + used, size - used, "%s%s", i > 0 ? ", " : "", name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* Returns 0: the sentence in why says what was found. */
static int cuda_probe(char *why, size_t size) {
    const rill__cuda_driver *drv = rill__cuda_driver_load(why, size);
    if (drv == NULL)
        return 0;
    int count = 0;
    CUresult r = drv->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) {
        char text[160] = "no GPU";
        if (r != CUDA_SUCCESS)
            rill__cuda_result_text(drv, r, text, sizeof text);
        snprintf(why, size, "no CUDA device: the CUDA driver %d.%d lists none (%s)",
                 drv->version / 1000, drv->version % 1000 / 10, text);
        return 0;
    }
    char names[256];
    gpu_names(drv, count, names, sizeof names);
    snprintf(why, size,
             "the CUDA driver %d.%d lists %d GPU%s (%s), but this version of rill runs work on "
             "CPU devices only (docs/cuda.md)",
             drv->version / 1000, drv->version % 1000 / 10, count, count == 1 ? "" : "s", names);
    return 0;
}

const rill__backend_ops rill__cuda_backend = {
    .name = "cuda",
    .kind = RILL_DEVICE_CUDA,
    .probe = cuda_probe,
};
