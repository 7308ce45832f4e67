package rnic_test

import (
	"testing"

	"github.com/rnic/rnic"
)

// TestFWVer: the device reports the module's version as its firmware
// version (ibv_query_device's fw_ver), not a constant of its own.
func TestFWVer(t *testing.T) {
	d, err := openNamed(t, "fw", false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Attr().FWVer, "rnic "+rnic.Version; got != want {
		t.Errorf("FWVer %q, want %q", got, want)
	}
}
