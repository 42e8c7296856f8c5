/* SPDX-License-Identifier: MIT */
/* Copies between a GPU's memory and pageable host memory, which the GPU
 * cannot reach by DMA, go through page-locked staging buffers of the
 * device's (see cuda.h), so that no thread of the backend but a runner
 * waits in the driver for one, and stream order holds. A copy to the GPU
 * of up to CUDA_STAGE_EAGER_BYTES, submitted where reading its source at
 * once is reading it in stream order, is copied into a part of a buffer
 * then (onto the heap where no part is to be had), and the caller may
 * reuse its memory on return; a copy from the GPU of up to
 * CUDA_STAGE_BYTES is issued into a part and copied out when it
 * completes, before anything after it starts; the others are a runner's
 * once they are first in their stream. Buffers are made on first need
 * and kept, CUDA_STAGE_BUFFERS at most per device; small copies share the
 * fill buffer. Invariants (stage_lock): a buffer is on stage_free iff
 * users == 0 and it is not stage_fill; used <= CUDA_STAGE_BYTES. */
#include <string.h>

#include "backend/cuda/cuda.h"
#include "util/alloc.h"
#include "util/assert.h"

struct cuda_stage {
    cuda_stage *next;    /* on the device's stage_free */
    unsigned char *host; /* owned: CUDA_STAGE_BYTES of page-locked memory */
    size_t used;         /* bytes handed out since it was last empty */
    unsigned users;      /* commands holding a part of it */
};

/* Parts are handed out at this alignment. */
#define STAGE_ALIGN 256u

/* ------------------------------------------------------------- buffers */

/* An empty buffer: one nobody holds, or a new one; NULL when the device
 * has CUDA_STAGE_BUFFERS already or no page-locked memory is to be had
 * (d->stage_lock held). */
static cuda_stage *fresh_locked(cuda_device *d) {
    cuda_stage *b = d->stage_free;
    if (b != NULL) {
        d->stage_free = b->next;
        b->used = 0;
        return b;
    }
    if (d->num_stages == CUDA_STAGE_BUFFERS || (b = rill__calloc(1, sizeof *b)) == NULL)
        return NULL;
    void *host = NULL;
    if (d->drv->cuMemHostAlloc(&host, CUDA_STAGE_BYTES, 0) != CUDA_SUCCESS) {
        rill__free(b);
        return NULL;
    }
    b->host = host;
    d->stages[d->num_stages++] = b;
    return b;
}

/* A part of bytes (at most CUDA_STAGE_BYTES) of a buffer: of the fill
 * buffer where it has room, else of an empty one, which becomes the fill
 * buffer unless the part takes all of it. false when none is to be had.
 * Any thread, the context current. */
static bool take(cuda_device *d, size_t bytes, cuda_stage **out, void **at) {
    size_t need = (bytes + STAGE_ALIGN - 1) & ~(size_t)(STAGE_ALIGN - 1);
    rill__mutex_lock(&d->stage_lock);
    cuda_stage *b = d->stage_fill;
    if (b != NULL && b->users == 0)
        b->used = 0;
    if (b == NULL || b->used + need > CUDA_STAGE_BYTES) {
        b = fresh_locked(d);
        if (b == NULL) {
            rill__mutex_unlock(&d->stage_lock);
            return false;
        }
        if (need < CUDA_STAGE_BYTES) {
            cuda_stage *old = d->stage_fill;
            d->stage_fill = b;
            if (old != NULL && old->users == 0) {
                old->next = d->stage_free;
                d->stage_free = old;
            }
        }
    }
    *at = b->host + b->used;
    b->used += need;
    b->users++;
    rill__mutex_unlock(&d->stage_lock);
    *out = b;
    return true;
}

static void put(cuda_device *d, cuda_stage *b) {
    rill__mutex_lock(&d->stage_lock);
    RILL_ASSERT(b->users > 0);
    if (--b->users == 0 && b != d->stage_fill) {
        b->next = d->stage_free;
        d->stage_free = b;
    }
    rill__mutex_unlock(&d->stage_lock);
}

void rill__cuda_stage_fini(cuda_device *d) {
    for (unsigned i = 0; i < d->num_stages; i++) {
        (void)d->drv->cuMemFreeHost(d->stages[i]->host);
        rill__free(d->stages[i]);
    }
    d->num_stages = 0;
    d->stage_free = d->stage_fill = NULL;
}

/* -------------------------------------------------------------- copies */

static bool is_gpu(rill__device *dev) {
    return dev != NULL && rill__device_base_of(dev)->info.kind == RILL_DEVICE_CUDA;
}

enum cuda_staged rill__cuda_stage_kind(cuda_device *d, const rill__copy_call *c) {
    bool src_gpu = is_gpu(c->src_dev), dst_gpu = is_gpu(c->dst_dev);
    if (src_gpu == dst_gpu)
        return CUDA_STAGED_NONE; /* between GPUs, or between host memories */
    const void *host = src_gpu ? c->dst : c->src;
    /* The driver knows page-locked memory (rill_malloc_host's, or another
     * library's), which it copies by DMA. */
    if (rill__cuda_memory_type(d, host) != 0)
        return CUDA_STAGED_NONE;
    return src_gpu ? CUDA_STAGED_D2H : CUDA_STAGED_H2D;
}

/* Whether reading host memory now is reading it at the end of cs in
 * stream order: nothing queued on cs is held back, runs on the host or
 * writes host memory later (a staged copy to it), and no wait for another
 * stream is pending (its work may). A command found so stays so until it
 * completes, so each look starts after the last one found (quiet_last,
 * still queued while the head's number is at most quiet_seq) (cs->lock
 * held). */
