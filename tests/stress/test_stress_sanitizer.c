/* SPDX-License-Identifier: MIT */
/* Randomized check of the stream sanitizer against an oracle: random
 * programs of launches that declare accesses, stream and event waits and
 * host waits; the oracle (dense vector clocks) says which ops race, and the
 * sanitizer must report exactly those. Seed from RILL_STRESS_SEED. Kernels
 * touch nothing, so the test is quiet under ThreadSanitizer. */
#include "fixture.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    STREAMS = 4,
    EVENTS = 4,
    BUFFERS = 5,
    FLOATS = 256,
    STEPS = 250,
    ROUNDS = 64,
    MAX_OPS = STEPS
};

typedef struct vc {
    uint64_t c[STREAMS];
} vc;

typedef struct op {
    int stream;
    uint64_t index;                 /* its number among its stream's ops */
    int reads[2], num_reads, write; /* buffers; -1: none */
} op;

static struct {
    vc stream[STREAMS]; /* what each stream's next op is ordered after; own: ops so far */
    vc event[EVENTS];
    bool recorded[EVENTS];
    vc host; /* what the host saw complete */
    op ops[MAX_OPS];
    int num_ops;
} O;

static void vc_join(vc *a, const vc *b) {
    for (int i = 0; i < STREAMS; i++)
        if (b->c[i] > a->c[i])
            a->c[i] = b->c[i];
}

static bool touches(const op *o, int buf, bool *writes) {
    *writes = o->write == buf;
    if (*writes)
        return true;
    for (int i = 0; i < o->num_reads; i++)
        if (o->reads[i] == buf)
            return true;
    return false;
}

/* Whether op x (not yet in the history) races with an earlier op. */
static bool oracle_races(const op *x) {
    const vc *now = &O.stream[x->stream];
    for (int k = 0; k < O.num_ops; k++) {
        const op *y = &O.ops[k];
        if (y->stream == x->stream || now->c[y->stream] >= y->index ||
            O.host.c[y->stream] >= y->index)
            continue;
        int bufs[3] = {x->write, x->num_reads > 0 ? x->reads[0] : -1,
                       x->num_reads > 1 ? x->reads[1] : -1};
        for (int b = 0; b < 3; b++) {
            bool yw, xw = b == 0;
            if (bufs[b] >= 0 && touches(y, bufs[b], &yw) && (xw || yw))
                return true;
        }
    }
    return false;
}

static void touch_body(const rill_block_ctx *ctx, const void *args) {
    (void)ctx, (void)args;
}

static unsigned long long rng_state;

static unsigned rnd(unsigned n) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng_state >> 33) % n);
}

