// clockjump: a Redis node's wall clock, moved on demand (seed 003's clock
// drift). The local cluster (FAULTS=1) builds it and LD_PRELOADs it into each
// Redis node; the clock-jump scenario writes an offset into the node's clock
// file (RUN_DIR/redis-PORT.clock) and the node's wall clock jumps by it at
// once, the way an NTP step or an operator's `date -s` would move it.
//
// Why not libfaketime, which Debian packages: Debian's redis-server 7.0
// links jemalloc, whose start-up calls clock_gettime before libfaketime is
// initialized, and libfaketime 0.9.10 aborts the server ("Unexpected recursive
// calls to clock_gettime()"), with every option tried. This shim initializes
// nothing on the way: it reads the time with the raw system call and an offset
// from a mapped file.
//
// Contract: LOCKLAB_CLOCK_FILE names a file of at least 8 bytes holding the
// offset in microseconds, a little-endian int64, read on every call (a write
// is seen at once). No variable, no file: the real clock. Only the wall clock
// moves (CLOCK_REALTIME and its coarse variant, gettimeofday, time): the
// monotonic clocks stay, as they do when a real wall clock is stepped.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const volatile int64_t *offset_us; // NULL until mapped: no offset

__attribute__((constructor)) static void map_offset(void) {
	const char *path = getenv("LOCKLAB_CLOCK_FILE");
	if (path == NULL) {
		return;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return;
	}
	void *p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED) {
		offset_us = p;
	}
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	// The raw call, not the vDSO through the next symbol: looking that up
	// may allocate, and the allocator reads the clock.
	long r = syscall(SYS_clock_gettime, id, ts);
	if (r != 0 || offset_us == NULL || (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE)) {
		return (int)r;
	}
	int64_t off = __atomic_load_n(offset_us, __ATOMIC_RELAXED);
	int64_t ns = (int64_t)ts->tv_nsec + (off % 1000000) * 1000;
	ts->tv_sec += off / 1000000 + ns / 1000000000;
	ns %= 1000000000;
	if (ns < 0) {
		ns += 1000000000;
		ts->tv_sec--;
	}
	ts->tv_nsec = ns;
	return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
	(void)tz;
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
		return -1;
	}
	tv->tv_sec = ts.tv_sec; // glibc declares tv non-null
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t time(time_t *t) {
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
		return (time_t)-1;
	}
	if (t != NULL) {
		*t = ts.tv_sec;
	}
	return ts.tv_sec;
}
