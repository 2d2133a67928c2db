#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/fuzz.sh -- build the libFuzzer targets and run each for a while.
#
# Run by `make fuzz` from the top of the build tree, which passes, in the
# environment:
#   CLANG         clang, as configure found it; empty: skip with a message
#   FUZZ_SECONDS  how long each target runs (default 600); 0 runs each
#                 target over its seed corpus once and stops
#   FUZZ_TARGETS  the targets to run (default: every one in the table)
#   FUZZ_CFLAGS   more compiler flags (warnings, libraries' -I)
#   srcdir        the top of the source tree (default .)
#
# A target is t/fuzz/NAME.c, defining LLVMFuzzerTestOneInput, with a seed
# corpus in t/fuzz/corpus/NAME/ and, optionally, a dictionary
# t/fuzz/NAME.dict.  Each is built with clang -fsanitize=fuzzer,address,
# undefined in a scratch directory under $TMPDIR, from its own file and
# the sources the table below gives it; its corpus is copied there, since
# libFuzzer adds what it finds to it: nothing is written to the source
# tree.  The library's sources are compiled once for the targets that
# build it in.  Targets run two at a time (libFuzzer uses one core each).
# A crash, a failed check (abort), a leak, an input running for more than
# 10 s or using more than 2 GiB fails the target; its scratch directory
# (the binary, the input that failed, the log) is kept and named.
# Prints one line per target: its executions, the time, the corpus.
# Exit: 0 every target ran clean (or no clang: skipped), 1 one failed,
# 99 a build or setup error.

set -u
srcdir=${srcdir:-.}
CLANG=${CLANG:-}
FUZZ_SECONDS=${FUZZ_SECONDS:-600}
FUZZ_TARGETS=${FUZZ_TARGETS:-}
FUZZ_CFLAGS=${FUZZ_CFLAGS:-}

# The targets: NAME, then the sources it is built from besides
# t/fuzz/NAME.c (paths in the source tree), then, after "--", what it
# links with (-l flags).  Every file is compiled with -fsanitize=fuzzer,
# so library sources are instrumented too.  Library sources (src/*.c)
# build as in the library: -DMARUKV_BUILDING, config.h from the build
# tree, src/ and include/ on the include path; their pkg-config flags
# come through FUZZ_CFLAGS.  The pool_* targets build the whole library in
# (t/fuzz/fuzz_pool.h): $lib below, the library's sources (FUZZ_LIB_SOURCES,
# from Makefile.am's list) and what it links.
FUZZ_LIB_SOURCES=${FUZZ_LIB_SOURCES:-}
if [ -z "$FUZZ_LIB_SOURCES" ]; then
	echo "fuzz: FUZZ_LIB_SOURCES is empty: run it as make fuzz" >&2
	exit 99
fi
lib="@lib -- -llmdb -lpmem2 -ldaxctl -lxxhash -lhiredis -lpthread"
targets="
json_string  utils/json.c
gc_args      utils/gc-args.c t/fuzz/fuzz_argv.c
stat_args    utils/stat-args.c t/fuzz/fuzz_argv.c
pool_super     t/fuzz/fuzz_pool.c $lib
pool_registry  t/fuzz/fuzz_pool.c $lib
pool_requests  t/fuzz/fuzz_pool.c $lib
frame_parse    t/fuzz/fuzz_pool.c $lib
"

case $FUZZ_SECONDS in
'' | *[!0-9]*)
	echo "fuzz: FUZZ_SECONDS must be a number of seconds, not '$FUZZ_SECONDS'" >&2
	exit 99
	;;
esac
names=$(echo "$targets" | sed -n 's/^\([a-z0-9_]*\) .*/\1/p' | tr '\n' ' ')
for t in $FUZZ_TARGETS; do
	case " $names" in
	*" $t "*) ;;
	*)
		echo "fuzz: no target '$t' (targets: ${names% })" >&2
		exit 99
		;;
	esac
done
[ -n "$FUZZ_TARGETS" ] || FUZZ_TARGETS=$names

skip() {
	echo "fuzz: skipped: $1"
	exit 0
}
[ -n "$CLANG" ] || skip "no clang (Debian: clang libclang-rt-14-dev; configure looks for it)"

