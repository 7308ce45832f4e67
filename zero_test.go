package rnic_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic"
)

// Zero values that grant or misdirect (issue 9, item 8).

// connectBare connects two fresh RC QPs of p with cp exactly as given
// (not through testConn, which grants every right when Access is zero).
func connectBare(t *testing.T, p *pair, typ rnic.QPType, cp rnic.ConnParams) (*rnic.QP, *rnic.QP) {
	t.Helper()
	qcap := rnic.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}
	qa := must(p.pda.CreateQP(rnic.QPInitAttr{Type: typ, SendCQ: p.cqa, RecvCQ: p.cqa, Cap: qcap}))
	qb := must(p.pdb.CreateQP(rnic.QPInitAttr{Type: typ, SendCQ: p.cqb, RecvCQ: p.cqb, Cap: qcap}))
	must0(t, qa.Connect(qb.Endpoint(cp), cp))
	must0(t, qb.Connect(qa.Endpoint(cp), cp))
	return qa, qb
}

// TestConnZeroAccessGrantsNothing: a QP connected with the zero
// ConnParams grants its peer no remote rights, as verbs' zero
// qp_access_flags do (the old default granted all): the peer's WRITE,
// READ and atomic are refused with a NAK (invalid request) and complete
// with WCRemInvReqErr, and the target memory is untouched; SEND, which
// needs no right, works. Each right granted alone allows exactly its
// operation.
func TestConnZeroAccessGrantsNothing(t *testing.T) {
	ops := []struct {
		op   rnic.WROpcode
		need rnic.Access
	}{
		{rnic.WRRDMAWrite, rnic.AccessRemoteWrite},
		{rnic.WRRDMARead, rnic.AccessRemoteRead},
		{rnic.WRAtomicFetchAndAdd, rnic.AccessRemoteAtomic},
		{rnic.WRAtomicCmpAndSwp, rnic.AccessRemoteAtomic},
	}
	grants := []rnic.Access{0, rnic.AccessRemoteWrite, rnic.AccessRemoteRead, rnic.AccessRemoteAtomic}
	for _, grant := range grants {
		for _, o := range ops {
			t.Run(fmt.Sprintf("%v/grant=%v", o.op, grant), func(t *testing.T) {
				t.Parallel()
				p := newPair(t, pairOpts{})
				qa, qb := connectBare(t, p, rnic.RC, rnic.ConnParams{Timeout: 10, Access: grant})
				if a, _ := query(t, qb); a.AccessFlags != grant {
					t.Fatalf("qp_access_flags = %v, want %v", a.AccessFlags, grant)
				}
				src := newGuarded(t, p.pda, 64, allAccess, 1)
				dst := newGuarded(t, p.pdb, 64, allAccess, 2)
				must0(t, qa.PostSend(rnic.SendWR{WRID: 1, Opcode: o.op, Flags: rnic.SendSignaled,
					SGL: []rnic.SGE{src.mr.SGE(0, 8)}, RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey(), CompareAdd: 1}))
				wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
				want := rnic.WCRemInvReqErr
				if grant == o.need {
					want = rnic.WCSuccess
				}
				if wc.Status != want {
					t.Fatalf("%v with qp_access_flags %v: %v, want %v", o.op, grant, wc.Status, want)
				}
				if want != rnic.WCSuccess {
					dst.unchanged(t, "refused "+o.op.String())
				}
			})
		}
	}
	t.Run("send-needs-no-right", func(t *testing.T) {
		p := newPair(t, pairOpts{})
		qa, qb := connectBare(t, p, rnic.RC, rnic.ConnParams{})
		dst := newGuarded(t, p.pdb, 64, allAccess, 2)
		src := newGuarded(t, p.pda, 64, allAccess, 1)
		must0(t, qb.PostRecv(rnic.RecvWR{WRID: 9, SGL: []rnic.SGE{dst.mr.SGE(0, 64)}}))
		must0(t, qa.PostSend(rnic.SendWR{Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, 64)}}))
		if wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess || wc.WRID != 9 {
			t.Fatalf("receive %+v", wc)
		}
	})
}

