package rnic_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// TestFeatureAPIMisuse: a wrong call returns an error that names the
// problem (DESIGN.md "A wrong call on the API returns an error that names
// the problem"), where libibverbs returns EINVAL, EBUSY or ENOMEM.
func TestFeatureAPIMisuse(t *testing.T) {
	type fixture struct {
		p  *pair
		qp *rnic.QP // a fresh RC QP in RESET on device a
	}
	newQP := func(f *fixture, typ rnic.QPType) *rnic.QP {
		return must(f.p.pda.CreateQP(rnic.QPInitAttr{Type: typ, SendCQ: f.p.cqa, RecvCQ: f.p.cqa,
			Cap: rnic.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	}
	toInit := func(qp *rnic.QP) error {
		return qp.Modify(&rnic.QPAttr{State: rnic.QPSInit, Port: 1, AccessFlags: rnic.AccessRemoteWrite},
			rnic.QPAttrState|rnic.QPAttrPKeyIndex|rnic.QPAttrPort|rnic.QPAttrAccessFlags)
	}
	toRTR := func(f *fixture, qp *rnic.QP) error {
		return qp.Modify(&rnic.QPAttr{State: rnic.QPSRTR, AH: rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(f.p.b.GID(rnic.AddrGIDIndex))}, PathMTU: rnic.MTU1024,
			DestQPN: f.p.qpb.QPN(), RQPSN: 1, MaxDestRdAtomic: 1, MinRNRTimer: 1},
			rnic.QPAttrState|rnic.QPAttrAV|rnic.QPAttrPathMTU|rnic.QPAttrDestQPN|rnic.QPAttrRQPSN|rnic.QPAttrMaxDestRdAtomic|rnic.QPAttrMinRNRTimer)
	}
	write := rnic.SendWR{Opcode: rnic.WRRDMAWrite, RemoteAddr: 0x1000, RKey: 0x100}
	buf8 := func(f *fixture) *rnic.MR { return must(f.p.pda.RegMR(make([]byte, 64), allAccess)) }

	cases := []struct {
		name string
		run  func(t *testing.T, f *fixture) error
		is   error    // errors.Is target, if any
		subs []string // the error must mention these
	}{
		// Posting in states that take no send WRs (IBTA §10.8.2: send WRs
		// may be posted in RTS, SQD and (flushed) SQE/ERR only).
		{"post-send-reset", func(t *testing.T, f *fixture) error { return f.qp.PostSend(write) }, nil, []string{"RESET"}},
		{"post-send-init", func(t *testing.T, f *fixture) error {
			must0(t, toInit(f.qp))
			return f.qp.PostSend(write)
		}, nil, []string{"INIT"}},
		{"post-send-rtr", func(t *testing.T, f *fixture) error {
			must0(t, toInit(f.qp))
			must0(t, toRTR(f, f.qp))
			return f.qp.PostSend(write)
		}, nil, []string{"RTR"}},
		{"post-recv-reset", func(t *testing.T, f *fixture) error { return f.qp.PostRecv(rnic.RecvWR{}) }, nil, []string{"RESET"}},
		{"post-recv-init-is-fine", func(t *testing.T, f *fixture) error {
			must0(t, toInit(f.qp))
			if err := f.qp.PostRecv(rnic.RecvWR{}); err != nil {
				t.Errorf("PostRecv in INIT (allowed by IBTA §10.8.2): %v", err)
			}
			return errors.New("ok")
		}, nil, nil},
		{"post-send-destroyed-qp", func(t *testing.T, f *fixture) error {
			must0(t, f.qp.Destroy())
			return f.qp.PostSend(write)
		}, nil, nil},

		// Modify QP (IBTA §11.2.4.2, ib_modify_qp_is_ok).
		{"modify-missing-attr", func(t *testing.T, f *fixture) error {
			return f.qp.Modify(&rnic.QPAttr{State: rnic.QPSInit, Port: 1}, rnic.QPAttrState|rnic.QPAttrPKeyIndex|rnic.QPAttrPort)
		}, nil, []string{"RESET", "INIT", "requires", "ACCESS_FLAGS"}},
		{"modify-extra-attr", func(t *testing.T, f *fixture) error {
			return f.qp.Modify(&rnic.QPAttr{State: rnic.QPSInit, Port: 1, Timeout: 10},
				rnic.QPAttrState|rnic.QPAttrPKeyIndex|rnic.QPAttrPort|rnic.QPAttrAccessFlags|rnic.QPAttrTimeout)
		}, nil, []string{"does not take", "TIMEOUT"}},
		{"modify-rtr-missing-dest-qpn", func(t *testing.T, f *fixture) error {
			must0(t, toInit(f.qp))
			return f.qp.Modify(&rnic.QPAttr{State: rnic.QPSRTR, AH: rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(f.p.b.GID(rnic.AddrGIDIndex))}, PathMTU: rnic.MTU1024, MaxDestRdAtomic: 1, MinRNRTimer: 1},
				rnic.QPAttrState|rnic.QPAttrAV|rnic.QPAttrPathMTU|rnic.QPAttrRQPSN|rnic.QPAttrMaxDestRdAtomic|rnic.QPAttrMinRNRTimer)
		}, nil, []string{"DEST_QPN"}},
		{"modify-illegal-transition", func(t *testing.T, f *fixture) error {
			return f.qp.Modify(&rnic.QPAttr{State: rnic.QPSRTS}, rnic.QPAttrState)
		}, nil, []string{"RESET", "RTS"}},
		{"modify-to-sqe", func(t *testing.T, f *fixture) error {
			return f.p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSSQE}, rnic.QPAttrState)
		}, nil, []string{"SQE"}},
		{"modify-cur-state-mismatch", func(t *testing.T, f *fixture) error {
			return f.p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSRTS, CurState: rnic.QPSRTR}, rnic.QPAttrState|rnic.QPAttrCurState)
		}, nil, []string{"cur_state"}},
		{"modify-unknown-access-bits", func(t *testing.T, f *fixture) error {
			return f.qp.Modify(&rnic.QPAttr{State: rnic.QPSInit, Port: 1, AccessFlags: rnic.AccessRemoteWrite | 1<<12},
				rnic.QPAttrState|rnic.QPAttrPKeyIndex|rnic.QPAttrPort|rnic.QPAttrAccessFlags)
		}, nil, []string{"qp_access_flags"}},
		{"modify-timeout-5-bits", func(t *testing.T, f *fixture) error {
			must0(t, f.p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSSQD}, rnic.QPAttrState))
			return f.p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSSQD, Timeout: 32}, rnic.QPAttrState|rnic.QPAttrTimeout)
		}, nil, []string{"timeout 32"}},
		{"modify-retry-cnt-3-bits", func(t *testing.T, f *fixture) error {
			must0(t, f.p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSSQD}, rnic.QPAttrState))
			return f.p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSSQD, RetryCnt: 8}, rnic.QPAttrState|rnic.QPAttrRetryCnt)
		}, nil, []string{"retry_cnt 8"}},
		{"modify-bad-port", func(t *testing.T, f *fixture) error {
			return f.qp.Modify(&rnic.QPAttr{State: rnic.QPSInit, Port: 2}, rnic.QPAttrState|rnic.QPAttrPKeyIndex|rnic.QPAttrPort|rnic.QPAttrAccessFlags)
		}, nil, []string{"port 2"}},
		{"modify-path-mtu-above-port", func(t *testing.T, f *fixture) error {
			d := must(rnic.Open(rnic.Options{Link: must(mem.NewSwitch().Port(netip.MustParseAddr("10.9.9.9"), mem.Faults{})), MTU: rnic.MTU1024}))
			t.Cleanup(func() { d.Close() })
			cq := must(d.CreateCQ(4))
			qp := must(must(d.AllocPD()).CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cq, RecvCQ: cq, Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1}}))
			must0(t, toInit(qp))
			return qp.Modify(&rnic.QPAttr{State: rnic.QPSRTR, AH: rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(f.p.b.GID(rnic.AddrGIDIndex))}, PathMTU: rnic.MTU4096, DestQPN: 1, MaxDestRdAtomic: 1, MinRNRTimer: 1},
				rnic.QPAttrState|rnic.QPAttrAV|rnic.QPAttrPathMTU|rnic.QPAttrDestQPN|rnic.QPAttrRQPSN|rnic.QPAttrMaxDestRdAtomic|rnic.QPAttrMinRNRTimer)
		}, nil, []string{"path_mtu"}},
		{"modify-max-rd-atomic-above-device", func(t *testing.T, f *fixture) error {
			must0(t, toInit(f.qp))
			return f.qp.Modify(&rnic.QPAttr{State: rnic.QPSRTR, AH: rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(f.p.b.GID(rnic.AddrGIDIndex))}, PathMTU: rnic.MTU1024, DestQPN: 1,
				MaxDestRdAtomic: uint8(f.p.a.Attr().MaxQPRdAtom + 1), MinRNRTimer: 1},
				rnic.QPAttrState|rnic.QPAttrAV|rnic.QPAttrPathMTU|rnic.QPAttrDestQPN|rnic.QPAttrRQPSN|rnic.QPAttrMaxDestRdAtomic|rnic.QPAttrMinRNRTimer)
		}, nil, []string{"max_dest_rd_atomic"}},
		{"modify-ud-missing-qkey", func(t *testing.T, f *fixture) error {
			return newQP(f, rnic.UD).Modify(&rnic.QPAttr{State: rnic.QPSInit, Port: 1}, rnic.QPAttrState|rnic.QPAttrPKeyIndex|rnic.QPAttrPort)
		}, nil, []string{"QKEY"}},
		{"modify-destroyed-qp", func(t *testing.T, f *fixture) error {
			must0(t, f.qp.Destroy())
			return toInit(f.qp)
		}, rnic.ErrClosed, []string{"destroyed"}},
		{"destroy-qp-twice", func(t *testing.T, f *fixture) error {
			must0(t, f.qp.Destroy())
			return f.qp.Destroy()
		}, rnic.ErrClosed, []string{"QP", "was destroyed"}},

		// Memory regions (ibv_reg_mr(3)).
		{"regmr-unknown-access-bits", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.RegMR(make([]byte, 8), rnic.AccessLocalWrite|1<<20)
			return err
		}, nil, []string{"access"}},
		{"regmr-remote-write-without-local-write", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.RegMR(make([]byte, 8), rnic.AccessRemoteWrite)
			return err
		}, nil, []string{"local write"}},
		{"regmr-remote-atomic-without-local-write", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.RegMR(make([]byte, 8), rnic.AccessRemoteAtomic)
			return err
		}, nil, []string{"local write"}},
		{"regmr-empty", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.RegMR([]byte{}, rnic.AccessLocalWrite)
			return err
		}, nil, []string{"empty"}},
		{"regmr-nil", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.RegMR(nil, rnic.AccessLocalWrite)
			return err
		}, nil, []string{"empty"}},
		{"regmr-page-size-not-power-of-two", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.RegMRPageSize(make([]byte, 8), 0, rnic.AccessLocalWrite, 3000)
			return err
		}, nil, []string{"3000"}},
		{"dereg-twice", func(t *testing.T, f *fixture) error {
			mr := buf8(f)
			must0(t, mr.Dereg())
			return mr.Dereg()
		}, rnic.ErrClosed, []string{"MR", "was deregistered"}},

		// Destroying objects in use (EBUSY).
		{"destroy-cq-in-use", func(t *testing.T, f *fixture) error { return f.p.cqa.Destroy() }, rnic.ErrBusy, []string{"QP"}},
		{"destroy-cq-after-its-qps", func(t *testing.T, f *fixture) error {
			must0(t, f.qp.Destroy())
			must0(t, f.p.qpa.Destroy())
			if err := f.p.cqa.Destroy(); err != nil {
				t.Errorf("Destroy of an unused CQ: %v", err)
			}
			return f.p.cqa.Destroy()
		}, rnic.ErrClosed, []string{"CQ", "was destroyed"}},
		{"dealloc-pd-with-mr", func(t *testing.T, f *fixture) error {
			pd := must(f.p.a.AllocPD())
			mr := must(pd.RegMR(make([]byte, 8), rnic.AccessLocalWrite))
			err := pd.Dealloc()
			must0(t, mr.Dereg())
			if err2 := pd.Dealloc(); err2 != nil {
				t.Errorf("Dealloc of an empty PD: %v", err2)
			}
			if pd.Dealloc() == nil {
				t.Error("second Dealloc succeeded")
			}
			return err
		}, rnic.ErrBusy, []string{"MR"}},
		{"dealloc-pd-with-qp", func(t *testing.T, f *fixture) error { return f.p.pdb.Dealloc() }, rnic.ErrBusy, nil},
		{"dealloc-pd-with-mw", func(t *testing.T, f *fixture) error {
			pd := must(f.p.a.AllocPD())
			must(pd.AllocMW(rnic.MWType2))
			return pd.Dealloc()
		}, rnic.ErrBusy, nil},
		{"regmr-on-deallocated-pd", func(t *testing.T, f *fixture) error {
			pd := must(f.p.a.AllocPD())
			must0(t, pd.Dealloc())
			_, err := pd.RegMR(make([]byte, 8), rnic.AccessLocalWrite)
			return err
		}, nil, []string{"deallocated"}},
		{"alloc-mw-bad-type", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.AllocMW(3)
			return err
		}, nil, []string{"type 3"}},

		// Creation limits (ibv_query_device's max_*).
		{"create-qp-max-send-wr", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: f.p.cqa, RecvCQ: f.p.cqa,
				Cap: rnic.QPCap{MaxSendWR: uint32(f.p.a.Attr().MaxQPWR + 1), MaxRecvWR: 1}})
			return err
		}, nil, []string{"max_send_wr", "max_qp_wr"}},
		{"create-qp-max-sge", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: f.p.cqa, RecvCQ: f.p.cqa,
				Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxRecvSGE: uint32(f.p.a.Attr().MaxSGE + 1)}})
			return err
		}, nil, []string{"max_recv_sge"}},
		{"create-qp-max-inline", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: f.p.cqa, RecvCQ: f.p.cqa,
				Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxInlineData: uint32(f.p.a.Attr().MaxInlineData + 1)}})
			return err
		}, nil, []string{"max_inline_data"}},
		{"create-qp-no-cq", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: f.p.cqa})
			return err
		}, nil, []string{"RecvCQ"}},
		{"create-qp-cq-of-other-device", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: f.p.cqa, RecvCQ: f.p.cqb})
			return err
		}, nil, []string{"another device"}},
		{"create-qp-bad-type", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.CreateQP(rnic.QPInitAttr{Type: 9, SendCQ: f.p.cqa, RecvCQ: f.p.cqa})
			return err
		}, nil, []string{"type"}},
		{"create-cq-0", func(t *testing.T, f *fixture) error { _, err := f.p.a.CreateCQ(0); return err }, nil, []string{"0 entries", "out of range"}},
		{"create-cq-negative", func(t *testing.T, f *fixture) error { _, err := f.p.a.CreateCQ(-1); return err }, nil, []string{"out of range"}},
		{"create-cq-above-max-cqe", func(t *testing.T, f *fixture) error {
			_, err := f.p.a.CreateCQ(f.p.a.Attr().MaxCQE + 1)
			return err
		}, nil, []string{"out of range"}},
		{"create-srq-0", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.CreateSRQ(rnic.SRQInitAttr{MaxWR: 0})
			return err
		}, nil, []string{"max_wr"}},
		{"create-srq-limit-above-max-wr", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.CreateSRQ(rnic.SRQInitAttr{MaxWR: 4, Limit: 5})
			return err
		}, nil, []string{"srq_limit"}},
		{"create-ah-no-gid", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex})
			return err
		}, nil, []string{"GID"}},
		{"create-ah-ipv6-from-ipv4", func(t *testing.T, f *fixture) error {
			var g rnic.GID
			copy(g[:], netip.MustParseAddr("fd00::1").AsSlice())
			_, err := f.p.pda.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: g})
			return err
		}, nil, []string{"IP version"}},
		{"gid-index-2", func(t *testing.T, f *fixture) error { _, err := f.p.a.GID(2); return err }, nil, []string{"GID index 2"}},
		{"create-ah-link-local-source", func(t *testing.T, f *fixture) error {
			_, err := f.p.pda.CreateAH(rnic.AHAttr{DGID: must(f.p.b.GID(rnic.AddrGIDIndex))})
			return err
		}, nil, []string{"link-local", "GID index 1"}},

		// Work requests refused at post time (ibv_post_send returns EINVAL).
		{"post-unknown-opcode", func(t *testing.T, f *fixture) error { return f.p.qpa.PostSend(rnic.SendWR{Opcode: 42}) }, nil, []string{"opcode 42"}},
		{"post-atomic-4-bytes", func(t *testing.T, f *fixture) error {
			return f.p.qpa.PostSend(rnic.SendWR{Opcode: rnic.WRAtomicFetchAndAdd, SGL: []rnic.SGE{buf8(f).SGE(0, 4)}, RemoteAddr: 8, RKey: 1})
		}, nil, []string{"8-byte"}},
		{"post-read-on-ud", func(t *testing.T, f *fixture) error {
			qp := newQP(f, rnic.UD)
			must0(t, qp.Connect(rnic.Endpoint{}, rnic.ConnParams{}))
			return qp.PostSend(rnic.SendWR{Opcode: rnic.WRRDMARead, SGL: []rnic.SGE{buf8(f).SGE(0, 8)}})
		}, nil, []string{"RDMA_READ", "UD"}},
		{"post-ud-without-ah", func(t *testing.T, f *fixture) error {
			qp := newQP(f, rnic.UD)
			must0(t, qp.Connect(rnic.Endpoint{}, rnic.ConnParams{}))
			return qp.PostSend(rnic.SendWR{Opcode: rnic.WRSend})
		}, nil, []string{"address handle"}},
		{"post-ud-ah-of-other-pd", func(t *testing.T, f *fixture) error {
			qp := newQP(f, rnic.UD)
			must0(t, qp.Connect(rnic.Endpoint{}, rnic.ConnParams{}))
			ah := must(must(f.p.a.AllocPD()).CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(f.p.b.GID(rnic.AddrGIDIndex))}))
			return qp.PostSend(rnic.SendWR{Opcode: rnic.WRSend, AH: ah, RemoteQPN: 1})
		}, nil, []string{"protection domain"}},
		{"post-recv-too-many-sge", func(t *testing.T, f *fixture) error {
			mr := buf8(f)
			return f.p.qpb.PostRecv(rnic.RecvWR{SGL: []rnic.SGE{mr.SGE(0, 1), mr.SGE(1, 1), mr.SGE(2, 1), mr.SGE(3, 1), mr.SGE(4, 1)}})
		}, nil, []string{"max_recv_sge"}},
		{"post-message-above-2GiB", func(t *testing.T, f *fixture) error {
			mr := buf8(f)
			big := mr.SGE(0, 1)
			big.Length = 1 << 31
			return f.p.qpa.PostSend(rnic.SendWR{Opcode: rnic.WRSend, SGL: []rnic.SGE{big, mr.SGE(0, 1)}})
		}, nil, []string{"maximum"}},

		// Device and CQ.
		{"open-without-link", func(t *testing.T, f *fixture) error { _, err := rnic.Open(rnic.Options{}); return err }, nil, []string{"Link"}},
		{"open-bad-page-size", func(t *testing.T, f *fixture) error {
			_, err := rnic.Open(rnic.Options{Link: must(mem.NewSwitch().Port(netip.MustParseAddr("10.9.9.8"), mem.Faults{})), PageSize: 5000})
			return err
		}, nil, []string{"PageSize"}},
		{"open-bad-mtu", func(t *testing.T, f *fixture) error {
			_, err := rnic.Open(rnic.Options{Link: must(mem.NewSwitch().Port(netip.MustParseAddr("10.9.9.7"), mem.Faults{})), MTU: 9})
			return err
		}, nil, []string{"MTU"}},
		{"closed-device", func(t *testing.T, f *fixture) error {
			pd := f.p.pda
			must0(t, f.p.a.Close())
			if _, err := pd.RegMR(make([]byte, 8), rnic.AccessLocalWrite); !errors.Is(err, rnic.ErrClosed) {
				t.Errorf("RegMR on a closed device: %v", err)
			}
			if _, err := f.p.a.CreateCQ(4); !errors.Is(err, rnic.ErrClosed) {
				t.Errorf("CreateCQ on a closed device: %v", err)
			}
			_, err := f.p.a.AllocPD()
			return err
		}, rnic.ErrClosed, nil},
		{"wait-empty-slice", func(t *testing.T, f *fixture) error {
			_, err := f.p.cqa.Wait(context.Background(), nil)
			return err
		}, nil, []string{"empty"}},
		{"async-event-cancelled", func(t *testing.T, f *fixture) error {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := f.p.a.GetAsyncEvent(ctx)
			return err
		}, context.Canceled, nil},
	}
	t.Run("dealloc-pd-with-ah", func(t *testing.T) {
		t.Parallel()
		p := newPair(t, pairOpts{})
		pd := must(p.a.AllocPD())
		if _, err := pd.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(p.b.GID(rnic.AddrGIDIndex))}); err != nil {
			t.Fatal(err)
		}
		if err := pd.Dealloc(); !errors.Is(err, rnic.ErrBusy) {
			t.Errorf("Dealloc of a PD with an AH: %v, want ErrBusy", err)
		}
		dead := must(p.a.AllocPD())
		must0(t, dead.Dealloc())
		if _, err := dead.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(p.b.GID(rnic.AddrGIDIndex))}); err == nil {
			t.Error("CreateAH on a deallocated PD succeeded")
		}
	})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &fixture{p: newPair(t, pairOpts{})}
			f.qp = newQP(f, rnic.RC)
			err := c.run(t, f)
			if err != nil && err.Error() == "ok" {
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %q does not wrap %v", err, c.is)
			}
			errContains(t, err, c.name, c.subs...)
			t.Logf("%v", err)
		})
	}
}

