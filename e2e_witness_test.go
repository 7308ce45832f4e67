package rnic_test

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/wire"
)

// A lossy link can legitimately exhaust a requester's retries: at 10 %
// loss in each direction a round trip fails with probability 0.19, and
// retry_cnt is at most 7, so about one ACK-timeout episode in 10^5 ends in
// RETRY_EXC_ERR (IBTA 9.7.6.1.3: that is what retry_cnt is for); the
// matrix's atomics meet one in every few hundred runs. A test
// that runs tens of thousands of episodes meets one now and then. It must
// not be taken for success, and it must not be taken for a defect either
// unless the NIC caused it. The witness decides which, from the frames
// both NICs sent and received: the link exhausted the retries only if the
// requester's last transmissions were all retries of the one failed
// request, the responder answered the copies that reached it, and not one
// answer reached the requester. Anything else (a responder that
// stayed silent, a response the requester ignored, a retransmission of
// the wrong PSN) is the NIC's fault and fails the test.

// witnessFrame is one frame as a sniff.Link in front of a or b saw it.
type witnessFrame struct {
	side byte // 'a' or 'b'
	dir  sniff.Direction
	op   wire.Opcode
	psn  wire.PSN
}

// witness keeps the last frames of both NICs in one causal order: each
// frame is recorded before it is handed on (sent, or delivered to the
// NIC), under one lock.
type witness struct {
	mu     sync.Mutex
	frames []witnessFrame // ring of the last witnessKeep frames
	next   int            // ring position of the next record
	full   bool
}

// witnessKeep bounds the record: eight 1 MiB READ retransmissions at MTU
// 256 and their responses fit.
const witnessKeep = 1 << 16

// wrap puts a sniff.Link recording into w in front of side's link.
func (w *witness) wrap(side byte, l link.Link) link.Link {
	var pkt wire.Packet
	return sniff.New(l, sniff.Options{Func: func(dir sniff.Direction, _ time.Time, frame []byte) {
		if pkt.Parse(frame) != nil {
			return
		}
		w.mu.Lock()
		if w.frames == nil {
			w.frames = make([]witnessFrame, witnessKeep)
		}
		w.frames[w.next] = witnessFrame{side: side, dir: dir, op: pkt.Op, psn: pkt.BTH.PSN()}
		w.next++
		if w.next == len(w.frames) {
			w.next, w.full = 0, true
		}
		w.mu.Unlock()
	}})
}

// log returns the recorded frames, oldest first.
func (w *witness) log() []witnessFrame {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.full {
		return append([]witnessFrame(nil), w.frames[:w.next]...)
	}
	return append(append([]witnessFrame(nil), w.frames[w.next:]...), w.frames[:w.next]...)
}

// linkExhaustedRetries reports whether the link, not a NIC, made a's
// requester (the only requester of the pair) fail with RETRY_EXC_ERR; why
// says what was seen either way. The evidence is the requester's trailing
// run of transmissions that are all one PSN p (after a timeout the window
// is one request, and each retry sends the oldest unacknowledged PSN
// again): the run must hold at least two of them, b must have answered the
// copies that reached it, and no response to p or later may have reached
// a. How many retries the requester spends (a sequence NAK's go-back
// spends one too, so the run may be shorter than retry_cnt) is
// TestFeatureRetryExhausted's to check, exactly.
func (w *witness) linkExhaustedRetries() (ok bool, why string) {
	log := w.log()
	last := -1
	for i := len(log) - 1; i >= 0; i-- {
		if f := log[i]; f.side == 'a' && f.dir == sniff.TX {
			last = i
			break
		}
	}
	if last < 0 {
		return false, "a sent nothing in the record"
	}
	p := log[last].psn
	start, n := last, 0
	for i := last; i >= 0; i-- {
		f := log[i]
		if f.side != 'a' || f.dir != sniff.TX {
			continue
		}
		if f.psn != p {
			break
		}
		start, n = i, n+1
	}
	span := log[start:]
	if n < 2 {
		return false, fmt.Sprintf("a sent PSN %v once at the end, not retries of it: %s", p, describe(log[max(0, start-32):]))
	}
	var got, answered, reached int
	for _, f := range span {
		switch {
		case f.side == 'b' && f.dir == sniff.RX && f.psn == p:
			got++
		case f.side == 'b' && f.dir == sniff.TX && !f.psn.Before(p):
			answered++
		case f.side == 'a' && f.dir == sniff.RX && !f.psn.Before(p):
			reached++
		}
	}
	switch {
	case got > 0 && answered == 0:
		return false, fmt.Sprintf("b received %d copies of PSN %v and answered none: %s", got, p, describe(span))
	case reached > 0:
		return false, fmt.Sprintf("%d responses to PSN %v reached a, which still failed: %s", reached, p, describe(span))
	}
	return true, fmt.Sprintf("PSN %v: a sent it %d times in a row, %d copies reached b, the link lost every answer", p, n, got)
}

// describe lists frames for a failure message (at most the last 64).
func describe(fs []witnessFrame) string {
	var b strings.Builder
	for _, f := range fs[max(0, len(fs)-64):] {
		fmt.Fprintf(&b, "\n  %c %v %v psn %v", f.side, f.dir, f.op, f.psn)
	}
	return b.String()
}
