package rnic

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/rnic/rnic/internal/device"
	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/hw/cache"
	"github.com/rnic/rnic/internal/hw/sched"
	"github.com/rnic/rnic/internal/nic"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/wire"
)

// The public types mirror the engine's (convert.go converts between them
// by value): every constant must have the engine's value, and every
// field of an engine type must have its public counterpart, or the
// conversion would silently drop it.

func TestConstantsMatchEngine(t *testing.T) {
	type pair struct {
		name      string
		api, core uint64
	}
	u := func(name string, a, c uint64) pair { return pair{name, a, c} }
	cases := []pair{
		u("WRRDMAWrite", uint64(WRRDMAWrite), uint64(transport.WRRDMAWrite)),
		u("WRRDMAWriteWithImm", uint64(WRRDMAWriteWithImm), uint64(transport.WRRDMAWriteWithImm)),
		u("WRSend", uint64(WRSend), uint64(transport.WRSend)),
		u("WRSendWithImm", uint64(WRSendWithImm), uint64(transport.WRSendWithImm)),
		u("WRRDMARead", uint64(WRRDMARead), uint64(transport.WRRDMARead)),
		u("WRAtomicCmpAndSwp", uint64(WRAtomicCmpAndSwp), uint64(transport.WRAtomicCmpAndSwp)),
		u("WRAtomicFetchAndAdd", uint64(WRAtomicFetchAndAdd), uint64(transport.WRAtomicFetchAndAdd)),
		u("WRLocalInv", uint64(WRLocalInv), uint64(transport.WRLocalInv)),
		u("WRBindMW", uint64(WRBindMW), uint64(transport.WRBindMW)),
		u("WRSendWithInv", uint64(WRSendWithInv), uint64(transport.WRSendWithInv)),
		u("SendFence", uint64(SendFence), uint64(transport.SendFence)),
		u("SendSignaled", uint64(SendSignaled), uint64(transport.SendSignaled)),
		u("SendSolicited", uint64(SendSolicited), uint64(transport.SendSolicited)),
		u("SendInline", uint64(SendInline), uint64(transport.SendInline)),
		u("WCSend", uint64(WCSend), uint64(transport.WCSend)),
		u("WCRDMAWrite", uint64(WCRDMAWrite), uint64(transport.WCRDMAWrite)),
		u("WCRDMARead", uint64(WCRDMARead), uint64(transport.WCRDMARead)),
		u("WCCompSwap", uint64(WCCompSwap), uint64(transport.WCCompSwap)),
		u("WCFetchAdd", uint64(WCFetchAdd), uint64(transport.WCFetchAdd)),
		u("WCBindMW", uint64(WCBindMW), uint64(transport.WCBindMW)),
		u("WCLocalInv", uint64(WCLocalInv), uint64(transport.WCLocalInv)),
		u("WCRecv", uint64(WCRecv), uint64(transport.WCRecv)),
		u("WCRecvRDMAWithImm", uint64(WCRecvRDMAWithImm), uint64(transport.WCRecvRDMAWithImm)),
		u("WCWithGRH", uint64(WCWithGRH), uint64(transport.WCWithGRH)),
		u("WCWithImm", uint64(WCWithImm), uint64(transport.WCWithImm)),
		u("WCWithInv", uint64(WCWithInv), uint64(transport.WCWithInv)),
		u("RC", uint64(RC), uint64(transport.RC)),
		u("UC", uint64(UC), uint64(transport.UC)),
		u("UD", uint64(UD), uint64(transport.UD)),
		u("AccessLocalWrite", uint64(AccessLocalWrite), uint64(atu.LocalWrite)),
		u("AccessRemoteWrite", uint64(AccessRemoteWrite), uint64(atu.RemoteWrite)),
		u("AccessRemoteRead", uint64(AccessRemoteRead), uint64(atu.RemoteRead)),
		u("AccessRemoteAtomic", uint64(AccessRemoteAtomic), uint64(atu.RemoteAtomic)),
		u("AccessMWBind", uint64(AccessMWBind), uint64(atu.MWBind)),
		u("AccessZeroBased", uint64(AccessZeroBased), uint64(atu.ZeroBased)),
		u("MTU256", uint64(MTU256), uint64(wire.MTU256)),
		u("MTU4096", uint64(MTU4096), uint64(wire.MTU4096)),
		u("PSNMask", uint64(PSNMask), uint64(wire.PSNMask)),
	}
	for s := WCSuccess; s <= WCGeneralErr; s++ {
		cases = append(cases, u("WCStatus "+s.String(), uint64(s), uint64(transport.WCStatus(s))))
	}
	if transport.WCGeneralErr != 21 {
		t.Errorf("the engine's last status is %d, the API's WCGeneralErr 21", transport.WCGeneralErr)
	}
	for s := QPSReset; s <= QPSErr; s++ {
		if s.String() != transport.QPState(s).String() {
			t.Errorf("QPState %d: %q, engine %q", s, s, transport.QPState(s))
		}
	}
	for e := EventCQErr; e <= EventGIDChange; e++ {
		if transport.EventType(e).String() != "unknown" && e != EventQPFatal && e.String() != transport.EventType(e).String() {
			t.Errorf("EventType %d: %q, engine %q", e, e, transport.EventType(e))
		}
	}
	masks := []struct {
		api  QPAttrMask
		core transport.AttrMask
	}{
		{QPAttrState, transport.AttrState}, {QPAttrCurState, transport.AttrCurState},
		{QPAttrEnSQDAsyncNotify, transport.AttrEnSQDAsyncNotify}, {QPAttrAccessFlags, transport.AttrAccessFlags},
		{QPAttrPKeyIndex, transport.AttrPKeyIndex}, {QPAttrPort, transport.AttrPort}, {QPAttrQKey, transport.AttrQKey},
		{QPAttrAV, transport.AttrAV}, {QPAttrPathMTU, transport.AttrPathMTU}, {QPAttrTimeout, transport.AttrTimeout},
		{QPAttrRetryCnt, transport.AttrRetryCnt}, {QPAttrRNRRetry, transport.AttrRNRRetry}, {QPAttrRQPSN, transport.AttrRQPSN},
		{QPAttrMaxQPRdAtomic, transport.AttrMaxQPRdAtomic}, {QPAttrAltPath, transport.AttrAltPath},
		{QPAttrMinRNRTimer, transport.AttrMinRNRTimer}, {QPAttrSQPSN, transport.AttrSQPSN},
		{QPAttrMaxDestRdAtomic, transport.AttrMaxDestRdAtomic}, {QPAttrPathMigState, transport.AttrPathMigState},
		{QPAttrCap, transport.AttrCap}, {QPAttrDestQPN, transport.AttrDestQPN}, {QPAttrRateLimit, transport.AttrRateLimit},
	}
	for _, m := range masks {
		cases = append(cases, u("QPAttrMask "+m.api.String(), uint64(m.api), uint64(m.core)))
	}
	for _, c := range cases {
		if c.api != c.core {
			t.Errorf("%s = %d, the engine's %d", c.name, c.api, c.core)
		}
	}
}

