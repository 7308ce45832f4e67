package udp_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/link/udp"
	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/pcap"
	"golang.org/x/sys/unix"
)

// captureOf reads the IP packets of a pcap file.
func captureOf(t *testing.T, file []byte) [][]byte {
	t.Helper()
	r, err := pcap.NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		data, _, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		ip, ok := pcap.IPPacket(r.LinkType(), data)
		if !ok {
			t.Fatalf("record %d is not an IP packet", len(out)+1)
		}
		out = append(out, bytes.Clone(ip))
	}
}

// TestCaptureIsWireIPv4 records, through link/sniff, the frames one IPv4
// link sends and the other receives (with rebuilt headers and with raw
// receive), and checks them byte for byte against the datagrams a raw
// socket of its own saw: TTL 255 as perftest asks, a TOS, UDP checksum 0,
// ID 0. This is what makes `rnic perf --pcap` show the wire.
func TestCaptureIsWireIPv4(t *testing.T) {
	needRoot(t)
	for _, raw := range []udp.Mode{udp.RawOff, udp.RawOn} {
		t.Run(map[udp.Mode]string{udp.RawOff: "rebuilt", udp.RawOn: "raw"}[raw], func(t *testing.T) {
			a, b := pair(t, false, udp.Options{}, udp.Options{Raw: raw}, nil, nil)
			var txFile, rxFile bytes.Buffer
			wtx, _ := pcap.NewWriter(&txFile, pcap.LinkTypeEthernet)
			wrx, _ := pcap.NewWriter(&rxFile, pcap.LinkTypeEthernet)
			sa := sniff.New(a, sniff.Options{Pcap: wtx})
			sb := sniff.New(b, sniff.Options{Pcap: wrx})
			rec := &recorder{}
			sb.Attach(rec)
			fd := rawCapture(t, b.Addr())

			const n = 60
			var bufs []*link.Buf
			for i := range n {
				f := frame(a, b, uint32(i), []int{1024, 1, 4096}[i%3])
				ip := wire.IPv4(f.Bytes())
				ip.SetTTL(255)
				ip.SetTOS([]uint8{0, 0x68, wire.ECNECT0}[i%3])
				ip.SetChecksum(ip.ComputeChecksum())
				bufs = append(bufs, f)
			}
			sa.Send(bufs)
			waitFor(t, "the frames", func() bool { return rec.count() == n })
			// This pair's datagrams only: other tests' NICs send from
			// port 4791 too, on other addresses.
			src, dst := a.Addr().As4(), b.Addr().As4()
			onWire := capture(t, fd, n, func(p []byte) bool {
				return len(p) >= 28 && p[0] == 0x45 && binary.BigEndian.Uint16(p[20:]) == a.SourcePort() &&
					bytes.Equal(p[12:16], src[:]) && bytes.Equal(p[16:20], dst[:])
			})
			tx, rx := captureOf(t, txFile.Bytes()), captureOf(t, rxFile.Bytes())
			if len(onWire) != n || len(tx) != n || len(rx) != n {
				t.Fatalf("%d datagrams on the wire, %d frames captured sent, %d received; want %d each", len(onWire), len(tx), len(rx), n)
			}
			byIndex := map[uint32][]byte{}
			for _, p := range onWire {
				byIndex[frameIndex(p)] = p
			}
			for i := range n {
				want := byIndex[frameIndex(tx[i])]
				if want == nil {
					t.Fatalf("captured frame %d (index %d) never went on the wire", i, frameIndex(tx[i]))
				}
				if !bytes.Equal(tx[i], want) {
					t.Errorf("sent frame %d: captured\n %x\nthe wire carried\n %x", i, tx[i][:48], want[:48])
				}
				if got := rx[i]; !bytes.Equal(got, byIndex[frameIndex(got)]) {
					t.Errorf("received frame %d: captured\n %x\nthe wire carried\n %x", i, got[:48], byIndex[frameIndex(got)][:48])
				}
			}
		})
	}
}

