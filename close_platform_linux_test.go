package rnic_test

import (
	"net"
	"path/filepath"
)

// platformCalls are the operations of close_test's table that exist on
// Linux only.
func platformCalls(o *objects) map[string]func() error {
	return map[string]func() error{
		"Device.ServeHost": func() error {
			ln, err := net.Listen("unixpacket", filepath.Join(o.p.t.TempDir(), "host.sock"))
			if err != nil {
				return err
			}
			defer ln.Close()
			return o.dev.ServeHost(ln)
		},
	}
}