// internalOnly are engine fields with no public counterpart on purpose:
// transport.SendWR.Inline carries the host interface's inline payloads,
// which only the NIC's own poller posts (a Go program's inline data is
// read from its SGL).
var internalOnly = map[string]bool{"SendWR.Inline": true}

// TestFieldsMatchEngine: each engine field has a public field of the same
// name (the AH pointer and a Bind's key aside, which convert.go maps).
func TestFieldsMatchEngine(t *testing.T) {
	pairs := []struct{ api, core any }{
		{SGE{}, transport.SGE{}},
		{SendWR{}, transport.SendWR{}},
		{RecvWR{}, transport.RecvWR{}},
		{WC{}, transport.WC{}},
		{MWBindInfo{}, transport.MWBindInfo{}},
		{QPCap{}, transport.QPCap{}},
	}
	for _, p := range pairs {
		a, c := reflect.TypeOf(p.api), reflect.TypeOf(p.core)
		skipped := 0
		for i := range c.NumField() {
			f := c.Field(i)
			if !f.IsExported() {
				continue
			}
			if internalOnly[c.Name()+"."+f.Name] {
				skipped++
				continue
			}
			g, ok := a.FieldByName(f.Name)
			if !ok {
				t.Errorf("%v.%s has no counterpart in %v", c, f.Name, a)
				continue
			}
			if g.Type.Size() != f.Type.Size() {
				t.Errorf("%v.%s is %d bytes, %v's %d", a, f.Name, g.Type.Size(), c, f.Type.Size())
			}
		}
		if a.NumField() != c.NumField()-countUnexported(c)-skipped {
			t.Errorf("%v has %d fields, %v %d exported and public", a, a.NumField(), c, c.NumField()-countUnexported(c)-skipped)
		}
	}
}

func countUnexported(t reflect.Type) int {
	n := 0
	for i := range t.NumField() {
		if !t.Field(i).IsExported() {
			n++
		}
	}
	return n
}

