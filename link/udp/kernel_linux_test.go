package udp_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
	"github.com/rnic/rnic/wire"
	"golang.org/x/sys/unix"
)

// These tests look at what the kernel really puts on the wire for each
// send path the link uses, through capture sockets of their own, and
// check that the header fields the ICRC covers are the ones the NIC built.

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("capturing needs root (CAP_NET_RAW): skipped")
	}
}

// capture reads packets from a blocking socket until n match keep or a
// second passes without one.
func capture(t *testing.T, fd int, n int, keep func([]byte) bool) [][]byte {
	t.Helper()
	tv := unix.Timeval{Sec: 1}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	buf := make([]byte, 1<<16)
	for len(out) < n {
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			if err == unix.EAGAIN {
				break
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if keep(buf[:m]) {
			out = append(out, append([]byte(nil), buf[:m]...))
		}
	}
	return out
}

// sameButChecksum compares a captured IPv6 frame with the one sent,
// except the UDP checksum, which the kernel writes (and on lo leaves
// begun for the offload that never comes).
func sameButChecksum(got, want []byte) bool {
	if len(got) != len(want) {
		return false
	}
	g, w := bytes.Clone(got), bytes.Clone(want)
	hl := hdrLen(w)
	for _, f := range [][]byte{g, w} {
		f[hl-2], f[hl-1] = 0, 0
	}
	return bytes.Equal(g, w)
}

// TestKernelIPv4Header captures, with a raw socket of its own, the IPv4
// datagrams a link sends (through sendmmsg, one frame per call and 64 per
// call, with and without a TOS control message, with TTLs from 1 to 255)
// and checks that the kernel wrote exactly the frame: ID 0 and DF, the
// frame's TOS and TTL (control messages), UDP checksum 0 (SO_NO_CHECK),
// so that every captured frame passes wire.CheckICRC and a capture of the
// frames is what the wire carried.
func TestKernelIPv4Header(t *testing.T) {
	needRoot(t)
	ttls := []uint8{64, 255, 1, 17}
	base := uint32(0) // frame indices of this round: lo may still deliver the last round's
	for _, batch := range []int{1, 64} {
		for _, tos := range []uint8{0, wire.ECNECT0 | 26<<2} {
			base += 1000
			a, b := pair(t, false, udp.Options{Batch: batch}, udp.Options{Raw: udp.RawOff}, nil, &recorder{})
			fd := rawCapture(t, b.Addr())
			const n = 200
			sent := make(map[uint32][]byte)
			var bufs []*link.Buf
			for i := range n {
				f := frame(a, b, base+uint32(i), []int{4096, 1, 1024}[i%3])
				ip := wire.IPv4(f.Bytes())
				ip.SetTOS(tos) // masked by the ICRC, so they need no new ICRC
				ip.SetTTL(ttls[i%len(ttls)])
				ip.SetChecksum(ip.ComputeChecksum())
				sent[base+uint32(i)] = bytes.Clone(f.Bytes())
				bufs = append(bufs, f)
			}
			a.Send(bufs)
			got := capture(t, fd, n, func(p []byte) bool {
				return len(p) >= 40 && p[0] == 0x45 && binary.BigEndian.Uint16(p[22:]) == b.SourcePort() &&
					binary.BigEndian.Uint16(p[20:]) == a.SourcePort() && frameIndex(p)-base < n
			})
			if len(got) != n {
				t.Fatalf("batch %d: captured %d of %d frames", batch, len(got), n)
			}
			for _, p := range got {
				ip := wire.IPv4(p)
				if ip.ID() != 0 || !ip.DF() || ip.TOS() != tos {
					t.Fatalf("batch %d: the kernel wrote ID %d, DF %v, TOS %#x; want 0, true, %#x", batch, ip.ID(), ip.DF(), ip.TOS(), tos)
				}
				if err := wire.CheckICRC(p); err != nil {
					t.Fatalf("batch %d: captured frame fails its ICRC: %v\n%x", batch, err, p[:48])
				}
				if want := sent[frameIndex(p)]; !bytes.Equal(p, want) {
					t.Fatalf("batch %d: the datagram differs from the frame sent (TTL %d, UDP checksum %#04x; frame's %d, %#04x):\n got %x\nwant %x",
						batch, ip.TTL(), wire.UDP(p[20:]).Checksum(), wire.IPv4(want).TTL(), wire.UDP(want[20:]).Checksum(), p[:48], want[:48])
				}
			}
			a.Close()
			b.Close()
		}
	}
}

// rawCapture opens a raw IPv4 UDP socket bound to addr, closed at the end
// of the test: it sees every datagram to addr with the headers the
// sender's kernel wrote.
func rawCapture(t *testing.T, addr netip.Addr) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_UDP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: addr.As4()}); err != nil {
		t.Fatal(err)
	}
	return fd
}

