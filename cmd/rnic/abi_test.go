package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// abiAllowed lists, per library, the symbols (name@version or
// name@@version, as nm prints them) the system's library exports and
// rnic's may lack, each with the reason. TestLibrarySymbols fails on any
// other symbol rnic's lacks, and on an entry here that rnic's exports
// (the reason is gone: delete the entry).
var abiAllowed = map[string]map[string]string{
	"libibverbs.so.1": {},
	"librdmacm.so.1":  {},
}

// systemLibrary returns the path of the system's copy of the library
// name (Debian's /usr/lib/<triplet>/, or where ldconfig knows it) for the
// machine of rnic's build of it, or "" if there is none.
func systemLibrary(t *testing.T, name string, machine elf.Machine) string {
	t.Helper()
	candidates := []string{"/usr/lib/x86_64-linux-gnu/" + name, "/usr/lib/aarch64-linux-gnu/" + name}
	if out, err := exec.Command("ldconfig", "-p").Output(); err == nil {
		// Lines like "\tlibibverbs.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libibverbs.so.1".
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 4 && f[0] == name && f[len(f)-2] == "=>" {
				candidates = append(candidates, f[len(f)-1])
			}
		}
	}
	for _, p := range candidates {
		if f, err := elf.Open(p); err == nil {
			m := f.Machine
			f.Close()
			if m == machine {
				return p
			}
		}
	}
	return ""
}

// exports returns the defined dynamic symbols of the library at path as
// nm prints them with their versions (name@@VERSION for a default
// version, name@VERSION for an older one, and each version node's own
// name).
func exports(t *testing.T, nm, path string) map[string]bool {
	t.Helper()
	out, err := exec.Command(nm, "-D", "--defined-only", "--with-symbol-versions", path).Output()
	if err != nil {
		t.Fatalf("nm %s: %v", path, err)
	}
	syms := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 {
			syms[f[2]] = true
		}
	}
	if len(syms) == 0 {
		t.Fatalf("nm found no symbols in %s:\n%s", path, out)
	}
	return syms
}

