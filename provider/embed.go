// Package provider holds the C sources of rnic's libibverbs.so.1 (the
// verbs library that programs load to run on rnic, docs/verbs.md),
// librdmacm.so.1 (RDMA CM over the NICs' connection managers) and
// librnic-sysfs.so (the sysfs view rnic exec preloads: the NICs' entries
// of /sys/class/infiniband and /dev/infiniband, internal/sysfs), so that
// the rnic command can build them where it runs (rnic exec) as
// scripts/build-provider.sh does.
package provider

import "embed"

// Sources are the libraries' C sources, headers and linker version
// scripts: src/ is libibverbs', rdmacm/ librdmacm's and sysfs/
// librnic-sysfs.so's (both also compile src/hostif.c).
//
//go:embed src/*.c src/*.h src/libibverbs.map rdmacm/*.c rdmacm/*.h rdmacm/librdmacm.map sysfs/*.c sysfs/librnic-sysfs.map
var Sources embed.FS

// Flags are the C compiler's flags for libibverbs.so.1 (besides the
// sources and the output), the same as scripts/build-provider.sh's; run
// in src/.
var Flags = []string{"-shared", "-fPIC", "-O2", "-g", "-Wall", "-Wextra", "-std=gnu11",
	"-Wl,--version-script=libibverbs.map", "-Wl,-soname,libibverbs.so.1"}

// CMFlags are librdmacm.so.1's, run in rdmacm/ with the directory of
// the libibverbs.so.1 built first as -L (CMLink follows the sources).
var CMFlags = []string{"-shared", "-fPIC", "-O2", "-g", "-Wall", "-Wextra", "-std=gnu11",
	"-Wl,--version-script=librdmacm.map", "-Wl,-soname,librdmacm.so.1"}

// CMSources are librdmacm.so.1's C files, relative to rdmacm/.
var CMSources = []string{"rdmacm.c", "rsocket.c", "../src/hostif.c"}

// SysfsFlags are librnic-sysfs.so's, run in sysfs/ with SysfsSources.
var SysfsFlags = []string{"-shared", "-fPIC", "-O2", "-g", "-Wall", "-Wextra", "-std=gnu11",
	"-Wl,--version-script=librnic-sysfs.map", "-ldl"}

// SysfsSources are librnic-sysfs.so's C files, relative to sysfs/.
var SysfsSources = []string{"sysfs.c", "../src/hostif.c"}
