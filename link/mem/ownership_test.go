package mem_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
)

// settled reports whether every frame sent on ports has been delivered or
// dropped.
func settled(ports ...*mem.Port) bool {
	var in, out uint64
	for _, p := range ports {
		s := p.Stats()
		in += s.TxFrames + s.Duplicated
		out += s.RxFrames + s.Dropped + s.Oversize + s.NoRoute + s.Unattached + s.ClosedDrops
	}
	return in == out
}

// TestOwnership checks, in every fault mode and when ports close with
// frames in flight, that every buffer is released exactly once (by the
// link or by the receiving dispatcher) and every frame is counted.
func TestOwnership(t *testing.T) {
	const (
		closeNone = iota
		closeSender
		closeReceiver
	)
	tests := []struct {
		name   string
		faults mem.Faults
		close  int
	}{
		{"perfect", mem.Faults{}, closeNone},
		{"loss", mem.Faults{Seed: 1, Loss: 0.3}, closeNone},
		{"duplicate", mem.Faults{Seed: 1, Duplicate: 0.3}, closeNone},
		{"reorder", mem.Faults{Seed: 1, Reorder: 0.3}, closeNone},
		{"corrupt", mem.Faults{Seed: 1, Corrupt: 0.3}, closeNone},
		{"delay+jitter", mem.Faults{Seed: 1, Delay: time.Millisecond, Jitter: time.Millisecond}, closeNone},
		{"all", mem.Faults{Seed: 1, Loss: 0.1, Duplicate: 0.2, Reorder: 0.2, Corrupt: 0.2, Jitter: 500 * time.Microsecond}, closeNone},
		{"close sender in flight", mem.Faults{Seed: 1, Duplicate: 0.5, Delay: 50 * time.Millisecond}, closeSender},
		{"close receiver in flight", mem.Faults{Seed: 1, Duplicate: 0.5, Delay: 50 * time.Millisecond}, closeReceiver},
	}
	unknown := netip.MustParseAddr("10.9.9.9")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n, mtu = 500, 200
			tr := newTracker()
			rb := &recorder{tr: tr}
			a, b := pipe(t, tt.faults, mem.Faults{}, &recorder{tr: tr}, rb, mem.WithMTU(mtu))
			var bufs []*link.Buf
			for i := range n {
				dst, size := v4b, 100
				switch {
				case i%10 == 3:
					dst = unknown
				case i%13 == 5:
					size = mtu + 1
				}
				bufs = append(bufs, tr.frame(dst, uint32(i), size))
				if len(bufs) == 7 || i == n-1 {
					a.Send(bufs)
					bufs = bufs[:0]
				}
			}
			switch tt.close {
			case closeSender:
				a.Close()
				if a.Stats().ClosedDrops == 0 {
					t.Error("no frame was in flight when the sender closed")
				}
			case closeReceiver:
				b.Close()
			}
			waitFor(t, "all frames accounted for", func() bool { return settled(a, b) })
			a.Close()
			b.Close()
			if tt.close == closeReceiver && a.Stats().NoRoute <= n/10 {
				t.Error("no frame met the closed receiver")
			}
			balance(t, a, b)
			tr.checkReleased(t)
		})
	}
}
