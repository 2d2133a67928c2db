#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/tools.sh -- the tools, the man pages and the documented examples.
#
# Run by `make check` from the top of the build tree, with $srcdir set by
# automake's harness; the compiler and sanitizer flags for building the
# examples come from the build tree's Makefile.  Each check prints
# "ok - ..." or "not ok - ..."; a check whose prerequisite is missing prints
# "skip - ..." and is not counted.  The last line is "N passed, M failed".
# Exit: 0 all passed, 1 a check failed, 77 nothing could run, 99 setup error.

set -u
top_builddir=.
top_srcdir=${srcdir:-.}
CC=$(sed -n 's/^CC = //p' "$top_builddir/Makefile")
SAN_CFLAGS=$(sed -n 's/^SAN_CFLAGS = //p' "$top_builddir/Makefile")

stat=$top_builddir/utils/marukv-stat
bench=$top_builddir/utils/marukv-bench
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok - $1"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $1"; }
skip() { echo "skip - $1"; }
# check DESCRIPTION COMMAND...: passes when the command succeeds.
check() {
	desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}
# show FILE...: a failed check's evidence, indented.
show() { for f; do sed 's/^/#   /' "$f"; done; }

if [ ! -x "$stat" ] || [ ! -x "$bench" ]; then
	echo "skip - $stat or $bench not built"
	exit 77
fi

# Pools live under /dev/shm (tmpfs) when there is one, as in production.
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
tmp=$(mktemp -d "$shm/marukv-tools.XXXXXX") || exit 99
# The examples create a default-sized pool (256 MiB): on disk, not in tmpfs.
disk=$(mktemp -d "${TMPDIR:-/tmp}/marukv-tools.XXXXXX") || { rm -rf "$tmp"; exit 99; }
trap 'rm -rf "$tmp" "$disk"' EXIT
trap 'exit 130' HUP INT TERM
pool=$tmp/pool
unset MARUKV_POOL

version=$(sed -n 's/^PACKAGE_VERSION = //p' "$top_builddir/Makefile")

# json_int FILE KEY: the integer value of "KEY" in a marukv-stat --json object.
json_int() { sed -n "s/^  \"$2\": \\([0-9][0-9]*\\),\\{0,1\\}\$/\\1/p" "$1"; }
# field FILE LABEL: the value of a "LABEL: value" line.
field() { sed -n "s/^$2: *//p" "$1"; }

# ---- marukv-bench demo ------------------------------------------------------

"$bench" demo --pool "$pool" --prompts 4 --blocks 4 --block-size 65536 --readers 2 \
	>"$tmp/demo.out" 2>"$tmp/demo.err"
rc=$?
check "bench demo exits 0 (got $rc)" test "$rc" -eq 0
check "bench demo reports 0 verify errors" test "$(field "$tmp/demo.out" 'verify errors')" = 0
written=$(field "$tmp/demo.out" 'keys written')
present=$(field "$tmp/demo.out" 'keys present')
check "bench demo: keys written ($written) + present ($present) = 16" \
	test "$((${written:-0} + ${present:-0}))" -eq 16
check "bench demo: final pass hits every block" \
	test "$(field "$tmp/demo.out" 'final pass hit')" = "32 / 32"
[ "$fail" -eq 0 ] || show "$tmp/demo.out" "$tmp/demo.err"

# Same seed, same pool: every key is there already.
"$bench" demo --pool "$pool" --prompts 4 --blocks 4 --block-size 65536 --readers 2 \
	--json >"$tmp/demo2.json" 2>"$tmp/demo2.err"
rc=$?
check "bench demo --json rerun exits 0 (got $rc)" test "$rc" -eq 0
check "bench demo rerun writes nothing" test "$(json_int "$tmp/demo2.json" keys_written)" = 0
check "bench demo rerun finds 16 keys present" \
	test "$(json_int "$tmp/demo2.json" keys_present)" = 16
check "bench demo --json verify_errors is 0" \
	test "$(json_int "$tmp/demo2.json" verify_errors)" = 0

"$bench" demo --pool "$pool" --blocks 0 >"$tmp/usage.out" 2>"$tmp/usage.err"
rc=$?
check "bench demo --blocks 0 exits 2 (got $rc)" test "$rc" -eq 2
check "bench demo --blocks 0 says why on stderr" test -s "$tmp/usage.err"
"$bench" no-such-command >/dev/null 2>&1
rc=$?
check "bench unknown command exits 2 (got $rc)" test "$rc" -eq 2

# ---- marukv-bench register and takeover --------------------------------------

"$bench" register --writers 1,2 --keys 200 --repeat 1 --dir "$tmp" \
	>"$tmp/reg.out" 2>"$tmp/reg.err"
rc=$?
check "bench register exits 0 (got $rc)" test "$rc" -eq 0
check "bench register is quiet on stderr" test ! -s "$tmp/reg.err"
check "bench register has its columns" grep -Eq \
	'^writers +marukv sync +marukv async\(8\) +raw LMDB +sync/LMDB +async/LMDB$' "$tmp/reg.out"
