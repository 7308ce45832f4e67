#!/usr/bin/env bash
# Builds rnic's libibverbs.so.1 (provider/src) and librdmacm.so.1
# (provider/rdmacm) with the system C compiler, against the system's
# <infiniband/verbs.h> and <rdma/rdma_cma.h> (Debian: libibverbs-dev,
# librdmacm-dev):
#   ./scripts/build-provider.sh [OUTDIR]     (default build/provider)
# and librnic-sysfs.so (provider/sysfs, the sysfs view): programs load the
# libraries with LD_LIBRARY_PATH=OUTDIR and LD_PRELOAD=OUTDIR/librnic-sysfs.so
# (rnic exec does this).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/provider}
mkdir -p "$out"
${CC:-cc} -shared -fPIC -O2 -g -Wall -Wextra -std=gnu11 \
	-Wl,--version-script=provider/src/libibverbs.map -Wl,-soname,libibverbs.so.1 \
	-o "$out/libibverbs.so.1" provider/src/*.c
echo "$out/libibverbs.so.1"
# The sysfs view.
(cd provider/sysfs && ${CC:-cc} -shared -fPIC -O2 -g -Wall -Wextra -std=gnu11 \
	-Wl,--version-script=librnic-sysfs.map \
	-o "$(cd "$OLDPWD" && cd "$out" && pwd)/librnic-sysfs.so" sysfs.c ../src/hostif.c -ldl)
echo "$out/librnic-sysfs.so"
# librdmacm.so.1, against <rdma/rdma_cma.h> (Debian: librdmacm-dev).
if [ -e /usr/include/rdma/rdma_cma.h ]; then
	(cd provider/rdmacm && ${CC:-cc} -shared -fPIC -O2 -g -Wall -Wextra -std=gnu11 \
		-Wl,--version-script=librdmacm.map -Wl,-soname,librdmacm.so.1 \
		-o "$(cd "$OLDPWD" && cd "$out" && pwd)/librdmacm.so.1" rdmacm.c rsocket.c ../src/hostif.c -L"$(cd "$OLDPWD" && cd "$out" && pwd)" -libverbs)
	echo "$out/librdmacm.so.1"
else
	echo "build-provider.sh: <rdma/rdma_cma.h> is not installed (librdmacm-dev): librdmacm.so.1 not built" >&2
fi
