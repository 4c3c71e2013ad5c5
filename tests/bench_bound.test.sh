#!/usr/bin/env bash
# bench_bound.test.sh: make bench-bound's measurement-only patch
# (bench/bound.patch) still applies to the source and the files it changes
# still compile, warnings as errors, so the benchmark does not rot while the
# codec changes.  The patch is applied to a copy, never to this tree.
set -eu
cd "$(dirname "$0")/.."
T=$(mktemp -d /tmp/wanopt-boundtest.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

files=$(sed -n 's|^+++ b/||p' bench/bound.patch)
[ -n "$files" ] || fail "bench/bound.patch names no files"
for f in $files; do
	mkdir -p "$T/$(dirname "$f")"
	cp "$f" "$T/$f"
done
cp -r include "$T/"
cp dre/*.h "$T/dre/"
(cd "$T" && git apply "$OLDPWD/bench/bound.patch") ||
	fail "bench/bound.patch no longer applies: update it to the codec (see bench/bound.sh)"
for f in $files; do
	case $f in *.c) ;; *) continue ;; esac
	${CC:-cc} -fsyntax-only -std=gnu11 -pthread -D_GNU_SOURCE -I"$T/include" -I"$T/dre" \
		-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla \
		-Wno-unused-parameter -Werror "$T/$f" || fail "$f with bench/bound.patch does not compile"
done
echo "ok   bench/bound.patch applies to $(echo $files | wc -w) files and they compile"
