// Package provider holds the C sources of rnic's libibverbs.so.1 (the
// verbs library that programs load to run on rnic, docs/verbs.md), so
// that the rnic command can build it where it runs (rnic exec) as
// scripts/build-provider.sh does.
package provider

import "embed"

// Sources are the library's C sources, headers and linker version
// script.
//
//go:embed src/*.c src/*.h src/libibverbs.map
var Sources embed.FS

// Flags are the C compiler's flags (besides the sources and the output),
// the same as scripts/build-provider.sh's.
var Flags = []string{"-shared", "-fPIC", "-O2", "-g", "-Wall", "-Wextra", "-std=gnu11",
	"-Wl,--version-script=libibverbs.map", "-Wl,-soname,libibverbs.so.1"}