check "bench register has rows for 1 and 2 writers" \
	test "$(sed -n 's/^ *\([12]\)  *[0-9][0-9]* (.*/\1/p' "$tmp/reg.out" | tr '\n' ' ')" = "1 2 "
[ "$rc" -eq 0 ] && [ ! -s "$tmp/reg.err" ] || show "$tmp/reg.out" "$tmp/reg.err"
check "bench register left no scratch directory" \
	test -z "$(find "$tmp" -maxdepth 1 -name 'marukv-bench.*')"

"$bench" register --writers 1 --keys 200 --repeat 1 --dir "$tmp" --json \
	>"$tmp/reg.json" 2>"$tmp/regj.err"
rc=$?
check "bench register --json exits 0 (got $rc)" test "$rc" -eq 0
for k in command dir keys value_size window repeat seed rows writers marukv_sync \
	marukv_async lmdb ratio_sync_lmdb ratio_async_lmdb; do
	check "bench register --json has \"$k\"" grep -q "\"$k\": " "$tmp/reg.json"
done
check "bench register --json medians are integers" grep -Eq \
	'"marukv_sync": \{ "median": [0-9]+, "min": [0-9]+, "max": [0-9]+ \}' "$tmp/reg.json"

"$bench" takeover --trials 2 --period-ms 200 --dir "$tmp" >"$tmp/to.out" 2>"$tmp/to.err"
rc=$?
check "bench takeover exits 0 (got $rc)" test "$rc" -eq 0
check "bench takeover is quiet on stderr" test ! -s "$tmp/to.err"
check "bench takeover has its columns" grep -Eq \
	'^client +trials +median +min +p90 +max +failed$' "$tmp/to.out"
check "bench takeover has a same-node and an other-node row of 2 trials, 0 failed" \
	test "$(sed -n 's/^\([a-z-]*\)  *2  *[0-9.]*  *[0-9.]*  *[0-9.]*  *[0-9.]*  *0$/\1/p' \
		"$tmp/to.out" | tr '\n' ' ')" = "same-node other-node "
[ "$rc" -eq 0 ] && [ ! -s "$tmp/to.err" ] || show "$tmp/to.out" "$tmp/to.err"

"$bench" takeover --trials 2 --period-ms 200 --same-node --dir "$tmp" --json \
	>"$tmp/to.json" 2>"$tmp/toj.err"
rc=$?
check "bench takeover --same-node --json exits 0 (got $rc)" test "$rc" -eq 0
check "bench takeover --json has one same-node row with the documented keys" grep -Eqx \
	'    \{ "client": "same-node", "median_ns": [0-9]+, "min_ns": [0-9]+, "p90_ns": [0-9]+, "max_ns": [0-9]+, "failed_publishes": 0 \}' \
	"$tmp/to.json"
"$bench" takeover --period-ms 10 >/dev/null 2>&1
rc=$?
check "bench takeover --period-ms 10 exits 2 (got $rc)" test "$rc" -eq 2

# ---- marukv-stat --------------------------------------------------------------

"$stat" --json "$pool" >"$tmp/stat.json" 2>"$tmp/stat.err"
rc=$?
check "stat --json exits 0 (got $rc)" test "$rc" -eq 0
keys=$(sed -n 's/^  "\([a-z_]*\)": .*/\1/p' "$tmp/stat.json" | tr '\n' ' ')
expected="path uuid format_version page_size pages_total pages_used pages_free \
pages_quarantined pages_granted entries bytes_stored registry_size registry_used \
clients max_clients lease_generation lease_holder_pid lease_period_ms \
lease_heartbeat_age_ms requests_pending lease_holder_node "
check "stat --json has the documented keys, in order" test "$keys" = "$expected"
[ "$keys" = "$expected" ] || { echo "#   got: $keys"; show "$tmp/stat.json" "$tmp/stat.err"; }
check "stat --json is one object" test "$(sed -n '1p;$p' "$tmp/stat.json" | tr -d '\n')" = "{}"
check "stat --json path is the pool" grep -qx "  \"path\": \"$pool\"," "$tmp/stat.json"
check "stat --json uuid is 36 characters" grep -Eqx \
	'  "uuid": "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",' "$tmp/stat.json"
entries=$(json_int "$tmp/stat.json" entries)
check "stat entries ($entries) = keys the demo wrote ($written)" test "$entries" = "$written"
check "stat page_size is the default 65536" test "$(json_int "$tmp/stat.json" page_size)" = 65536
check "stat clients is 1 (itself)" test "$(json_int "$tmp/stat.json" clients)" = 1

if command -v mdb_stat >/dev/null 2>&1; then
	mdb=$(mdb_stat -n -s entries "$pool/registry.mdb" 2>&1 | sed -n 's/^ *Entries: //p')
	check "stat entries ($entries) = mdb_stat entries ($mdb)" test "$entries" = "$mdb"
else
	skip "mdb_stat not installed (Debian: lmdb-utils): registry cross-check"
fi

