#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/spin.sh -- model-check the lease acquisition protocol (t/lease.pml),
# the write window between hosts without coherence (t/window.pml), the
# registry snapshots kept from reuse between such hosts (t/regsnap.pml),
# the splitter through which such hosts take node entries (t/split.pml)
# and a record of the registry's page log read while it is rewritten
# (t/wlog.pml).
#
# Run by `make check` from the top of the build tree, with $srcdir set by
# automake's harness.  Each configuration is verified exhaustively with spin
# (spin -a, cc pan.c, ./pan); the protocol's configurations must report
# "errors: 0", each mutant must report a violation of the property it breaks.
# Each check prints "ok - ..." or "not ok - ..."; the last line is
# "N passed, M failed".  Exit: 0 all passed, 1 a check failed, 77 spin or cc
# missing, 99 setup error.

set -u
model=${srcdir:-.}/t/lease.pml
window=${srcdir:-.}/t/window.pml
regsnap=${srcdir:-.}/t/regsnap.pml
split=${srcdir:-.}/t/split.pml
wlog=${srcdir:-.}/t/wlog.pml
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok - $1"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $1"; }
# show FILE...: a failed check's evidence, indented.
show() { for f; do sed 's/^/#   /' "$f"; done; }

for tool in spin cc; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "spin.sh: $tool not found, model not checked" >&2
		exit 77
	fi
done
for f in "$model" "$window" "$regsnap" "$split" "$wlog"; do
	if [ ! -r "$f" ]; then
		echo "spin.sh: $f not readable" >&2
		exit 99
	fi
done
case $model in /*) ;; *) model=$(pwd)/$model ;; esac
case $window in /*) ;; *) window=$(pwd)/$window ;; esac
case $regsnap in /*) ;; *) regsnap=$(pwd)/$regsnap ;; esac
case $split in /*) ;; *) split=$(pwd)/$split ;; esac
case $wlog in /*) ;; *) wlog=$(pwd)/$wlog ;; esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/marukv-spin.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' HUP INT TERM

# Bound every pan run: memory (MB) by pan itself, time by timeout(1) if any.
memlim=1024
limit=
command -v timeout >/dev/null 2>&1 && limit="timeout 120"

# verify NAME FLAGS...: generate, build and run the verifier for the model
# with the given spin preprocessor flags, in $tmp/NAME; output in
# $tmp/NAME/out.  Status: that of pan (or 99 when it could not be built).
# The verifier is compiled with $opt, -O0 unless set: most runs take less
# time than cc -O2 takes to compile pan.c (about 2 s); the large ones set
# -O2, which runs them twice as fast, and leave $collapse empty: without
# COLLAPSE's compression of the states stored they run a quarter faster
# and take up to 2 GB ($memlim is raised for them).
verify() {
	name=$1
	shift
	mkdir "$tmp/$name" || return 99
	(
		cd "$tmp/$name" || exit 99
		spin "$@" -a "$model" >gen.log 2>&1 || { cat gen.log >out; exit 99; }
		# shellcheck disable=SC2086 # -DCOLLAPSE or nothing
		cc "${opt:--O0}" -DSAFETY ${collapse--DCOLLAPSE} -DMEMLIM=$memlim -o pan pan.c \
			>cc.log 2>&1 ||
			{ cat gen.log cc.log >out; exit 99; }
		# -E: a node blocked at a model bound (GMAX, NMAX) is no deadlock.
		$limit ./pan -E -m20000 >out 2>&1
	)
}

# summary NAME: "states, time" of a finished run, for the check line.
summary() {
	st=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$tmp/$1/out")
	el=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) .*/\1/p' "$tmp/$1/out" | tail -n 1)
	echo "${st:-?} states, ${el:-?} s"
}

# expect_pass NAME DESC: the run finished exhaustively with no error.
expect_pass() {
	out=$tmp/$1/out
	if grep -q '^State-vector .* errors: 0$' "$out" &&
	   ! grep -q 'max search depth too small' "$out" &&
	   ! grep -qi 'out of memory\|MEMLIM' "$out"; then
		ok "$2 ($(summary "$1"))"
	else
		not_ok "$2"
		show "$out"
	fi
}

# expect_fail NAME DESC PATTERN: spin found an error and it is PATTERN.
expect_fail() {
	out=$tmp/$1/out
	if grep -q '^State-vector .* errors: [1-9]' "$out" &&
	   grep -q "$3" "$out"; then
		ok "$2 (counterexample at depth $(sed -n 's/.*violated.*(at depth \([0-9]*\))$/\1/p' "$out" | head -n 1))"
	else
		not_ok "$2"
		show "$out"
	fi
}

# Every run first, then every check of its outcome.  The five large
# runs, optimized, go in two lanes in the background (about 25 s each on
# this machine's cores); the small ones run meanwhile.
(
	opt=-O2 collapse='' memlim=4096
	verify n3 -DN=3 -DGMAX=2 -DCRASHES=0
	model=$split
	verify split3 -DN=3
) &
lane1=$!
(
	opt=-O2 collapse='' memlim=4096
	verify n2p -DN=2 -DPAUSES=1 -DCRASHES=0
	model=$regsnap
	verify regsnap2 -DR=2 -DNOISE=0
	verify regsnap1 -DR=1
) &
lane2=$!

verify n2 -DN=2
opt=-O2
verify n3c -DN=3 -DGMAX=1
opt=
verify no_choosing -DN=2 -DCRASHES=0 -DBROKEN_NO_CHOOSING
verify no_recheck -DN=2 -DBROKEN_NO_RECHECK
verify no_fence -DN=2 -DPAUSES=1 -DCRASHES=0 -DBROKEN_NO_FENCE \
	-DSKIP_P4
