package rnic_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/udpref"
	"github.com/rnic/rnic/link/udp"
)

// BenchmarkUDPLatency is one operation in flight between two NICs on
// link/udp over loopback (127.0.0.11 and 127.0.0.12, port 4791), each in
// its own process as perftest's client and server are, completed by
// busy-polling the CQ (as perftest's latency tests do) or by Wait, with
// the physical reference measured in the same run: a UDP ping-pong of
// datagrams of the request's size through the same kind of socket. It
// reports the median round trip of each, and their ratio.
//
//	go test -run '^$' -bench UDPLatency -benchtime 20000x .
//	GOMAXPROCS=1 go test -run '^$' -bench UDPLatency -benchtime 20000x .
func BenchmarkUDPLatency(b *testing.B) {
	for _, op := range []struct {
		name   string
		opcode rnic.WROpcode
		size   int
		frame  int // the request's UDP payload: BTH + RETH + payload + ICRC
	}{
		{"write8", rnic.WRRDMAWrite, 8, 12 + 16 + 8 + 4},
		{"read64", rnic.WRRDMARead, 64, 12 + 16 + 4},
	} {
		for _, mode := range []string{"poll", "wait"} {
			b.Run(op.name+"/"+mode, func(b *testing.B) {
				a, raddr, rkey := udpBenchPair(b)
				src := make([]byte, op.size)
				mra := must(a.pd.RegMR(src, rnic.AccessLocalWrite))
				wr := rnic.SendWR{Opcode: op.opcode, Flags: rnic.SendSignaled, SGL: []rnic.SGE{mra.SGE(0, op.size)},
					RemoteAddr: raddr, RKey: rkey}
				if op.opcode == rnic.WRRDMAWrite {
					wr.Flags |= rnic.SendInline
				}
				wcs := make([]rnic.WC, 4)
				ctx := context.Background()
				complete := func() {
					var n int
					var err error
					if mode == "poll" {
						for n == 0 && err == nil {
							n, err = a.cq.Poll(wcs)
						}
						if err != nil {
							b.Fatal(err)
						}
					} else if n, err = a.cq.Wait(ctx, wcs); err != nil {
						b.Fatal(err)
					}
					if n != 1 || wcs[0].Status != rnic.WCSuccess {
						b.Fatalf("%d completions, %v", n, wcs[0].Status)
					}
				}
				for range 100 { // warm up
					if err := a.qp.PostSend(wr); err != nil {
						b.Fatal(err)
					}
					complete()
				}
				rtts := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					t0 := time.Now()
					if err := a.qp.PostSend(wr); err != nil {
						b.Fatal(err)
					}
					complete()
					rtts = append(rtts, time.Since(t0))
				}
				b.StopTimer()
				a.close()
				ref, err := udpref.PingPong(ctx, netip.MustParseAddr(udpBenchCli), netip.MustParseAddr(udpBenchPeer), op.frame, max(b.N, 1000))
				if err != nil {
					b.Fatal(err)
				}
				rdma, raw := median(rtts), median(ref.RTTs)
				b.ReportMetric(float64(rdma.Nanoseconds())/1e3, "rtt_usec")
				b.ReportMetric(float64(raw.Nanoseconds())/1e3, "raw_rtt_usec")
				b.ReportMetric(float64(rdma)/float64(raw), "ratio")
				b.ReportMetric(float64(time.Second)/float64(rdma), "ops/s")
				b.ReportMetric(float64(slices.Max(rtts).Nanoseconds())/1e3, "max_usec")
				b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
			})
		}
	}
}

// udpNode is a NIC on link/udp with a PD, a CQ and an RC QP.
type udpNode struct {
	dev *rnic.Device
	pd  *rnic.PD
	cq  *rnic.CQ
	qp  *rnic.QP
}

func (n *udpNode) close() { n.dev.Close() }

const (
	udpBenchCli  = "127.0.0.11"
	udpBenchPeer = "127.0.0.12"
)

