/*
 * clockstep: steps the wall clock of one process, not the machine's (e2e fault "clock-step",
 * docs/reliability.md). Preloaded into the process (LD_PRELOAD), it adds an offset to every
 * CLOCK_REALTIME reading (clock_gettime, gettimeofday, time) and takes it off absolute
 * CLOCK_REALTIME sleeps, so the process sees its wall clock jump as it would after a step of
 * the system clock; CLOCK_MONOTONIC and every other clock pass through untouched.
 *
 * The offset is the signed 64-bit little-endian count of nanoseconds in the first 8 bytes of
 * the file named by LAYERCAST_CLOCK_OFFSET_FILE, mapped shared: a write of those bytes by the
 * test (in place, never truncating the file) takes effect at the process's next reading.
 *
 * Why not libfaketime: Debian 12's 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC=1 hands a shifted
 * time to absolute CLOCK_MONOTONIC clock_nanosleep (EINVAL: GStreamer's and Rust's timed sleeps
 * fail) and shortens monotonic condition-variable waits; the fixes are not in a Debian release
 * on this machine. This shim fakes one clock and nothing else.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*gettime_fn)(clockid_t, struct timespec *);
typedef int (*nanosleep_fn)(clockid_t, int, const struct timespec *, struct timespec *);

static gettime_fn real_gettime;
static nanosleep_fn real_nanosleep;
static const volatile int64_t *offset_ns;

__attribute__((constructor)) static void clockstep_init(void) {
    real_gettime = (gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    real_nanosleep = (nanosleep_fn)dlsym(RTLD_NEXT, "clock_nanosleep");
    const char *f = getenv("LAYERCAST_CLOCK_OFFSET_FILE");
    if (!f) return;
    int fd = open(f, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    void *p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p != MAP_FAILED) offset_ns = (const volatile int64_t *)p;
}

static int64_t offset(void) {
    return offset_ns ? __atomic_load_n(offset_ns, __ATOMIC_RELAXED) : 0;
}

static int is_wall(clockid_t c) {
    return c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE || c == CLOCK_TAI;
}

static void shift(struct timespec *ts, int64_t ns) {
    int64_t t = (int64_t)ts->tv_nsec + ns % 1000000000;
    ts->tv_sec += ns / 1000000000 + t / 1000000000;
    t %= 1000000000;
    if (t < 0) {
        t += 1000000000;
        ts->tv_sec -= 1;
    }
    ts->tv_nsec = t;
}

int clock_gettime(clockid_t c, struct timespec *ts) {
    if (!real_gettime) clockstep_init();
    int r = real_gettime(c, ts);
    if (r == 0 && is_wall(c)) shift(ts, offset());
    return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    struct timespec ts;
    int r = clock_gettime(CLOCK_REALTIME, &ts);
    if (r == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return r;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}

int clock_nanosleep(clockid_t c, int flags, const struct timespec *req, struct timespec *rem) {
    if (!real_nanosleep) clockstep_init();
    if ((flags & TIMER_ABSTIME) && is_wall(c) && req) {
        struct timespec t = *req;
        shift(&t, -offset());
        return real_nanosleep(c, flags, &t, rem);
    }
    return real_nanosleep(c, flags, req, rem);
}
