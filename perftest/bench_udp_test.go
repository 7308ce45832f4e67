package perftest

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rnic/rnic/internal/udpref"
	"github.com/rnic/rnic/wire"
)

// The loopback benchmarks run rnic perf between two NICs on link/udp
// (127.0.0.1 and 127.0.0.2, port 4791, the real TCP exchange) and, in the
// same run, the physical reference: the same datagrams through the same
// kind of socket with no RDMA processing (internal/udpref). They report
// both and rnic's fraction of the reference.
//
//	go test -run '^$' -bench Loopback -benchtime 1x -count 5 ./perftest

// BenchmarkLoopbackWriteBW is write_bw with 64 KiB messages, path MTU 4096:
// each message is 16 datagrams of a 4 KiB payload. The reference streams
// as many datagrams of the size of an RC WRITE MIDDLE (BTH + 4096 + ICRC).
func BenchmarkLoopbackWriteBW(b *testing.B) { loopbackBW(b, WriteBW) }

// BenchmarkLoopbackReadBW is read_bw the same way: the responses are the
// 4 KiB datagrams, against the same reference.
func BenchmarkLoopbackReadBW(b *testing.B) { loopbackBW(b, ReadBW) }

// BenchmarkLoopbackWriteLat is write_lat with 8 B messages (inline) against
// a UDP ping-pong of datagrams of the size of an RC WRITE ONLY of 8 B
// (BTH + RETH + 8 + ICRC). perftest's write_lat reports the one-way time,
// half a round trip; so does raw_usec.
func BenchmarkLoopbackWriteLat(b *testing.B) { loopbackLat(b, WriteLat) }

// BenchmarkLoopbackReadLat is read_lat with 8 B messages (a round trip per
// READ; perftest reports it whole) against the same ping-pong, whose
// raw_usec is then the whole round trip too.
func BenchmarkLoopbackReadLat(b *testing.B) { loopbackLat(b, ReadLat) }

// BenchmarkLoopbackSendLat is send_lat with 8 B messages, half a round
// trip as write_lat.
func BenchmarkLoopbackSendLat(b *testing.B) { loopbackLat(b, SendLat) }

func loopbackBW(b *testing.B, test Test) {
	if !udpPortFree(udpSrv) || !udpPortFree(udpCli) {
		b.Skipf("UDP port %d is taken on %v or %v", wire.UDPPort, udpSrv, udpCli)
	}
	const size, iters, mtu = 65536, 20000, 4096
	for range b.N {
		cfg := NewConfig(test)
		cfg.Size, cfg.Iters, cfg.MTU = size, iters, mtu
		cfg.Timeout = 30 * time.Second
		srv, cli := startPair(b, cfg, udpOpener, udpSrv, udpCli)
		if errors.Is(srv.err, syscall.EADDRINUSE) || errors.Is(cli.err, syscall.EADDRINUSE) {
			b.Skipf("UDP port %d was taken meanwhile", wire.UDPPort)
		}
		if srv.err != nil || cli.err != nil {
			b.Fatalf("server: %v\nclient: %v", srv.err, cli.err)
		}
		rdma := cli.res.BW[0].BWAvg
		ref, err := udpref.Stream(context.Background(), udpref.StreamOptions{
			Src: udpCli, Dst: udpSrv, Size: 12 + mtu + 4, Count: iters * size / mtu,
		})
		if err != nil {
			b.Fatal(err)
		}
		// perftest counts message bytes; the reference counts datagram
		// bytes, headers included: compare the RDMA payload each carries.
		raw := ref.MBps() * mtu / (12 + mtu + 4)
		b.ReportMetric(rdma, "MB/s")
		b.ReportMetric(raw, "raw_MB/s")
		b.ReportMetric(rdma/raw, "ratio")
		b.ReportMetric(float64(ref.Drops), "raw_drops")
	}
}

func loopbackLat(b *testing.B, test Test) {
	if !udpPortFree(udpSrv) || !udpPortFree(udpCli) {
		b.Skipf("UDP port %d is taken on %v or %v", wire.UDPPort, udpSrv, udpCli)
	}
	const size, iters = 8, 20000
	for range b.N {
		cfg := NewConfig(test)
		cfg.Size, cfg.Iters = size, iters
		cfg.Timeout = 30 * time.Second
		srv, cli := startPair(b, cfg, udpOpener, udpSrv, udpCli)
		if errors.Is(srv.err, syscall.EADDRINUSE) || errors.Is(cli.err, syscall.EADDRINUSE) {
			b.Skipf("UDP port %d was taken meanwhile", wire.UDPPort)
		}
		if srv.err != nil || cli.err != nil {
			b.Fatalf("server: %v\nclient: %v", srv.err, cli.err)
		}
		rdma := cli.res.Lat[0].Typical
		ref, err := udpref.PingPong(context.Background(), udpCli, udpSrv, 12+16+size+4, iters)
		if err != nil {
			b.Fatal(err)
		}
		rtts := slices.Clone(ref.RTTs)
		slices.Sort(rtts)
		raw := float64(rtts[len(rtts)/2]) / 1e3
		if test != ReadLat {
			raw /= 2 // perftest's one-way time
		}
		b.ReportMetric(rdma, "t_typical_usec")
		b.ReportMetric(raw, "raw_usec")
		b.ReportMetric(rdma/raw, "ratio")
	}
}
