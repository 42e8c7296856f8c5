/* SPDX-License-Identifier: MIT */
/* The CPU devices' memory: the limit that makes filling memory end in RILL_ERROR_OUT_OF_MEMORY
 * rather than the kernel's out-of-memory killer. The memory cgroup's limit read from made-up
 * cgroup trees (v2, v1, "max", nested, in a container's namespace); the default and
 * RILL_CPU_MEMORY; allocation past the limit, with host memory and a second device drawing on
 * the same memory; and, where this process may create a memory cgroup, a process in a 3 GiB
 * cgroup that fills its memory and gets the error.
 *
 * The limit is counted when the pool commits memory, not when pages are touched, so the tests
 * that reach the default limit allocate gigabytes without touching them: they take no memory. */
#include "fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cpu/cpu.h"
#include "platform/memlimit.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* ---- a made-up cgroup tree ---- */

/* Writes text into root/path, making the directories on the way. */
static void put(const char *root, const char *path, const char *text) {
    char full[512];
    snprintf(full, sizeof full, "%s/%s", root, path);
    for (char *p = full + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        if (mkdir(full, 0755) != 0 && errno != EEXIST)
            fail_msg("mkdir %s: %s", full, strerror(errno));
        *p = '/';
    }
    FILE *f = fopen(full, "w");
    if (f == NULL)
        fail_msg("fopen %s: %s", full, strerror(errno));
    fputs(text, f);
    fclose(f);
}

static void new_root(char *root, size_t size) {
    const char *tmp = getenv("TMPDIR");
    snprintf(root, size, "%s/rill-test-cgroup-XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
    assert_non_null(mkdtemp(root));
}

static void remove_root(const char *root) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

#define V2_MOUNT "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
#define V1_MOUNTS                                                                                  \
    "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"                                   \
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"                         \
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"                   \
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"

/* platform/memlimit.h: cgroup v2's memory.max is the limit, and "a parent's limit binds its
 * children too": the smallest along the path counts. */
static void test_memlimit_cgroup_v2_memory_max(void **state) {
    (void)state;
    char root[256];
    new_root(root, sizeof root);
    put(root, "proc/self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" V2_MOUNT);
    put(root, "proc/self/cgroup", "0::/user.slice/app.scope\n");
    put(root, "sys/fs/cgroup/memory.max", "max\n");
    put(root, "sys/fs/cgroup/user.slice/memory.max", "max\n");
    put(root, "sys/fs/cgroup/user.slice/app.scope/memory.max", "3221225472\n");
    assert_int_equal(rill__cgroup_memory_limit_bytes(root), 3 * GiB);
    put(root, "sys/fs/cgroup/user.slice/memory.max", "2147483648\n");
    assert_int_equal(rill__cgroup_memory_limit_bytes(root), 2 * GiB);
    remove_root(root);
}

/* cgroup v1's memory.limit_in_bytes, in a hybrid layout (v1 controllers beside an empty v2
 * hierarchy), the way this process's own /proc/self/cgroup names its memory cgroup; the root's
 * "no limit" (the largest page count times the page size) is none. */
static void test_memlimit_cgroup_v1_limit_in_bytes(void **state) {
    (void)state;
    char root[256];
    new_root(root, sizeof root);
    put(root, "proc/self/mountinfo", V1_MOUNTS);
    put(root, "proc/self/cgroup", "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n");
    put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put(root, "sys/fs/cgroup/memory/process_api/memory.limit_in_bytes", "9223372036854771712\n");
    put(root, "sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes", "3221225472\n");
    assert_int_equal(rill__cgroup_memory_limit_bytes(root), 3 * GiB);
    remove_root(root);

    /* A container: the mount shows the process's own cgroup as its root. */
    new_root(root, sizeof root);
    put(root, "proc/self/mountinfo",
        "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n");
    put(root, "proc/self/cgroup", "4:memory:/docker/abc\n");
    put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "536870912\n");
    assert_int_equal(rill__cgroup_memory_limit_bytes(root), 512 * MiB);
    remove_root(root);
}

