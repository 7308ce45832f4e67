package udp

import "github.com/rnic/rnic/link"

// deliver hands one receive batch to the dispatcher after Faults.RxLoss,
// or releases it if none is attached. keep is scratch space of at least
// len(out). It runs on the receive goroutine or in Poll, both holding the
// receive ring's lock, which the goroutine takes once more on its way out;
// Close waits for that, so no Deliver starts after Close returns.
//
// With hold set and a dispatcher with a bounded queue (link.Receiver), it
// offers the frames with TryDeliver and returns how many were taken: the
// caller keeps the rest, in order, and offers them again after the NIC
// drained (link.Drainer), while the socket's buffer holds what comes
// next. Otherwise it returns len(out) once out is handed over or released.
// out is compacted by RxLoss: the frames that remain are out[:n] of the
// returned length n plus the ones the caller keeps, out[n:kept]. bytes
// is the length of the frames handed over.
//
// quiet (a sibling's frames) hands them over without waking a
// dispatcher that can be told later (link.QuietReceiver): the sender tells it
// once it holds no lock (Send).
func (l *Link) deliver(out []*link.Buf, keep []bool, t *rxTally, hold, quiet bool) (taken int, rest []*link.Buf, bytes int) {
	if len(out) == 0 {
		return 0, nil, 0
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
			return 0, nil, 0
		}
	}
	d := l.d.Load()
	if d == nil {
		for _, b := range out {
			b.Release()
		}
		t.unattached += uint64(len(out))
		return 0, nil, 0
	}
	n := bytesOf(out) // before the hand-over: then the frames are the NIC's
	if r, ok := d.Dispatcher.(link.Receiver); ok && hold {
		var k int
		if kr, ok := r.(link.QuietReceiver); ok && quiet {
			k = kr.TryDeliverQuiet(out)
		} else {
			k = r.TryDeliver(out)
		}
		handed := n - bytesOf(out[k:])
		t.frames += uint64(k)
		t.bytes += uint64(handed)
		t.addTo(&l.c)
		*t = rxTally{}
		return k, out[k:], handed
	}
	t.frames += uint64(len(out))
	t.bytes += uint64(n)
	// Count before Deliver, so that a dispatcher that has seen the frames
	// also sees them in Stats.
	t.addTo(&l.c)
	*t = rxTally{}
	d.Deliver(out)
	return len(out), nil, n
}

// bytesOf returns the length of the frames of bufs.
func bytesOf(bufs []*link.Buf) int {
	n := 0
	for _, b := range bufs {
		n += b.Len()
	}
	return n
}
