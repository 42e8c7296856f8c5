/* SPDX-License-Identifier: MIT */
/* Two processes share a device buffer and synchronise only through an
 * interprocess event. The producer allocates the buffer, queues work that
 * fills it (x = 1, then x = x + 2), records an interprocess event after
 * that work, and starts this program again as the consumer, sending it the
 * two handles (plain bytes) through a pipe. The consumer maps the buffer,
 * makes its stream wait on the event, and sums the buffer on the device:
 * 3 * 2^20 = 3145728, never a value from before the producer's work. So
 * that the consumer's wait really waits, the producer's fill starts only
 * once the consumer says, on a second pipe, that its wait is queued. The
 * producer frees the buffer once the consumer has exited. */
#define _POSIX_C_SOURCE 200809L

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rill.h>

#define N ((size_t)1 << 20)

static int check(rill_status st, const char *what) {
    if (st != RILL_OK)
        fprintf(stderr, "%s: %s: %s\n", what, rill_status_name(st), rill_last_error());
    return st != RILL_OK;
}

/* Holds the producer's stream until the consumer's wait is queued (a byte,
 * or the pipe closed by a consumer that failed), 10 s at most. */
static void until_consumer_waits(void *user_data) {
    struct pollfd p = {*(const int *)user_data, POLLIN, 0};
    char byte;
    if (poll(&p, 1, 10000) == 1 && read(p.fd, &byte, 1) < 0)
        perror("read");
}

static int read_all(int fd, void *p, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0)
            return 0;
        got += (size_t)r;
    }
    return 1;
}

/* queued_fd: the second pipe's write end, or -1. */
static int consumer(int queued_fd) {
    rill_ipc_mem_handle mh;
    rill_ipc_event_handle eh;
    float *x, *sum, result = 0.0f;
    rill_event *ready;
    if (!read_all(0, &mh, sizeof mh) || !read_all(0, &eh, sizeof eh)) {
        fprintf(stderr, "consumer: the producer sent no handles\n");
        return 1;
    }
    if (check(rill_ipc_open_mem_handle(&mh, (void **)&x), "rill_ipc_open_mem_handle") ||
        check(rill_event_open_ipc_handle(&eh, &ready), "rill_event_open_ipc_handle") ||
        check(rill_malloc(NULL, sizeof(float), (void **)&sum), "rill_malloc"))
        return 1;
    /* The only thing that orders the sum after the producer's work: */
    if (check(rill_stream_wait_event(NULL, ready), "rill_stream_wait_event"))
        return 1;
    if (queued_fd >= 0 && (write(queued_fd, "w", 1) != 1 || close(queued_fd) != 0))
        perror("write");
    if (check(rill_op_sum_f32(NULL, sum, x, N), "rill_op_sum_f32") ||
        check(rill_memcpy(&result, sum, sizeof result), "rill_memcpy"))
        return 1;
    printf("consumer: sum of the shared buffer = %.0f\n", result);
    if (check(rill_free(sum), "rill_free") || check(rill_event_destroy(ready), "destroy") ||
        check(rill_ipc_close_mem_handle(x), "rill_ipc_close_mem_handle"))
        return 1;
    return check(rill_shutdown(), "rill_shutdown");
}

static int producer(void) {
    float *x;
    rill_event *ready;
    rill_ipc_mem_handle mh;
    rill_ipc_event_handle eh;
    static int queued[2];
    if (pipe(queued) != 0) {
        perror("pipe");
        return 1;
    }
    if (check(rill_malloc(NULL, N * sizeof(float), (void **)&x), "rill_malloc") ||
        check(rill_event_create(RILL_EVENT_INTERPROCESS, &ready), "rill_event_create") ||
        check(rill_launch_host_func(NULL, until_consumer_waits, &queued[0]),
              "rill_launch_host_func") ||
        check(rill_op_fill_f32(NULL, x, 1.0f, N), "rill_op_fill_f32") ||
        check(rill_op_add_scalar_f32(NULL, x, x, 2.0f, N), "rill_op_add_scalar_f32") ||
        check(rill_event_record(ready, NULL), "rill_event_record") ||
        check(rill_ipc_get_mem_handle(x, &mh), "rill_ipc_get_mem_handle") ||
        check(rill_event_ipc_handle(ready, &eh), "rill_event_ipc_handle"))
        return 1;
    printf("producer: %zu floats queued for filling, event recorded\n", N);
    fflush(stdout); /* before fork: the child must not print it again */

    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        char fd[16];
        snprintf(fd, sizeof fd, "%d", queued[1]);
        char *argv[] = {"ipc_producer_consumer", "--consumer", fd, NULL};
        dup2(fds[0], 0);
        close(fds[0]);
        close(fds[1]);
        close(queued[0]);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(fds[0]);
    close(queued[1]);
    if (write(fds[1], &mh, sizeof mh) != (ssize_t)sizeof mh ||
        write(fds[1], &eh, sizeof eh) != (ssize_t)sizeof eh)
        perror("write");
    close(fds[1]);
    int status = 0;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("producer: the consumer %s\n", ok ? "finished" : "failed");
    if (check(rill_free(x), "rill_free") || check(rill_event_destroy(ready), "destroy") ||
        check(rill_shutdown(), "rill_shutdown"))
        return 1;
    close(queued[0]); /* the host function that reads it has run */
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--consumer") == 0)
        return consumer(argc == 3 ? atoi(argv[2]) : -1);
    return producer();
}
