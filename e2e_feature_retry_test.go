package rnic_test

import (
	"bytes"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// setRetries changes retry_cnt and rnr_retry of a connected RC QP the way
// IBTA §11.2.4.2 allows it: RTS → SQD, SQD → SQD with the new values,
// SQD → RTS (Connect treats 0 as "default", so 0 is set this way).
func setRetries(t testing.TB, qp *rnic.QP, retry, rnr uint8) {
	t.Helper()
	must0(t, qp.Modify(&rnic.QPAttr{State: rnic.QPSSQD}, rnic.QPAttrState))
	must0(t, qp.Modify(&rnic.QPAttr{State: rnic.QPSSQD, RetryCnt: retry, RNRRetry: rnr},
		rnic.QPAttrState|rnic.QPAttrRetryCnt|rnic.QPAttrRNRRetry))
	must0(t, qp.Modify(&rnic.QPAttr{State: rnic.QPSRTS}, rnic.QPAttrState))
	if a, _ := query(t, qp); a.RetryCnt != retry || a.RNRRetry != rnr || a.State != rnic.QPSRTS {
		t.Fatalf("after SQD→SQD→RTS: retry_cnt %d rnr_retry %d state %v, want %d %d RTS", a.RetryCnt, a.RNRRetry, a.State, retry, rnr)
	}
}

// ackTimeout is IBTA's local ACK timeout, 4.096 µs × 2^timeout (§9.7.6.1.3).
func ackTimeout(exp uint8) time.Duration { return time.Duration(4096<<exp) * time.Nanosecond }

// TestFeatureRetryExhausted: the peer vanishes (every frame lost in both
// directions). IBTA §9.7.6.1.3 (C9-140, C9-141): the requester retries
// after each local ACK timeout, retry_cnt times, and then completes the WR
// with IBV_WC_RETRY_EXC_ERR and moves the QP to Error. The timeout fires
// retry_cnt+1 times (local_ack_timeout_err), the request is sent again
// retry_cnt times, and the whole takes (retry_cnt+1) × 4.096 µs ×
// 2^timeout. The tests of this file run in testing/synctest bubbles, so
// the timers are exact and a loaded machine cannot stretch them.
func TestFeatureRetryExhausted(t *testing.T) {
	cases := []struct{ retry, timeout uint8 }{{0, 10}, {1, 10}, {3, 9}, {7, 8}}
	for _, c := range cases {
		t.Run(fmt.Sprintf("retry%d-timeout%d", c.retry, c.timeout), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: int(c.timeout), RetryCnt: 7}})
				setRetries(t, p.qpa, c.retry, 7)
				src := newGuarded(t, p.pda, 256, rnic.AccessLocalWrite, 1)
				dst := newGuarded(t, p.pdb, 256, allAccess, 2)

				// The path works...
				must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
					SGL: []rnic.SGE{src.mr.SGE(0, 64)}, RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey()}))
				if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess {
					t.Fatalf("first WRITE: %+v", wc)
				}
				// ...until the peer disappears. (Counters are taken as deltas:
				// on a loaded machine the first WRITE may have been retried.)
				timeouts0 := qpCounter(t, p.qpa, "local_ack_timeout_err")
				devTimeouts0 := counter(t, p.a, "local_ack_timeout_err")
				retrans0 := qpCounter(t, p.qpa, "roce_retrans_packets")
				must0(t, p.pa.SetFaults(mem.Faults{Loss: 1}))
				must0(t, p.pb.SetFaults(mem.Faults{Loss: 1}))
				start := time.Now()
				must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 2, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
					SGL: []rnic.SGE{src.mr.SGE(64, 64)}, RemoteAddr: dst.mr.Addr() + 64, RKey: dst.mr.RKey()}))
				wc := waitWC(t, p.cqa, 1, 10*time.Second)[0]
				elapsed := time.Since(start)
				if wc.WRID != 2 || wc.Status != rnic.WCRetryExcErr {
					t.Fatalf("completion %+v (%v), want RETRY_EXC_ERR", wc, wc.Status)
				}
				want := time.Duration(c.retry+1) * ackTimeout(c.timeout)
				t.Logf("retry_cnt %d, timeout %d (%v): RETRY_EXC_ERR after %v (expected ≈ %v)", c.retry, c.timeout, ackTimeout(c.timeout), elapsed, want)
				// In the bubble the clock is exact: the error comes when the
				// last of retry_cnt+1 timers fires, not a tick later.
				if elapsed != want {
					t.Errorf("RETRY_EXC_ERR after %v, want exactly %d timeouts of %v", elapsed, c.retry+1, ackTimeout(c.timeout))
				}
				if n := qpCounter(t, p.qpa, "local_ack_timeout_err") - timeouts0; n != uint64(c.retry)+1 {
					t.Errorf("local_ack_timeout_err = %d, want retry_cnt+1 = %d", n, c.retry+1)
				}
				if n := counter(t, p.a, "local_ack_timeout_err") - devTimeouts0; n != uint64(c.retry)+1 {
					t.Errorf("device local_ack_timeout_err = %d, want %d", n, c.retry+1)
				}
				if n := qpCounter(t, p.qpa, "roce_retrans_packets") - retrans0; n != uint64(c.retry) {
					t.Errorf("roce_retrans_packets = %d, want retry_cnt = %d", n, c.retry)
				}
				waitState(t, p.qpa, rnic.QPSErr)
				flushCheck(t, p.qpa, p.cqa, 3, src.mr, dst.mr)
				if i := firstDiff(dst.region()[64:128], dst.orig[guardLen+64:guardLen+128]); i >= 0 {
					t.Errorf("the lost WRITE reached the target")
				}
			})
		})
	}

	t.Run("peer-returns-in-time", func(t *testing.T) {
		// The peer is unreachable for a few timeouts, fewer than
		// retry_cnt: the retransmission gets through and the WR
		// succeeds.
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 10, RetryCnt: 7}})
			src := newGuarded(t, p.pda, 4096, rnic.AccessLocalWrite, 1)
			dst := newGuarded(t, p.pdb, 4096, allAccess, 2)
			must0(t, p.pa.SetFaults(mem.Faults{Loss: 1}))
			must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{src.mr.SGE(0, 4096)}, RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey()}))
			time.Sleep(3 * ackTimeout(10))
			must0(t, p.pa.SetFaults(mem.Faults{}))
			wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
			if wc.Status != rnic.WCSuccess {
				t.Fatalf("completion %+v (%v), want success", wc, wc.Status)
			}
			if !bytes.Equal(dst.region(), src.region()) {
				t.Fatal("data differs after the retransmission")
			}
			dst.guardsIntact(t, "target")
			n := qpCounter(t, p.qpa, "local_ack_timeout_err")
			if n < 1 || n > 7 {
				t.Errorf("local_ack_timeout_err = %d, want 1..7", n)
			}
			if qpCounter(t, p.qpa, "roce_retrans_packets") < 1 {
				t.Error("no retransmission counted")
			}
		})
	})
}