/* "0 when there is none (no cgroup file system, no memory controller, or "max")". */
static void test_memlimit_cgroup_max_or_missing_is_none(void **state) {
    (void)state;
    char root[256];
    new_root(root, sizeof root);
    assert_int_equal(rill__cgroup_memory_limit_bytes(root), 0); /* no /proc at all */
    put(root, "proc/self/mountinfo", V2_MOUNT);
    put(root, "proc/self/cgroup", "0::/a\n");
    assert_int_equal(rill__cgroup_memory_limit_bytes(root), 0); /* no memory.max files */
    put(root, "sys/fs/cgroup/a/memory.max", "max\n");
    assert_int_equal(rill__cgroup_memory_limit_bytes(root), 0);
    remove_root(root);

    new_root(root, sizeof root);
    put(root, "proc/self/mountinfo", V1_MOUNTS);
    put(root, "proc/self/cgroup", "4:memory:/\n0::/\n");
    put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put(root, "sys/fs/cgroup/unified/memory.max", "max\n");
    assert_int_equal(rill__cgroup_memory_limit_bytes(root), 0);
    remove_root(root);
}

/* ---- the default and RILL_CPU_MEMORY ---- */

/* rill.h: by default the CPU devices take "3/4 of the smaller of physical memory and the
 * process's memory cgroup limit"; RILL_CPU_MEMORY sets a size or a percentage instead, and a
 * value that is neither makes no CPU device, with a sentence naming the variable. */
static void test_memlimit_default_and_setting(void **state) {
    (void)state;
    char how[320];
    size_t out = 0;
    assert_true(rill__cpu_memory_choose(NULL, 24 * GiB, 0, &out, how, sizeof how));
    assert_int_equal(out, 18 * GiB);
    assert_non_null(strstr(how, "physical memory"));
    assert_true(rill__cpu_memory_choose("", 24 * GiB, 3 * GiB, &out, how, sizeof how));
    assert_int_equal(out, 3 * GiB / 4 * 3);
    assert_non_null(strstr(how, "cgroup"));
    assert_true(rill__cpu_memory_choose(NULL, 24 * GiB, 64 * GiB, &out, how, sizeof how));
    assert_int_equal(out, 18 * GiB); /* a cgroup above the machine's memory does not count */

    static const struct {
        const char *env;
        size_t bytes;
    } good[] = {{"8G", 8 * GiB},    {"8GiB", 8 * GiB}, {"8gb", 8 * GiB},  {"512M", 512 * MiB},
                {"1T", 1024 * GiB}, {"4096", 4096},    {"50%", 12 * GiB}, {"100%", 24 * GiB}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        assert_true(rill__cpu_memory_choose(good[i].env, 24 * GiB, 0, &out, how, sizeof how));
        assert_int_equal(out, good[i].bytes);
        assert_non_null(strstr(how, "RILL_CPU_MEMORY="));
    }
    assert_true(rill__cpu_memory_choose("50%", 24 * GiB, 4 * GiB, &out, how, sizeof how));
    assert_int_equal(out, 2 * GiB); /* a percentage of the cgroup's limit */

    static const char *const bad[] = {"abc", "0", "-1G", "8X", "8GG", "101%", "0%", "1.5G", " 8G"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(rill__cpu_memory_choose(bad[i], 24 * GiB, 0, &out, how, sizeof how));
        assert_non_null(strstr(how, "RILL_CPU_MEMORY="));
        assert_non_null(strstr(how, bad[i]));
    }
}

/* With RILL_CPU_MEMORY naming no amount, the CPU devices do not start and the runtime says
 * why; unset, they start again. */
static void test_memlimit_bad_setting_is_no_device(void **state) {
    (void)state;
    RT_OK(rill_shutdown());
    setenv("RILL_CPU_MEMORY", "lots", 1);
    int count = -1;
    rill_status st = rill_device_count(&count);
    char sentence[1024];
    snprintf(sentence, sizeof sentence, "%s", rill_last_error());
    unsetenv("RILL_CPU_MEMORY");
    RT_OK(rill_shutdown());
    if (st == RILL_OK)
        assert_int_equal(count, 0);
    rill_device *dev = NULL;
    setenv("RILL_CPU_MEMORY", "lots", 1);
    st = rill_device_get(0, &dev);
    snprintf(sentence, sizeof sentence, "%s", rill_last_error());
    unsetenv("RILL_CPU_MEMORY");
    assert_int_equal(st, RILL_ERROR_NO_DEVICE);
    assert_non_null(strstr(sentence, "RILL_CPU_MEMORY='lots'"));
    RT_OK(rill_shutdown());
    RT_OK(rill_device_get(0, &dev));
}

