#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/timings.sh [N] -- a table of wall times, the slowest first.
#
# Reads lines "STAGE SECONDS NAME" (t/timed-driver writes one per test run)
# on standard input and prints them as a table sorted by time, the slowest
# first, then the sum of each stage's tests (more than its wall
# time where tests run two at a time).  With N, only the N slowest
# rows are listed (the sums still count every row).
set -u
top=${1:-0}
awk -v top="$top" '
NF >= 3 { n++; stage[n] = $1; secs[n] = $2; name[n] = $3; sum[$1] += $2; cnt[$1]++ }
END {
	printf "%9s  %-14s %s\n", "seconds", "stage", "test"
	cmd = "sort -k1,1nr"
	for (i = 1; i <= n; i++)
		printf "%9.1f  %-14s %s\n", secs[i], stage[i], name[i] | cmd
	close(cmd)
	cmd = "sort -k1,1nr"
	for (s in sum)
		printf "%9.1f  %-14s the sum of its %d tests\n", sum[s], s, cnt[s] | cmd
	close(cmd)
}' | awk -v top="$top" 'NR == 1 || top == 0 || NR <= top + 1 || /the sum of its/'
