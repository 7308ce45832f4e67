package host_test

import (
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/device"
	"github.com/rnic/rnic/internal/device/host"
	"github.com/rnic/rnic/internal/hw/atu"
)

const (
	allAccess    = rnic.AccessLocalWrite | rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic
	remoteRights = rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic
)

// must returns v, panicking on err: for set-up that cannot fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// must0 fails the test on err.
func must0(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// readThroughMR reads n bytes at iova through the region key as the NIC
// does for a local access of PD pd: the ATU's translation, then the bus
// (the region is another process's memory).
func readThroughMR(d *rnic.Device, pd, key uint32, iova uint64, n int) ([]byte, error) {
	u := device.DriverOf(d).(device.Wall).ATU
	segs, f := u.Translate(&atu.Request{Key: key, PD: pd, VA: iova, Len: uint64(n)}, nil)
	if f != atu.OK {
		return nil, fmt.Errorf("translation fault %v", f)
	}
	out := make([]byte, n)
	if _, err := u.Host().Gather(out, segs); err != nil {
		return nil, err
	}
	return out, nil
}

// serve serves dev's host interface on a socket in a directory of the
// test's and returns the socket's path, and stop, which closes the
// socket and waits for Serve to return (before the device closes).
func serve(t *testing.T, dev *rnic.Device) (sock string, stop func()) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "rnic0.sock")
	ln := must(net.Listen("unixpacket", sock))
	served := make(chan error, 1)
	go func() { served <- host.Serve(dev, ln) }()
	return sock, func() { ln.Close(); <-served }
}