// TestConnParamsVerbsZero: zero fields take the documented defaults;
// negative ones give verbs' 0, which the zero value cannot express; out
// of range is an error naming the field.
func TestConnParamsVerbsZero(t *testing.T) {
	p := newPair(t, pairOpts{})
	maxRd := uint8(p.a.Attr().MaxQPRdAtom)
	cases := []struct {
		name string
		cp   rnic.ConnParams
		want rnic.QPAttr // Timeout, RetryCnt, RNRRetry, MinRNRTimer, MaxRdAtomic, MaxDestRdAtomic
		err  string
	}{
		{"defaults", rnic.ConnParams{}, rnic.QPAttr{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12, MaxRdAtomic: maxRd, MaxDestRdAtomic: maxRd}, ""},
		{"verbs-zero", rnic.ConnParams{Timeout: -1, RetryCnt: -1, RNRRetry: -1, MinRNRTimer: -1, MaxRdAtomic: -1, MaxDestRdAtomic: -1}, rnic.QPAttr{}, ""},
		{"given", rnic.ConnParams{Timeout: 9, RetryCnt: 3, RNRRetry: 2, MinRNRTimer: 5, MaxRdAtomic: 4, MaxDestRdAtomic: 2},
			rnic.QPAttr{Timeout: 9, RetryCnt: 3, RNRRetry: 2, MinRNRTimer: 5, MaxRdAtomic: 4, MaxDestRdAtomic: 2}, ""},
		{"retry-too-big", rnic.ConnParams{RetryCnt: 8}, rnic.QPAttr{}, "ConnParams.RetryCnt 8 exceeds 7"},
		{"timeout-too-big", rnic.ConnParams{Timeout: 32}, rnic.QPAttr{}, "ConnParams.Timeout 32 exceeds 31"},
		{"rd-too-big", rnic.ConnParams{MaxRdAtomic: 300}, rnic.QPAttr{}, "ConnParams.MaxRdAtomic 300"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			qp := must(p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: p.cqa, RecvCQ: p.cqa, Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1}}))
			err := qp.Connect(p.qpb.Endpoint(rnic.ConnParams{}), c.cp)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			must0(t, err)
			a, _ := query(t, qp)
			got := rnic.QPAttr{Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, MinRNRTimer: a.MinRNRTimer,
				MaxRdAtomic: a.MaxRdAtomic, MaxDestRdAtomic: a.MaxDestRdAtomic}
			if got != c.want {
				t.Fatalf("attributes %+v, want %+v", got, c.want)
			}
		})
	}
	// Behaviour, not only attributes: RNRRetry -1 fails at the first RNR
	// NAK instead of retrying forever (the zero value's 7).
	t.Run("rnr-retry-none", func(t *testing.T) {
		q := newPair(t, pairOpts{})
		qa, _ := connectBare(t, q, rnic.RC, rnic.ConnParams{RNRRetry: -1, MinRNRTimer: 1})
		src := newGuarded(t, q.pda, 64, allAccess, 1)
		must0(t, qa.PostSend(rnic.SendWR{Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, 8)}}))
		if wc := waitWC(t, q.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCRNRRetryExcErr {
			t.Fatalf("SEND to a QP with no receive posted: %v, want %v", wc.Status, rnic.WCRNRRetryExcErr)
		}
	})
}

