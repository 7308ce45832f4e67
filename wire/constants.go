package wire

// Specification constants: sizes and numbers fixed by the IBTA
// specification (Vol. 1, chapter 9) and its RoCEv2 annex (A17).
const (
	// UDPPort is the UDP destination port IANA assigned to RoCEv2. The
	// source port is free; senders hash the QP into it for ECMP entropy.
	UDPPort = 4791

	// BTHSize is the size of the Base Transport Header, present in every
	// packet.
	BTHSize = 12
	// RETHSize is the size of the RDMA Extended Transport Header (first or
	// only packet of an RDMA WRITE, and the RDMA READ request).
	RETHSize = 16
	// AETHSize is the size of the ACK Extended Transport Header.
	AETHSize = 4
	// AtomicETHSize is the size of the Atomic Extended Transport Header of
	// a CmpSwap or FetchAdd request.
	AtomicETHSize = 28
	// AtomicAckETHSize is the size of the Atomic ACK Extended Transport
	// Header that returns the original remote value.
	AtomicAckETHSize = 8
	// ImmDtSize is the size of the Immediate Data header.
	ImmDtSize = 4
	// IETHSize is the size of the Invalidate Extended Transport Header.
	IETHSize = 4
	// FETHSize is the size of the FLUSH Extended Transport Header.
	FETHSize = 4
	// AtomicWriteSize is the payload of an ATOMIC WRITE: one 8-byte word.
	AtomicWriteSize = 8
	// DETHSize is the size of the Datagram Extended Transport Header that
	// every UD packet carries.
	DETHSize = 8
	// ICRCSize is the size of the Invariant CRC that ends every packet.
	ICRCSize = 4
	// CNPReservedSize is the number of reserved (zero) bytes that follow
	// the BTH of a RoCEv2 Congestion Notification Packet (A17.9.3).
	CNPReservedSize = 16

	// IPv4HeaderSize is the size of an IPv4 header without options, as
	// RoCEv2 senders write it.
	IPv4HeaderSize = 20
	// IPv6HeaderSize is the size of the fixed IPv6 header.
	IPv6HeaderSize = 40
	// UDPHeaderSize is the size of the UDP header.
	UDPHeaderSize = 8

	// DefaultPKey is the default (full-membership) partition key, the only
	// one RoCEv2 deployments normally use.
	DefaultPKey = 0xFFFF

	// QPNMask selects the 24 bits of a queue pair number.
	QPNMask = 0xFFFFFF

	// MaxPad is the largest pad count: pad bytes round the payload up to a
	// multiple of 4 bytes.
	MaxPad = 3
)

// MTU is a path MTU as the verbs API encodes it (enum ibv_mtu): the largest
// payload one packet carries, headers not counted. The zero value is not a
// valid MTU.
type MTU uint8

// The path MTUs of the IBTA specification, numbered as ibv_mtu numbers them
// (and as perftest exchanges them).
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 if m is not a valid MTU.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// MTUFromBytes returns the MTU of exactly n bytes; ok is false unless n is
// one of 256, 512, 1024, 2048 or 4096.
func MTUFromBytes(n int) (m MTU, ok bool) {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m, true
		}
	}
	return 0, false
}

// String returns the MTU in bytes, or "MTU(n)" for an invalid value.
func (m MTU) String() string {
	if b := m.Bytes(); b != 0 {
		return itoa(uint64(b))
	}
	return "MTU(" + itoa(uint64(m)) + ")"
}
