package rnic_test

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/statsrv"
	"github.com/rnic/rnic/link/mem"
)

func openNamed(t *testing.T, name string, publish bool) (*rnic.Device, error) {
	t.Helper()
	port, err := mem.NewSwitch().Port(netip.MustParseAddr("10.3.3.3"), mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := rnic.Open(rnic.Options{Link: port, Name: name, Publish: publish})
	if d != nil {
		t.Cleanup(func() { d.Close() })
	}
	return d, err
}

// TestPublish: a published device answers on its control socket with its
// own counters and QPs until it closes, and the socket goes with it.
func TestPublish(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	d, err := openNamed(t, "pub0", false)
	if err != nil {
		t.Fatal(err)
	}
	path := statsrv.Path("pub0")
	if _, err := statsrv.Ask(path, statsrv.ReqCounters); err == nil {
		t.Fatal("an unpublished device answers")
	}
	if err := d.Publish(); err != nil {
		t.Fatal(err)
	}
	if err := d.Publish(); err != nil {
		t.Errorf("second Publish: %v", err)
	}
	r, err := statsrv.Ask(path, statsrv.ReqCounters)
	if err != nil {
		t.Fatal(err)
	}
	if want := d.Counters(); r.Device != "pub0" || r.PID != os.Getpid() || len(r.Counters) != len(want) || r.Counters[0].Name != want[0].Name {
		t.Errorf("reply %+v", r)
	}
	pd, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := d.CreateCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cq, RecvCQ: cq, Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	r, err = statsrv.Ask(path, statsrv.ReqQPs)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.QPs) != 1 || r.QPs[0].LQPN != qp.QPN() || r.QPs[0].Type != "RC" || r.QPs[0].State != "RESET" {
		t.Errorf("QPs %+v, want QP %d in RESET", r.QPs, qp.QPN())
	}
	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if r, err := statsrv.Ask(path, statsrv.ReqQPs); err != nil || len(r.QPs) != 0 {
		t.Errorf("after Destroy: %v %+v", err, r)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Close: %v", err)
	}
	if err := d.Publish(); !errors.Is(err, rnic.ErrClosed) {
		t.Errorf("Publish after Close: %v, want ErrClosed", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Publish on a closed device: %v", err)
	}
}

// TestPublishErrors: a name another running device has published, or one
// that cannot name a file, is refused; Options.Publish makes Open fail.
func TestPublishErrors(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	if _, err := openNamed(t, "dup", true); err != nil {
		t.Fatal(err)
	}
	d, err := openNamed(t, "dup", true)
	if d != nil || err == nil || !strings.Contains(err.Error(), "a device named dup is already published") {
		t.Errorf("second device named dup: %v, %v", d, err)
	}
	d, err = openNamed(t, "dup", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Publish(); err == nil || !strings.Contains(err.Error(), "rnic: Publish dup:") {
		t.Errorf("Publish of a second dup: %v", err)
	}
	if _, err := openNamed(t, "a/b", true); err == nil || !strings.Contains(err.Error(), `device name "a/b" cannot name a socket`) {
		t.Errorf("name a/b: %v", err)
	}
}