// TestMRSGEOutOfRange: mr.SGE with a range outside the region gives an
// SGE the NIC refuses, with a local protection error, and touches nothing;
// CheckedSGE reports the mistake as an error; ranges inside, the empty
// one at the end included, are accepted by both.
func TestMRSGEOutOfRange(t *testing.T) {
	const n = 256
	bad := []struct{ off, length int }{
		{-1, 8}, {0, -1}, {n + 1, 0}, {n - 4, 8}, {n, 1}, {0, n + 1}, {1 << 40, 8}, {8, 1 << 33},
	}
	good := []struct{ off, length int }{{0, n}, {n, 0}, {n - 8, 8}, {0, 0}}
	p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 10}})
	src := newGuarded(t, p.pda, n, allAccess, 1)
	for _, g := range good {
		s, err := src.mr.CheckedSGE(g.off, g.length)
		if err != nil || s != src.mr.SGE(g.off, g.length) || s.Addr != src.mr.Addr()+uint64(g.off) || s.Length != uint32(g.length) {
			t.Errorf("CheckedSGE(%d, %d) = %+v, %v; SGE %+v", g.off, g.length, s, err, src.mr.SGE(g.off, g.length))
		}
	}
	for _, b := range bad {
		t.Run(fmt.Sprintf("off=%d,len=%d", b.off, b.length), func(t *testing.T) {
			if _, err := src.mr.CheckedSGE(b.off, b.length); err == nil || !strings.Contains(err.Error(), "outside") {
				t.Errorf("CheckedSGE: %v, want an error saying the range is outside", err)
			}
			s := src.mr.SGE(b.off, b.length)
			if s.Addr != src.mr.Addr()+n || s.Length == 0 || s.LKey != src.mr.LKey() {
				t.Fatalf("SGE = %+v, want one starting past the region's end, at least 1 byte long", s)
			}
		})
	}
	// The NIC refuses each one: as the source of a WRITE, as the
	// destination of a READ or of a receive, and inline at post time.
	for _, b := range bad {
		for _, op := range []rnic.WROpcode{rnic.WRRDMAWrite, rnic.WRRDMARead, rnic.WRSend} {
			t.Run(fmt.Sprintf("%v/off=%d,len=%d", op, b.off, b.length), func(t *testing.T) {
				t.Parallel()
				q := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 10}})
				local := newGuarded(t, q.pda, n, allAccess, 3)
				remote := newGuarded(t, q.pdb, n, allAccess, 4)
				wr := rnic.SendWR{Opcode: op, Flags: rnic.SendSignaled,
					SGL: []rnic.SGE{local.mr.SGE(b.off, b.length)}, RemoteAddr: remote.mr.Addr(), RKey: remote.mr.RKey()}
				// WRITE reads its source first: a protection error. A READ
				// of a too-long range may be refused by the peer first, a
				// receive shorter than the message by the length check.
				cq, want := q.cqa, []rnic.WCStatus{rnic.WCLocProtErr}
				switch op {
				case rnic.WRRDMARead:
					want = append(want, rnic.WCRemAccessErr)
				case rnic.WRSend:
					want = append(want, rnic.WCLocLenErr)
				}
				if op == rnic.WRSend { // the bad SGE is the receiver's
					must0(t, q.qpb.PostRecv(rnic.RecvWR{WRID: 7, SGL: []rnic.SGE{remote.mr.SGE(b.off, b.length)}}))
					wr.SGL = []rnic.SGE{local.mr.SGE(0, 8)}
					cq = q.cqb
				}
				must0(t, q.qpa.PostSend(wr))
				if wc := waitWC(t, cq, 1, 5*time.Second)[0]; !slices.Contains(want, wc.Status) {
					t.Errorf("%v with SGE(%d, %d): %v, want one of %v", op, b.off, b.length, wc.Status, want)
				}
				local.unchanged(t, "local region and guards")
				remote.unchanged(t, "remote region and guards")
			})
		}
	}
	q := newPair(t, pairOpts{})
	local := newGuarded(t, q.pda, n, allAccess, 5)
	err := q.qpa.PostSend(rnic.SendWR{Opcode: rnic.WRSend, Flags: rnic.SendInline, SGL: []rnic.SGE{local.mr.SGE(n-4, 8)}})
	var wre *rnic.WRError
	if !errors.As(err, &wre) || wre.Index != 0 || !strings.Contains(err.Error(), "out of bounds") {
		t.Errorf("inline send of an out-of-range SGE: %v, want a WRError at 0 saying out of bounds", err)
	}
}
