/*
 * A server's wall clock under the safety suite's control (LD_PRELOAD into one redis-server).
 *
 * Why not libfaketime: Debian's redis-server links jemalloc, which reads the clock while
 * libfaketime is still initialising; libfaketime then returns -1 from clock_gettime and the
 * server never starts (seen with faketime 0.9.10). This shim allocates nothing: it maps a small
 * file named by SAFETY_CLOCK_FILE (three little-endian int64: offset_us, rate_ppm, anchor_us)
 * and answers
 *
 *     fake = real + offset_us + (real - anchor_us) * (rate_ppm - 1e6) / 1e6
 *
 * for CLOCK_REALTIME (and its coarse variant), gettimeofday() and time(). The suite rewrites the
 * file to jump the clock (offset) or to make it run fast (rate). The monotonic clocks are left
 * alone: Redis expires keys by its wall clock (mstime), which is what a clock fault is about.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile const int64_t *control; /* offset_us, rate_ppm, anchor_us; NULL: not mapped yet */
static volatile int tried;

static void map_control(void) {
    if (tried) return;
    tried = 1;
    const char *path = getenv("SAFETY_CLOCK_FILE");
    if (path == NULL) return;
    int fd = (int)syscall(SYS_open, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    void *p = (void *)syscall(SYS_mmap, NULL, 3 * sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    syscall(SYS_close, fd);
    if (p != MAP_FAILED) control = (const int64_t *)p;
}

static int64_t shift_us(int64_t real_us) {
    map_control();
    if (control == NULL) return 0;
    int64_t offset = control[0], rate = control[1], anchor = control[2];
    int64_t drift = 0;
    if (rate > 0 && rate != 1000000 && real_us > anchor)
        drift = (int64_t)((__int128)(real_us - anchor) * (rate - 1000000) / 1000000);
    return offset + drift;
}

static int real_clock(clockid_t id, struct timespec *ts) {
    return (int)syscall(SYS_clock_gettime, id, ts);
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    int rc = real_clock(id, ts);
    if (rc != 0 || (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE)) return rc;
    int64_t us = (int64_t)ts->tv_sec * 1000000 + ts->tv_nsec / 1000;
    int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + shift_us(us) * 1000;
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
    return 0;
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
    struct timeval *volatile out = tv; /* glibc declares tv nonnull; callers may still pass NULL */
    if (out != NULL) {
        out->tv_sec = ts.tv_sec;
        out->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (out != NULL) *out = ts.tv_sec;
    return ts.tv_sec;
}
