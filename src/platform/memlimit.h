/* SPDX-License-Identifier: MIT */
/* The platform layer's memory limits: how much memory the system lets this
 * process use before it kills it, which the CPU device turns into a limit
 * that fails an allocation instead (src/backend/cpu/cpu_memory.c). With
 * thread.h and shm.h, the only place that knows the operating system
 * (src/platform/<os>/memlimit.c). */
#ifndef RILL_PLATFORM_MEMLIMIT_H
#define RILL_PLATFORM_MEMLIMIT_H

#include <stddef.h>

/* The memory limit of the process's memory cgroup, in bytes; 0 when there
 * is none (no cgroup file system, no memory controller, or "max"). On
 * Linux: the smallest of cgroup v2's memory.max and cgroup v1's
 * memory.limit_in_bytes over the process's cgroup and its ancestors up to
 * the root of the mount, since a parent's limit binds its children too;
 * the cgroups come from /proc/self/cgroup, the mounts from
 * /proc/self/mountinfo. root is put in front of every path read ("" for
 * the running system; a test passes a directory that holds a made-up
 * proc/self and cgroup tree). Reads files only; never fails. */
size_t rill__cgroup_memory_limit_bytes(const char *root);

#endif
