/* SPDX-License-Identifier: MIT */
/* `rill trace-summary` and `rill trace-svg` (trace_view.h): a trace read
 * with the tools' JSON reader (json.h) and checked as one; per-stream busy
 * time, overlap, idle gaps and the critical path (the longest chain of
 * slices by stream order and the trace's arrows, weighted by duration). */
#include "trace_view.h"

#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- trace */

typedef struct slice {
    double ts, dur; /* microseconds */
    const char *name, *cat;
    int track;
    double pred_weight; /* critical path: the longest chain ending here */
    int pred;           /* its previous slice, or -1 */
} slice;

typedef struct track {
    double pid, tid;
    const char *name;
    bool is_stream, is_unit;
} track;

typedef struct flow {
    double id, ts;
    int track;
    bool start;
} flow;

typedef struct trace {
    jval root;
    track *tracks;
    size_t num_tracks;
    slice *slices;
    size_t num_slices;
    flow *flows;
    size_t num_flows;
    double t_min, t_max;
} trace;

static void trace_free(trace *t) {
    jfree(&t->root);
    free(t->tracks);
    free(t->slices);
    free(t->flows);
}

static int track_of(trace *t, double pid, double tid) {
    for (size_t i = 0; i < t->num_tracks; i++)
        if (t->tracks[i].pid == pid && t->tracks[i].tid == tid)
            return (int)i;
    track *nt = realloc(t->tracks, (t->num_tracks + 1) * sizeof *nt);
    if (nt == NULL)
        return -1;
    t->tracks = nt;
    t->tracks[t->num_tracks] = (track){pid, tid, NULL, false, false};
    return (int)t->num_tracks++;
}

static int bad(const char *path, const char *what) {
    fprintf(stderr,
            "rill: %s is not a trace that rill can read: %s; write one with "
            "rill_trace_start or RILL_TRACE=path\n",
            path, what);
    return 1;
}

static int load(const char *path, trace *t) {
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "rill: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (buf == NULL) {
            fclose(f);
            fprintf(stderr, "rill: out of memory reading %s\n", path);
            return 1;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *nb = realloc(buf, cap *= 2);
        if (nb == NULL)
            free(buf);
        buf = nb;
    }
    fclose(f);
    char err[160];
    bool ok = jparse(buf, n, &t->root, err, sizeof err);
    free(buf);
    if (!ok) {
        char what[200];
        snprintf(what, sizeof what, "it is not valid JSON (%s)", err);
        trace_free(t);
        return bad(path, what);
    }
    const jval *events = jget(&t->root, "traceEvents");
    if (events == NULL || events->kind != J_ARR) {
        trace_free(t);
        return bad(path, "it has no \"traceEvents\" array");
    }
    t->slices = calloc(events->count + 1, sizeof *t->slices);
    t->flows = calloc(events->count + 1, sizeof *t->flows);
    if (t->slices == NULL || t->flows == NULL) {
        trace_free(t);
        fprintf(stderr, "rill: out of memory reading %s\n", path);
        return 1;
    }
    t->t_min = INFINITY;
    t->t_max = -INFINITY;
    for (size_t i = 0; i < events->count; i++) {
        const jval *e = &events->items[i];
        const char *ph = jstr(jget(e, "ph"));
        double pid = 0, tid = 0, ts, dur;
        if (e->kind != J_OBJ || ph == NULL) {
            char what[96];
            snprintf(what, sizeof what, "event %zu is not an object with a \"ph\"", i);
            trace_free(t);
            return bad(path, what);
        }
        jnum(jget(e, "pid"), &pid);
        jnum(jget(e, "tid"), &tid);
        if (strcmp(ph, "M") == 0) {
            const char *name = jstr(jget(jget(e, "args"), "name"));
            if (name != NULL &&
                strcmp(jstr(jget(e, "name")) ? jstr(jget(e, "name")) : "", "thread_name") == 0) {
                int k = track_of(t, pid, tid);
                if (k < 0)
                    continue;
                t->tracks[k].name = name;
                t->tracks[k].is_stream = strncmp(name, "stream ", 7) == 0;
                t->tracks[k].is_unit = strncmp(name, "compute unit ", 13) == 0;
            }
            continue;
        }
        if (strcmp(ph, "X") == 0 || strcmp(ph, "s") == 0 || strcmp(ph, "f") == 0) {
            if (!jnum(jget(e, "ts"), &ts)) {
                char what[96];
                snprintf(what, sizeof what, "event %zu has no numeric \"ts\"", i);
                trace_free(t);
                return bad(path, what);
            }
            int k = track_of(t, pid, tid);
            if (k < 0)
                continue;
            if (ph[0] == 'X') {
                if (!jnum(jget(e, "dur"), &dur) || dur < 0) {
                    char what[96];
                    snprintf(what, sizeof what, "slice %zu has no valid \"dur\"", i);
                    trace_free(t);
                    return bad(path, what);
                }
                slice *s = &t->slices[t->num_slices++];
                s->ts = ts;
                s->dur = dur;
                s->name = jstr(jget(e, "name")) ? jstr(jget(e, "name")) : "?";
                s->cat = jstr(jget(e, "cat")) ? jstr(jget(e, "cat")) : "";
                s->track = k;
                s->pred = -1;
                if (ts < t->t_min)
                    t->t_min = ts;
                if (ts + dur > t->t_max)
                    t->t_max = ts + dur;
            } else {
                flow *fl = &t->flows[t->num_flows++];
                jnum(jget(e, "id"), &fl->id);
                fl->ts = ts;
                fl->track = k;
                fl->start = ph[0] == 's';
            }
        }
    }
    if (t->num_slices == 0)
        t->t_min = t->t_max = 0;
    return 0;
}