// TestLibrarySymbols: rnic's libibverbs.so.1 and librdmacm.so.1 export
// every symbol, at every version, that the system's (rdma-core's) do, so
// that any program linked against rdma-core loads on rnic's; and the
// calls that need no device (names of enumerations, rate conversions,
// the kernel structure copies, ibv_init_ah_from_wc without a GRH) answer
// exactly as the system's do (provider/tests/pure_values.c on both).
func TestLibrarySymbols(t *testing.T) {
	nm, err := exec.LookPath("nm")
	if err != nil {
		t.Skip("skipped: no nm to list the libraries' symbols; Debian: apt-get install binutils")
	}
	lib := buildProvider(t)
	for _, name := range []string{"libibverbs.so.1", "librdmacm.so.1"} {
		t.Run(name, func(t *testing.T) {
			ours := filepath.Join(lib, name)
			f, err := elf.Open(ours)
			if err != nil {
				if os.IsNotExist(err) {
					t.Skipf("skipped: build-provider.sh built no %s (its headers are missing: see its output)", name)
				}
				t.Fatal(err)
			}
			machine := f.Machine
			f.Close()
			sys := systemLibrary(t, name, machine)
			if sys == "" {
				t.Skipf("skipped: the system has no %s (%v) to compare with; Debian: apt-get install ibverbs-providers librdmacm1", name, machine)
			}
			want, got := exports(t, nm, sys), exports(t, nm, ours)
			var missing, extra []string
			for s := range want {
				if got[s] {
					continue
				}
				if why, ok := abiAllowed[name][s]; ok {
					t.Logf("%s lacks %s, allowed: %s", name, s, why)
					continue
				}
				missing = append(missing, s)
			}
			for s := range got {
				if !want[s] {
					extra = append(extra, s)
				}
			}
			sort.Strings(missing)
			sort.Strings(extra)
			if len(missing) > 0 {
				t.Errorf("rnic's %s lacks %d symbols that %s exports:\n\t%s", name, len(missing), sys, strings.Join(missing, "\n\t"))
			}
			if len(extra) > 0 {
				t.Logf("rnic's %s exports %d symbols that %s does not: %s", name, len(extra), sys, strings.Join(extra, " "))
			}
			for s, why := range abiAllowed[name] {
				if got[s] {
					t.Errorf("abiAllowed excuses %s from %s (%q), but rnic's library exports it now: delete the entry", s, name, why)
				}
			}
		})
	}

	// The calls that need no device, over their domains, on both
	// libraries: one program, run once with each.
	t.Run("values", func(t *testing.T) {
		f, err := elf.Open(filepath.Join(lib, "libibverbs.so.1"))
		if err != nil {
			t.Fatal(err)
		}
		machine := f.Machine
		f.Close()
		sys := systemLibrary(t, "libibverbs.so.1", machine)
		if sys == "" {
			t.Skip("skipped: the system has no libibverbs.so.1 to compare with; Debian: apt-get install libibverbs1")
		}
		bin := filepath.Join(t.TempDir(), "pure_values")
		if out, err := exec.Command("cc", "-O2", "-Wall", "-Wextra", "-std=gnu11", "-o", bin, "../../provider/tests/pure_values.c",
			"-L"+lib, "-l:libibverbs.so.1").CombinedOutput(); err != nil {
			t.Fatalf("cc: %v\n%s", err, out)
		}
		run := func(dir string) string {
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("pure_values on %s: %v\n%s", dir, err, out)
			}
			return string(out)
		}
		ours, theirs := run(lib), run(filepath.Dir(sys))
		if ours == theirs {
			return
		}
		a, b := strings.Split(theirs, "\n"), strings.Split(ours, "\n")
		for i := 0; i < len(a) || i < len(b); i++ {
			var x, y string
			if i < len(a) {
				x = a[i]
			}
			if i < len(b) {
				y = b[i]
			}
			if x != y {
				t.Errorf("line %d: %s says %q, rnic's %q", i+1, sys, x, y)
			}
		}
	})
}

// TestCompat10 runs a program of the IBVERBS_1.0 ABI
// (provider/tests/compat_1_0.c: the 1.0 structures, each call bound to
// its @IBVERBS_1.0 version) on rnic's libibverbs.so.1 between two NICs of
// one process (127.0.2.1 and .2, so every packet crosses link/udp): it
// lists, opens and queries the devices, makes PDs, MRs, CQs, an SRQ, RC
// and UD QPs and AHs, takes the QPs to RTS, posts and polls through the
// 1.0 context's ops (an RDMA WRITE and a SEND chained, a SEND back, UD
// both ways), takes a completion event and the SRQ's limit event, and
// destroys it all; and checks the string and rate calls against
// rdma-core 44's values, ibv_init_ah_from_wc on the UD receive's GRH and
// made-up ones, and ibv_reg_mr_iova by an RDMA WRITE to its IOVA.
func TestCompat10(t *testing.T) {
	lib := buildProvider(t)
	t.Setenv("RNIC_RUN_DIR", t.TempDir())
	t.Setenv("RNIC_TEST_MAIN", "1")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir()) // the NICs' counters, this test's own
	t.Cleanup(func() { nicCmd(t, "down", "--all") })
	// One process for both, which a program using two NICs needs under
	// Yama's ptrace_scope 1.
	if out, err := nicCmd(t, "up", "--addr", "127.0.2.1", "--addr", "127.0.2.2"); err != nil {
		t.Fatalf("nic up: %v\n%s", err, out)
	}
	bin := filepath.Join(t.TempDir(), "compat_1_0")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-Wextra", "-std=gnu11", "-o", bin, "../../provider/tests/compat_1_0.c",
		"-L"+lib, "-l:libibverbs.so.1").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	} else if len(out) > 0 {
		t.Logf("cc:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("compat_1_0: %v\n%s", err, out)
	}
}