srcdir=$(cd "$srcdir" && pwd) || exit 99
builddir=$(pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/marukv-fuzz.XXXXXX") || exit 99
keep=
trap '[ -n "$keep" ] || rm -rf "$scratch"' EXIT
trap 'exit 130' HUP INT TERM

cflags="-g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
	-fno-omit-frame-pointer $FUZZ_CFLAGS -DMARUKV_BUILDING -I$builddir -I$srcdir/include
	-I$srcdir/src -I$srcdir/utils"

# Can clang link a fuzzer at all (libFuzzer's runtime is a package apart)?
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
	>"$scratch/probe.c"
if ! "$CLANG" -fsanitize=fuzzer,address,undefined -o "$scratch/probe" "$scratch/probe.c" \
	>"$scratch/probe.log" 2>&1; then
	sed 's/^/#   /' "$scratch/probe.log"
	skip "$CLANG cannot link -fsanitize=fuzzer (Debian: libclang-rt-14-dev)"
fi

# lib: the library's sources compiled once, two at a time, into
# $scratch/lib, for the targets that build it in ("@lib" in the table).
lib() {
	mkdir "$scratch/lib" || return 1
	export CLANG cflags scratch srcdir
	# shellcheck disable=SC2016,SC2086 # the script is xargs', a word list
	printf '%s\n' $FUZZ_LIB_SOURCES | xargs -P 2 -n 1 sh -c '
		o=$scratch/lib/$(basename "$1" .c).o
		$CLANG $cflags -c -o "$o" "$srcdir/$1" >"$o.log" 2>&1 ||
			{ cat "$o.log"; exit 255; }' sh >"$scratch/lib/build.log" 2>&1
}

# build NAME: t/fuzz/NAME.c and its sources into $scratch/NAME/NAME.
build() {
	line=$(echo "$targets" | sed -n "s/^$1 //p")
	srcs=${line%%--*}
	libs=
	case $line in *--*) libs=${line#*--} ;; esac
	files=$srcdir/t/fuzz/$1.c
	for s in $srcs; do
		case $s in
		@lib) files="$files $scratch/lib/*.o" ;;
		*) files="$files $srcdir/$s" ;;
		esac
	done
	mkdir -p "$scratch/$1" || return 1
	# shellcheck disable=SC2086 # word lists
	"$CLANG" $cflags -o "$scratch/$1/$1" $files $libs >"$scratch/$1/build.log" 2>&1
}

# run NAME: run it over a copy of its corpus and say how it went; 0 if clean.
run() {
	name=$1
	dir=$scratch/$name
	mkdir "$dir/corpus" || return 1
	for f in "$srcdir/t/fuzz/corpus/$name"/*; do
		[ -f "$f" ] || continue
		cp "$f" "$dir/corpus/" && chmod u+w "$dir/corpus/${f##*/}" || return 1
	done
	if [ "$FUZZ_SECONDS" -eq 0 ]; then
		set -- -runs=0
	else
		set -- -max_total_time="$FUZZ_SECONDS"
	fi
	[ -f "$srcdir/t/fuzz/$name.dict" ] && set -- "$@" -dict="$srcdir/t/fuzz/$name.dict"
	start=$(date +%s)
	"$dir/$name" "$@" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$dir/" "$dir/corpus" >"$dir/log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log")
	corpus=$(find "$dir/corpus" -type f | wc -l)
	cov=$(sed -n 's/.* cov: \([0-9]*\) .*/\1/p' "$dir/log" | tail -n 1)
	if [ "$rc" -eq 0 ]; then
		echo "fuzz $name: ${execs:-?} executions in $secs s, 0 crashes;" \
			"corpus $corpus inputs, coverage ${cov:-?} edges"
		return 0
	fi
	echo "fuzz $name: FAILED (exit $rc) after ${execs:-?} executions in $secs s:"
	grep -E '(==[0-9]+==ERROR|^SUMMARY|: check failed:|Test unit written to|ERROR: libFuzzer)' \
		"$dir/log" | sed 's/^/#   /'
	echo "#   kept: $dir (the binary, the input that failed, the log)"
	return 1
}

needlib=
for t in $FUZZ_TARGETS; do
	echo "$targets" | sed -n "s/^$t //p" | grep -q @lib && needlib=1
done
if [ -n "$needlib" ] && ! lib; then
	sed 's/^/#   /' "$scratch/lib/build.log"
	echo "fuzz: the library does not build"
	keep=1
	exit 99
fi
for t in $FUZZ_TARGETS; do
	if ! build "$t"; then
		sed 's/^/#   /' "$scratch/$t/build.log"
		echo "fuzz $t: does not build"
		keep=1
		exit 99
	fi
done
# Two targets at a time, libFuzzer taking one core each; their lines in order.
failed=0
# shellcheck disable=SC2086 # a word list
set -- $FUZZ_TARGETS
while [ $# -gt 0 ]; do
	run "$1" >"$scratch/$1.result" &
	p1=$!
	p2=
	if [ $# -gt 1 ]; then
		run "$2" >"$scratch/$2.result" &
		p2=$!
	fi
	wait "$p1" || { failed=1; keep=1; }
	cat "$scratch/$1.result"
	if [ -n "$p2" ]; then
		wait "$p2" || { failed=1; keep=1; }
		cat "$scratch/$2.result"
		shift
	fi
	shift
done
[ "$failed" -eq 0 ] || echo "fuzz: a target failed; its directory is kept under $scratch"
exit "$failed"