// TestCaptureIsWireIPv6 does the same over IPv6 on lo, through an
// AF_PACKET socket: the capture equals the datagram but for the UDP
// checksum, which the capture has computed (as the wire carries it; on lo
// the kernel leaves it begun for an offload) and which verifies.
func TestCaptureIsWireIPv6(t *testing.T) {
	needRoot(t)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no lo interface: %v", err)
	}
	a, b := pair(t, true, udp.Options{GSO: udp.Off}, udp.Options{GRO: udp.Off}, nil, nil)
	var txFile, rxFile bytes.Buffer
	wtx, _ := pcap.NewWriter(&txFile, pcap.LinkTypeRaw)
	wrx, _ := pcap.NewWriter(&rxFile, pcap.LinkTypeRaw)
	sa := sniff.New(a, sniff.Options{Pcap: wtx})
	sb := sniff.New(b, sniff.Options{Pcap: wrx})
	rec := &recorder{}
	sb.Attach(rec)
	proto := htons(unix.ETH_P_IPV6)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(proto))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: lo.Index}); err != nil {
		t.Fatal(err)
	}
	const n = 60
	var bufs []*link.Buf
	for i := range n {
		f := frame(a, b, uint32(i), []int{1024, 1, 4096}[i%3])
		wire.IPv6(f.Bytes()).SetHopLimit(255)
		wire.IPv6(f.Bytes()).SetTrafficClass([]uint8{0, 0x68, wire.ECNECT0}[i%3])
		bufs = append(bufs, f)
	}
	sa.Send(bufs)
	waitFor(t, "the frames", func() bool { return rec.count() == n })
	onWire := capture(t, fd, n, func(p []byte) bool {
		return len(p) >= 48 && p[0]>>4 == 6 && p[6] == 17 && binary.BigEndian.Uint16(p[40:]) == a.SourcePort()
	})
	byIndex := map[uint32][]byte{}
	for _, p := range onWire {
		byIndex[frameIndex(p)] = p
	}
	tx, rx := captureOf(t, txFile.Bytes()), captureOf(t, rxFile.Bytes())
	if len(byIndex) != n || len(tx) != n || len(rx) != n {
		t.Fatalf("%d datagrams on the wire, %d frames captured sent, %d received; want %d each", len(byIndex), len(tx), len(rx), n)
	}
	for i := range n {
		for what, got := range map[string][]byte{"sent": tx[i], "received": rx[i]} {
			want := byIndex[frameIndex(got)]
			if !sameButChecksum(got, want) || wire.UDP(got[40:]).Checksum() == 0 || wire.CheckUDPChecksum(got) != nil {
				t.Errorf("%s frame %d: captured\n %x\nthe wire carried\n %x", what, i, got[:56], want[:56])
			}
		}
	}
}

// TestRebuiltTTL checks that a frame received through the UDP socket
// (headers rebuilt, no privilege needed) carries the TTL or hop limit its
// sender wrote, which the socket reports (IP_RECVTTL, IPV6_RECVHOPLIMIT),
// and not a made-up 64.
func TestRebuiltTTL(t *testing.T) {
	for _, v6pair := range []bool{false, true} {
		rec := &recorder{keep: true}
		a, b := pair(t, v6pair, udp.Options{}, udp.Options{Raw: udp.RawOff, GRO: udp.Off}, nil, rec)
		ttls := []uint8{255, 1, 64, 17}
		var bufs []*link.Buf
		for i, ttl := range ttls {
			f := frame(a, b, uint32(i), 100)
			if v6pair {
				wire.IPv6(f.Bytes()).SetHopLimit(ttl)
			} else {
				ip := wire.IPv4(f.Bytes())
				ip.SetTTL(ttl)
				ip.SetChecksum(ip.ComputeChecksum())
			}
			bufs = append(bufs, f)
		}
		a.Send(bufs)
		waitFor(t, "the frames", func() bool { return rec.count() == len(ttls) })
		for i, f := range rec.frames {
			got := f[8] // IPv4 TTL
			if v6pair {
				got = f[7]
			}
			if want := ttls[frameIndex(f)]; got != want {
				t.Errorf("IPv6 %v: frame %d rebuilt with TTL %d, the sender sent %d", v6pair, i, got, want)
			}
		}
	}
}