/* rill_device_info.memory_bytes of a CPU device is the default: 3/4 of this machine's physical
 * memory or of this process's cgroup limit, whichever is smaller. */
static void test_memlimit_device_reports_the_default(void **state) {
    (void)state;
    RT_OK(rill_shutdown());
    unsetenv("RILL_CPU_MEMORY");
    size_t physical = rill__physical_memory_bytes(), cgroup = rill__cgroup_memory_limit_bytes("");
    size_t want = 0;
    char how[320];
    assert_true(rill__cpu_memory_choose(NULL, physical, cgroup, &want, how, sizeof how));
    rill_device *dev = NULL;
    rill_device_info info;
    RT_OK(rill_device_get(0, &dev));
    RT_OK(rill_device_get_info(dev, &info));
    assert_int_equal(info.memory_bytes, want);
    assert_true(info.memory_bytes <= physical / 4 * 3);
    if (cgroup != 0)
        assert_true(info.memory_bytes <= cgroup / 4 * 3);
}

/* Allocates blocks of `block` bytes on dev until the pool refuses one (at most `most` of them),
 * without touching them; returns how many it got, in ptrs, and the status and sentence of the
 * refusal. */
static size_t fill(rill_device *dev, size_t block, void **ptrs, size_t most, rill_status *st,
                   char *sentence, size_t size) {
    size_t n = 0;
    *st = RILL_OK;
    while (n < most && (*st = rill_malloc(dev, block, &ptrs[n])) == RILL_OK)
        n++;
    snprintf(sentence, size, "%s", rill_last_error());
    return n;
}

static void free_all(void **ptrs, size_t n) {
    for (size_t i = 0; i < n; i++)
        RT_OK(rill_free(ptrs[i]));
}

/* The program: allocating until it fails ends in RILL_ERROR_OUT_OF_MEMORY at the
 * default limit (not in the kernel's killer at the machine's memory), with the pool's figures,
 * the device's memory and what sets it in the sentence. rill_mem_set_limit still lowers what a
 * device may reserve, and a limit above the device's memory does not raise it. */
static void test_memlimit_filling_the_default_is_out_of_memory(void **state) {
    (void)state;
    RT_OK(rill_shutdown());
    unsetenv("RILL_CPU_MEMORY");
    rill_device *dev = NULL;
    rill_device_info info;
    RT_OK(rill_device_get(0, &dev));
    RT_OK(rill_device_get_info(dev, &info));
    size_t most = 2 * (info.memory_bytes / GiB) + 4; /* before: no refusal up to twice memory */
    void **ptrs = calloc(most, sizeof *ptrs);
    assert_non_null(ptrs);
    rill_status st;
    char sentence[1024];
    size_t n = fill(dev, GiB, ptrs, most, &st, sentence, sizeof sentence);
    if (st != RILL_ERROR_OUT_OF_MEMORY)
        fail_msg("%zu allocations of 1 GiB (%s) succeeded on a device of %zu bytes", n,
                 rill_status_name(st), info.memory_bytes);
    assert_true(n * GiB <= info.memory_bytes);
    assert_true((n + 1) * GiB > info.memory_bytes - GiB / 8); /* what is left is less than 1 GiB */
    assert_non_null(strstr(sentence, "rill_malloc: cannot allocate 1073741824 bytes on device 0"));
    assert_non_null(strstr(sentence, "bytes in use"));
    assert_null(strstr(sentence, "rill_mem_set_limit")); /* no limit stood in the way */
    assert_non_null(strstr(sentence, "for the CPU devices and host memory together"));
    assert_non_null(strstr(sentence, "RILL_CPU_MEMORY=SIZE or PERCENT% sets it"));

    /* A limit above the device's memory does not raise it. */
    RT_OK(rill_mem_set_limit(dev, 2 * info.memory_bytes));
    void *p = NULL;
    RT_STATUS(RILL_ERROR_OUT_OF_MEMORY, rill_malloc(dev, GiB, &p));
    assert_null(p);
    free_all(ptrs, n);
    RT_OK(rill_mem_empty_cache(dev));

    /* A lower limit binds, and its sentence says to raise it. */
    RT_OK(rill_mem_set_limit(dev, 2 * GiB));
    n = fill(dev, GiB, ptrs, most, &st, sentence, sizeof sentence);
    assert_int_equal(st, RILL_ERROR_OUT_OF_MEMORY);
    assert_int_equal(n, 2);
    assert_non_null(strstr(sentence, "raise the limit with rill_mem_set_limit"));
    free_all(ptrs, n);
    RT_OK(rill_mem_set_limit(dev, 0));
    RT_OK(rill_mem_empty_cache(dev));
    free(ptrs);
}

