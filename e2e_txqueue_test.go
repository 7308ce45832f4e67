package rnic_test

import (
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link"
)

// stallLink is a link whose Send can be made to hang, as a sendmmsg does
// when the kernel is slow to take the frames.
type stallLink struct {
	link.Link
	mu      sync.Mutex
	gate    chan struct{} // non-nil: Send waits for it to close
	entered chan struct{} // closed when a Send starts waiting
}

func (s *stallLink) Unwrap() link.Link { return s.Link }

func (s *stallLink) stall() (entered, release func()) {
	s.mu.Lock()
	s.gate, s.entered = make(chan struct{}), make(chan struct{})
	gate, in := s.gate, s.entered
	s.mu.Unlock()
	return func() { <-in }, func() {
		s.mu.Lock()
		s.gate = nil
		s.mu.Unlock()
		close(gate)
	}
}

func (s *stallLink) Send(bufs []*link.Buf) {
	s.mu.Lock()
	gate, in := s.gate, s.entered
	if in != nil {
		s.entered = nil
		close(in)
	}
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.Link.Send(bufs)
}

// TestNoSendUnderTheEngineLock: frames leave the engine through a transmit
// queue that the link is given outside the engine lock, so a Send that
// hangs in the kernel holds up neither the control path (counters, QP
// query, MR registration, CQ creation), nor host reads of registered
// memory, nor a poller's turn. Before, Link.Send ran under the engine lock
// and every one of these waited for it.
func TestNoSendUnderTheEngineLock(t *testing.T) {
	checkGoroutines(t)
	var sl *stallLink
	p := newPair(t, pairOpts{wrapA: func(l link.Link) link.Link { sl = &stallLink{Link: l}; return sl }})
	src := must(p.pda.RegMR(pattern(3, 64), rnic.AccessLocalWrite))
	dst := make([]byte, 64)
	mrb := must(p.pdb.RegMR(dst, allAccess))

	entered, release := sl.stall()
	must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{src.SGE(0, 64)}, RemoteAddr: mrb.Addr(), RKey: mrb.RKey()}))
	entered() // the engine's Send of the WRITE hangs now

	done := make(chan string)
	go func() {
		p.a.Counters()
		done <- "Counters"
		if _, _, err := p.qpa.Query(); err != nil {
			t.Error(err)
		}
		done <- "QP.Query"
		buf := make([]byte, 8)
		if _, err := src.ReadAt(buf, 0); err != nil {
			t.Error(err)
		}
		done <- "MR.ReadAt"
		mr := must(p.pda.RegMR(make([]byte, 4096), rnic.AccessLocalWrite))
		must0(t, mr.Dereg())
		done <- "RegMR/Dereg"
		cq := must(p.a.CreateCQ(16))
		must0(t, cq.Destroy())
		done <- "CreateCQ/Destroy"
		wcs := make([]rnic.WC, 1)
		if n := must(p.cqa.Poll(wcs)); n != 0 {
			t.Errorf("a completion while the WRITE has not left: %+v", wcs[0])
		}
		done <- "CQ.Poll"
		close(done)
	}()
	last := "nothing"
	for {
		select {
		case what, ok := <-done:
			if !ok {
				release()
				if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess {
					t.Fatalf("WRITE after the stall: %+v", wc)
				}
				if string(dst) != string(pattern(3, 64)) {
					t.Fatal("the WRITE's data differs")
				}
				return
			}
			last = what
		case <-time.After(5 * time.Second):
			release()
			t.Fatalf("after %s returned, the next host call waited for the link's Send, which the engine lock held", last)
		}
	}
}