// TestSGLSharesMemory: sgl converts without copying.
func TestSGLSharesMemory(t *testing.T) {
	s := []SGE{{1, 2, 3}, {4, 5, 6}}
	c := sgl(s)
	if len(c) != 2 || &c[0] != (*transport.SGE)(&s[0]) || c[1] != (transport.SGE{Addr: 4, Length: 5, LKey: 6}) {
		t.Fatalf("sgl = %+v", c)
	}
	if sgl(nil) != nil || sgl([]SGE{}) != nil {
		t.Fatal("an empty SGL is not nil")
	}
}

// TestWCLayout: the engine's completion, seen through wcs, is the API's,
// field by field.
func TestWCLayout(t *testing.T) {
	w := make([]WC, 2)
	in := transport.WC{WRID: 1, Status: transport.WCRemAccessErr, Opcode: transport.WCRecvRDMAWithImm, Flags: transport.WCWithImm | transport.WCWithGRH,
		VendorErr: 2, ByteLen: 3, ImmData: 4, InvalidatedRKey: 5, QPNum: 6, SrcQP: 7, PKeyIndex: 8, SL: 9}
	wcs(w)[1] = in
	want := WC{WRID: 1, Status: WCRemAccessErr, Opcode: WCRecvRDMAWithImm, Flags: WCWithImm | WCWithGRH,
		VendorErr: 2, ByteLen: 3, ImmData: 4, InvalidatedRKey: 5, QPNum: 6, SrcQP: 7, PKeyIndex: 8, SL: 9}
	if w[1] != want || w[0] != (WC{}) {
		t.Fatalf("got %+v\nwant %+v", w, want)
	}
	a, c := reflect.TypeOf(WC{}), reflect.TypeOf(transport.WC{})
	if a.NumField() != c.NumField() || a.Size() != c.Size() {
		t.Fatalf("WC has %d fields, %d bytes; the engine's %d, %d", a.NumField(), a.Size(), c.NumField(), c.Size())
	}
	for i := range a.NumField() {
		f, g := a.Field(i), c.Field(i)
		if f.Name != g.Name || f.Offset != g.Offset || f.Type.Size() != g.Type.Size() || f.Type.Kind() != g.Type.Kind() {
			t.Errorf("field %d: %s %v at %d, the engine's %s %v at %d", i, f.Name, f.Type, f.Offset, g.Name, g.Type, g.Offset)
		}
	}
	if wcs(nil) != nil {
		t.Error("wcs(nil) is not nil")
	}
}