/* rill.h: "rill_malloc_host counts against it too": host memory and device memory draw on the
 * same memory, and what one frees the other may take. */
static void test_memlimit_host_memory_counts(void **state) {
    (void)state;
    RT_OK(rill_shutdown());
    setenv("RILL_CPU_MEMORY", "64M", 1);
    rill_device *dev = NULL;
    rill_status st = rill_device_get(0, &dev);
    unsetenv("RILL_CPU_MEMORY");
    RT_OK(st);
    rill_device_info info;
    RT_OK(rill_device_get_info(dev, &info));
    assert_int_equal(info.memory_bytes, 64 * MiB);
    void *host = NULL, *p = NULL;
    RT_OK(rill_malloc_host(48 * MiB, &host));
    RT_STATUS(RILL_ERROR_OUT_OF_MEMORY, rill_malloc(dev, 32 * MiB, &p));
    assert_non_null(strstr(rill_last_error(), "RILL_CPU_MEMORY=64M"));
    RT_STATUS(RILL_ERROR_OUT_OF_MEMORY, rill_malloc_host(32 * MiB, &p));
    assert_non_null(strstr(rill_last_error(), "rill_malloc_host: cannot allocate"));
    RT_OK(rill_free_host(host));
    RT_OK(rill_malloc(dev, 32 * MiB, &p));
    RT_OK(rill_free(p));
    RT_OK(rill_shutdown());
}

/* rill.h: the CPU devices share their memory: "together they take at most memory_bytes". */
static void test_memlimit_devices_share_the_memory(void **state) {
    (void)state;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 2)
        skip();
    RT_OK(rill_shutdown());
    const char *was = getenv("RILL_CPU_DEVICES"); /* ctest runs the unit tests with 2 too */
    char devices[32] = "";
    if (was != NULL)
        snprintf(devices, sizeof devices, "%s", was);
    setenv("RILL_CPU_MEMORY", "64M", 1);
    setenv("RILL_CPU_DEVICES", "2", 1);
    rill_device *d0 = NULL, *d1 = NULL;
    rill_status st0 = rill_device_get(0, &d0), st1 = rill_device_get(1, &d1);
    unsetenv("RILL_CPU_MEMORY");
    if (was != NULL)
        setenv("RILL_CPU_DEVICES", devices, 1);
    else
        unsetenv("RILL_CPU_DEVICES");
    RT_OK(st0);
    RT_OK(st1);
    void *a = NULL, *b = NULL;
    RT_OK(rill_malloc(d0, 40 * MiB, &a));
    RT_STATUS(RILL_ERROR_OUT_OF_MEMORY, rill_malloc(d1, 40 * MiB, &b));
    assert_non_null(strstr(rill_last_error(), "on device 1"));
    RT_OK(rill_free(a));
    RT_OK(rill_mem_empty_cache(d0));
    RT_OK(rill_malloc(d1, 40 * MiB, &b));
    RT_OK(rill_free(b));
    RT_OK(rill_shutdown());
}

/* ---- a real memory cgroup ---- */

#define CHILD_ENV "RILL_TEST_MEMLIMIT_CHILD"

