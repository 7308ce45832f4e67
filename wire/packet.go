package wire

import "encoding/binary"

// Packet is a parsed RoCEv2 frame. Parse fills it without allocating: the
// header views and Payload alias the frame, so a Packet is valid only while
// its frame is. Views of headers the opcode does not carry are nil.
//
// A Packet is meant to be reused (one per engine, or per receive slot):
// Parse overwrites every field.
type Packet struct {
	// Frame is the whole frame, IP header through ICRC; nil after
	// ParseTransport.
	Frame []byte

	// Outer headers. IPv4 addresses appear as IPv4-mapped GIDs.
	IPv6         bool
	Src, Dst     GID
	SrcPort      uint16 // UDP source port
	TrafficClass uint8  // IPv4 TOS or IPv6 traffic class: DSCP<<2 | ECN
	TTL          uint8  // IPv4 TTL or IPv6 hop limit
	IPID         uint16 // IPv4 identification
	FlowLabel    uint32 // IPv6 flow label
	DF           bool   // IPv4 Don't Fragment
	UDPChecksum  uint16 // as received; Parse does not verify it

	// Transport headers.
	Op           Opcode
	Info         *OpcodeInfo
	BTH          BTH
	RETH         RETH
	AETH         AETH
	AtomicETH    AtomicETH
	AtomicAckETH AtomicAckETH
	ImmDt        ImmDt
	IETH         IETH
	DETH         DETH
	FETH         FETH

	// Payload is the payload without pad; Pad is the pad count.
	Payload []byte
	Pad     int
	// ICRC is the ICRC as carried in the frame (read little-endian, so it
	// compares equal to ComputeICRC's result).
	ICRC uint32
}

// Parse parses a frame that starts at its IP header (IPv4, options allowed,
// or IPv6 without extension headers) and ends with the ICRC. It validates
// everything that can be checked without the ICRC, each failure with its
// own error: IP version, IPv4 header length and checksum, IP length equal
// to the frame length, no fragment, UDP to port 4791 with a consistent
// length, a valid opcode, TVer 0, room for the opcode's headers and the
// ICRC, a pad that fits and aligns payload plus pad to 4 bytes, and no
// payload on opcodes that carry none (a CNP carries exactly its 16
// reserved bytes).
//
// Parse does not verify the ICRC, because a link that rebuilds the IP
// header (a UDP socket hides the IPv4 identification) cannot: call
// CheckICRC(p.Frame) when the frame arrived intact. Nor does it verify a
// UDP checksum (see CheckUDPChecksum). On error the fields of p are
// unspecified.
func (p *Packet) Parse(frame []byte) error {
	*p = Packet{}
	if len(frame) == 0 {
		return ErrTruncated
	}
	var hl int
	var err error
	switch frame[0] >> 4 {
	case 4:
		hl, err = p.parseIPv4(frame)
	case 6:
		hl, err = p.parseIPv6(frame)
	default:
		return ErrIPVersion
	}
	if err != nil {
		return err
	}
	if err := p.parseUDP(frame[hl:]); err != nil {
		return err
	}
	if err := p.parseTransport(frame[hl+UDPHeaderSize:]); err != nil {
		return err
	}
	p.Frame = frame
	return nil
}

// ParseTransport parses a UDP payload: a datagram that starts at the BTH
// and ends with the ICRC, as a UDP socket delivers it. It validates what
// Parse validates from the BTH on; the outer-header fields stay zero and
// Frame is nil (the ICRC cannot be checked without the IP header).
func (p *Packet) ParseTransport(udpPayload []byte) error {
	*p = Packet{}
	return p.parseTransport(udpPayload)
}

func (p *Packet) parseIPv4(frame []byte) (int, error) {
	if len(frame) < IPv4HeaderSize {
		return 0, ErrTruncated
	}
	ip := IPv4(frame)
	hl := ip.HeaderLen()
	switch {
	case hl < IPv4HeaderSize:
		return 0, ErrIPHeader
	case hl > len(frame):
		return 0, ErrTruncated
	case int(ip.TotalLength()) != len(frame):
		return 0, ErrIPLength
	case !ip.IsChecksumValid():
		return 0, ErrIPChecksum
	case ip.Flags()&IPv4FlagReserved != 0:
		return 0, ErrIPHeader
	case ip.MF() || ip.FragmentOffset() != 0:
		return 0, ErrFragment
	case ip.Protocol() != IPProtocolUDP:
		return 0, ErrNotUDP
	}
	p.Src = gidFromIPv4(ip.Src())
	p.Dst = gidFromIPv4(ip.Dst())
	p.TrafficClass = ip.TOS()
	p.TTL = ip.TTL()
	p.IPID = ip.ID()
	p.DF = ip.DF()
	return hl, nil
}

