package udp_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
)

// TestUnprivileged checks the fallback of a process without CAP_NET_RAW:
// RawAuto rebuilds IPv4 headers (frames flagged link.FlagIPRebuilt, the
// reason in Features as a *FeatureError wrapping EPERM), RawOn fails Open
// with that error, and IPv6 is verified all the same. Run as root, it
// runs itself again as user nobody (65534), which has no capabilities.
func TestUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		unprivileged(t)
		return
	}
	if os.Getenv("UDP_TEST_CHILD") != "" {
		t.Fatal("still root in the child")
	}
	// The test binary must be executable by nobody: copy it out of the
	// build directory, which only root can enter.
	dir, err := os.MkdirTemp("", "udp-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "udp.test")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestUnprivileged$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "UDP_TEST_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("as nobody:\n%s", out)
	if err != nil {
		t.Fatalf("the unprivileged run failed: %v", err)
	}
}

func unprivileged(t *testing.T) {
	if l, err := udp.Open(udp.Options{Addr: v4a, Port: freePort(t, v4a), Raw: udp.RawOn}); err == nil {
		l.Close()
		t.Skip("raw receive is permitted here (CAP_NET_RAW): nothing to fall back from")
	} else {
		var fe *udp.FeatureError
		if !errors.As(err, &fe) || fe.Feature != "raw" || !errors.Is(err, syscall.EPERM) {
			t.Fatalf("RawOn without CAP_NET_RAW: %v, want a raw *FeatureError wrapping EPERM", err)
		}
	}
	ra, rb := &recorder{keep: true}, &recorder{keep: true}
	a, b := pair(t, false, udp.Options{}, udp.Options{}, ra, rb)
	f := b.Features()
	var fe *udp.FeatureError
	if f.Raw || b.ICRCVerified() || !errors.As(f.RawErr, &fe) || !errors.Is(fe, syscall.EPERM) {
		t.Fatalf("RawAuto without CAP_NET_RAW: features %+v, verified %v", f, b.ICRCVerified())
	}
	sent := sendN(a, b, 50, 10, []int{4096, 7})
	waitFor(t, "frames", func() bool { return rb.count() == 50 })
	checkFrames(t, a, b, rb, sent) // flagged rebuilt, ICRC right (the sender is a link/udp)

	t.Logf("IPv4 RawAuto falls back: %v", f.RawErr)

	r6 := &recorder{keep: true}
	a6, b6 := pair(t, true, udp.Options{Raw: udp.RawOn}, udp.Options{Raw: udp.RawOn}, nil, r6)
	if !b6.ICRCVerified() {
		t.Fatal("IPv6 without CAP_NET_RAW is not verified")
	}
	sent = sendN(a6, b6, 50, 10, []int{4096, 7})
	waitFor(t, "frames", func() bool { return r6.count() == 50 })
	checkFrames(t, a6, b6, r6, sent)
	for _, r := range []*recorder{rb, r6} {
		for _, fl := range r.flags {
			if r == r6 && fl != 0 || r == rb && fl != link.FlagIPRebuilt {
				t.Fatalf("flags %v", fl)
			}
		}
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
