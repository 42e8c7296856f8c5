/* SPDX-License-Identifier: MIT */
/* A kernel's images: a rill_kernel_image_desc's list, or what
 * rill_kernel_desc's shorthand fields (cpu, cuda_ptx and cuda_entry) stand
 * for, become one owned list of rill_kernel_image; a device's backend
 * names the formats it loads (rill__backend_ops.image_formats) and gets
 * the first image of the first of them the kernel has. The core knows no
 * format beyond the shorthand's two ids. */
#include "core/kernel_image.h"

#include <stdio.h>
#include <string.h>

#include "core/runtime.h"
#include "util/alloc.h"
#include "util/status.h"

void rill__kernel_desc_images(const rill_kernel_desc *desc, rill_kernel_image out[2], size_t *n) {
    *n = 0;
    if (desc->cpu != NULL)
        out[(*n)++] = (rill_kernel_image){.format = RILL_KERNEL_IMAGE_CPU_FN, .fn = desc->cpu};
    if (desc->cuda_ptx != NULL)
        out[(*n)++] = (rill_kernel_image){
            .format = RILL_KERNEL_IMAGE_PTX, .bytes = desc->cuda_ptx, .entry = desc->cuda_entry};
}

rill_status rill__kernel_image_desc_check(const rill_kernel_image_desc *desc) {
    const char *fn = "rill_kernel_create_from_images";
    if (desc->struct_size != sizeof(rill_kernel_image_desc))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: desc->struct_size is %zu; set it to sizeof(rill_kernel_image_desc) "
                          "(%zu in this version of rill.h)",
                          fn, desc->struct_size, sizeof(rill_kernel_image_desc));
    if (desc->name == NULL || desc->name[0] == '\0')
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: desc->name is NULL or empty; kernels need a name for errors and "
                          "traces",
                          fn);
    if (desc->num_images == 0 || desc->images == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: kernel '%s' has no images (images %s, num_images %zu); give at "
                          "least one",
                          fn, desc->name, desc->images == NULL ? "NULL" : "set", desc->num_images);
    for (size_t i = 0; i < desc->num_images; i++) {
        const rill_kernel_image *im = &desc->images[i];
        if (im->format == 0)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: kernel '%s' image %zu has format 0; set a "
                              "RILL_KERNEL_IMAGE_* format",
                              fn, desc->name, i);
        bool is_fn = im->format == RILL_KERNEL_IMAGE_CPU_FN;
        if (is_fn ? im->fn == NULL : im->bytes == NULL)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: kernel '%s' image %zu (format %u) has no %s; set it", fn,
                              desc->name, i, im->format, is_fn ? "fn" : "bytes");
    }
    return RILL_OK;
}

/* Copies src into *dst, its bytes and entry name owned; false when out of
 * memory (dst then owns nothing). */
static bool copy_one(const rill_kernel_image *src, rill_kernel_image *dst) {
    *dst = (rill_kernel_image){.format = src->format, .fn = src->fn};
    if (src->bytes != NULL) {
        size_t size = src->size != 0 ? src->size : strlen(src->bytes) + 1;
        char *b = rill__malloc(size + 1);
        if (b == NULL)
            return false;
        memcpy(b, src->bytes, size);
        b[size] = '\0'; /* text stays terminated */
        dst->bytes = b;
        dst->size = src->size;
    }
    if (src->entry != NULL && (dst->entry = rill__strdup(src->entry)) == NULL) {
        rill__free((void *)dst->bytes);
        return false;
    }
    return true;
}

static void free_one(rill_kernel_image *im) {
    rill__free((void *)im->bytes);
    rill__free((void *)im->entry);
}

void rill__kernel_images_free(rill__kernel_image *image) {
    for (size_t i = 0; i < image->num_images; i++)
        free_one(&image->images[i]);
    rill__free(image->images);
    image->images = NULL;
    image->num_images = 0;
}

rill_status rill__kernel_images_copy(const rill_kernel_image *list, size_t n,
                                     rill__kernel_image *image, const char *fn) {
    if (n == 0)
        return RILL_OK;
    image->images = rill__calloc(n, sizeof *image->images);
    if (image->images == NULL)
        goto oom;
    for (size_t i = 0; i < n; i++, image->num_images++)
        if (!copy_one(&list[i], &image->images[i]))
            goto oom;
    return RILL_OK;

oom:
    rill__kernel_images_free(image);
    return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of host memory; no kernel was created",
                      fn);
}

/* A format's name, from the backends that load it ("format 65536" when
 * none does). */
static const char *format_name(unsigned format, char *buf, size_t size) {
    for (const rill__backend_ops *const *b = rill__backends; *b != NULL; b++)
        for (const rill__image_format *f = (*b)->image_formats; f != NULL && f->format != 0; f++)
            if (f->format == format)
                return f->name;
    snprintf(buf, size, "format %u", format);
    return buf;
}

rill_status rill__kernel_image_choose(const rill__kernel_image *k, rill__device *dev,
                                      const rill_kernel_image **out) {
    *out = NULL;
    if (k->op != RILL__OP_NONE)
        return RILL_OK;
    const rill__image_format *formats = dev->ops->image_formats;
    for (const rill__image_format *f = formats; f != NULL && f->format != 0; f++) {
        for (size_t i = 0; i < k->num_images; i++) {
            if (k->images[i].format == f->format) {
                *out = &k->images[i];
                return RILL_OK;
            }
        }
    }
    char has[128] = "", loads[128] = "", buf[32];
    size_t used = 0;
    for (size_t i = 0; i < k->num_images && used < sizeof has; i++)
        used += (size_t)snprintf(has + used, sizeof has - used, "%s%s", i > 0 ? ", " : "",
                                 format_name(k->images[i].format, buf, sizeof buf));
    used = 0;
    for (const rill__image_format *f = formats; f != NULL && f->format != 0 && used < sizeof loads;
         f++)
        used += (size_t)snprintf(loads + used, sizeof loads - used, "%s%s",
                                 f == formats ? "" : ", ", f->name);
    return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                      "kernel '%s' has no image that device %d (%s) loads: its images are %s, "
                      "and the %s backend loads %s; give the kernel an image in one of those "
                      "formats, or launch it on another device",
                      k->name, dev->base.info.ordinal, dev->base.info.name, has, dev->ops->name,
                      loads[0] != '\0' ? loads : "no kernel images");
}