static bool host_quiet_locked(cuda_stream *cs) {
    if (cs->next_issue != NULL)
        return false;
    cuda_cmd *p = cs->head;
    if (p != NULL && cs->quiet_last != NULL && p->seq <= cs->quiet_seq)
        p = cs->quiet_last->next;
    for (; p != NULL; p = p->next) {
        if (p->state != CUDA_ON_GPU && p->state != CUDA_MET)
            return false;
        if (p->state == CUDA_ON_GPU &&
            (p->c.kind == RILL__CMD_WAIT ||
             (p->c.kind == RILL__CMD_COPY && p->staged == CUDA_STAGED_D2H)))
            return false;
        cs->quiet_last = p;
        cs->quiet_seq = p->seq;
    }
    return true;
}

bool rill__cuda_stage_submit_locked(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    rill__copy_call *c = &n->c.u.copy;
    if (!host_quiet_locked(cs))
        return true; /* read in stream order, by a runner */
    if (take(d, c->bytes, &n->stage, &n->stage_at)) {
        memcpy(n->stage_at, c->src, c->bytes);
    } else {
        /* No page-locked memory to be had: the source is kept on the heap
         * and a runner copies it (rill__cuda_stage_run). */
        if ((n->stage_at = rill__malloc(c->bytes)) == NULL)
            return false;
        memcpy(n->stage_at, c->src, c->bytes);
        n->heap_copy = true;
    }
    c->src = n->stage_at;
    return true;
}

bool rill__cuda_stage_issue_locked(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    const rill__copy_call *c = &n->c.u.copy;
    if (n->staged == CUDA_STAGED_H2D) {
        /* Staged at submit: from its part; else larger than that, or on
         * the heap. */
        if (n->stage == NULL)
            return false;
        n->error = rill__cuda_copy(d, cs->cu, c);
        return true;
    }
    if (c->bytes > CUDA_STAGE_BYTES || !take(d, c->bytes, &n->stage, &n->stage_at))
        return false;
    rill__copy_call part = *c;
    part.dst = n->stage_at;
    n->error = rill__cuda_copy(d, cs->cu, &part);
    return true;
}

void rill__cuda_stage_complete_locked(cuda_cmd *n) {
    /* Only an issued copy has a part, and its completion follows the
     * GPU's write of it (the done word's write comes after a barrier). */
    if (n->staged == CUDA_STAGED_D2H && n->stage != NULL && n->error == CUDA_SUCCESS)
        memcpy(n->c.u.copy.dst, n->stage_at, n->c.u.copy.bytes);
}

void rill__cuda_stage_release(cuda_device *d, cuda_cmd *n) {
    if (n->stage != NULL)
        put(d, n->stage);
    else if (n->heap_copy)
        rill__free(n->stage_at);
    n->stage = NULL;
    n->heap_copy = false;
}

/* Copies up to k chunks of c from off on through the parts at, then waits
 * for the GPU (everything before the copy completed, so only its own
 * chunks); returns the bytes done in *done. */
static CUresult run_cycle(cuda_device *d, cuda_stream *cs, const rill__copy_call *c, bool to_gpu,
                          void *const *at, unsigned k, size_t off, size_t *done) {
    size_t start = off;
    CUresult r = CUDA_SUCCESS;
    for (unsigned i = 0; i < k && off < c->bytes && r == CUDA_SUCCESS; i++) {
        size_t len = c->bytes - off < CUDA_STAGE_BYTES ? c->bytes - off : CUDA_STAGE_BYTES;
        rill__copy_call part = *c;
        part.bytes = len;
        if (to_gpu) {
            memcpy(at[i], (const char *)c->src + off, len);
            part.src = at[i];
            part.dst = (char *)c->dst + off;
        } else {
            part.src = (const char *)c->src + off;
            part.dst = at[i];
        }
        r = rill__cuda_copy(d, cs->cu, &part);
        off += len;
    }
    if (r == CUDA_SUCCESS)
        r = d->drv->cuStreamSynchronize(cs->cu);
    for (unsigned i = 0; !to_gpu && r == CUDA_SUCCESS && start + i * CUDA_STAGE_BYTES < off; i++) {
        size_t at_off = start + i * CUDA_STAGE_BYTES;
        size_t len = off - at_off < CUDA_STAGE_BYTES ? off - at_off : CUDA_STAGE_BYTES;
        memcpy((char *)c->dst + at_off, at[i], len);
    }
    *done = off - start;
    return r;
}

bool rill__cuda_stage_run(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    if (cs->failing)
        return true; /* skipped, as the stream's other work */
    const rill__copy_call *c = &n->c.u.copy;
    cuda_stage *bufs[CUDA_STAGE_RUN_BUFFERS];
    void *at[CUDA_STAGE_RUN_BUFFERS];
    unsigned k = 0;
    while (k < CUDA_STAGE_RUN_BUFFERS && (size_t)k * CUDA_STAGE_BYTES < c->bytes &&
           take(d, CUDA_STAGE_BYTES, &bufs[k], &at[k]))
        k++;
    if (k == 0) {
        /* No page-locked memory: the driver's own copy of pageable memory,
         * which returns once it read the source (to the GPU) or wrote the
         * destination (from it); reported by the done word. */
        n->error = rill__cuda_copy(d, cs->cu, c);
        return n->error != CUDA_SUCCESS;
    }
    CUresult r = CUDA_SUCCESS;
    for (size_t off = 0, done = 0; off < c->bytes && r == CUDA_SUCCESS; off += done)
        r = run_cycle(d, cs, c, n->staged == CUDA_STAGED_H2D, at, k, off, &done);
    for (unsigned i = 0; i < k; i++)
        put(d, bufs[i]);
    n->error = r;
    return true;
}