/* ThreadSanitizer keeps a shadow of every byte the program touches, in memory the cgroup charges
 * too: a child under it is killed for its shadow before rill's limit is reached. */
#if defined(__SANITIZE_THREAD__)
#define SHADOW_CHARGED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHADOW_CHARGED 1
#endif
#endif
#ifndef SHADOW_CHARGED
#define SHADOW_CHARGED 0
#endif

/* The child: fills its memory, touching every page, 64 MiB at a time, until rill refuses.
 * Exits 0 with the sentence on stdout when the refusal is RILL_ERROR_OUT_OF_MEMORY. */
static int child_fill(void) {
    rill_device *dev = NULL;
    rill_device_info info;
    if (rill_device_get(0, &dev) != RILL_OK || rill_device_get_info(dev, &info) != RILL_OK) {
        printf("no device: %s\n", rill_last_error());
        return 2;
    }
    printf("memory_bytes %zu\n", info.memory_bytes);
    fflush(stdout);
    size_t n = 0;
    void *p = NULL;
    rill_status st;
    while ((st = rill_malloc(dev, 64 * MiB, &p)) == RILL_OK) {
        memset(p, 1, 64 * MiB);
        n++;
    }
    printf("filled %zu MiB: %s: %s\n", n * 64, rill_status_name(st), rill_last_error());
    return st == RILL_ERROR_OUT_OF_MEMORY ? 0 : 2;
}

/* Reads the first line of path into buf; false when it cannot. */
static bool read_first_line(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

static bool write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        return false;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text);
}

/* The directory of this process's memory cgroup where a child cgroup may be made: cgroup v1's
 * memory hierarchy, else v2's when its memory controller is available there. */
static bool own_memory_cgroup(char *dir, size_t size, bool *v2) {
    char line[1024];
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f == NULL)
        return false;
    char v1path[512] = "", v2path[512] = "";
    bool has_v1 = false, has_v2 = false;
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c2 = '\0';
        if (strcmp(c1 + 1, "memory") == 0 || strstr(c1 + 1, "memory,") != NULL ||
            (strlen(c1 + 1) > 7 && strcmp(c1 + 1 + strlen(c1 + 1) - 7, ",memory") == 0)) {
            snprintf(v1path, sizeof v1path, "%s", c2 + 1);
            has_v1 = true;
        } else if (strncmp(line, "0:", 2) == 0 && c1[1] == '\0') {
            snprintf(v2path, sizeof v2path, "%s", c2 + 1);
            has_v2 = true;
        }
    }
    fclose(f);
    char probe[1100], text[256];
    if (has_v1) {
        snprintf(dir, size, "/sys/fs/cgroup/memory%s", v1path);
        snprintf(probe, sizeof probe, "%s/memory.limit_in_bytes", dir);
        if (access(probe, W_OK) == 0) {
            *v2 = false;
            return true;
        }
    }
    if (has_v2) {
        snprintf(dir, size, "/sys/fs/cgroup%s", v2path);
        snprintf(probe, sizeof probe, "%s/cgroup.subtree_control", dir);
        if (read_first_line(probe, text, sizeof text) && strstr(text, "memory") != NULL) {
            *v2 = true;
            return true;
        }
    }
    return false;
}

/* The rule: "a process in a 3 GiB cgroup must get the error, not a kill". A child
 * process in a new memory cgroup of 3 GiB fills its memory page by page; it must end with
 * RILL_ERROR_OUT_OF_MEMORY, at no more than 3/4 of the cgroup. Skipped where this process may
 * not create a memory cgroup (not root, cgroups mounted read-only, no memory controller). */
