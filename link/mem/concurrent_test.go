package mem_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
)

// TestConcurrentSend sends from several goroutines on both ports at once
// (as several NIC engines would); run it with -race.
func TestConcurrentSend(t *testing.T) {
	tests := []struct {
		name    string
		faults  mem.Faults
		ordered bool // each goroutine's frames arrive in its send order
	}{
		{"perfect", mem.Faults{}, true},
		{"duplicate+delay", mem.Faults{Seed: 1, Duplicate: 0.1, Delay: 50 * time.Microsecond, Jitter: 50 * time.Microsecond}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const senders, n = 3, 2000
			tr := newTracker()
			ra, rb := &recorder{tr: tr}, &recorder{tr: tr}
			a, b := pipe(t, tt.faults, tt.faults, ra, rb)
			var wg sync.WaitGroup
			for g := range senders {
				for _, p := range []*mem.Port{a, b} {
					dst := v4b
					if p == b {
						dst = v4a
					}
					wg.Go(func() {
						bufs := make([]*link.Buf, 0, 5)
						for i := range n {
							buf := link.Get(64)
							fill(buf.Bytes(), dst, uint32(g<<16|i), 20)
							bufs = append(bufs, buf)
							if len(bufs) == cap(bufs) {
								p.Send(bufs)
								bufs = bufs[:0]
							}
						}
					})
				}
			}
			wg.Wait()
			waitFor(t, "all frames", func() bool { return settled(a, b) })
			for _, r := range []*recorder{ra, rb} {
				per := make([][]uint32, senders)
				for _, x := range r.indices() {
					per[x>>16] = append(per[x>>16], x&0xffff)
				}
				for g, got := range per {
					if tt.ordered && !slices.Equal(got, seq(n)) {
						t.Fatalf("sender %d: frames lost, duplicated or reordered", g)
					}
					got = slices.Compact(slices.Sorted(slices.Values(got)))
					if !slices.Equal(got, seq(n)) {
						t.Fatalf("sender %d: frames lost", g)
					}
				}
			}
			balance(t, a, b)
			tr.checkReleased(t)
		})
	}
}
