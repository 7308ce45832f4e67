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
		Long: `exec runs PROGRAM with rnic's libibverbs.so.1, so that its verbs (libibverbs)
go to rnic's NICs: every running NIC ("rnic nic list") is a device it sees.
If no NIC serves --addr (default 127.0.0.1), exec starts one there for the
program's lifetime. The library is built on first use with the system C
compiler, against <infiniband/verbs.h> (Debian: gcc libibverbs-dev), into
$XDG_CACHE_HOME/rnic (default ~/.cache/rnic).

  rnic exec -- ibv_devinfo
  rnic exec -- ib_write_bw -d rnic0 -x 1`,
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
			p.Env = append(os.Environ(), "RNIC_RUN_DIR="+dir, "LD_LIBRARY_PATH="+joinPath(filepath.Dir(lib), os.Getenv("LD_LIBRARY_PATH")))
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
	fmt.Fprintln(h, strings.Join(provider.Flags, " "))
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
		base := filepath.Base(n) // src/x.c
		if err := os.WriteFile(filepath.Join(src, base), b, 0o644); err != nil {
			return "", err
		}
		if strings.HasSuffix(base, ".c") {
			cfiles = append(cfiles, base)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".libibverbs.so.1.%d", os.Getpid()))
	cmd := exec.Command(cc, append(append(append([]string{}, provider.Flags...), "-o", tmp), cfiles...)...)
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("building rnic's libibverbs.so.1: %v\n%s", err, out)
	}
	return lib, os.Rename(tmp, lib)
}
