package mem_test

import (
	"errors"
	"math"
	"net/netip"
	"slices"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
)

func TestSwitchRoutes(t *testing.T) {
	checkGoroutines(t)
	s := mem.NewSwitch()
	mapped := netip.AddrFrom16(v4b.As16()) // ::ffff:10.0.0.2
	given := []netip.Addr{v4a, mapped, v6a, v6b}
	ports := make([]*mem.Port, len(given))
	recs := make([]*recorder, len(given))
	for i, a := range given {
		p, err := s.Port(a, mem.Faults{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		recs[i] = &recorder{}
		p.Attach(recs[i])
		ports[i] = p
	}
	if got := ports[1].Addr(); got != v4b {
		t.Errorf("port given %v has address %v, want %v", mapped, got, v4b)
	}

	tests := []struct {
		from int
		dst  netip.Addr // frame destination; an IPv6 frame if not Is4
		to   int
	}{
		{0, v4b, 1},
		{1, v4a, 0},
		{2, v6b, 3},
		{3, v6a, 2},
		{2, v4a, 0},                          // IPv4 frame from an IPv6 port
		{3, netip.AddrFrom16(v4b.As16()), 1}, // IPv6 frame to an IPv4-mapped address
		{0, v4a, 0},                          // to itself
		{1, netip.AddrFrom16(v4a.As16()), 0}, // mapped destination, port given as IPv4
	}
	tr := newTracker()
	want := make([][]uint32, len(ports))
	for i, tt := range tests {
		ports[tt.from].Send([]*link.Buf{tr.frame(tt.dst, uint32(i), 100)})
		want[tt.to] = append(want[tt.to], uint32(i))
	}
	for i, r := range recs {
		if got := r.indices(); !slices.Equal(got, want[i]) {
			t.Errorf("port %v received frames %v, want %v", given[i], got, want[i])
		}
	}
	balance(t, ports...)
	tr.checkReleased(t)
}

func TestSwitchNoRoute(t *testing.T) {
	short4 := func(b *link.Buf) { b.SetLen(19) }
	tests := []struct {
		name   string
		dst    netip.Addr
		size   int
		mangle func(b *link.Buf)
	}{
		{"unknown IPv4", netip.MustParseAddr("10.9.9.9"), 100, nil},
		{"unknown IPv6", netip.MustParseAddr("fd00::9"), 100, nil},
		{"short IPv4", v4b, 100, short4},
		{"short IPv6", v6b, 100, func(b *link.Buf) { b.SetLen(39) }},
		{"version 5", v4b, 100, func(b *link.Buf) { b.Bytes()[0] = 0x55 }},
		{"empty", v4b, 100, func(b *link.Buf) { b.SetLen(0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb := &recorder{}
			a, b := pipe(t, mem.Faults{}, mem.Faults{}, &recorder{}, rb)
			tr := newTracker()
			bad := tr.frame(tt.dst, 1, tt.size)
			if tt.mangle != nil {
				tt.mangle(bad)
			}
			// The bad frame sits between two good ones, so it also splits
			// the batch into two Deliver calls.
			a.Send([]*link.Buf{tr.frame(v4b, 0, 100), bad, tr.frame(v4b, 2, 100)})
			if got := rb.indices(); !slices.Equal(got, []uint32{0, 2}) {
				t.Errorf("delivered %v, want [0 2]", got)
			}
			if rb.calls != 2 {
				t.Errorf("%d Deliver calls, want 2", rb.calls)
			}
			if got := a.Stats().NoRoute; got != 1 {
				t.Errorf("NoRoute = %d, want 1", got)
			}
			balance(t, a, b)
			tr.checkReleased(t)
		})
	}
}

func TestPortErrors(t *testing.T) {
	tests := []struct {
		name   string
		addr   netip.Addr
		faults mem.Faults
		opts   []mem.Option
		is     error
	}{
		{"zero addr", netip.Addr{}, mem.Faults{}, nil, nil},
		{"unspecified", netip.IPv4Unspecified(), mem.Faults{}, nil, nil},
		{"taken", v4a, mem.Faults{}, nil, mem.ErrAddrInUse},
		{"taken mapped", netip.AddrFrom16(v4a.As16()), mem.Faults{}, nil, mem.ErrAddrInUse},
		{"loss > 1", v4b, mem.Faults{Loss: 1.5}, nil, nil},
		{"NaN", v4b, mem.Faults{Corrupt: math.NaN()}, nil, nil},
		{"negative", v4b, mem.Faults{Reorder: -0.1}, nil, nil},
		{"negative delay", v4b, mem.Faults{Delay: -1}, nil, nil},
		{"negative jitter", v4b, mem.Faults{Jitter: -1}, nil, nil},
		{"MTU 0", v4b, mem.Faults{}, []mem.Option{mem.WithMTU(0)}, nil},
		{"MTU too big", v4b, mem.Faults{}, []mem.Option{mem.WithMTU(link.BigFrame + 1)}, nil},
	}
	checkGoroutines(t)
	s := mem.NewSwitch()
	first, err := s.Port(v4a, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := s.Port(tt.addr, tt.faults, tt.opts...)
			if err == nil {
				p.Close()
				t.Fatal("Port succeeded, want an error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q, want %q", err, tt.is)
			}
		})
	}
	if err := first.SetFaults(mem.Faults{Duplicate: 2}); err == nil {
		t.Error("SetFaults accepted Duplicate 2")
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); !errors.Is(err, mem.ErrClosed) {
		t.Errorf("second Close returned %v, want ErrClosed", err)
	}
	again, err := s.Port(v4a, mem.Faults{})
	if err != nil {
		t.Fatalf("address not freed by Close: %v", err)
	}
	again.Close()
	if _, _, err := mem.Pipe(v4a, v4a, mem.Faults{}, mem.Faults{}); !errors.Is(err, mem.ErrAddrInUse) {
		t.Errorf("Pipe with one address twice returned %v, want ErrAddrInUse", err)
	}
}

func TestMTU(t *testing.T) {
	for _, f := range []mem.Faults{{}, {Corrupt: 1}, {Delay: 100e3}} {
		rb := &recorder{}
		a, b := pipe(t, f, mem.Faults{}, &recorder{}, rb, mem.WithMTU(300))
		if a.MTU() != 300 {
			t.Errorf("MTU() = %d, want 300", a.MTU())
		}
		tr := newTracker()
		a.Send([]*link.Buf{tr.frame(v4b, 0, 300), tr.frame(v4b, 1, 301), tr.frame(v4b, 2, 300)})
		waitFor(t, "2 frames", func() bool { return rb.count() == 2 })
		if got := rb.indices(); !slices.Equal(got, []uint32{0, 2}) {
			t.Errorf("faults %+v: delivered %v, want [0 2]", f, got)
		}
		if got := a.Stats().Oversize; got != 1 {
			t.Errorf("faults %+v: Oversize = %d, want 1", f, got)
		}
		balance(t, a, b)
		tr.checkReleased(t)
	}
}

// TestSwitchManyPorts routes among more ports than the linear table holds,
// then closes most of them so the table shrinks back.
func TestSwitchManyPorts(t *testing.T) {
	checkGoroutines(t)
	const n = 20
	s := mem.NewSwitch()
	ports := make([]*mem.Port, n)
	recs := make([]*recorder, n)
	addr := func(i int) netip.Addr {
		if i%2 == 0 {
			return netip.AddrFrom4([4]byte{10, 1, 0, byte(i)})
		}
		return netip.AddrFrom16([16]byte{0xfd, 15: byte(i)})
	}
	for i := range ports {
		p, err := s.Port(addr(i), mem.Faults{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		recs[i] = &recorder{}
		p.Attach(recs[i])
		ports[i] = p
	}
	tr := newTracker()
	round := func(open func(i int) bool) {
		t.Helper()
		for i, p := range ports {
			p.Send([]*link.Buf{tr.frame(addr((i+1)%n), uint32(i), 64)})
		}
		for i, r := range recs {
			from := (i + n - 1) % n
			want := []uint32{uint32(from)}
			if !open(i) || !open(from) {
				want = nil
			}
			if got := r.indices(); !slices.Equal(got, want) {
				t.Errorf("port %d received %v, want %v", i, got, want)
			}
			r.idx = nil
		}
	}
	round(func(int) bool { return true })
	for i := 3; i < n; i++ { // leave 3 ports: the table is small again
		ports[i].Close()
	}
	round(func(i int) bool { return i < 3 })
	balance(t, ports...)
	tr.checkReleased(t)
}
