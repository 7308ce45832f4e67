package rnic_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/rnic/rnic"
)

// TestBusyPollOverUDP is the hardening issue's second defect: a program
// that completes its work by busy-polling the CQ, on one processor, with
// its peer in another process over link/udp. Go's scheduler looks at the
// network only when a processor runs out of work; the poll loop never lets
// that happen, so a received frame waited for the runtime's 10 ms sysmon
// tick: some 100 READs a second, where a NIC driven by the polling thread
// does tens of thousands (about 17,000 on an idle 2-core machine, some 700
// under the race detector with both cores busy elsewhere). The bound
// below, 250 a second, passes a loaded CI runner and still fails the
// defect, which takes 10 s.
func TestBusyPollOverUDP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a peer process")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, raddr, rkey := udpBenchPair(t)
	buf := must(a.pd.RegMR(make([]byte, 64), rnic.AccessLocalWrite))
	wr := rnic.SendWR{Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled, SGL: []rnic.SGE{buf.SGE(0, 64)},
		RemoteAddr: raddr, RKey: rkey}
	wcs := make([]rnic.WC, 4)
	const n, limit = 1000, 4 * time.Second
	start := time.Now()
	for i := range n {
		if err := a.qp.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		for must(a.cq.Poll(wcs)) == 0 {
			if time.Since(start) > 3*limit {
				t.Fatalf("READ %d not complete after %v", i, time.Since(start))
			}
		}
		if wcs[0].Status != rnic.WCSuccess {
			t.Fatalf("READ %d: %v", i, wcs[0].Status)
		}
	}
	if el := time.Since(start); el > limit {
		t.Errorf("%d READs, one at a time and busy-polled, took %v (%.0f/s), want under %v", n, el, n/el.Seconds(), limit)
	} else {
		t.Logf("%d READs in %v (%.0f/s)", n, el, n/el.Seconds())
	}
}