// TestKernelIPv6Header captures, with an AF_PACKET socket on lo, the IPv6
// datagrams a link sends without GSO and checks them as
// TestKernelIPv4Header does, traffic class, hop limit and flow label (no
// automatic flow labels) included; only the UDP checksum is the kernel's
// (on lo only begun: the checksum is offloaded).
func TestKernelIPv6Header(t *testing.T) {
	needRoot(t)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no lo interface: %v", err)
	}
	a, b := pair(t, true, udp.Options{GSO: udp.Off}, udp.Options{}, nil, &recorder{})
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
	const n = 200
	sent := make(map[uint32][]byte)
	var bufs []*link.Buf
	for i := range n {
		f := frame(a, b, uint32(i), []int{4096, 1, 1024}[i%3])
		if i%2 == 1 {
			wire.IPv6(f.Bytes()).SetTrafficClass(wire.ECNECT1)
		}
		f.Bytes()[7] = []uint8{64, 255, 1}[i%3] // the hop limit, masked by the ICRC
		sent[uint32(i)] = bytes.Clone(f.Bytes())
		bufs = append(bufs, f)
	}
	a.Send(bufs)
	got := capture(t, fd, n, func(p []byte) bool {
		return len(p) >= 48 && p[0]>>4 == 6 && p[6] == 17 && binary.BigEndian.Uint16(p[42:]) == b.SourcePort() &&
			binary.BigEndian.Uint16(p[40:]) == a.SourcePort()
	})
	if len(got) != n {
		t.Fatalf("captured %d of %d frames", len(got), n)
	}
	for _, p := range got {
		want := sent[frameIndex(p)]
		if err := wire.CheckICRC(p); err != nil {
			t.Fatalf("captured frame fails its ICRC: %v\n%x", err, p[:56])
		}
		if !sameButChecksum(p, want) {
			t.Fatalf("captured frame differs from the one sent:\n got %x\nwant %x", p[:56], want[:56])
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// TestGSOIPv4IDs measures why IPv4 links do not use GSO (ErrGSOIPv4): the
// kernel numbers the IPv4 IDs of one GSO datagram's segments 0, 1, 2, ...
// A raw socket on loopback sees the datagram before segmentation, so the
// measurement is made where segmentation has happened: a classic BPF
// filter on the receiving UDP socket runs once per segment, reads the
// segment's IPv4 ID through SKF_NET_OFF and truncates the datagram to
// 8 + ID bytes, so the received length tells the ID. No privilege needed.
func TestGSOIPv4IDs(t *testing.T) {
	rx, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rx)
	idOffset := int32(-0x100000 + 4) // SKF_NET_OFF + offset of the IPv4 ID
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: uint32(idOffset)}, // A = the segment's IPv4 ID
		{Code: unix.BPF_ALU | unix.BPF_ADD | unix.BPF_K, K: 16},              // keep UDP header + 8 + ID bytes
		{Code: unix.BPF_RET | unix.BPF_A},
	}
	if err := unix.SetsockoptSockFprog(rx, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(rx, &unix.SockaddrInet4{Addr: v4b.As4()}); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(rx)
	tv := unix.Timeval{Sec: 1}
	unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)

	tx, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tx)
	unix.SetsockoptInt(tx, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
	if err := unix.Bind(tx, &unix.SockaddrInet4{Addr: v4a.As4()}); err != nil {
		t.Fatal(err)
	}
	const segs, segSize = 8, 1000
	if err := unix.SetsockoptInt(tx, unix.SOL_UDP, unix.UDP_SEGMENT, segSize); err != nil {
		t.Skipf("kernel without UDP GSO: %v", err)
	}
	if err := unix.Sendto(tx, make([]byte, segs*segSize), 0, sa); err != nil {
		t.Fatal(err)
	}
	var ids []int
	buf := make([]byte, 2000)
	for range segs {
		n, _, err := unix.Recvfrom(rx, buf, 0)
		if err != nil {
			t.Fatalf("after %d segments: %v", len(ids), err)
		}
		ids = append(ids, n-8)
	}
	t.Logf("IPv4 IDs of the %d segments of one GSO datagram from an unconnected DF socket: %v", segs, ids)
	for i, id := range ids {
		if id != i {
			t.Fatalf("segment IDs %v, want 0..%d: if the kernel now keeps ID 0 for every segment, IPv4 GSO would keep the ICRC valid and ErrGSOIPv4 can go", ids, segs-1)
		}
	}
}