static int cmp_slice(const void *a, const void *b) {
    const slice *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int cmp_edge(const void *a, const void *b) {
    const double *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static bool is_wait(const slice *s) {
    return strcmp(s->cat, "wait") == 0;
}

/* The union of track k's busy slices as [begin, end) spans, in order. */
static size_t busy_spans(const trace *t, int k, double (*spans)[2]) {
    size_t n = 0;
    for (size_t i = 0; i < t->num_slices; i++) {
        const slice *s = &t->slices[i];
        if (s->track != k || is_wait(s))
            continue;
        if (n > 0 && s->ts <= spans[n - 1][1]) {
            if (s->ts + s->dur > spans[n - 1][1])
                spans[n - 1][1] = s->ts + s->dur;
        } else {
            spans[n][0] = s->ts;
            spans[n][1] = s->ts + s->dur;
            n++;
        }
    }
    return n;
}

static const char *track_name(const trace *t, int k) {
    return t->tracks[k].name != NULL ? t->tracks[k].name : "unnamed track";
}

static int cmp_flow(const void *a, const void *b) {
    const flow *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (int)y->start - (int)x->start; /* the start first */
}

/* Sorts the arrows so that each start is followed by its ends. */
static void pair_flows(trace *t) {
    qsort(t->flows, t->num_flows, sizeof *t->flows, cmp_flow);
}

/* Slices by track, each track's in start order (t->slices sorted): the
 * slices of track k are order[first[k] .. first[k + 1]). */
typedef struct track_index {
    size_t *first;
    int *order;
} track_index;

static bool index_tracks(const trace *t, track_index *ix) {
    ix->first = calloc(t->num_tracks + 2, sizeof *ix->first);
    ix->order = malloc((t->num_slices + 1) * sizeof *ix->order);
    if (ix->first == NULL || ix->order == NULL)
        return false;
    for (size_t i = 0; i < t->num_slices; i++)
        ix->first[t->slices[i].track + 1]++;
    for (size_t k = 0; k < t->num_tracks; k++)
        ix->first[k + 1] += ix->first[k];
    size_t *fill = calloc(t->num_tracks + 1, sizeof *fill);
    if (fill == NULL)
        return false;
    for (size_t i = 0; i < t->num_slices; i++) {
        int k = t->slices[i].track;
        ix->order[ix->first[k] + fill[k]++] = (int)i;
    }
    free(fill);
    return true;
}

/* The slice of track k that contains ts: among the last few that start by
 * ts (to within the trace's rounding), the latest. */
static int slice_at(const trace *t, const track_index *ix, int k, double ts) {
    size_t lo = ix->first[k], hi = ix->first[k + 1];
    while (lo < hi) { /* the first that starts after ts */
        size_t mid = lo + (hi - lo) / 2;
        if (t->slices[ix->order[mid]].ts <= ts + 0.0015)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t j = lo, tries = 0; j > ix->first[k] && tries < 8; j--, tries++) {
        const slice *s = &t->slices[ix->order[j - 1]];
        if (ts <= s->ts + s->dur + 0.0015)
            return ix->order[j - 1];
    }
    return -1;
}

static void critical_path(trace *t, FILE *out) {
    /* predecessors: the previous slice on the stream, and the producer of
     * an arrow that ends in the slice; slices sorted by start time, so
     * every predecessor comes first */
    int *last = malloc((t->num_tracks + 1) * sizeof *last);
    int *from = calloc(t->num_slices + 1, sizeof *from);
    track_index ix = {NULL, NULL};
    if (last == NULL || from == NULL || !index_tracks(t, &ix)) {
        free(last);
        free(from);
        free(ix.first);
        free(ix.order);
        return;
    }
    for (size_t k = 0; k < t->num_tracks; k++)
        last[k] = -1;
    for (size_t i = 0; i < t->num_slices; i++)
        from[i] = -1;
    pair_flows(t);
    for (size_t g = 0; g < t->num_flows; g++) {
        if (!t->flows[g].start)
            continue;
        int src = slice_at(t, &ix, t->flows[g].track, t->flows[g].ts);
        for (size_t f = g + 1;
             f < t->num_flows && !t->flows[f].start && t->flows[f].id == t->flows[g].id; f++) {
            int dst = slice_at(t, &ix, t->flows[f].track, t->flows[f].ts);
            if (src >= 0 && dst >= 0 && src != dst)
                from[dst] = src;
        }
    }
    free(ix.first);
    free(ix.order);
    double best = 0;
    int best_i = -1;
    for (size_t i = 0; i < t->num_slices; i++) {
        slice *s = &t->slices[i];
        if (!t->tracks[s->track].is_stream)
            continue;
        double w = 0;
        int pred = -1;
        if (last[s->track] >= 0) {
            pred = last[s->track];
            w = t->slices[pred].pred_weight;
        }
        if (from[i] >= 0 && t->slices[from[i]].pred_weight > w) {
            pred = from[i];
            w = t->slices[pred].pred_weight;
        }
        s->pred = pred;
        s->pred_weight = w + (is_wait(s) ? 0 : s->dur);
        last[s->track] = (int)i;
        if (s->pred_weight > best) {
            best = s->pred_weight;
            best_i = (int)i;
        }
    }
    double span = t->t_max - t->t_min;
    fprintf(out, "critical path: %.1f us of work in a %.1f us trace (%.0f%%)\n", best, span,
            span > 0 ? 100.0 * best / span : 0.0);
    /* the chain, from its end back to its start; printed from the start */
    int chain[24], n = 0, total = 0;
    for (int i = best_i; i >= 0; i = t->slices[i].pred) {
        if (is_wait(&t->slices[i]))
            continue;
        if (n < 24)
            chain[n++] = i;
        total++;
    }
    if (total > n)
        fprintf(out, "  ... %d earlier slices\n", total - n);
    for (int j = n - 1; j >= 0; j--) {
        const slice *s = &t->slices[chain[j]];
        fprintf(out, "  %-28.28s %-24.24s %10.1f us\n", track_name(t, s->track), s->name, s->dur);
    }
    free(last);
    free(from);
}

int rill_tool_trace_summary(const char *path, FILE *out) {
    trace t;
    if (load(path, &t) != 0)
        return 1;
    qsort(t.slices, t.num_slices, sizeof *t.slices, cmp_slice);
    double span = t.t_max - t.t_min;
    double(*spans)[2] = malloc((t.num_slices + 1) * sizeof *spans);
    /* every stream's busy spans at once, for the overlap: +1 at a start,
     * -1 at an end */
    double(*edges)[2] = malloc((2 * t.num_slices + 1) * sizeof *edges);
    if (spans == NULL || edges == NULL) {
        free(spans);
        free(edges);
        trace_free(&t);
        fprintf(stderr, "rill: out of memory\n");
        return 1;
    }
    fprintf(out, "trace %s: %zu slices on %zu tracks over %.1f us\n\n", path, t.num_slices,
            t.num_tracks, span);
    fprintf(out, "%-36s %12s %7s %9s  %s\n", "track", "busy us", "busy%", "slices",
            "longest idle gaps (us)");
    size_t num_edges = 0;
    int streams = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < t.num_tracks; k++) {
            const track *tr = &t.tracks[k];
            if (pass == 0 ? !tr->is_stream : !tr->is_unit)
                continue;
            size_t n = busy_spans(&t, (int)k, spans);
            double busy = 0;
            size_t count = 0;
            for (size_t i = 0; i < t.num_slices; i++)
                count += t.slices[i].track == (int)k;
            double gaps[3] = {0, 0, 0};
            for (size_t i = 0; i < n; i++) {
                busy += spans[i][1] - spans[i][0];
                if (tr->is_stream) {
                    edges[num_edges][0] = spans[i][0];
                    edges[num_edges++][1] = 1;
                    edges[num_edges][0] = spans[i][1];
                    edges[num_edges++][1] = -1;
                }
                if (i > 0) {
                    double g = spans[i][0] - spans[i - 1][1];
                    for (int j = 0; j < 3; j++) {
                        if (g > gaps[j]) {
                            double tmp = gaps[j];
                            gaps[j] = g;
                            g = tmp;
                        }
                    }
                }
            }
            streams += tr->is_stream && n > 0;
            fprintf(out, "%-36.36s %12.1f %6.1f%% %9zu  %.1f %.1f %.1f\n", track_name(&t, (int)k),
                    busy, span > 0 ? 100.0 * busy / span : 0.0, count, gaps[0], gaps[1], gaps[2]);
        }
    }
    /* overlap: time during which two streams or more are busy */
    qsort(edges, num_edges, sizeof *edges, cmp_edge);
    double overlap = 0, any = 0, prev = 0;
    int depth = 0;
    for (size_t i = 0; i < num_edges; i++) {
        if (depth >= 2)
            overlap += edges[i][0] - prev;
        if (depth >= 1)
            any += edges[i][0] - prev;
        depth += (int)edges[i][1];
        prev = edges[i][0];
    }
    fprintf(out,
            "\nstreams busy: %d; some stream busy %.1f us; two or more at once %.1f us "
            "(%.0f%% of the busy time)\n",
            streams, any, overlap, any > 0 ? 100.0 * overlap / any : 0.0);
    critical_path(&t, out);
    free(spans);
    free(edges);
    trace_free(&t);
    return 0;
}