func (p *Packet) parseIPv6(frame []byte) (int, error) {
	if len(frame) < IPv6HeaderSize {
		return 0, ErrTruncated
	}
	ip := IPv6(frame)
	switch {
	case IPv6HeaderSize+int(ip.PayloadLength()) != len(frame):
		return 0, ErrIPLength
	case ip.NextHeader() != IPProtocolUDP:
		return 0, ErrNotUDP
	}
	p.Src, p.Dst = ip.Src(), ip.Dst()
	// An IPv4-mapped address never appears in an IPv6 header (RFC 4291
	// §2.5.5.2); it would also turn into IPv4 on re-encoding.
	if p.Src.IsIPv4() || p.Dst.IsIPv4() {
		return 0, ErrIPHeader
	}
	p.IPv6 = true
	p.TrafficClass = ip.TrafficClass()
	p.FlowLabel = ip.FlowLabel()
	p.TTL = ip.HopLimit()
	return IPv6HeaderSize, nil
}

func (p *Packet) parseUDP(b []byte) error {
	if len(b) < UDPHeaderSize {
		return ErrTruncated
	}
	udp := UDP(b)
	switch {
	case udp.DstPort() != UDPPort:
		return ErrNotRoCEPort
	case int(udp.Length()) != len(b):
		return ErrUDPLength
	}
	p.SrcPort = udp.SrcPort()
	p.UDPChecksum = udp.Checksum()
	return nil
}

// parseTransport parses b from the BTH through the ICRC.
func (p *Packet) parseTransport(b []byte) error {
	if len(b) < BTHSize {
		return ErrTruncated
	}
	bth := BTH(b[:BTHSize:BTHSize])
	op := bth.Opcode()
	info := op.Info()
	if info.Name == "" {
		return ErrOpcode
	}
	if bth.TVer() != 0 {
		return ErrTVer
	}
	room := len(b) - ICRCSize - info.HdrLen // payload + pad
	if room < 0 {
		return ErrTruncated
	}
	if room != 0 && !info.Flags.Has(FlagPayload) {
		return ErrLength
	}
	pad := bth.PadCount()
	if pad > room || room%4 != 0 {
		return ErrPad
	}

	p.Op, p.Info, p.BTH = op, info, bth
	p.DETH = DETH(view(b, info, HdrDETH))
	p.RETH = RETH(view(b, info, HdrRETH))
	p.AtomicETH = AtomicETH(view(b, info, HdrAtomicETH))
	p.AETH = AETH(view(b, info, HdrAETH))
	p.AtomicAckETH = AtomicAckETH(view(b, info, HdrAtomicAckETH))
	p.ImmDt = ImmDt(view(b, info, HdrImmDt))
	p.IETH = IETH(view(b, info, HdrIETH))
	p.FETH = FETH(view(b, info, HdrFETH))
	end := info.HdrLen + room - pad
	p.Payload = b[info.HdrLen:end:end]
	p.Pad = pad
	p.ICRC = binary.LittleEndian.Uint32(b[len(b)-ICRCSize:])
	return nil
}

// view returns header h of b (capacity limited to the header), or nil if
// the opcode does not carry it.
func view(b []byte, info *OpcodeInfo, h Header) []byte {
	off := int(info.off[h])
	if off < 0 {
		return nil
	}
	end := off + h.Size()
	return b[off:end:end]
}

// Route returns the packet's outer-header fields as a Route, so that the
// frame can be re-encoded (or answered, after swapping Src and Dst). A TTL
// of 0 and a UDP source port of 0 come back as Route's defaults, 64 and
// 4791.
func (p *Packet) Route() Route {
	return Route{
		Src:          p.Src,
		Dst:          p.Dst,
		SrcPort:      p.SrcPort,
		TrafficClass: p.TrafficClass,
		HopLimit:     p.TTL,
		FlowLabel:    p.FlowLabel,
		IPID:         p.IPID,
		NoDF:         !p.IPv6 && !p.DF,
		UDPChecksum:  p.UDPChecksum != 0,
	}
}