// TestCQResize: ibv_resize_cq keeps the completions not yet polled, in
// order, grows the CQ's room, and refuses a size below what it holds.
func TestCQResize(t *testing.T) {
	p := newPair(t, pairOpts{})
	buf := make([]byte, 64)
	mr := must(p.pda.RegMR(buf, rnic.AccessLocalWrite))
	cq := must(p.a.CreateCQ(4))
	qp := must(p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cq, RecvCQ: cq, Cap: rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	// The QP never connects: receives posted to a QP in error complete
	// flushed, one CQE each, without the wire.
	must0(t, qp.Modify(&rnic.QPAttr{State: rnic.QPSErr}, rnic.QPAttrState))
	post := func(first, n int) {
		for i := range n {
			must0(t, qp.PostRecv(rnic.RecvWR{WRID: uint64(first + i), SGL: []rnic.SGE{{Addr: mr.Addr(), Length: 64, LKey: mr.LKey()}}}))
		}
	}
	post(0, 3)
	waitUnpolled := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for rnic.CQUnpolled(cq) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d completions, want %d", rnic.CQUnpolled(cq), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitUnpolled(3)
	if err := cq.Resize(2); err == nil {
		t.Fatal("Resize(2) of a CQ holding 3 completions succeeded")
	}
	must0(t, cq.Resize(16))
	post(3, 10)
	waitUnpolled(13)
	wcs := make([]rnic.WC, 16)
	n := must(cq.Poll(wcs))
	if n != 13 {
		t.Fatalf("polled %d, want 13", n)
	}
	for i, wc := range wcs[:n] {
		if wc.WRID != uint64(i) || wc.Status != rnic.WCWRFlushErr {
			t.Fatalf("completion %d: wr_id %d status %v, want %d flushed", i, wc.WRID, wc.Status, i)
		}
	}
	must0(t, cq.Resize(1))
	if err := cq.Resize(0); err == nil {
		t.Error("Resize(0) succeeded")
	}
}
