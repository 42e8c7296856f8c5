/* SPDX-License-Identifier: MIT */
/* Linux implementation of src/platform/memlimit.h: the memory cgroup's
 * limit, read from the cgroup file systems. A process's cgroup is a path
 * inside a hierarchy (/proc/self/cgroup: "0::/path" for v2, "N:memory:/path"
 * for v1's memory controller); the hierarchy is mounted somewhere
 * (/proc/self/mountinfo), possibly from a subdirectory of it, as in a
 * container. The limit that binds is the smallest along the path from the
 * process's cgroup up to the mount. */
#include "platform/memlimit.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_BYTES 4096
#define LINE_BYTES 8192

/* A limit at or above this is "no limit": cgroup v1 writes its largest
 * counter in pages times the page size (9223372036854771712) for none. */
#define NO_LIMIT ((uint64_t)1 << 62)

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s) {
    char *out = s;
    for (const char *in = s; *in != '\0'; in++) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' &&
            in[3] >= '0' && in[3] <= '7') {
            *out++ = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
            in += 3;
        } else {
            *out++ = *in;
        }
    }
    *out = '\0';
}

/* Does the comma-separated list hold word? */
static bool has_word(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; p != NULL && *p != '\0';) {
        if (strncmp(p, word, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return true;
        p = strchr(p, ',');
        if (p != NULL)
            p++;
    }
    return false;
}

/* The mount of a cgroup hierarchy, v2 (v1 false) or v1's with the memory
 * controller: its mount point and the path of the hierarchy it shows. */
static bool find_mount(const char *root, bool v1, char *point, char *hroot) {
    char path[PATH_BYTES], line[LINE_BYTES];
    snprintf(path, sizeof path, "%s/proc/self/mountinfo", root);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool found = false;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        /* id parent dev root point options [optional...] - type source super */
        char *dash = strstr(line, " - ");
        if (dash == NULL)
            continue;
        *dash = '\0';
        char *tail = NULL; /* strtok_r: the program may use strtok in another thread */
        char *type = strtok_r(dash + 3, " ", &tail), *source = strtok_r(NULL, " ", &tail);
        char *super = strtok_r(NULL, " ", &tail);
        if (type == NULL || source == NULL)
            continue;
        if (v1 ? strcmp(type, "cgroup") != 0 || super == NULL || !has_word(super, "memory")
               : strcmp(type, "cgroup2") != 0)
            continue;
        char *field[5] = {NULL}, *save = NULL;
        field[0] = strtok_r(line, " ", &save);
        for (int i = 1; i < 5 && field[i - 1] != NULL; i++)
            field[i] = strtok_r(NULL, " ", &save);
        if (field[4] == NULL)
            continue;
        unescape(field[3]);
        unescape(field[4]);
        snprintf(hroot, PATH_BYTES, "%s", field[3]);
        snprintf(point, PATH_BYTES, "%s", field[4]);
        found = true;
    }
    fclose(f);
    return found;
}

/* The process's cgroup in the v2 hierarchy (v1 false) or in v1's memory
 * hierarchy, from /proc/self/cgroup. */
static bool find_cgroup(const char *root, bool v1, char *cgroup) {
    char path[PATH_BYTES], line[LINE_BYTES];
    snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool found = false;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c2 = '\0';
        const char *controllers = c1 + 1;
        if (v1 ? has_word(controllers, "memory")
               : (strncmp(line, "0:", 2) == 0 && *controllers == '\0')) {
            snprintf(cgroup, PATH_BYTES, "%s", c2 + 1);
            found = true;
        }
    }
    fclose(f);
    return found;
}

/* The limit in file path: its number, NO_LIMIT for "max", a missing file
 * or anything else. */
static uint64_t read_limit(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NO_LIMIT;
    char text[64];
    uint64_t limit = NO_LIMIT;
    if (fgets(text, sizeof text, f) != NULL && text[0] >= '0' && text[0] <= '9') {
        char *end;
        unsigned long long n = strtoull(text, &end, 10);
        if (*end == '\n' || *end == '\0')
            limit = n < NO_LIMIT ? (uint64_t)n : NO_LIMIT;
    }
    fclose(f);
    return limit;
}

/* The smallest limit of file along the process's cgroup and its
 * ancestors in one hierarchy. The cgroup's path is made relative to the
 * mount's root; when it lies outside it (a cgroup namespace the mount does
 * not show), only the mount's own directory is read. */
static uint64_t hierarchy_limit(const char *root, bool v1, const char *file) {
    char point[PATH_BYTES], hroot[PATH_BYTES], cgroup[PATH_BYTES], dir[PATH_BYTES];
    if (!find_mount(root, v1, point, hroot) || !find_cgroup(root, v1, cgroup))
        return NO_LIMIT;
    const char *rel = "";
    size_t n = strlen(hroot);
    if (strcmp(hroot, "/") == 0)
        rel = cgroup;
    else if (strncmp(cgroup, hroot, n) == 0 && (cgroup[n] == '/' || cgroup[n] == '\0'))
        rel = cgroup + n;
    int len = snprintf(dir, sizeof dir, "%s%s%s", root, point, rel);
    if (len < 0 || (size_t)len >= sizeof dir)
        return NO_LIMIT;
    size_t top = strlen(root) + strlen(point); /* dir[0, top) is the mount point */
    while (len > 0 && dir[len - 1] == '/' && (size_t)len > top)
        dir[--len] = '\0';
    uint64_t least = NO_LIMIT;
    for (;;) {
        char path[PATH_BYTES + 32];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        uint64_t limit = read_limit(path);
        if (limit < least)
            least = limit;
        char *slash = strrchr(dir, '/');
        if ((size_t)len <= top || slash == NULL || (size_t)(slash - dir) < top)
            break;
        *slash = '\0';
        len = (int)(slash - dir);
    }
    return least;
}

size_t rill__cgroup_memory_limit_bytes(const char *root) {
    uint64_t v2 = hierarchy_limit(root, false, "memory.max");
    uint64_t v1 = hierarchy_limit(root, true, "memory.limit_in_bytes");
    uint64_t least = v2 < v1 ? v2 : v1;
    if (least >= NO_LIMIT)
        return 0;
    return least < SIZE_MAX ? (size_t)least : SIZE_MAX;
}
