package udp_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
	"github.com/rnic/rnic/wire"
)

// TestExchange sends frames of several sizes both ways between two links
// and checks that each arrives whole: identical from the BTH on, with IP
// and UDP headers naming the right addresses, ports and lengths, flagged
// as rebuilt exactly when the IPv4 ID is unknown, and with an ICRC that
// verifies. For rebuilt IPv4 frames it verifies too, because the sender
// is a link/udp that writes ID 0 and DF, as the rebuilt header assumes.
func TestExchange(t *testing.T) {
	tests := []struct {
		name string
		v6   bool
		o    udp.Options
	}{
		{"v4/raw=off", false, udp.Options{Raw: udp.RawOff}},
		{"v4/raw=auto", false, udp.Options{}},
		{"v4/raw=off/batch=1", false, udp.Options{Raw: udp.RawOff, Batch: 1}},
		{"v4/raw=off/gro=on", false, udp.Options{Raw: udp.RawOff, GRO: udp.On}},
		{"v6/auto", true, udp.Options{}},
		{"v6/gso=off/gro=off", true, udp.Options{GSO: udp.Off, GRO: udp.Off}},
		{"v6/gso=on/gro=off", true, udp.Options{GSO: udp.On, GRO: udp.Off}},
		{"v6/gso=off/gro=on", true, udp.Options{GSO: udp.Off, GRO: udp.On}},
	}
	sizes := []int{4096, 4096, 4096, 1000, 0, 1, 2048, 4096, 4096, 3}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ra, rb := &recorder{keep: true}, &recorder{keep: true}
			a, b := pair(t, tt.v6, tt.o, tt.o, ra, rb)
			t.Logf("features a: %+v", a.Features())
			const n = 500
			for _, dir := range []struct {
				from, to *udp.Link
				r        *recorder
			}{{a, b, rb}, {b, a, ra}} {
				sent := sendN(dir.from, dir.to, n, 32, sizes)
				waitFor(t, fmt.Sprintf("%d frames", n), func() bool { return dir.r.count() == n })
				checkFrames(t, dir.from, dir.to, dir.r, sent)
			}
			for _, l := range []*udp.Link{a, b} {
				txBalance(t, l)
				rxBalance(t, l)
				s := l.Stats()
				if s.SentFrames != n || s.RxFrames != n || s.KernelDrops != 0 {
					t.Errorf("stats %+v: want %d frames sent and received, no kernel drops", s, n)
				}
				f := l.Features()
				if tt.v6 && f.GSO != (s.GSOSegments > 0) {
					t.Errorf("GSO in use %v, but %d GSO segments sent", f.GSO, s.GSOSegments)
				}
				if f.Raw != (s.RawRx == n) || f.Raw != (s.SocketRx == 0) {
					t.Errorf("raw receive %v, but %d raw and %d socket receives", f.Raw, s.RawRx, s.SocketRx)
				}
			}
			if fa, fb := a.Features(), b.Features(); fa.GSO && fb.GRO && b.Stats().GROSegments == 0 {
				t.Error("GSO sender and GRO receiver, but no GRO segments arrived")
			}
		})
	}
}

// checkFrames compares the frames r received with those sent.
func checkFrames(t *testing.T, from, to *udp.Link, r *recorder, sent map[uint32][]byte) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[uint32]bool, len(sent))
	for i, got := range r.frames {
		idx := frameIndex(got)
		want, okSent := sent[idx]
		if !okSent || seen[idx] {
			t.Fatalf("frame %d: unknown or duplicate index %d", i, idx)
		}
		seen[idx] = true
		hl := hdrLen(want)
		if len(got) != len(want) || !bytes.Equal(got[hl:], want[hl:]) {
			t.Fatalf("frame %d differs from the BTH on:\n got %x\nwant %x", idx, got[hl:min(len(got), hl+32)], want[hl:min(len(want), hl+32)])
		}
		var p wire.Packet
		if err := p.Parse(got); err != nil && to.SourcePort() == wire.UDPPort {
			t.Fatalf("frame %d does not parse: %v", idx, err)
		}
		if len(got) >= 20 && got[0]>>4 == 4 {
			ip := wire.IPv4(got)
			if ip.Src() != from.Addr().As4() || ip.Dst() != to.Addr().As4() || int(ip.TotalLength()) != len(got) ||
				ip.Protocol() != 17 || !ip.IsChecksumValid() || ip.IHL() != 5 {
				t.Fatalf("frame %d: IPv4 header %x", idx, got[:20])
			}
		} else {
			ip := wire.IPv6(got)
			if ip.Src() != from.Addr().As16() || ip.Dst() != to.Addr().As16() || int(ip.PayloadLength()) != len(got)-40 || ip.NextHeader() != 17 {
				t.Fatalf("frame %d: IPv6 header %x", idx, got[:40])
			}
		}
		u := wire.UDP(got[hl-8:])
		if u.SrcPort() != from.SourcePort() || u.DstPort() != to.SourcePort() || int(u.Length()) != len(got)-hl+8 {
			t.Fatalf("frame %d: UDP header %x", idx, got[hl-8:hl])
		}
		wantFlags := link.Flags(0)
		if !to.ICRCVerified() {
			wantFlags = link.FlagIPRebuilt
		}
		if r.flags[i] != wantFlags {
			t.Fatalf("frame %d: flags %v, want %v", idx, r.flags[i], wantFlags)
		}
		if err := wire.CheckICRC(got); err != nil {
			t.Fatalf("frame %d (flags %v): ICRC: %v", idx, r.flags[i], err)
		}
	}
	if len(seen) != len(sent) {
		t.Fatalf("%d of %d frames arrived", len(seen), len(sent))
	}
}
