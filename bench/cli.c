/* SPDX-License-Identifier: MIT */
/* The command line and the run shared by the benchmark programs (cli.h):
 * options, watchdog, header lines, meta, the selected figures, teardown and
 * the JSON file. It knows nothing of rill or OpenCL: the program's setup and
 * teardown callbacks open and close its device. The selection is a bit mask,
 * bit i for figures[i], so a table holds at most MAX_FIGURES figures. */
#include "cli.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { MAX_FIGURES = 32 };

static void usage(const bench_cli *cli, FILE *f) {
    fprintf(f, "usage: %s [--quick] [--json PATH] [--only ", cli->program);
    for (int i = 0; i < cli->num_figures; i++)
        fprintf(f, "%s%c", i ? "," : "", cli->figures[i].id);
    fprintf(f,
            "]\n"
            "  --quick       %s\n"
            "  --json PATH   also write the figures as JSON to PATH\n"
            "  --only LIST   run only the listed figures:\n"
            "%s",
            cli->quick_help, cli->figures_help);
}

/* Parses "a,c,e" into a mask of figures; returns -1 on an unknown id or an
 * id longer than one character. */
static int parse_only(const bench_cli *cli, const char *list, uint32_t *selected) {
    *selected = 0;
    for (const char *p = list; *p; p++) {
        if (*p == ',')
            continue;
        int i = 0;
        while (i < cli->num_figures && cli->figures[i].id != *p)
            i++;
        if (i == cli->num_figures || (p[1] != ',' && p[1] != '\0'))
            return -1;
        *selected |= UINT32_C(1) << i;
    }
    return 0;
}

/* Parses the options into *quick, *json_path and *selected. Returns -1 to
 * go on, or the exit status: 0 after --help, 2 after a usage error. */
static int parse_args(const bench_cli *cli, int argc, char **argv, bool *quick,
                      const char **json_path, uint32_t *selected) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            *quick = true;
        } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
            *json_path = argv[++i];
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            if (parse_only(cli, argv[++i], selected) != 0) {
                fprintf(stderr, "%s: unknown figure in --only %s\n", cli->program, argv[i]);
                usage(cli, stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(cli, stdout);
            return 0;
        } else {
            fprintf(stderr, "%s: unknown argument '%s'\n", cli->program, argv[i]);
            usage(cli, stderr);
            return 2;
        }
    }
    return -1;
}

/* Prints the lines above the table and the table's header, and fills the
 * meta. device outlives the report: the meta points into it. */
static int print_header(const bench_cli *cli, bench_report *report, bool quick,
                        const bench_cli_device *device) {
    const char *mode = quick ? "quick" : "full";
    double probe = bench_probe_hop_ns();
    int cpu_a, cpu_b;
    bench_probe_cpus(&cpu_a, &cpu_b);
    long processors = sysconf(_SC_NPROCESSORS_ONLN);
    printf("%s: %s, %d compute units, %ld processors online, %s run%s\n", cli->program,
           device->name, device->compute_units, processors, mode,
           cli->header_note ? cli->header_note : "");
    if (device->platform[0])
        printf("platform: %s\n", device->platform);
    if (isnan(probe))
        printf("cross-core probe: unavailable (fewer than two processors to pin to)\n");
    else
        printf("cross-core probe: processors %d and %d, %.0f ns per one-way hop now\n", cpu_a,
               cpu_b, probe);
    printf("ratio = %s median / baseline median; hop ns = probe before/after the row\n\n",
           cli->subject);
    bench_report_header(report);
    if (bench_report_meta_str(report, "bench", cli->program) ||
        bench_report_meta_str(report, "device", device->name) ||
        (device->platform[0] &&
         bench_report_meta_str(report, "platform_version", device->platform)) ||
        bench_report_meta_num(report, "compute_units", device->compute_units) ||
        bench_report_meta_num(report, "processors", (double)processors) ||
        bench_report_meta_num(report, "probe_cpu_a", cpu_a) ||
        bench_report_meta_num(report, "probe_cpu_b", cpu_b) ||
        bench_report_meta_str(report, "mode", mode)) {
        fprintf(stderr, "%s: out of memory\n", cli->program);
        return -1;
    }
    return 0;
}

int bench_cli_main(const bench_cli *cli, void *ctx, int argc, char **argv) {
    if (cli->num_figures < 1 || cli->num_figures > MAX_FIGURES) {
        fprintf(stderr, "%s: %d figures; 1 to %d fit\n", cli->program, cli->num_figures,
                MAX_FIGURES);
        return 1;
    }
    bool quick = false;
    const char *json_path = NULL;
    uint32_t selected = UINT32_MAX;
    int status = parse_args(cli, argc, argv, &quick, &json_path, &selected);
    if (status >= 0)
        return status;
    /* A hang is a failure: generous limits, far above a normal run's time. */
    if (bench_watchdog_start(quick ? 120 : 1200) != 0) {
        fprintf(stderr, "%s: cannot start the watchdog thread\n", cli->program);
        return 1;
    }
    bench_report *report = bench_report_create(stdout, cli->subject);
    if (!report) {
        fprintf(stderr, "%s: out of memory\n", cli->program);
        return 1;
    }
    bench_cli_device device = {.name = "", .compute_units = 0, .platform = ""};
    bool set_up = cli->setup(ctx, quick, report, &device) == 0 &&
                  print_header(cli, report, quick, &device) == 0;
    int rc = set_up ? 0 : 1;
    /* A failed figure does not stop the others: each opens its own streams or queues. */
    for (int i = 0; set_up && i < cli->num_figures; i++) {
        if ((selected >> i & 1u) && cli->figures[i].run(ctx) != 0) {
            fprintf(stderr, "%s: figure %s%c failed\n", cli->program, cli->figure_prefix,
                    cli->figures[i].id);
            rc = 1;
        }
    }
    bench_watchdog_note("teardown");
    if (cli->teardown(ctx) != 0)
        rc = 1;
    if (json_path && bench_report_write_json(report, json_path) != 0)
        rc = 1;
    bench_report_destroy(report);
    return rc;
}