static void test_memlimit_process_in_a_3gib_cgroup_gets_the_error(void **state) {
    (void)state;
    char parent[600], dir[700], path[800], reason[900] = "";
    bool v2 = false;
    if (SHADOW_CHARGED) {
        print_message("skipped: ThreadSanitizer's shadow memory counts against the cgroup\n");
        skip();
    }
    if (!own_memory_cgroup(parent, sizeof parent, &v2)) {
        print_message("skipped: no writable memory cgroup of this process (needs root and "
                      "cgroup v1's memory hierarchy or v2's memory controller)\n");
        skip();
    }
    snprintf(dir, sizeof dir, "%s/rill-test-memlimit-%d", parent, (int)getpid());
    if (mkdir(dir, 0755) != 0) {
        print_message("skipped: cannot create the cgroup %s: %s\n", dir, strerror(errno));
        skip();
    }
    snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
    if (!write_file(path, "3221225472")) {
        snprintf(reason, sizeof reason, "cannot write %s: %s", path, strerror(errno));
        rmdir(dir);
        print_message("skipped: %s\n", reason);
        skip();
    }
    if (v2) { /* no swap: the limit is the memory */
        snprintf(path, sizeof path, "%s/memory.swap.max", dir);
        (void)write_file(path, "0");
    }
    RT_OK(rill_shutdown()); /* no thread of rill runs while the child forks */
    extern char **environ;
    size_t num_env = 0;
    while (environ[num_env] != NULL)
        num_env++;
    char **envp = calloc(num_env + 2, sizeof *envp);
    assert_non_null(envp);
    memcpy(envp, environ, num_env * sizeof *envp);
    envp[num_env] = (char *)CHILD_ENV "=1";
    char procs[800], out_path[256];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
    snprintf(out_path, sizeof out_path, "/tmp/rill-test-memlimit-%d.out", (int)getpid());
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(procs, O_WRONLY);
        if (fd < 0 || write(fd, "0", 1) != 1)
            _exit(3);
        close(fd);
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out < 0)
            _exit(4);
        dup2(out, 1);
        dup2(out, 2);
        char *const argv[] = {(char *)"test_memlimit", NULL};
        execve("/proc/self/exe", argv, envp);
        _exit(5);
    }
    free(envp);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char text[2048] = "";
    FILE *f = fopen(out_path, "r");
    if (f != NULL) {
        size_t got = fread(text, 1, sizeof text - 1, f);
        text[got] = '\0';
        fclose(f);
    }
    unlink(out_path);
    for (int i = 0; i < 100 && rmdir(dir) != 0 && errno == EBUSY; i++)
        rt_sleep_us(10000);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
        print_message("skipped: cannot move a process into %s\n", dir);
        skip();
    }
    if (WIFSIGNALED(status))
        fail_msg("the child in a 3 GiB memory cgroup was killed by signal %d (%s) instead of "
                 "getting RILL_ERROR_OUT_OF_MEMORY; its output:\n%s",
                 WTERMSIG(status), WTERMSIG(status) == SIGKILL ? "the out-of-memory killer" : "",
                 text);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the child exited with %d; its output:\n%s", WEXITSTATUS(status), text);
    size_t memory = 0;
    assert_int_equal(sscanf(text, "memory_bytes %zu", &memory), 1);
    assert_true(memory <= 3 * GiB / 4 * 3 && memory > 3 * GiB / 4 * 3 - 64 * MiB);
    print_message("%s", text);
    assert_non_null(strstr(text, "RILL_ERROR_OUT_OF_MEMORY"));
    assert_non_null(strstr(text, "cgroup"));
}

int main(int argc, char **argv) {
    if (getenv(CHILD_ENV) != NULL) {
        int rc = child_fill();
        rill_shutdown();
        return rc;
    }
    unsetenv("RILL_CPU_MEMORY");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memlimit_cgroup_v2_memory_max),
        cmocka_unit_test(test_memlimit_cgroup_v1_limit_in_bytes),
        cmocka_unit_test(test_memlimit_cgroup_max_or_missing_is_none),
        cmocka_unit_test(test_memlimit_default_and_setting),
        cmocka_unit_test(test_memlimit_bad_setting_is_no_device),
        cmocka_unit_test(test_memlimit_device_reports_the_default),
        cmocka_unit_test(test_memlimit_filling_the_default_is_out_of_memory),
        cmocka_unit_test(test_memlimit_host_memory_counts),
        cmocka_unit_test(test_memlimit_devices_share_the_memory),
        cmocka_unit_test(test_memlimit_process_in_a_3gib_cgroup_gets_the_error),
    };
    return RT_RUN(tests);
}
