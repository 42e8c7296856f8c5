/* SPDX-License-Identifier: MIT */
/* A kernel's images (rill.h, rill_kernel_image): checked and copied at
 * create, chosen per device at load by its backend's image_formats. */
#ifndef RILL_CORE_KERNEL_IMAGE_H
#define RILL_CORE_KERNEL_IMAGE_H

#include "backend/backend.h"

/* The images that desc's shorthand fields stand for, in out[0..*n). */
void rill__kernel_desc_images(const rill_kernel_desc *desc, rill_kernel_image out[2], size_t *n);
/* Checks desc: RILL_ERROR_INVALID_ARGUMENT with a sentence naming
 * rill_kernel_create_from_images when its size or an image is wrong. */
rill_status rill__kernel_image_desc_check(const rill_kernel_image_desc *desc);
/* Copies the (checked) images list[0..n) into image->images;
 * RILL_ERROR_OUT_OF_MEMORY (nothing kept) with a sentence naming fn. */
rill_status rill__kernel_images_copy(const rill_kernel_image *list, size_t n,
                                     rill__kernel_image *image, const char *fn);
void rill__kernel_images_free(rill__kernel_image *image);
/* The image of k that dev's backend loads: the first of k's images in
 * the backend's first format that k has; NULL for a built-in op.
 * RILL_ERROR_NOT_SUPPORTED with a sentence (the kernel, its formats and
 * the device's, no public call) when k has no such image. */
rill_status rill__kernel_image_choose(const rill__kernel_image *k, rill__device *dev,
                                      const rill_kernel_image **out);

#endif