"$stat" "$pool" >"$tmp/stat.txt" 2>"$tmp/stat.err"
rc=$?
check "stat (human) exits 0 (got $rc)" test "$rc" -eq 0
check "stat (human) has an entries line" test "$(field "$tmp/stat.txt" entries)" = "$entries"
check "stat (human) prints raw sizes" test "$(field "$tmp/stat.txt" 'page size')" = 65536
"$stat" -h "$pool" >"$tmp/stath.txt" 2>&1
check "stat -h prints KiB" test "$(field "$tmp/stath.txt" 'page size')" = "64.0 KiB"

MARUKV_POOL=$pool "$stat" --json >"$tmp/env.json" 2>"$tmp/env.err"
rc=$?
check "stat honours \$MARUKV_POOL (exit $rc)" grep -qx "  \"path\": \"$pool\"," "$tmp/env.json"

"$stat" "$tmp/missing" >"$tmp/missing.out" 2>"$tmp/missing.err"
rc=$?
check "stat on a missing pool exits 2 (got $rc)" test "$rc" -eq 2
check "stat on a missing pool prints nothing on stdout" test ! -s "$tmp/missing.out"
check "stat on a missing pool says 'marukv-stat: POOL: ...' on stderr" \
	grep -q "^marukv-stat: $tmp/missing: ." "$tmp/missing.err"
check "stat on a missing pool does not create it" test ! -e "$tmp/missing"

"$stat" "$pool" extra >/dev/null 2>&1
rc=$?
check "stat with two pools exits 2 (got $rc)" test "$rc" -eq 2
"$stat" --no-such-option >/dev/null 2>&1
rc=$?
check "stat with a bad option exits 2 (got $rc)" test "$rc" -eq 2
if [ -w /dev/full ]; then
	"$stat" --json "$pool" >/dev/full 2>"$tmp/full.err"
	rc=$?
	check "stat to a full stdout exits 2 (got $rc)" test "$rc" -eq 2
	check "stat to a full stdout says so on stderr" test -s "$tmp/full.err"
else
	skip "no /dev/full: stdout write error"
fi

check "stat -V prints 'marukv-stat $version'" test "$("$stat" -V)" = "marukv-stat $version"
check "stat --version prints the version" test "$("$stat" --version)" = "marukv-stat $version"
check "bench -V prints 'marukv-bench $version'" test "$("$bench" -V)" = "marukv-bench $version"
check "stat --help exits 0" "$stat" --help >/dev/null

# ---- man pages --------------------------------------------------------------

if command -v mandoc >/dev/null 2>&1; then
	for m in marukv.7 marukv.3 marukv-stat.1 marukv-bench.1; do
		out=$(mandoc -T lint -W warning "$top_builddir/man/$m" 2>&1)
		check "mandoc -T lint -W warning man/$m is clean" test -z "$out"
		[ -z "$out" ] || echo "$out" | sed 's/^/#   /'
	done
	check "man pages carry the package version" \
		grep -q "^\.TH .* \"marukv $version\"" "$top_builddir/man/marukv.7"
else
	skip "mandoc not installed: man page lint"
fi

# ---- documented examples ------------------------------------------------------

# build NAME: compile $disk/NAME.c against the library just built.
build() {
	# shellcheck disable=SC2086 # CC and SAN_CFLAGS are word lists
	"$top_builddir/libtool" --quiet --mode=link $CC $SAN_CFLAGS -std=gnu11 \
		-Wall -Wextra -Werror -I"$top_srcdir/include" -o "$disk/$1" "$disk/$1.c" \
		"$top_builddir/src/libmarukv.la" >"$disk/$1.err" 2>&1
}
# run_twice NAME EXPECTED: run it twice (create, then find) on its own pool.
run_twice() {
	r=0
	for _ in 1 2; do
		MARUKV_POOL=$disk/pool-$1 "$disk/$1" >"$disk/$1.out" 2>&1 || r=1
		grep -q "$2" "$disk/$1.out" || r=1
	done
	[ "$r" -eq 0 ] || show "$disk/$1.out"
	return "$r"
}

awk '/^```c$/ { f = 1; next } /^```$/ { if (f) exit } f' "$top_srcdir/README" >"$disk/readme.c"
if [ -s "$disk/readme.c" ] && build readme; then
	ok "README example compiles"
	check "README example runs (twice)" run_twice readme 'hello -> world (6 bytes)'
else
	not_ok "README example compiles"
	show "$disk/readme.err"
fi

awk '/^\.EX$/ { f = 1; next } /^\.EE$/ { exit } f' "$top_builddir/man/marukv.3" |
	sed 's/\\e/\\/g; s/\\-/-/g; s/\\&//g' >"$disk/man3.c"
if [ -s "$disk/man3.c" ] && build man3; then
	ok "marukv(3) example compiles"
	check "marukv(3) example runs (twice)" run_twice man3 '4096 bytes, first 0x2a'
else
	not_ok "marukv(3) example compiles"
	show "$disk/man3.err"
fi

# CI runs the README's test command and nothing else.
ci=$(sed -n '$p' "$top_srcdir/.ci/run")
check "README's second line is .ci/run's command" \
	test "$(sed -n 2p "$top_srcdir/README")" = "$ci"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
