/*
 * clockshift: an LD_PRELOAD library that shifts a process's wall clock (CLOCK_REALTIME and
 * its coarse variant, gettimeofday, time) by the signed number of milliseconds written in the
 * file named by KLC_CLOCK_FILE, read on every call through a shared mapping, so the chaos
 * harness can step the clock while the process runs. CLOCK_MONOTONIC and every other clock
 * are left alone, as an NTP step leaves them. The real time comes from raw system calls, never
 * from dlsym: libfaketime's lookup of the real functions recurses into jemalloc (which
 * redis-server uses) and cannot start there. Imports libc only.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const volatile char *shift_map;
static int shift_state; /* 0 not tried, 1 mapped, 2 no file */

static void shift_init(void) {
    const char *path = getenv("KLC_CLOCK_FILE");
    void *m = MAP_FAILED;
    if (path != NULL) {
        int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            m = mmap(NULL, 64, PROT_READ, MAP_SHARED, fd, 0);
            syscall(SYS_close, fd);
        }
    }
    if (m != MAP_FAILED) {
        shift_map = m;
        __atomic_store_n(&shift_state, 1, __ATOMIC_RELEASE);
    } else {
        __atomic_store_n(&shift_state, 2, __ATOMIC_RELEASE);
    }
}

__attribute__((constructor)) static void shift_ctor(void) { shift_init(); }

/* The shift in nanoseconds: "<sign><digits>" milliseconds; anything else reads as 0. */
static long long shift_ns(void) {
    int st = __atomic_load_n(&shift_state, __ATOMIC_ACQUIRE);
    if (st == 0) {
        shift_init();
        st = __atomic_load_n(&shift_state, __ATOMIC_ACQUIRE);
    }
    if (st != 1) return 0;
    long long v = 0;
    int neg = 0, i = 0;
    if (shift_map[0] == '-' || shift_map[0] == '+') {
        neg = shift_map[0] == '-';
        i = 1;
    }
    for (; i < 20 && shift_map[i] >= '0' && shift_map[i] <= '9'; i++) v = v * 10 + (shift_map[i] - '0');
    return (neg ? -v : v) * 1000000LL;
}

static void add_ns(struct timespec *ts, long long ns) {
    long long t = (long long)ts->tv_nsec + ns % 1000000000LL;
    long long s = (long long)ts->tv_sec + ns / 1000000000LL;
    if (t < 0) { t += 1000000000LL; s -= 1; }
    if (t >= 1000000000LL) { t -= 1000000000LL; s += 1; }
    ts->tv_sec = (time_t)s;
    ts->tv_nsec = (long)t;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    int r = (int)syscall(SYS_clock_gettime, id, ts);
    if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) add_ns(ts, shift_ns());
    return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    /* tv is never NULL here: glibc declares it nonnull. */
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
    if (out != NULL) *out = ts.tv_sec;
    return ts.tv_sec;
}
