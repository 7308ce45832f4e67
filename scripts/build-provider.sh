#!/usr/bin/env bash
# Builds rnic's libibverbs.so.1 (provider/src) with the system C compiler,
# against the system's <infiniband/verbs.h> (Debian: libibverbs-dev):
#   ./scripts/build-provider.sh [OUTDIR]     (default build/provider)
# Programs load it with LD_LIBRARY_PATH=OUTDIR (rnic exec will do this).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/provider}
mkdir -p "$out"
${CC:-cc} -shared -fPIC -O2 -g -Wall -Wextra -std=gnu11 \
	-Wl,--version-script=provider/src/libibverbs.map -Wl,-soname,libibverbs.so.1 \
	-o "$out/libibverbs.so.1" provider/src/*.c
echo "$out/libibverbs.so.1"