func openUDPNode(addr string) (*udpNode, error) {
	l, err := udp.Open(udp.Options{Addr: netip.MustParseAddr(addr)})
	if err != nil {
		return nil, err
	}
	d, err := rnic.Open(rnic.Options{Link: l})
	if err != nil {
		return nil, err
	}
	n := &udpNode{dev: d, pd: must(d.AllocPD()), cq: must(d.CreateCQ(64))}
	n.qp = must(n.pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}}))
	return n, nil
}

var udpBenchConn = rnic.ConnParams{Access: rnic.AccessLocalWrite | rnic.AccessRemoteWrite | rnic.AccessRemoteRead}

// udpBenchPair opens the client's NIC here and the peer's in a child
// process (TestUDPBenchPeer), connects their QPs, and returns the client
// with the peer's buffer.
func udpBenchPair(b testing.TB) (cli *udpNode, raddr uint64, rkey uint32) {
	b.Helper()
	a, err := openUDPNode(udpBenchCli)
	if err != nil {
		b.Skipf("link/udp on %s: %v", udpBenchCli, err)
	}
	b.Cleanup(a.close)
	cmd := exec.Command(os.Args[0], "-test.run=^TestUDPBenchPeer$")
	cmd.Env = append(os.Environ(), "RNIC_BENCH_PEER=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); cmd.Wait() })
	br := bufio.NewReader(out)
	var peer rnic.Endpoint
	if err := readEndpoint(br, &peer, &raddr, &rkey); err != nil {
		b.Fatalf("peer: %v", err)
	}
	writeEndpoint(in, a.qp.Endpoint(udpBenchConn), 0, 0)
	if err := a.qp.Connect(peer, udpBenchConn); err != nil {
		b.Fatal(err)
	}
	if _, err := br.ReadString('\n'); err != nil { // the peer is connected
		b.Fatalf("peer: %v", err)
	}
	return a, raddr, rkey
}

func writeEndpoint(w io.Writer, e rnic.Endpoint, addr uint64, rkey uint32) {
	fmt.Fprintf(w, "%s %d %d %d %d\n", hex.EncodeToString(e.GID[:]), e.QPN, e.PSN, addr, rkey)
}

func readEndpoint(r *bufio.Reader, e *rnic.Endpoint, addr *uint64, rkey *uint32) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	var g string
	var psn uint32
	if _, err := fmt.Sscan(line, &g, &e.QPN, &psn, addr, rkey); err != nil {
		return fmt.Errorf("%q: %w", line, err)
	}
	e.PSN = rnic.PSN(psn)
	gb, err := hex.DecodeString(g)
	if err != nil || len(gb) != len(e.GID) {
		return fmt.Errorf("bad GID %q", g)
	}
	copy(e.GID[:], gb)
	return nil
}

// TestUDPBenchPeer is BenchmarkUDPLatency's peer process (it runs only
// when the benchmark starts it): a NIC with a registered buffer that
// answers until its stdin closes.
func TestUDPBenchPeer(t *testing.T) {
	if os.Getenv("RNIC_BENCH_PEER") == "" {
		return // not a test: the peer process BenchmarkUDPLatency starts
	}
	n, err := openUDPNode(udpBenchPeer)
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	mr := must(n.pd.RegMR(make([]byte, 4096), rnic.AccessLocalWrite|rnic.AccessRemoteWrite|rnic.AccessRemoteRead))
	writeEndpoint(os.Stdout, n.qp.Endpoint(udpBenchConn), mr.Addr(), mr.RKey())
	br := bufio.NewReader(os.Stdin)
	var peer rnic.Endpoint
	var x uint64
	var y uint32
	if err := readEndpoint(br, &peer, &x, &y); err != nil {
		t.Fatal(err)
	}
	if err := n.qp.Connect(peer, udpBenchConn); err != nil {
		t.Fatal(err)
	}
	fmt.Println("connected")
	io.Copy(io.Discard, br)
}