/* ---------------------------------------------------------------- SVG */

static void svg_text(FILE *f, const char *s) {
    for (; *s != '\0'; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

static unsigned hash(const char *s) {
    unsigned h = 2166136261u;
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

int rill_tool_trace_svg(const char *path, const char *svg_path) {
    trace t;
    if (load(path, &t) != 0)
        return 1;
    FILE *f = fopen(svg_path, "w");
    if (f == NULL) {
        fprintf(stderr, "rill: cannot open %s for writing: %s\n", svg_path, strerror(errno));
        trace_free(&t);
        return 1;
    }
    /* rows: streams, then units, then the rest (host threads) */
    int *row = malloc((t.num_tracks + 1) * sizeof *row);
    if (row == NULL) {
        fclose(f);
        trace_free(&t);
        return 1;
    }
    int rows = 0;
    for (int pass = 0; pass < 3; pass++)
        for (size_t k = 0; k < t.num_tracks; k++) {
            const track *tr = &t.tracks[k];
            int cls = tr->is_stream ? 0 : tr->is_unit ? 1 : 2;
            if (cls == pass)
                row[k] = rows++;
        }
    const double label_w = 230, plot_w = 1000, row_h = 22, top = 40;
    double span = t.t_max - t.t_min > 0 ? t.t_max - t.t_min : 1;
    double height = top + rows * row_h + 30;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"Helvetica,Arial,sans-serif\" font-size=\"11\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"8\" y=\"18\" font-size=\"13\">",
            label_w + plot_w + 20, height);
    svg_text(f, path);
    fprintf(f, ": %.1f us</text>\n", span);
    for (size_t k = 0; k < t.num_tracks; k++) {
        double y = top + row[k] * row_h;
        fprintf(f, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.0f\" height=\"%.1f\" fill=\"%s\"/>\n",
                label_w, y, plot_w, row_h - 2, row[k] % 2 ? "#f4f4f4" : "#fafafa");
        fprintf(f, "<text x=\"8\" y=\"%.1f\">", y + row_h - 8);
        svg_text(f, track_name(&t, (int)k));
        fputs("</text>\n", f);
    }
    for (size_t i = 0; i < t.num_slices; i++) {
        const slice *s = &t.slices[i];
        double x = label_w + (s->ts - t.t_min) / span * plot_w;
        double w = s->dur / span * plot_w;
        if (w < 0.5)
            w = 0.5;
        double y = top + row[s->track] * row_h + 2;
        unsigned h = hash(s->name);
        const char *fill = is_wait(s) ? "#cccccc" : NULL;
        char color[24];
        snprintf(color, sizeof color, "hsl(%u,60%%,60%%)", h % 360);
        fprintf(f,
                "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">"
                "<title>",
                x, y, w, row_h - 6, fill != NULL ? fill : color);
        svg_text(f, s->name);
        fprintf(f, " (%.1f us)</title></rect>\n", s->dur);
        if (w > 40) {
            fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"9\">", x + 2, y + row_h - 10);
            svg_text(f, s->name);
            fputs("</text>\n", f);
        }
    }
    /* arrows: producer to wait */
    pair_flows(&t);
    for (size_t a = 0; a < t.num_flows; a++) {
        if (!t.flows[a].start)
            continue;
        for (size_t b = a + 1;
             b < t.num_flows && !t.flows[b].start && t.flows[b].id == t.flows[a].id; b++) {
            double x1 = label_w + (t.flows[a].ts - t.t_min) / span * plot_w;
            double x2 = label_w + (t.flows[b].ts - t.t_min) / span * plot_w;
            double y1 = top + row[t.flows[a].track] * row_h + row_h / 2;
            double y2 = top + row[t.flows[b].track] * row_h + row_h / 2;
            fprintf(f,
                    "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333\" "
                    "stroke-width=\"0.8\"/>\n",
                    x1, y1, x2, y2);
        }
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">0 us</text>\n", label_w, height - 10);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.1f us</text>\n", label_w + plot_w,
            height - 10, span);
    fputs("</svg>\n", f);
    free(row);
    int rc = 0;
    if (ferror(f) | (fclose(f) != 0)) {
        fprintf(stderr, "rill: writing %s failed\n", svg_path);
        rc = 1;
    }
    trace_free(&t);
    return rc;
}

