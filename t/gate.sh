#!/bin/bash
# SPDX-License-Identifier: MIT
#
# t/gate.sh -- the gate: every stage of `make check-all`, timed.
#
# Run by `make check-all` from the top of a configured build tree, which
# passes MAKE (its own command, so the stages share its job slots), distdir
# (marukv-VERSION) and TSAN_TESTS in the environment.  The stages, in order;
# the first that fails stops the gate:
#   plain        make check: every suite, the plain build
#   noncoherent  make check-noncoherent: the suites whose pools follow
#                TU_COHERENCE, with every pool non-coherent
#   mutations    make check-mutations-short: a seeded sample of the
#                emulator's invalidation and flush sites, with its floor
#   fuzz         make fuzz: every libFuzzer target for FUZZ_SECONDS (20)
#   asan         make distcheck from the tarball, configured with
#                --enable-sanitize=address (ASan+UBSan): every suite, with
#                libpmem2's cache line flushes (PMEM2_FORCE_GRANULARITY=
#                CACHE_LINE), and distcheck's own install and dist checks
#   tsan         the same tarball with --enable-sanitize=thread: the
#                suites that do not fork ($TSAN_TESTS)
#   deb          make check-deb: the Debian packages, lintian, and the
#                installed packages' tests
# Each test's wall time is collected through t/timed-driver (MKV_TIMINGS);
# at the end, or at the failing stage, the gate prints the stages' times
# and the 10 slowest tests, and writes both, with every test, to
# check-all-timings.txt.
# Exit: 0 every stage passed, 1 one failed.
set -u
: "${MAKE:=make}" "${distdir:?}" "${TSAN_TESTS:?}"
srcdir=$(cd "$(dirname "$0")/.." && pwd)
out=$(pwd)/check-all-timings.txt
MKV_TIMINGS=$(pwd)/check-all-timings.raw
export MKV_TIMINGS
: >"$MKV_TIMINGS"
stages=

# table [N]: the stages' times, then the N slowest tests (every test without N).
table() {
	echo "  seconds  stage"
	printf '%s' "$stages"
	echo
	sh "$srcdir/t/timings.sh" ${1:+"$1"} <"$MKV_TIMINGS"
}

finish() {
	table >"$out"
	echo
	echo "The gate's wall time by stage, and its 10 slowest tests ($out has every test):"
	table 10
}

# stage NAME COMMAND...: run COMMAND as stage NAME, timed; stop the gate if it fails.
stage() {
	name=$1
	shift
	echo "=== gate stage $name: $*"
	start=$(date +%s)
	MKV_STAGE=$name "$@"
	rc=$?
	secs=$(($(date +%s) - start))
	stages=$stages$(printf '%9d  %s%s' "$secs" "$name" "$([ "$rc" -eq 0 ] || echo ' FAILED')")$'\n'
	if [ "$rc" -ne 0 ]; then
		echo "=== gate stage $name FAILED (exit $rc) after $secs s"
		finish
		exit 1
	fi
	echo "=== gate stage $name: passed in $secs s"
}

# shellcheck disable=SC2086 # TSAN_TESTS: a list of programs
tsan() {
	rm -rf check-tsan && mkdir check-tsan &&
	tar -xzf "$distdir.tar.gz" -C check-tsan &&
	(
		cd "check-tsan/$distdir" &&
		./configure --enable-sanitize=thread >configure.log &&
		"$MAKE" $TSAN_TESTS &&
		"$MAKE" check-TESTS TESTS="$TSAN_TESTS"
	) && rm -rf check-tsan
}

total=$(date +%s)
export MKV_STAGE
stage plain "$MAKE" check
stage noncoherent "$MAKE" check-noncoherent
stage mutations "$MAKE" check-mutations-short
stage fuzz "$MAKE" fuzz FUZZ_SECONDS=20
stage asan env PMEM2_FORCE_GRANULARITY=CACHE_LINE \
	"$MAKE" distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-sanitize=address
stage tsan tsan
stage deb "$MAKE" check-deb
stages=$stages$(printf '%9d  %s' $(($(date +%s) - total)) "the gate")$'\n'
finish