// TestFeatureRNR: a SEND that finds no receive WQE is answered with an RNR
// NAK (IBTA §9.7.5.2.8); the requester waits min_rnr_timer and retries,
// rnr_retry times, then completes with IBV_WC_RNR_RETRY_EXC_ERR
// (C9-148..C9-150). rnr_retry 7 means "retry forever" (§9.7.5.2.8), so the
// SEND completes once a receive is posted.
func TestFeatureRNR(t *testing.T) {
	for _, rnr := range []uint8{0, 1, 3} {
		t.Run(fmt.Sprintf("rnr_retry%d", rnr), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				// min_rnr_timer 8: 160 µs.
				p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 12, MinRNRTimer: 8}})
				setRetries(t, p.qpa, 7, rnr)
				src := newGuarded(t, p.pda, 256, rnic.AccessLocalWrite, 1)
				start := time.Now()
				must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, 100)}}))
				wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
				elapsed := time.Since(start)
				if wc.WRID != 1 || wc.Status != rnic.WCRNRRetryExcErr {
					t.Fatalf("completion %+v (%v), want RNR_RETRY_EXC_ERR", wc, wc.Status)
				}
				if want := time.Duration(rnr) * 160 * time.Microsecond; elapsed != want {
					t.Errorf("RNR_RETRY_EXC_ERR after %v, want exactly %d RNR timers of 160 µs", elapsed, rnr)
				}
				if n := qpCounter(t, p.qpb, "rnr_nak_sent"); n != uint64(rnr)+1 {
					t.Errorf("responder rnr_nak_sent = %d, want rnr_retry+1 = %d (the SEND and its retries)", n, rnr+1)
				}
				// mlx5 counts RNR NAKs received in rnr_nak_retry_err; whether
				// the last one (that exhausted the budget) is included varies.
				if n := qpCounter(t, p.qpa, "rnr_nak_retry_err"); n < uint64(rnr) || n > uint64(rnr)+1 {
					t.Errorf("requester rnr_nak_retry_err = %d, want %d or %d", n, rnr, rnr+1)
				}
				t.Logf("rnr_retry %d: RNR_RETRY_EXC_ERR after %v; rnr_nak_retry_err %d", rnr, elapsed, qpCounter(t, p.qpa, "rnr_nak_retry_err"))
				waitState(t, p.qpa, rnic.QPSErr)
				if st := p.qpb.State(); st != rnic.QPSRTS {
					t.Errorf("responder went to %v; an RNR is not an error on its side", st)
				}
			})
		})
	}

	t.Run("rnr_retry7-infinite", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 10, RNRRetry: 7, MinRNRTimer: 8}})
			src := newGuarded(t, p.pda, 5000, rnic.AccessLocalWrite, 1)
			dst := newGuarded(t, p.pdb, 5000, rnic.AccessLocalWrite, 2)
			must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, 5000)}}))
			// More RNR NAKs than rnr_retry 6 would allow come and go, with no
			// completion. (Counted, not timed: a loaded machine may take far
			// longer than 8 timers of 160 µs.)
			deadline := time.Now().Add(10 * time.Second)
			for qpCounter(t, p.qpa, "rnr_nak_retry_err") < 8 {
				if time.Now().After(deadline) {
					t.Fatalf("only %d RNR NAKs in 10 s with a 160 µs RNR timer", qpCounter(t, p.qpa, "rnr_nak_retry_err"))
				}
				quiet(t, p.cqa, time.Millisecond, "SEND before any receive is posted")
			}
			if st := p.qpa.State(); st != rnic.QPSRTS {
				t.Fatalf("requester in %v while retrying RNR forever", st)
			}
			must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 9, SGL: []rnic.SGE{dst.mr.SGE(0, 5000)}}))
			wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
			if wc.WRID != 1 || wc.Status != rnic.WCSuccess {
				t.Fatalf("completion %+v (%v), want success", wc, wc.Status)
			}
			rwc := waitWC(t, p.cqb, 1, 5*time.Second)[0]
			if rwc.WRID != 9 || rwc.Status != rnic.WCSuccess || rwc.ByteLen != 5000 {
				t.Fatalf("receive completion %+v", rwc)
			}
			if !bytes.Equal(dst.region(), src.region()) {
				t.Fatal("data differs")
			}
			dst.guardsIntact(t, "receive buffer")
			quiet(t, p.cqb, 10*time.Millisecond, "after the one receive")
		})
	})
}
