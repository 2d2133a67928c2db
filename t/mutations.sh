#!/bin/bash
# SPDX-License-Identifier: MIT
#
# t/mutations.sh -- does the host emulator catch each missing cache
# maintenance?  Runs each suite once recording every site of an
# invalidation or a flush that the library made (HOSTEMU_SITES, see
# t/hostemu.c), then, for each site, the suites that reached it again with
# that site left out (HOSTEMU_SKIP), in the order given, until one fails: a
# site is "caught" if a test case of some suite fails without it twice in
# a row (once may be a timing test failing under load), "missed" if every
# suite that reached it still passes.  A suite that runs past the timeout
# counts as failing (a hang is noticed too) and is named so.  Prints one
# line per site, a caught one with the suite and its test cases that
# failed both times, and the seconds the site took, and a summary; exits 1
# if fewer than PCT percent of the sites were caught (by default: if any
# was missed), 99 if a suite fails twice with every site in place.
#
# Usage: t/mutations.sh [-f FILE] [-j JOBS] [-m PCT] [-n COUNT] [-s SEED] [-t SECONDS] [SUITE...]
#   -f FILE     only the sites listed in FILE, one a line ("src/lease.c:500"),
#               of those the suites reach (default: all they reach)
#   -j JOBS     sites judged at once (default 2)
#   -m PCT      the share of sites that must be caught (default 100)
#   -n COUNT    only COUNT sites, a sample chosen by SEED (default: all)
#   -s SEED     the sample's seed (default 1): the same seed, the same sites
#   -t SECONDS  the limit on one suite's run (default 600); a run with a
#               site left out stops sooner, at four times the suite's run
#               with every site in place or a minute, whichever is longer
#   SUITE       programs of the build to run (default: t/check_leasesites
#               t/check_sites t/check_hosts, the fast and deterministic
#               suites first)
#
# make check-mutations runs every site through the three suites (opt-in:
# about an hour on two cores, two sites at a time).  make
# check-mutations-short, part of make check-all, runs a seeded sample of
# sites through t/check_sites alone, four at a time (MUT_COUNT and
# MUT_SEED choose it; about three minutes on two cores) and fails
# if fewer than MUT_MIN percent of them are caught: a floor under which
# the emulator or the suite has gone lenient, while not every site is
# caught yet.
set -u
top_builddir=${top_builddir:-.}
# A left-out site often makes a test wait for what never comes, until its
# test case's time limit, which is set for a loaded machine: a quarter of
# it (30 s for the 120 s cases; a test takes a few seconds) keeps a run
# short, and the runs with every site in place show it is enough.
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-0.25}
count=0
jobs=2
only=
seed=1
limit=600
min=100
while getopts f:j:m:n:s:t: opt; do
	case $opt in
	f) only=$OPTARG ;;
	j) jobs=$OPTARG ;;
	m) min=$OPTARG ;;
	n) count=$OPTARG ;;
	s) seed=$OPTARG ;;
	t) limit=$OPTARG ;;
	*) echo "usage: $0 [-f FILE] [-j JOBS] [-m PCT] [-n COUNT] [-s SEED] [-t SECONDS] [SUITE...]" >&2
	   exit 99 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- t/check_leasesites t/check_sites t/check_hosts
if [ -n "$only" ] && [ ! -r "$only" ]; then
	echo "mutations: cannot read $only" >&2
	exit 99
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mkvmut.XXXXXX") || exit 99
# the suites' pools go under $shm (MKV_TEST_SHM, t/tu_pool.c): a run killed
# by its time limit leaves them there, and they go with the run's judge
shm=$(mktemp -d /dev/shm/mkvmut.XXXXXX) || exit 99
trap 'rm -rf "$scratch" "$shm"' EXIT