// TestHardwareConfig: Hardware's public fields reach the NIC's
// configuration, each zero field taking its default alone.
func TestHardwareConfig(t *testing.T) {
	var def nic.Config
	def.Defaults()
	cases := []struct {
		name  string
		hw    Hardware
		check func(t *testing.T, c nic.Config)
		err   string
	}{
		{"zero", Hardware{}, func(t *testing.T, c nic.Config) {
			if c.QPCCache != def.QPCCache || c.MTTCache != def.MTTCache || c.Arbiter.Levels != def.Arbiter.Levels ||
				c.Arbiter.Mode != def.Arbiter.Mode || c.Arbiter.Quantum != def.Arbiter.Quantum || c.Arbiter.BurstLimit != def.Arbiter.BurstLimit {
				t.Errorf("zero Hardware gave %+v", c)
			}
		}, ""},
		{"one-field", Hardware{QPCCache: Cache{CapacityBytes: 4096}}, func(t *testing.T, c nic.Config) {
			if want := (cache.Config{Name: "qpc", CapacityBytes: 4096, EntryBytes: 256, Ways: 8}); c.QPCCache != want {
				t.Errorf("QPCCache = %+v, want %+v", c.QPCCache, want)
			}
			if c.MTTCache != def.MTTCache {
				t.Errorf("MTTCache = %+v changed", c.MTTCache)
			}
		}, ""},
		{"disabled-fully-associative", Hardware{MTTCache: Cache{CapacityBytes: -1}, MPTCache: Cache{Ways: -1}}, func(t *testing.T, c nic.Config) {
			if c.MTTCache.CapacityBytes != 0 || c.MPTCache.Ways != 0 || c.MPTCache.CapacityBytes != def.MPTCache.CapacityBytes {
				t.Errorf("MTT %+v MPT %+v", c.MTTCache, c.MPTCache)
			}
		}, ""},
		{"arbiter", Hardware{Arbiter: Arbiter{Levels: 2, Mode: ArbiterWRR, BurstLimit: 4}, DMAEngines: 2, MaxUnackedPSNs: 64, MaxQPRdAtom: 4},
			func(t *testing.T, c nic.Config) {
				if want := (sched.Config{Levels: 2, Mode: sched.WRR, Quantum: def.Arbiter.Quantum, BurstLimit: 4}); c.Arbiter.Levels != want.Levels ||
					c.Arbiter.Mode != want.Mode || c.Arbiter.Quantum != want.Quantum || c.Arbiter.BurstLimit != want.BurstLimit {
					t.Errorf("Arbiter = %+v, want %+v", c.Arbiter, want)
				}
				if c.DMAEngines != 2 || c.MaxUnackedPSNs != 64 || c.MaxQPRdAtom != 4 {
					t.Errorf("config %+v", c)
				}
			}, ""},
		{"bad-mode", Hardware{Arbiter: Arbiter{Mode: 7}}, nil, "neither DWRR nor WRR"},
		{"bad-levels", Hardware{Arbiter: Arbiter{Levels: 99}}, nil, "Levels"},
		{"bad-entry", Hardware{QPCCache: Cache{EntryBytes: -4}}, nil, "EntryBytes"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pa, pb, err := mem.Pipe(netip.AddrFrom4([4]byte{10, 3, byte(i), 1}), netip.AddrFrom4([4]byte{10, 3, byte(i), 2}), mem.Faults{}, mem.Faults{})
			if err != nil {
				t.Fatal(err)
			}
			defer pb.Close()
			d, err := Open(Options{Link: pa, Hardware: c.hw})
			if c.err != "" {
				pa.Close()
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one mentioning %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			c.check(t, d.d.(device.Wall).Config())
		})
	}
	if h := DefaultHardware(); h.QPCCache.CapacityBytes != def.QPCCache.CapacityBytes || h.Arbiter.Levels != def.Arbiter.Levels ||
		h.MaxUnackedPSNs != transport.DefaultMaxUnackedPSNs || h.DMAEngines != def.DMAEngines || h.Arbiter.Mode != ArbiterDWRR {
		t.Errorf("DefaultHardware = %+v", h)
	}
}

// TestStrings: the texts of libibverbs' *_str functions.
func TestStrings(t *testing.T) {
	cases := []struct {
		got, want string
	}{
		{WCSuccess.String(), "success"},
		{WCLocProtErr.String(), "local protection error"},
		{WCWRFlushErr.String(), "Work Request Flushed Error"},
		{WCMWBindErr.String(), "memory management operation error"},
		{WCRemAccessErr.String(), "remote access error"},
		{WCRetryExcErr.String(), "transport retry counter exceeded"},
		{WCRNRRetryExcErr.String(), "RNR retry counter exceeded"},
		{WCGeneralErr.String(), "general error"},
		{WCStatus(22).String(), "unknown"},
		{WRRDMAWrite.String(), "rdma-write"},
		{WRAtomicFetchAndAdd.String(), "atomic-fetch-and-add"},
		{WRSendWithInv.String(), "send-with-inv"},
		{WROpcode(10).String(), "unknown"},
		{WCRecvRDMAWithImm.String(), "recv-rdma-with-imm"},
		{WCCompSwap.String(), "comp-swap"},
		{EventCQErr.String(), "CQ error"},
		{EventQPFatal.String(), "local work queue catastrophic error"},
		{EventSRQLimitReached.String(), "SRQ limit reached"},
		{EventType(40).String(), "unknown"},
		{QPSRTS.String(), "RTS"},
		{QPState(9).String(), "QPState(9)"},
		{RC.String(), "RC"},
		{QPType(8).String(), "QPType(8)"},
		{(AccessLocalWrite | AccessRemoteAtomic).String(), "local_write|remote_atomic"},
		{Access(0).String(), "none"},
		{Access(1 << 9).String(), "flush_persistent"},
		{Access(1 << 10).String(), "0x400"},
		{(SendSignaled | SendInline).String(), "signaled|inline"},
		{(WCWithGRH | WCWithInv).String(), "grh|inv"},
		{(QPAttrState | QPAttrPort).String(), "STATE|PORT"},
		{MTU1024.String(), "1024"},
		{PSN(0x123456).String(), "0x123456"},
		{GIDFromAddr(netip.MustParseAddr("10.0.0.1")).String(), "::ffff:10.0.0.1"},
		{GIDFromAddr(netip.MustParseAddr("fe80::1")).String(), "fe80::1"},
		{ArbiterWRR.String(), "WRR"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
