package pcap

import (
	"encoding/binary"
	"io"
	"math"
	"time"
)

// Writer writes a classic pcap file with microsecond timestamps, in
// little-endian byte order. It does no buffering of its own; wrap the
// destination in a bufio.Writer when writing many packets.
type Writer struct {
	w        io.Writer
	linkType LinkType
	hdr      [recordHeaderSize + ethernetHeaderSize]byte
}

// SnapLen is the snapshot length a Writer declares; WritePacket never
// truncates, and RoCEv2 frames are far smaller.
const SnapLen = MaxRecordSize

// NewWriter writes the global header for records of the given link type
// and returns a Writer for the records.
func NewWriter(w io.Writer, linkType LinkType) (*Writer, error) {
	var h [globalHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], magicMicros)
	binary.LittleEndian.PutUint16(h[4:], versionMajor)
	binary.LittleEndian.PutUint16(h[6:], versionMinor)
	// thiszone and sigfigs stay 0.
	binary.LittleEndian.PutUint32(h[16:], SnapLen)
	binary.LittleEndian.PutUint32(h[20:], uint32(linkType))
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &Writer{w: w, linkType: linkType}, nil
}

// LinkType returns the link type the Writer declared.
func (w *Writer) LinkType() LinkType { return w.linkType }

// WritePacket writes one record holding data, which must already carry the
// Writer's link-layer header (none for LinkTypeRaw). The timestamp is
// truncated to microseconds; one outside the file format's range (1970 to
// 2106) is refused with ErrTimestamp.
func (w *Writer) WritePacket(ts time.Time, data []byte) error {
	if !inRange(ts) {
		return ErrTimestamp
	}
	if _, err := w.w.Write(w.recordHeader(ts, len(data))); err != nil {
		return err
	}
	_, err := w.w.Write(data)
	return err
}

// WriteIPPacket writes one record holding an IP packet, adding the link
// header the Writer's link type needs: none for LinkTypeRaw, or for
// LinkTypeEthernet an Ethernet header with zero MAC addresses and the
// EtherType of the packet's IP version. It is how a NIC, whose frames
// start at the IP header, is captured. Other link types are written as
// WritePacket would.
func (w *Writer) WriteIPPacket(ts time.Time, ip []byte) error {
	if w.linkType != LinkTypeEthernet {
		return w.WritePacket(ts, ip)
	}
	if !inRange(ts) {
		return ErrTimestamp
	}
	w.recordHeader(ts, ethernetHeaderSize+len(ip))
	eth := w.hdr[recordHeaderSize:]
	clear(eth[:12]) // destination and source MAC
	etherType := uint16(etherTypeIPv4)
	if len(ip) > 0 && ip[0]>>4 == 6 {
		etherType = etherTypeIPv6
	}
	binary.BigEndian.PutUint16(eth[12:], etherType)
	if _, err := w.w.Write(w.hdr[:recordHeaderSize+ethernetHeaderSize]); err != nil {
		return err
	}
	_, err := w.w.Write(ip)
	return err
}

// inRange reports whether a record header can hold ts: its seconds field is
// an unsigned 32-bit count from 1970.
func inRange(ts time.Time) bool {
	s := ts.Unix()
	return s >= 0 && s <= math.MaxUint32
}

// recordHeader fills and returns the record header for n captured bytes.
func (w *Writer) recordHeader(ts time.Time, n int) []byte {
	h := w.hdr[:recordHeaderSize]
	binary.LittleEndian.PutUint32(h[0:], uint32(ts.Unix()))
	binary.LittleEndian.PutUint32(h[4:], uint32(ts.Nanosecond()/1000))
	binary.LittleEndian.PutUint32(h[8:], uint32(n))
	binary.LittleEndian.PutUint32(h[12:], uint32(n))
	return h
}
