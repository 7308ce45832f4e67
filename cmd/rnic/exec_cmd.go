package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rnic/rnic/provider"
)

func newExecCmd() *cobra.Command {
	var addr string
	c := &cobra.Command{
		Use:   "exec [--addr A] -- PROGRAM [ARGS...]",
		Short: "Run a verbs program on rnic",
		Long: `exec runs PROGRAM with rnic's libibverbs.so.1 and librdmacm.so.1, so that its
verbs and RDMA CM calls go to rnic's NICs: every running NIC ("rnic nic list")
is a device it sees. It also preloads librnic-sysfs.so, which shows the
program the NICs at /sys/class/infiniband, /sys/class/infiniband_verbs and
/dev/infiniband, where UCX and others look for devices (docs/verbs.md).
If no NIC serves --addr (default 127.0.0.1), exec starts one there for the
program's lifetime. The libraries are built on first use with the system C
compiler, against <infiniband/verbs.h> and <rdma/rdma_cma.h> (Debian: gcc
libibverbs-dev librdmacm-dev), into $XDG_CACHE_HOME/rnic (default
~/.cache/rnic).

  rnic exec -- ibv_devinfo
  rnic exec -- ib_write_bw -d rnic0 -x 1
  rnic exec -- ucx_info -d`,
		Args:               cobra.MinimumNArgs(1),
		DisableFlagParsing: false,
		RunE: func(cmd *cobra.Command, args []string) error {
			lib, err := providerLib()
			if err != nil {
				return err
			}
			dir, err := runDir()
			if err != nil {
				return err
			}
			nics, _ := listNICs(dir)
			serving := false
			for _, n := range nics {
				serving = serving || n.Addr == addr && n.alive()
			}
			if !serving {
				out, err := runSelf("nic", "up", "--addr", addr)
				if err != nil {
					return fmt.Errorf("starting a NIC on %s: %v\n%s", addr, err, out)
				}
				name := strings.Fields(out)[0]
				defer runSelf("nic", "down", name)
			}
			p := exec.Command(args[0], args[1:]...)
			p.Stdin, p.Stdout, p.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			p.Env = append(os.Environ(), "RNIC_RUN_DIR="+dir, "LD_LIBRARY_PATH="+joinPath(filepath.Dir(lib), os.Getenv("LD_LIBRARY_PATH")),
				"LD_PRELOAD="+joinPreload(filepath.Join(filepath.Dir(lib), "librnic-sysfs.so"), os.Getenv("LD_PRELOAD")))
			err = p.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				cmd.SilenceErrors = true // the program said what went wrong
				return &exitCode{ee.ExitCode()}
			}
			return err
		},
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1", "the address of the NIC to start if none serves it")
	return c
}

// joinPreload puts lib first in an LD_PRELOAD list (space or colon
// separated) unless it is there already.
func joinPreload(lib, list string) string {
	for _, l := range strings.FieldsFunc(list, func(r rune) bool { return r == ' ' || r == ':' }) {
		if l == lib {
			return list
		}
	}
	if list == "" {
		return lib
	}
	return lib + " " + list
}

// exitCode is the program's exit status, which rnic exec exits with.
type exitCode struct{ code int }

func (e *exitCode) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func joinPath(a, b string) string {
	if b == "" {
		return a
	}
	return a + ":" + b
}

// runSelf runs this rnic binary with args and returns its output.
func runSelf(args ...string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	out, err := exec.Command(exe, args...).CombinedOutput()
	return string(out), err
}

// providerLib returns the path of rnic's libibverbs.so.1, building it
// into the cache if it is not there (a directory per version of the
// sources).
func providerLib() (string, error) {
	h := sha256.New()
	var names []string
	fs.WalkDir(provider.Sources, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	for _, n := range names {
		b, _ := provider.Sources.ReadFile(n)
		fmt.Fprintf(h, "%s %d\n", n, len(b))
		h.Write(b)
	}
	fmt.Fprintln(h, strings.Join(provider.Flags, " "), strings.Join(provider.CMFlags, " "), strings.Join(provider.CMSources, " "),
		strings.Join(provider.SysfsFlags, " "), strings.Join(provider.SysfsSources, " "))
	_, noCMA := os.Stat("/usr/include/rdma/rdma_cma.h")
	fmt.Fprintln(h, "rdma_cma.h", noCMA == nil) // installed later, librdmacm is built then
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "rnic", "provider-"+hex.EncodeToString(h.Sum(nil))[:16])
	lib := filepath.Join(dir, "libibverbs.so.1")
	if _, err := os.Stat(lib); err == nil {
		return lib, nil
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", errors.New("rnic exec builds its libibverbs.so.1 with a C compiler, and there is none (cc); Debian: apt-get install gcc libibverbs-dev")
	}
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		return "", errors.New("rnic exec builds its libibverbs.so.1 against <infiniband/verbs.h>, which is not installed; Debian: apt-get install libibverbs-dev")
	}
	src, err := os.MkdirTemp("", "rnic-provider-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	var cfiles []string
	for _, n := range names {
		b, _ := provider.Sources.ReadFile(n)
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(n)), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(src, n), b, 0o644); err != nil {
			return "", err
		}
		if strings.HasPrefix(n, "src/") && strings.HasSuffix(n, ".c") {
			cfiles = append(cfiles, filepath.Base(n))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Built in a directory of their own and renamed into place whole,
	// so that another rnic exec never sees one library without the other.
	tmpdir, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmpdir)
	cmd := exec.Command(cc, append(append(append([]string{}, provider.Flags...), "-o", filepath.Join(tmpdir, "libibverbs.so.1")), cfiles...)...)
	cmd.Dir = filepath.Join(src, "src")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building rnic's libibverbs.so.1: %v\n%s", err, out)
	}
	{
		args := append(append([]string{}, provider.SysfsFlags...), "-o", filepath.Join(tmpdir, "librnic-sysfs.so"))
		cmd := exec.Command(cc, append(args, provider.SysfsSources...)...)
		cmd.Dir = filepath.Join(src, "sysfs")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("building rnic's librnic-sysfs.so: %v\n%s", err, out)
		}
	}
	if _, err := os.Stat("/usr/include/rdma/rdma_cma.h"); err == nil {
		args := append(append([]string{}, provider.CMFlags...), "-o", filepath.Join(tmpdir, "librdmacm.so.1"))
		args = append(append(args, provider.CMSources...), "-L"+tmpdir, "-libverbs")
		cmd := exec.Command(cc, args...)
		cmd.Dir = filepath.Join(src, "rdmacm")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("building rnic's librdmacm.so.1: %v\n%s", err, out)
		}
	} else {
		fmt.Fprintln(os.Stderr, "rnic exec: <rdma/rdma_cma.h> is not installed, so rnic's librdmacm.so.1 is not built: programs that use RDMA CM would load the system's, which needs the kernel's rdma_cm; Debian: apt-get install librdmacm-dev")
	}
	for _, f := range []string{"librnic-sysfs.so", "librdmacm.so.1", "libibverbs.so.1"} { // libibverbs last: its presence says the build is whole
		if _, err := os.Stat(filepath.Join(tmpdir, f)); err == nil {
			if err := os.Rename(filepath.Join(tmpdir, f), filepath.Join(dir, f)); err != nil {
				return "", err
			}
		}
	}
	return lib, nil
}
