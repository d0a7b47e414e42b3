/* Preloaded before libfaketime by `make test-clock-ahead`, which moves every process's
   wall clock (CLOCK_REALTIME) ahead and leaves monotonic clocks real. libfaketime 0.9.10
   (Debian 12) gets two kinds of wait wrong in that mode, and this corrects them:
   - a monotonic sleep goes straight to the kernel: libfaketime shifts its absolute
     CLOCK_MONOTONIC deadline and fails it with EINVAL (Python's time.sleep);
   - a condition wait whose absolute deadline was computed from the moved wall clock is
     moved back by the offset, or it would last the offset: librdkafka's C11 cnd_timedwait
     is not intercepted at all. A deadline more than half the offset ahead of the real
     wall clock is taken for such a one (no wait of a test run lasts days).
   The offset is FAKETIME's "+<days>d", the only form the target sets. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

static struct timespec moved_back(const struct timespec *deadline) {
    const char *faketime = getenv("FAKETIME");
    long offset = faketime && faketime[0] == '+' ? strtol(faketime + 1, NULL, 10) * 86400L : 0;
    struct timespec wall, real_deadline = *deadline;
    syscall(SYS_clock_gettime, CLOCK_REALTIME, &wall); /* the kernel's, not libfaketime's */
    if (offset && deadline->tv_sec > wall.tv_sec + offset / 2) real_deadline.tv_sec -= offset;
    return real_deadline;
}

static void *in_libc(const char *name, const char *version) {
    return dlvsym(dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD), name, version);
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *request,
                    struct timespec *remain) {
    if (clock == CLOCK_REALTIME) { /* a wall-clock deadline: libfaketime's to translate */
        int (*faked)(clockid_t, int, const struct timespec *, struct timespec *) =
            dlsym(RTLD_NEXT, "clock_nanosleep");
        return faked(clock, flags, request, remain);
    }
    return syscall(SYS_clock_nanosleep, clock, flags, request, remain) == 0 ? 0 : errno;
}

int pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex,
                           const struct timespec *deadline) {
    static int (*real)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    if (!real) real = in_libc("pthread_cond_timedwait", "GLIBC_2.3.2");
    struct timespec real_deadline = moved_back(deadline);
    return real(cond, mutex, &real_deadline);
}

int cnd_timedwait(cnd_t *cond, mtx_t *mutex, const struct timespec *deadline) {
    static int (*real)(cnd_t *, mtx_t *, const struct timespec *);
    if (!real) real = in_libc("cnd_timedwait", "GLIBC_2.28");
    struct timespec real_deadline = moved_back(deadline);
    return real(cond, mutex, &real_deadline);
}
