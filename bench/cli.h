/* SPDX-License-Identifier: MIT */
/* The command line and the run that every benchmark program shares: its
 * options (--quick, --json PATH, --only LIST, --help), the watchdog, the
 * header lines (device, cross-core probe, what the ratio means), the
 * report's meta, the selected figures in table order, and the exit status.
 * A program describes itself in a bench_cli and hands main's arguments to
 * bench_cli_main. */
#ifndef RILL_BENCH_CLI_H
#define RILL_BENCH_CLI_H

#include <stdbool.h>

#include "harness.h"

/* One figure: the character that --only names, and the function that
 * measures its rows. run gets the program's context and returns 0, or -1
 * after printing why it failed; a failed figure does not stop the others. */
typedef struct bench_cli_figure {
    char id; /* 'a' or '1'; unique within the table */
    int (*run)(void *ctx);
} bench_cli_figure;

/* What the setup callback tells the header line and the meta. */
typedef struct bench_cli_device {
    char name[128];     /* "AMD EPYC ..." */
    int compute_units;  /* as printed and kept in the meta */
    char platform[128]; /* "" or a line "platform: ..." after the header,
                           kept as meta "platform_version" */
} bench_cli_device;

typedef struct bench_cli {
    const char *program; /* "bench_runtime": starts every message; meta "bench" */
    const char *subject; /* what the rows measure: "rill", "pocl" */
    /* Prefix of a figure's id in the "figure m1 failed" message: "" or "m". */
    const char *figure_prefix;
    /* Usage text after the "--quick" option's name, and the lines listing
     * the figures after "--only LIST   run only the listed figures:". */
    const char *quick_help;
    const char *figures_help;
    /* NULL, or text appended to the header line. */
    const char *header_note;
    const bench_cli_figure *figures; /* borrowed: run in this order */
    int num_figures;
    /* Opens the device and keeps quick and report (which outlives every
     * figure) in ctx; fills device. Returns 0, or -1 after printing why.
     * Runs before anything is printed to stdout. */
    int (*setup)(void *ctx, bool quick, bench_report *report, bench_cli_device *device);
    /* Releases what setup and the figures left, even after a failed setup
     * (rill_shutdown, clReleaseContext). Returns 0, or -1 after printing why. */
    int (*teardown)(void *ctx);
} bench_cli;

/* Runs the program that cli describes, passing ctx to every callback.
 * Parses argv, starts the watchdog (120 s with --quick, 20 min without),
 * creates the report, runs setup, prints the header lines and the table
 * header, fills the meta, runs the selected figures, tears down and writes
 * the JSON file. Returns the process's exit status: 0 when every selected
 * figure ran, 1 on a failure, 2 on a usage error (0 for --help). The
 * watchdog ends a hung run with 124. */
int bench_cli_main(const bench_cli *cli, void *ctx, int argc, char **argv);

#endif
