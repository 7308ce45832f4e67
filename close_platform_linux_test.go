package rnic_test

import (
	"net"
	"path/filepath"

	"github.com/rnic/rnic/internal/device/host"
)

// platformCalls are the operations of close_test's table that exist on
// Linux only.
func platformCalls(o *objects) map[string]func() error {
	return map[string]func() error{
		"host.Serve": func() error {
			ln, err := net.Listen("unixpacket", filepath.Join(o.p.t.TempDir(), "host.sock"))
			if err != nil {
				return err
			}
			defer ln.Close()
			return host.Serve(o.dev, ln)
		},
	}
}