# the sites each suite reaches, in $scratch/<n>.sites, and the limit on a
# run of it with a site left out: four times what it took with every site
# in place (a minute at least), within -t, for a left-out site that makes
# its tests wait costs the limit twice
n=0
declare -a suite_limit
for suite in "$@"; do
	n=$((n + 1))
	start=$SECONDS
	if ! MKV_TEST_SHM=$shm HOSTEMU_SITES="$scratch/$n.raw" timeout "$limit" \
			"$top_builddir/$suite" >"$scratch/base.log" 2>&1; then
		start=$SECONDS
		if ! MKV_TEST_SHM=$shm HOSTEMU_SITES="$scratch/$n.raw" timeout "$limit" \
				"$top_builddir/$suite" >"$scratch/base.log" 2>&1; then
			echo "mutations: $suite fails with every site in place:" >&2
			tail -5 "$scratch/base.log" >&2
			exit 99
		fi
	fi
	took=$((4 * (SECONDS - start)))
	[ "$took" -ge 60 ] || took=60
	[ "$took" -le "$limit" ] || took=$limit
	suite_limit[$n]=$took
	sort -u "$scratch/$n.raw" >"$scratch/$n.sites"
done
sort -u "$scratch"/*.sites >"$scratch/all"
if [ -n "$only" ]; then
	sort -u "$only" | comm -12 "$scratch/all" - >"$scratch/only"
	mv "$scratch/only" "$scratch/all"
fi
# a sample: the sites ordered by a checksum of the seed and their name
if [ "$count" -gt 0 ]; then
	while read -r site; do
		printf '%s %s\n' "$(printf '%s %s' "$seed" "$site" | cksum | cut -d' ' -f1)" "$site"
	done <"$scratch/all" | sort -n | head -n "$count" | cut -d' ' -f2 | sort >"$scratch/pick"
	mv "$scratch/pick" "$scratch/all"
fi

# judge SITE DIR: run the suites that reach SITE with it left out, in
# DIR; its line ("caught ..." or "missed ...") into DIR/verdict.
judge() {
	local site=$1 dir=$2 verdict=missed start=$SECONDS n=0 suite try rc failed
	local pools
	pools=$(mktemp -d "$shm/judge.XXXXXX") || exit 99
	for suite in "${suites[@]}"; do
		n=$((n + 1))
		grep -qxF "$site" "$scratch/$n.sites" || continue
		# a failure is confirmed by a second run: a suite that fails now
		# and then under load must not pass for a catch
		for try in 1 2; do
			MKV_TEST_SHM=$pools HOSTEMU_SKIP=$site timeout "${suite_limit[$n]}" \
				"$top_builddir/$suite" >"$dir/run$try.log" 2>&1
			rc=$?
			rm -rf "${pools:?}"/*
			[ "$rc" -ne 0 ] || break
		done
		[ "$rc" -ne 0 ] || continue
		if [ "$rc" -eq 124 ]; then
			verdict="by $suite (timed out)"
			break
		fi
		# the test cases that failed both times (Check's "F:" and "E:"
		# lines): none in common is two flukes, no catch
		failed=$(cat "$dir/run1.log" "$dir/run2.log" |
			sed -n 's/^[^:]*:[0-9]*:[FE]:[^:]*:\([^:]*\):.*/\1/p' | sort | uniq -d |
			tr '\n' ' ')
		if [ -n "$failed" ]; then
			verdict="by $suite: ${failed% }"
			break
		fi
	done
	rm -rf "$pools"
	if [ "$verdict" = missed ]; then
		echo "missed $site [$((SECONDS - start)) s]" >"$dir/verdict"
	else
		echo "caught $site $verdict [$((SECONDS - start)) s]" >"$dir/verdict"
	fi
}

# The sites are judged $jobs at a time: a suite's run spends most of its
# time waiting for the emulated hosts' periods and timeouts.
suites=("$@")
i=0
while read -r site; do
	i=$((i + 1))
	mkdir "$scratch/site$i" || exit 99
	judge "$site" "$scratch/site$i" </dev/null &
	[ "$(jobs -rp | wc -l)" -lt "$jobs" ] || wait -n
done <"$scratch/all"
wait
caught=0
missed=0
for ((k = 1; k <= i; k++)); do
	cat "$scratch/site$k/verdict"
	case $(cat "$scratch/site$k/verdict") in
	caught*) caught=$((caught + 1)) ;;
	*) missed=$((missed + 1)) ;;
	esac
done
echo "mutations: $caught of $((caught + missed)) sites caught, $missed missed"
[ $((caught * 100)) -ge $((min * (caught + missed))) ]