static void test_sanitizer_matches_oracle(void **state) {
    (void)state;
    const char *env = getenv("RILL_STRESS_SEED");
    unsigned long long seed = env != NULL ? strtoull(env, NULL, 0) : 0x5a17c0deull;
    rng_state = seed;
    rill_stream *streams[STREAMS];
    rill_event *events[EVENTS];
    float *bufs[BUFFERS];
    rill_kernel *touch;
    rill_kernel_desc desc = {.name = "touch", .cpu = touch_body};
    RT_OK(rill_kernel_create(&desc, &touch));
    for (int i = 0; i < STREAMS; i++)
        RT_OK(rill_stream_create(NULL, 0, &streams[i]));
    for (int i = 0; i < EVENTS; i++)
        RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &events[i]));
    for (int i = 0; i < BUFFERS; i++) {
        RT_OK(rill_malloc(NULL, FLOATS * sizeof(float), (void **)&bufs[i]));
        RT_OK(rill_op_fill_f32(NULL, bufs[i], 0.0f, FLOATS));
    }
    RT_OK(rill_device_synchronize(NULL));
    /* The sanitizer's reports go to a file, not the test's output. */
    fflush(stderr);
    FILE *sink = tmpfile();
    assert_non_null(sink);
    int saved = dup(2);
    assert_true(saved >= 0 && dup2(fileno(sink), 2) >= 0);
    char trail[4096];
    int races = 0, ordered = 0;
    for (int round = 0; round < ROUNDS; round++) {
        RT_OK(rill_device_synchronize(NULL));
        RT_OK(rill_sanitizer_enable(1)); /* forgets everything: so does the oracle */
        memset(&O, 0, sizeof O);
        size_t tl = 0;
        trail[0] = '\0';
        for (int step = 0; step < STEPS; step++) {
            int s = (int)rnd(STREAMS), o = (int)rnd(STREAMS), e = (int)rnd(EVENTS);
            unsigned what = rnd(100);
            char act[64];
            if (what < 40) {
                op x = {.stream = s, .index = O.stream[s].c[s] + 1, .write = (int)rnd(BUFFERS)};
                unsigned kind = rnd(3);
                if (kind == 1 || kind == 2) {
                    x.reads[0] = (int)((x.write + 1 + rnd(BUFFERS - 1)) % BUFFERS);
                    x.num_reads = 1;
                }
                if (kind == 1) {
                    x.reads[1] = (int)((x.write + 1 + rnd(BUFFERS - 1)) % BUFFERS);
                    x.num_reads = 2;
                }
                bool want = oracle_races(&x);
                uint64_t before = rill_sanitizer_report_count();
                rill_access acc[3] = {{bufs[x.write], FLOATS * sizeof(float), RILL_WRITE}};
                for (int r = 0; r < x.num_reads; r++)
                    acc[1 + r] = (rill_access){bufs[x.reads[r]], FLOATS * sizeof(float), RILL_READ};
                rill_launch l = {.grid = {1, 1, 1},
                                 .block = {1, 1, 1},
                                 .accesses = acc,
                                 .num_accesses = 1 + (size_t)x.num_reads};
                RT_OK(rill_launch_kernel(streams[s], touch, &l));
                bool got = rill_sanitizer_report_count() != before;
                snprintf(act, sizeof act, "%s s%d b%d<-b%d,b%d%s; ",
                         kind == 0   ? "write"
                         : kind == 1 ? "2 reads, write"
                                     : "read, write",
                         s, x.write, x.num_reads > 0 ? x.reads[0] : -1,
                         x.num_reads > 1 ? x.reads[1] : -1, want ? " (race)" : "");
                if (tl + strlen(act) < sizeof trail) {
                    memcpy(trail + tl, act, strlen(act) + 1);
                    tl += strlen(act);
                }
                if (got != want) {
                    dup2(saved, 2);
                    fail_msg("seed 0x%llx round %d step %d: the oracle says %s, the sanitizer "
                             "%s; the round so far: %s",
                             seed, round, step, want ? "race" : "ordered",
                             got ? "reported it" : "did not report", trail);
                }
                races += want;
                ordered += !want;
                O.stream[s].c[s]++;
                O.ops[O.num_ops++] = x;
            } else if (what < 58) {
                snprintf(act, sizeof act, "s%d waits s%d; ", s, o);
                RT_OK(rill_stream_wait_stream(streams[s], streams[o]));
                if (s != o)
                    vc_join(&O.stream[s], &O.stream[o]);
            } else if (what < 72) {
                snprintf(act, sizeof act, "rec e%d on s%d; ", e, s);
                RT_OK(rill_event_record(events[e], streams[s]));
                O.event[e] = O.stream[s];
                O.recorded[e] = true;
            } else if (what < 86) {
                snprintf(act, sizeof act, "s%d waits e%d; ", s, e);
                RT_OK(rill_stream_wait_event(streams[s], events[e]));
                if (O.recorded[e])
                    vc_join(&O.stream[s], &O.event[e]);
            } else if (what < 91) {
                snprintf(act, sizeof act, "sync s%d; ", s);
                RT_OK(rill_stream_synchronize(streams[s]));
                vc_join(&O.host, &O.stream[s]);
            } else if (what < 94) {
                snprintf(act, sizeof act, "sync e%d; ", e);
                RT_OK(rill_event_synchronize(events[e]));
                if (O.recorded[e])
                    vc_join(&O.host, &O.event[e]);
            } else if (what < 97) {
                rill_status q = rill_stream_query(streams[s]);
                snprintf(act, sizeof act, "query s%d: %s; ", s, q == RILL_OK ? "done" : "busy");
                if (q == RILL_OK)
                    vc_join(&O.host, &O.stream[s]);
            } else {
                snprintf(act, sizeof act, "device sync; ");
                RT_OK(rill_device_synchronize(NULL));
                for (int i = 0; i < STREAMS; i++)
                    vc_join(&O.host, &O.stream[i]);
            }
            if (what >= 40 && tl + strlen(act) < sizeof trail) {
                memcpy(trail + tl, act, strlen(act) + 1);
                tl += strlen(act);
            }
        }
    }
    RT_OK(rill_device_synchronize(NULL));
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(sink);
    /* Both answers came up often enough to mean something. */
    printf("sanitizer vs oracle: %d racing ops, %d ordered ops (seed 0x%llx)\n", races, ordered,
           seed);
    assert_true(races > 50);
    assert_true(ordered > 50);
    RT_OK(rill_sanitizer_enable(0));
    for (int i = 0; i < BUFFERS; i++)
        RT_OK(rill_free(bufs[i]));
    for (int i = 0; i < EVENTS; i++)
        RT_OK(rill_event_destroy(events[i]));
    for (int i = 0; i < STREAMS; i++)
        RT_OK(rill_stream_destroy(streams[i]));
    RT_OK(rill_kernel_destroy(touch));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sanitizer_matches_oracle),
    };
    return rt_run("stress_sanitizer", tests, sizeof tests / sizeof tests[0], argc, argv);
}
