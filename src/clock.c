/* SPDX-License-Identifier: MIT */
/*
 * clock.c -- the library's clocks: CLOCK_MONOTONIC for deadlines and the
 * intervals one process measures, CLOCK_REALTIME for the times written in
 * the pool for others to read (heartbeats).
 */
#include "config.h"

#include <time.h>

#include "internal.h"

/* CLOCK_MONOTONIC in nanoseconds: deadlines, and intervals this process measures. */
uint64_t
mkv_clock_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* CLOCK_REALTIME in nanoseconds: heartbeats' times, for display. */
uint64_t
mkv_clock_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * Milliseconds from a CLOCK_REALTIME time another process wrote in the
 * pool (a heartbeat's) to now, by this host's clock; negative if it is in
 * the future.  Any value: the word may be damaged.
 */
int64_t
mkv_clock_age_ms(uint64_t wall_ns)
{
	uint64_t now = mkv_clock_wall();

	return now >= wall_ns ? (int64_t)((now - wall_ns) / 1000000) :
		-(int64_t)((wall_ns - now) / 1000000);
}

/* Sleep ns nanoseconds (less if a signal comes). */
void
mkv_clock_sleep(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };

	nanosleep(&ts, NULL);
}
