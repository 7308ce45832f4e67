package udp_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
)

// TestConcurrentSend sends from several goroutines on both links at once,
// as several NIC engines would, while the links receive; run it with
// -race. Every frame arrives exactly once, unless the kernel reports it
// dropped (KernelDrops: a receive buffer overflowed).
func TestConcurrentSend(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		const senders, n = 3, 2000
		ra, rb := &recorder{}, &recorder{}
		a, b := pair(t, v6, udp.Options{}, udp.Options{}, ra, rb)
		var wg sync.WaitGroup
		for g := range senders {
			for _, l := range []*udp.Link{a, b} {
				to := b
				if l == b {
					to = a
				}
				wg.Go(func() {
					bufs := make([]*link.Buf, 0, 7)
					for i := range n {
						bufs = append(bufs, frame(l, to, uint32(g<<16|i), 64+i%200))
						if len(bufs) == cap(bufs) || i == n-1 {
							l.Send(bufs)
							bufs = bufs[:0]
						}
					}
				})
			}
		}
		wg.Wait()
		for _, c := range []struct {
			r    *recorder
			from *udp.Link
			to   *udp.Link
		}{{rb, a, b}, {ra, b, a}} {
			waitFor(t, "all frames", func() bool {
				return uint64(c.r.count())+c.to.Stats().KernelDrops >= senders*n
			})
			if k := c.to.Stats().KernelDrops; k > 0 {
				t.Logf("v6=%v: the kernel dropped %d frames (receive buffer full)", v6, k)
			}
			idx := slices.Sorted(slices.Values(c.r.indices()))
			if len(slices.Compact(slices.Clone(idx))) != len(idx) {
				t.Fatalf("v6=%v: duplicate frames", v6)
			}
			for _, x := range idx {
				if x>>16 >= senders || x&0xffff >= n {
					t.Fatalf("v6=%v: unknown frame %#x", v6, x)
				}
			}
			txBalance(t, c.from)
			rxBalance(t, c.to)
		}
		a.Close()
		b.Close()
	}
}