int rill_tool_trace_merge(const char *out_path, char *const *paths, int n) {
    trace *t = calloc((size_t)n, sizeof *t);
    if (t == NULL) {
        fprintf(stderr, "rill: out of memory\n");
        return 1;
    }
    int loaded = 0, rc = 1;
    for (; loaded < n; loaded++)
        if (load(paths[loaded], &t[loaded]) != 0)
            goto out;
    FILE *f = fopen(out_path, "w");
    if (f == NULL) {
        fprintf(stderr, "rill: cannot write %s: %s\n", out_path, strerror(errno));
        goto out;
    }
    fputs("{\"traceEvents\":[", f);
    const char *sep = "\n";
    size_t events = 0;
    for (int i = 0; i < n; i++) {
        const jval *ev = jget(&t[i].root, "traceEvents");
        for (size_t k = 0; k < ev->count; k++, events++) {
            fputs(sep, f);
            jwrite(f, &ev->items[k]);
            sep = ",\n";
        }
    }
    fprintf(f, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"merged_traces\":%d}}\n", n);
    if (fclose(f) != 0) {
        fprintf(stderr, "rill: cannot write %s: %s\n", out_path, strerror(errno));
        goto out;
    }
    printf("%s: %zu events of %d traces\n", out_path, events, n);
    rc = 0;
out:
    for (int i = 0; i < loaded; i++)
        trace_free(&t[i]);
    free(t);
    return rc;
}
