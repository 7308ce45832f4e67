package vclock

import (
	"net/netip"
	"testing"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/device"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/sim/profile"
)

// TestSameHardware: a NIC is assembled alike on both clocks — the
// micro-TLB, the MTT page choice and the READ budget of the wall-clock
// NIC are the virtual-time NIC's too, unless its profile says otherwise
// (the built-in profiles, calibrated without them, do), and the page
// choice shows where it matters: the MTT entries of a 1 MiB region.
func TestSameHardware(t *testing.T) {
	port, _, err := mem.Pipe(netip.MustParseAddr("10.0.9.1"), netip.MustParseAddr("10.0.9.2"), mem.Faults{}, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	wall, err := rnic.Open(rnic.Options{Link: port})
	if err != nil {
		t.Fatal(err)
	}
	defer wall.Close()
	w, ok := device.DriverOf(wall).(device.Wall)
	if !ok {
		t.Fatalf("the wall-clock device's driver is %T", device.DriverOf(wall))
	}
	wallCore := w.Config().CoreConfig

	type choice struct {
		utlb, best bool
		budget     uint32
	}
	of := func(c transport.CoreConfig) choice { return choice{c.UTLB, c.BestPageSize, c.MaxReadPSNs} }
	if got, want := of(wallCore), (choice{true, true, device.DefaultReadBudgetPSNs}); got != want {
		t.Fatalf("wall-clock NIC: %+v, want %+v", got, want)
	}

	cx6, err := profile.Builtin("cx6")
	if err != nil {
		t.Fatal(err)
	}
	rnicHW := *cx6 // the same chip, with rnic's own choices
	rnicHW.Caches.UTLB, rnicHW.Caches.MTTPages = "", ""
	on := rnicHW
	on.Caches.UTLB, on.Caches.MTTPages = "on", "best"
	unbounded, small := rnicHW, rnicHW
	unbounded.Engine.ReadBudgetPSNs, small.Engine.ReadBudgetPSNs = -1, 256

	for _, tc := range []struct {
		name string
		prof *profile.HardwareProfile
		want choice
		// The MTT entries of a 1 MiB region registered without a page
		// size: one or two large pages (two where the buffer straddles a
		// large page's boundary), or 4 KiB pages.
		mttMin, mttMax uint32
	}{
		{"choices left out", &rnicHW, of(wallCore), 1, 2},
		{"choices said", &on, of(wallCore), 1, 2},
		{"built-in cx6", cx6, choice{false, false, device.DefaultReadBudgetPSNs}, 256, 257},
		{"no READ bound", &unbounded, choice{true, true, 0}, 1, 2},
		{"READ budget 256", &small, choice{true, true, 256}, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vc, err := New(Options{HardwareProfile: tc.prof})
			if err != nil {
				t.Fatal(err)
			}
			err = vc.Run(func() {
				dev, err := rnic.Open(rnic.Options{Clock: vc})
				if err != nil {
					t.Error(err)
					return
				}
				defer dev.Close()
				core := Model(vc, dev).Core()
				if got := of(core); got != tc.want {
					t.Errorf("virtual-time NIC: %+v, want %+v", got, tc.want)
				}
				// The limits and the page size are the program's, alike on
				// both clocks.
				if core.MaxQP != wallCore.MaxQP || core.MaxMR != wallCore.MaxMR || core.PageShift != wallCore.PageShift || core.MaxQPWR != wallCore.MaxQPWR {
					t.Errorf("limits differ: virtual %d QPs, %d MRs, page shift %d, %d WRs; wall %d, %d, %d, %d",
						core.MaxQP, core.MaxMR, core.PageShift, core.MaxQPWR, wallCore.MaxQP, wallCore.MaxMR, wallCore.PageShift, wallCore.MaxQPWR)
				}
				pd, err := dev.AllocPD()
				if err != nil {
					t.Error(err)
					return
				}
				defer pd.Dealloc()
				before := Model(vc, dev).ATU.Stats().MTTEntries
				mr, err := pd.RegMR(make([]byte, 1<<20), rnic.AccessLocalWrite)
				if err != nil {
					t.Error(err)
					return
				}
				defer mr.Dereg()
				if got := Model(vc, dev).ATU.Stats().MTTEntries - before; got < tc.mttMin || got > tc.mttMax {
					t.Errorf("a 1 MiB region takes %d MTT entries, want %d to %d", got, tc.mttMin, tc.mttMax)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
