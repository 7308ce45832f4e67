package udp

import "github.com/rnic/rnic/link"

// deliver hands one receive batch to the dispatcher after Faults.RxLoss,
// or releases it if none is attached. keep is scratch space of at least
// len(out). It runs on the receive goroutine or in Poll, both holding the
// receive ring's lock, which the goroutine takes once more on its way out;
// Close waits for that, so no Deliver starts after Close returns. It
// returns how many frames it delivered.
func (l *Link) deliver(out []*link.Buf, keep []bool, t *rxTally) int {
	if len(out) == 0 {
		return 0
	}
	if l.rxLoss.on.Load() {
		keep = keep[:len(out)]
		for i := range keep {
			keep[i] = true
		}
		t.dropped += l.rxLoss.drop(keep)
		n := 0
		for i, b := range out {
			if keep[i] {
				out[n] = b
				n++
			} else {
				b.Release()
			}
		}
		clear(out[n:])
		out = out[:n]
		if n == 0 {
			return 0
		}
	}
	d := l.d.Load()
	if d == nil {
		for _, b := range out {
			b.Release()
		}
		t.unattached += uint64(len(out))
		return 0
	}
	t.frames += uint64(len(out))
	for _, b := range out {
		t.bytes += uint64(b.Len())
	}
	// Count before Deliver, so that a dispatcher that has seen the frames
	// also sees them in Stats.
	t.addTo(&l.c)
	*t = rxTally{}
	d.Deliver(out)
	return len(out)
}
