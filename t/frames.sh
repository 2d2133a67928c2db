#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/frames.sh -- marukv-dump and marukv-load: a pool dumped and loaded
# into a fresh pool gives the same frames back, every key and byte; keys
# given, a prefix, keys there already; a stream damaged, cut short, not
# frames at all, or holding a frame larger than the pool; values damaged
# in the pool; a reader that goes away; usage errors.
#
# Run by `make check` from the top of the build tree.  Each check prints
# "ok - ..." or "not ok - ..."; the last line is "N passed, M failed".
# Exit: 0 all passed, 1 a check failed, 77 nothing could run, 99 setup error.

set -u
top_builddir=.
dump=$top_builddir/utils/marukv-dump
load=$top_builddir/utils/marukv-load
bench=$top_builddir/utils/marukv-bench
gc=$top_builddir/utils/marukv-gc
py=/usr/bin/python3
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok - $1"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $1"; }
check() {
	desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}
show() { for f; do sed 's/^/#   /' "$f"; done; }

for t in "$dump" "$load" "$bench" "$gc"; do
	[ -x "$t" ] || { echo "skip - $t not built"; exit 77; }
done
[ -x "$py" ] || { echo "skip - $py not installed"; exit 77; }

shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
tmp=$(mktemp -d "$shm/marukv-frames.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' HUP INT TERM
export MARUKV_LOCK_DIR="$tmp"
unset MARUKV_POOL

# json FILE EXPR: a Python expression over the JSON object o in FILE is true.
json() { "$py" -c 'import json, sys; o = json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"; }

# A pool of KV blocks in chains, as the demo writes them (some 80 MB).
a=$tmp/a
"$bench" demo --pool "$a" --readers 1 --prompts 20 --blocks 16 --block-size 256k \
	>"$tmp/demo.out" 2>&1 || { show "$tmp/demo.out"; exit 99; }
"$gc" --json verify "$a" >"$tmp/a.json" 2>&1 || { show "$tmp/a.json"; exit 99; }

# ---- round trip ---------------------------------------------------------------

"$dump" --json "$a" >"$tmp/a.mrdn" 2>"$tmp/d.json"
rc=$?
check "dump exits 0 (got $rc)" test "$rc" -eq 0
check "dump --json: every key, complete" json "$tmp/d.json" \
	'o["frames"] > 100 and o["missing"] == o["gone"] == o["corrupt"] == 0 and o["complete"] and o["bytes"] == __import__("os").path.getsize(sys.argv[1].replace("d.json", "a.mrdn"))'
"$load" --create --data-size 256m --json "$tmp/b" <"$tmp/a.mrdn" >"$tmp/l.json" 2>"$tmp/l.err"
rc=$?
check "load into a fresh pool exits 0 (got $rc)" test "$rc" -eq 0
check "load is quiet on stderr when not on a terminal" test ! -s "$tmp/l.err"
check "load --json: every frame imported" json "$tmp/l.json" \
	'o["imported"] == o["frames"] and o["exists"] == o["corrupt"] == o["too_large"] == 0 and not o["stopped"] and not o["truncated"]'
"$dump" -q "$tmp/b" >"$tmp/b.mrdn" 2>"$tmp/d2.err"
check "the loaded pool dumps the same bytes (every key, value and chain link)" \
	cmp -s "$tmp/a.mrdn" "$tmp/b.mrdn"
"$gc" verify --deep "$tmp/b" >"$tmp/v.out" 2>&1
rc=$?
check "the loaded pool verifies deeply (got $rc)" test "$rc" -eq 0 || show "$tmp/v.out"

"$load" --json "$tmp/b" <"$tmp/a.mrdn" >"$tmp/l2.json" 2>"$tmp/l2.err"
rc=$?
check "loading again exits 0 (got $rc)" test "$rc" -eq 0
check "loading again: every key there already, none imported" json "$tmp/l2.json" \
	'o["imported"] == 0 and o["exists"] == o["frames"] > 0'

# ---- keys given, a prefix -------------------------------------------------------

"$py" - "$tmp/a.mrdn" "$tmp/keys" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
off, n = 0, 0
while off < len(b):
    off += 32 + struct.unpack_from("<I", b, off + 8)[0]
    n += 1
open(sys.argv[2], "w").write("%d\n" % n if off == len(b) else "0\n")
EOF
read -r nkeys <"$tmp/keys"
check "the stream parses as frames, one per key ($nkeys)" json "$tmp/d.json" "o['frames'] == $nkeys"

# text keys: frames made by another producer (Python and b3sum), loaded
"$py" - "$tmp/text.mrdn" <<'EOF'
import struct, subprocess, sys
def frame(key, value, parent=0, tier=0):
    body = b"MKVB" + struct.pack("<HHQQQ", 1, len(key), len(value), parent, 0) + key + value
    h = subprocess.run(["b3sum", "--length", "16", "--raw", "-"], input=body,
                       capture_output=True, check=True).stdout
    return b"MRDN" + struct.pack("<IIB3x", 1, len(body), tier) + h + body
with open(sys.argv[1], "wb") as f:
    for k in (b"pre/a", b"pre/b", b"pre", b"prf", b"other"):
        f.write(frame(k, b"value of " + k * 50))
EOF
"$load" -c --data-size 8m --json "$tmp/t" <"$tmp/text.mrdn" >"$tmp/t.json" 2>"$tmp/t.err"
rc=$?
check "frames written by another producer (Python, b3sum) load (got $rc)" test "$rc" -eq 0
check "... all five" json "$tmp/t.json" 'o["imported"] == 5'
"$dump" --prefix zzz "$tmp/t" >"$tmp/none.mrdn" 2>"$tmp/none.err"
rc=$?
check "a prefix no key has: exit 0, no frames (got $rc)" test "$rc" -eq 0 -a ! -s "$tmp/none.mrdn"
"$dump" --prefix pre --json "$tmp/t" >"$tmp/pre.mrdn" 2>"$tmp/pre.json"
check "dump --prefix pre: pre, pre/a, pre/b" json "$tmp/pre.json" 'o["frames"] == 3'
check "... the frames of those keys, in byte order" "$py" -c '
import struct, sys
b = open(sys.argv[1], "rb").read(); off = 0; ks = []
while off < len(b):
    body = struct.unpack_from("<I", b, off + 8)[0]; klen = struct.unpack_from("<H", b, off + 38)[0]
    ks.append(b[off + 64:off + 64 + klen]); off += 32 + body
sys.exit(0 if ks == [b"pre", b"pre/a", b"pre/b"] else 1)' "$tmp/pre.mrdn"
"$dump" -k other -k pre/b -k missing --json "$tmp/t" >"$tmp/k.mrdn" 2>"$tmp/k.err"
rc=$?
check "dump -k with a missing key exits 1 (got $rc)" test "$rc" -eq 1
check "... says which key is missing" grep -q "missing: no such key" "$tmp/k.err"
check "... and writes the two others" "$py" -c '
import json, sys
o = json.loads(open(sys.argv[1]).read().splitlines()[-1])
sys.exit(0 if o["frames"] == 2 and o["missing"] == 1 and o["complete"] else 1)' "$tmp/k.err"

# ---- damaged streams -------------------------------------------------------------

# the offsets of the frames of the text stream
set -- $("$py" -c '
import struct, sys
b = open(sys.argv[1], "rb").read(); off = 0
while off < len(b):
    print(off); off += 32 + struct.unpack_from("<I", b, off + 8)[0]
print(off)' "$tmp/text.mrdn")
o2=$2 o5=$5 end=$6
# a byte of the second frame's value
cp "$tmp/text.mrdn" "$tmp/bad.mrdn"
printf 'X' | dd of="$tmp/bad.mrdn" bs=1 seek=$((o2 + 80)) conv=notrunc 2>/dev/null
"$load" -c --data-size 8m --json "$tmp/s1" <"$tmp/bad.mrdn" >"$tmp/s1.json" 2>"$tmp/s1.err"
rc=$?
check "a damaged frame stops the load: exit 1 (got $rc)" test "$rc" -eq 1
check "... at its offset ($o2), named" grep -q "offset $o2: .*checksum; stopped" "$tmp/s1.err"
check "... the frame before it imported, none after" json "$tmp/s1.json" \
	"o['imported'] == 1 and o['corrupt'] == 1 and o['stopped'] and o['offset'] == $o2"
"$load" -c --data-size 8m --skip-corrupt --json "$tmp/s2" <"$tmp/bad.mrdn" >"$tmp/s2.json" \
	2>"$tmp/s2.err"
rc=$?
check "--skip-corrupt steps over it: exit 1 (got $rc)" test "$rc" -eq 1
check "... the four others imported" json "$tmp/s2.json" \
	"o['imported'] == 4 and o['corrupt'] == 1 and not o['stopped'] and o['offset'] == $end"
"$dump" -k pre/b -q "$tmp/s2" >"$tmp/s2a.mrdn" 2>/dev/null
check "... and the damaged key is not in the pool" test ! -s "$tmp/s2a.mrdn"

head -c $((end - 7)) "$tmp/text.mrdn" >"$tmp/cut.mrdn"
"$load" -c --data-size 8m --json "$tmp/s3" <"$tmp/cut.mrdn" >"$tmp/s3.json" 2>"$tmp/s3.err"
rc=$?
check "a stream cut inside its last frame: exit 1 (got $rc)" test "$rc" -eq 1
check "... four imported, truncated" json "$tmp/s3.json" \
	"o['imported'] == 4 and o['truncated'] and o['offset'] == $o5"
head -c $((o2 + 10)) "$tmp/text.mrdn" >"$tmp/cut2.mrdn"
"$load" -c --data-size 8m --json "$tmp/s4" <"$tmp/cut2.mrdn" >"$tmp/s4.json" 2>/dev/null
rc=$?
check "a stream cut inside a header: exit 1, truncated (got $rc)" json "$tmp/s4.json" \
	"$rc == 1 and o['imported'] == 1 and o['truncated']"
{ printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n'; cat "$tmp/text.mrdn"; } >"$tmp/junk.mrdn"
"$load" -c --data-size 8m --skip-corrupt --json "$tmp/s5" <"$tmp/junk.mrdn" >"$tmp/s5.json" \
	2>"$tmp/s5.err"
rc=$?
check "not frames at all: exit 1, stopped at 0, nothing imported (got $rc)" json \
	"$tmp/s5.json" "$rc == 1 and o['stopped'] and o['imported'] == 0 and o['offset'] == 0"
check "... says it is not MRDN" grep -q "offset 0: .*not an MRDN frame" "$tmp/s5.err"

# big_frame OUT KEYLEN VALUELEN: a frame of a zero value of VALUELEN
# bytes under a key of KEYLEN bytes, then the frames of text.mrdn, in OUT
big_frame() {
	"$py" - "$1" "$2" "$3" "$tmp/text.mrdn" <<'EOF'
import struct, subprocess, sys
key, value = b"k" * int(sys.argv[2]), bytes(int(sys.argv[3]))
body = b"MKVB" + struct.pack("<HHQQQ", 1, len(key), len(value), 0, 0) + key + value
h = subprocess.run(["b3sum", "--length", "16", "--raw", "-"], input=body,
                   capture_output=True, check=True).stdout
with open(sys.argv[1], "wb") as f:
    f.write(b"MRDN" + struct.pack("<IIB3x", 1, len(body), 0) + h + body)
    f.write(open(sys.argv[4], "rb").read())
EOF
}

# a frame larger than the pool's arena is read past, not held
big_frame "$tmp/big.mrdn" 3 $((3 << 20))
"$load" -c --data-size 1m --json "$tmp/s6" <"$tmp/big.mrdn" >"$tmp/s6.json" 2>"$tmp/s6.err"
rc=$?
check "a frame larger than the pool is passed over: exit 1 (got $rc)" json "$tmp/s6.json" \
	"$rc == 1 and o['too_large'] == 1 and o['imported'] == 5"

# a value one byte longer than the arena, behind a long key: the frame is
# shorter than arena, key and headers, so it is read, then passed over
big_frame "$tmp/edge.mrdn" 500 $(((1 << 20) + 1))
"$load" -c --data-size 1m --json "$tmp/s7" <"$tmp/edge.mrdn" >"$tmp/s7.json" 2>"$tmp/s7.err"
rc=$?
check "a value just longer than the arena is passed over: exit 1 (got $rc)" json \
	"$tmp/s7.json" "$rc == 1 and o['too_large'] == 1 and o['imported'] == 5"
check "... and said" grep -q "offset 0: a value of 1048577 bytes, larger than" "$tmp/s7.err"

# ---- damaged values, a reader that goes away, usage ----------------------------------

cp -r "$tmp/t" "$tmp/u"
size=$(stat -c %s "$tmp/u/data")
"$py" -c '
import sys
with open(sys.argv[1], "r+b") as f:
    for off in range(0, int(sys.argv[2]), 4096):
        f.seek(off + 100); b = f.read(1); f.seek(off + 100); f.write(bytes([b[0] ^ 0x55]))' \
	"$tmp/u/data" "$size"
"$dump" --json "$tmp/u" >"$tmp/u.mrdn" 2>"$tmp/u.err"
rc=$?
check "values damaged in the pool: dump exits 1 (got $rc), none written" \
	test "$rc" -eq 1 -a ! -s "$tmp/u.mrdn"
check "... each one said and counted" "$py" -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines(); o = json.loads(lines[-1])
sys.exit(0 if o["corrupt"] == 5 and sum("not dumped" in l for l in lines) == 5 else 1)' "$tmp/u.err"
"$dump" --no-verify -q "$tmp/u" >"$tmp/u2.mrdn" 2>/dev/null
rc=$?
check "--no-verify dumps them (got $rc)" test "$rc" -eq 0 -a -s "$tmp/u2.mrdn"

( "$dump" "$a" 2>"$tmp/pipe.err"; echo $? >"$tmp/pipe.rc" ) | head -c 100 >/dev/null
rc=$(cat "$tmp/pipe.rc")
check "a reader that goes away: exit 2, not a signal (got $rc)" test "$rc" -eq 2
check "... said on stderr" grep -q "write to fd 1" "$tmp/pipe.err"

"$dump" -t 256 "$a" >/dev/null 2>&1
check "dump -t 256 is a usage error" test $? -eq 2
"$dump" -k x -p y "$a" >/dev/null 2>&1
check "dump with keys and a prefix is a usage error" test $? -eq 2
"$load" --data-size 1m "$tmp/b" </dev/null >/dev/null 2>&1
check "load --data-size without --create is a usage error" test $? -eq 2
"$load" "$tmp/none" </dev/null >"$tmp/n.out" 2>"$tmp/n.err"
rc=$?
check "load into a pool that is not there exits 2 (got $rc)" test "$rc" -eq 2
check "... and says so" grep -q "$tmp/none" "$tmp/n.err"
"$load" "$tmp/b" </dev/null >"$tmp/e.out" 2>"$tmp/e.err"
rc=$?
check "an empty stream loads nothing: exit 0 (got $rc)" test "$rc" -eq 0 -a ! -s "$tmp/e.err"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
