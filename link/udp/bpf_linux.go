package udp

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// Classic BPF programs (SO_ATTACH_FILTER). Socket filters run in the
// kernel before a datagram is queued, so frames that are not ours never
// cost a wakeup or a copy.

func bpfStmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

func bpfJump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// dropAll drops every datagram. The UDP socket of a link with raw receive
// carries it: the socket stays bound, so the kernel does not answer the
// peer with ICMP port unreachable, but it queues nothing, since the raw
// socket delivers the same datagrams.
var dropAll = []unix.SockFilter{bpfStmt(unix.BPF_RET|unix.BPF_K, 0)}

// rawIPv4Filter keeps, on an AF_INET raw socket for IPPROTO_UDP (whose
// filter sees the packet from its IP header), the unfragmented datagrams
// to addr:port, whole.
func rawIPv4Filter(addr [4]byte, port uint16) []unix.SockFilter {
	const accept, drop = 7, 8 // instruction indexes, the targets of the jumps
	// to turns an absolute target into the offset from the instruction
	// after jump at, as BPF counts.
	to := func(at, target int) uint8 { return uint8(target - at - 1) }
	return []unix.SockFilter{
		/* 0 */ bpfStmt(unix.BPF_LD|unix.BPF_H|unix.BPF_ABS, 6), // flags and fragment offset
		/* 1 */ bpfJump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, 0x3fff, to(1, drop), 0), // MF or an offset: a fragment
		/* 2 */ bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, 16), // destination address
		/* 3 */ bpfJump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, binary.BigEndian.Uint32(addr[:]), 0, to(3, drop)),
		/* 4 */ bpfStmt(unix.BPF_LDX|unix.BPF_B|unix.BPF_MSH, 0), // X = IP header length
		/* 5 */ bpfStmt(unix.BPF_LD|unix.BPF_H|unix.BPF_IND, 2), // UDP destination port
		/* 6 */ bpfJump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, uint32(port), to(6, accept), to(6, drop)),
		/* 7 */ bpfStmt(unix.BPF_RET|unix.BPF_K, 1<<18), // accept: the whole packet
		/* 8 */ bpfStmt(unix.BPF_RET|unix.BPF_K, 0), // drop
	}
}

// attachFilter installs prog on fd.
func attachFilter(fd int, prog []unix.SockFilter) error {
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
}
