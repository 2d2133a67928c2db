#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/deb.sh -- build the Debian packages from the release tarball and test
# them installed.
#
# Run by `make check-deb` with the tarball it has just made:
#   sh t/deb.sh marukv-VERSION.tar.gz
#
# In a scratch directory under $TMPDIR, the tarball is unpacked and
# dpkg-buildpackage -us -uc -b builds libmarukv0, libmarukv-dev,
# marukv-tools and python3-marukv from its debian/ (with the quick tests
# debian/rules runs); lintian then checks them and fails on any error or
# warning (the warnings that stay are overridden in
# debian/*.lintian-overrides, each with its reason).  As root, the four
# packages are installed with apt-get, debian/tests/installed,
# debian/tests/python and debian/tests/venv run against them, and they are
# purged again: nothing of them stays on the machine.  Without root the
# packages are built and checked but not installed, and the script says
# so.  If any of them is already installed, it is left alone and the
# installed tests are not run.
# The scratch directory goes in every case; a failing step prints the end
# of its log.
# Exit: 0 built, clean and (as root) passing installed; 1 otherwise.

set -eu
tarball=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
packages="libmarukv0 libmarukv-dev marukv-tools python3-marukv"

for tool in dpkg-buildpackage dh dh_python3 lintian; do
	command -v "$tool" >/dev/null || {
		echo "check-deb: $tool not found (Debian: apt-get install debhelper dh-python lintian)" >&2
		exit 1
	}
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/marukv-deb.XXXXXX")
installed=
cleanup() {
	if [ -n "$installed" ]; then
		# shellcheck disable=SC2086 # a list of package names
		DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $installed >"$tmp/purge.log" 2>&1 ||
			{ echo "check-deb: could not purge$installed:"; tail -20 "$tmp/purge.log"; } >&2
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

# step NAME LOG COMMAND...: run COMMAND with its output in LOG; on failure
# print the end of LOG and stop.
step() {
	name=$1 log=$2
	shift 2
	start=$(date +%s)
	if "$@" >"$log" 2>&1; then
		echo "check-deb: $name: ok ($(($(date +%s) - start)) s)"
	else
		echo "check-deb: $name failed; the end of its output:" >&2
		tail -60 "$log" >&2
		exit 1
	fi
}

tar -xzf "$tarball" -C "$tmp"
src=$(echo "$tmp"/marukv-*/)
cd "$src"
# The outer make's job server means nothing to this build; -J sets its own.
step dpkg-buildpackage "$tmp/build.log" \
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL dpkg-buildpackage -us -uc -b -Jauto
cd "$tmp"
step lintian "$tmp/lintian.log" lintian --fail-on error,warning ./*.changes
ls ./*.deb

if [ "$(id -u)" -ne 0 ]; then
	echo "check-deb: not root: the packages are built and checked, not installed or tested installed"
	exit 0
fi
for p in $packages; do
	if dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q ' installed$'; then
		echo "check-deb: $p is installed already: left alone, installed tests not run"
		exit 0
	fi
done
debs=
for p in $packages; do
	debs="$debs ./${p}_*.deb"
done
installed=" $packages"
# shellcheck disable=SC2086 # globs of the four packages
step "apt-get install" "$tmp/install.log" \
	env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $debs
for t in installed python venv; do
	step "debian/tests/$t" "$tmp/$t.log" sh "$src/debian/tests/$t"
	cat "$tmp/$t.log"
done