verify gen_fence -DN=2 -DPAUSES=1 -DCRASHES=0 -DGEN_ONLY_FENCE

# The write window: the protocol holds with caches that evict on their
# own; each step left out breaks it.
model=$window
verify window
for m in CHECK_FIRST NO_WB_WIN NO_INVAL_REC NO_WB_REC NO_INVAL_WIN; do
	verify "window_$m" "-DBROKEN_$m"
done

# Registry snapshots between hosts: no reader reads a snapshot whose pages
# LMDB may have reused; each step left out breaks it.
model=$regsnap
for m in NO_RECHECK NO_WB_SNAP NO_INVAL_SNAP NO_INVAL_NEWEST NO_WAIT; do
	verify "regsnap_$m" -DR=1 "-DBROKEN_$m"
done

# Node entries taken between hosts: at most one node through a splitter;
# each step left out breaks it.
model=$split
verify split1 -DN=1
for m in NO_DOOR2 NO_RACE NO_WB_RACE NO_INVAL_RACE; do
	verify "split_$m" -DN=2 "-DBROKEN_$m"
done

# A record of the registry's page log read while it is rewritten.
model=$wlog
verify wlog
for m in NO_WB_ZERO NO_INVAL_RANGES NO_RECHECK NO_INVAL_AGAIN; do
	verify "wlog_$m" "-DBROKEN_$m"
done

wait $lane1
wait $lane2

expect_pass n2 "2 nodes, 1 crash, generations 1-3: P1-P4 hold"
expect_pass n3 "3 nodes, no crash, generations 1-2: P1-P4 hold"
expect_pass n3c "3 nodes, 1 crash, generation 1: P1-P4 hold"
expect_pass n2p "2 nodes, pauses, (generation, node) fence: P1, P3, P4 hold"
expect_fail no_choosing "mutant without the wait on choosing[j] breaks P1" \
	'violated .*!(incs\[0\])'
expect_fail no_recheck "mutant without the re-check in the CS breaks P2" \
	'violated *!(acquired\['
expect_fail no_fence "mutant without the fence on commit breaks P3" \
	'violated *(mine>=hi_gen)'
expect_fail gen_fence "mutant with the brief's generation-only fence breaks P4 (split brain)" \
	'violated *!(superseded\['

expect_pass window "write window, two holders on two hosts, noisy caches: never both writing"
expect_fail window_CHECK_FIRST "mutant that reads the record before announcing breaks it" \
	'assertion violated (writing<=1)'
expect_fail window_NO_WB_WIN "mutant that does not write its announcement back breaks it" \
	'assertion violated (writing<=1)'
expect_fail window_NO_INVAL_REC "mutant that reads the record from its cache breaks it" \
	'assertion violated (writing<=1)'
expect_fail window_NO_WB_REC "mutant whose new holder does not write the record back breaks it" \
	'assertion violated (writing<=1)'
expect_fail window_NO_INVAL_WIN "mutant whose new holder reads the window from its cache breaks it" \
	'assertion violated (writing<=1)'

expect_pass regsnap1 "registry snapshots, a reader, two holders in turn, noisy caches: none reused under a read"
expect_pass regsnap2 "registry snapshots, two readers, two holders in turn: none reused under a read"
expect_fail regsnap_NO_RECHECK "mutant whose reader does not check the newest snapshot again breaks it" \
	'assertion violated (t>=reused_below)'
expect_fail regsnap_NO_WB_SNAP "mutant whose reader does not write its snap back breaks it" \
	'assertion violated (t>=reused_below)'
expect_fail regsnap_NO_INVAL_SNAP "mutant whose holder reads the snaps from its cache breaks it" \
	'assertion violated (t>=reused_below)'
expect_fail regsnap_NO_INVAL_NEWEST "mutant whose reader checks newest in its cache breaks it" \
	'assertion violated (t>=reused_below)'
expect_fail regsnap_NO_WAIT "mutant whose new holder does not wait for readers breaks it" \
	'assertion violated (t>=reused_below)'

expect_pass split3 "node entry splitter, three hosts, noisy caches: at most one takes the entry"
expect_pass split1 "node entry splitter, one host alone: it takes the entry"
expect_fail split_NO_DOOR2 "mutant without the second look at the door breaks it" \
	'assertion violated (won<=1)'
expect_fail split_NO_RACE "mutant without the last look at race breaks it" \
	'assertion violated (won<=1)'
expect_fail split_NO_WB_RACE "mutant that does not write race back breaks it" \
	'assertion violated (won<=1)'
expect_fail split_NO_INVAL_RACE "mutant that reads race from its cache breaks it" \
	'assertion violated (won<=1)'

expect_pass wlog "page log record rewritten while read on another host, noisy caches: a reader uses its commit's pages or none"
expect_fail wlog_NO_WB_ZERO "mutant whose holder does not write the cleared txn back first breaks it" \
	'assertion violated (r==1)'
expect_fail wlog_NO_INVAL_RANGES "mutant whose reader reads the ranges from its cache breaks it" \
	'assertion violated (r==1)'
expect_fail wlog_NO_RECHECK "mutant whose reader does not look at txn again breaks it" \
	'assertion violated (r==1)'
expect_fail wlog_NO_INVAL_AGAIN "mutant whose reader looks at txn again in its cache breaks it" \
	'assertion violated (r==1)'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
