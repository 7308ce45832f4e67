package pcap

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"time"
)

// Writer writes a classic pcap file with microsecond timestamps, in
// little-endian byte order. It does no buffering of its own; wrap the
// destination in a bufio.Writer when writing many packets.
//
// A record keeps at most the Writer's snapshot length of a packet, as
// tcpdump -s does: the record header's captured length (incl_len) says
// how many bytes were kept and its original length (orig_len) how long
// the packet was, so that tshark marks a cut packet "[Packet size limited
// during capture]" instead of reporting it malformed.
type Writer struct {
	w        io.Writer
	linkType LinkType
	snapLen  int
	hdr      [recordHeaderSize + ethernetHeaderSize]byte
}

// SnapLen is the snapshot length of a Writer made by NewWriter, and what
// a snapshot length of 0 means: whole packets (tcpdump -s 0).
const SnapLen = MaxRecordSize

// NewWriter writes the global header for records of the given link type
// and returns a Writer that keeps whole packets (up to SnapLen bytes).
func NewWriter(w io.Writer, linkType LinkType) (*Writer, error) {
	return NewWriterSnapLen(w, linkType, 0)
}

// NewWriterSnapLen is NewWriter with a snapshot length: each record keeps
// the first snapLen bytes of its packet, link-layer header included (as
// tcpdump counts them). snapLen 0 means SnapLen; it must not exceed
// MaxRecordSize, the largest a reader accepts.
func NewWriterSnapLen(w io.Writer, linkType LinkType, snapLen int) (*Writer, error) {
	if snapLen == 0 {
		snapLen = SnapLen
	}
	if snapLen < 0 || snapLen > MaxRecordSize {
		return nil, fmt.Errorf("pcap: snapshot length %d out of range [1, %d]", snapLen, MaxRecordSize)
	}
	var h [globalHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], magicMicros)
	binary.LittleEndian.PutUint16(h[4:], versionMajor)
	binary.LittleEndian.PutUint16(h[6:], versionMinor)
	// thiszone and sigfigs stay 0.
	binary.LittleEndian.PutUint32(h[16:], uint32(snapLen))
	binary.LittleEndian.PutUint32(h[20:], uint32(linkType))
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &Writer{w: w, linkType: linkType, snapLen: snapLen}, nil
}

// LinkType returns the link type the Writer declared.
func (w *Writer) LinkType() LinkType { return w.linkType }

// SnapLen returns the snapshot length the Writer declared: no record
// holds more bytes.
func (w *Writer) SnapLen() int { return w.snapLen }

// RecordSize returns how many bytes of the file a packet of n bytes
// (link-layer header included) takes: the record header and what the
// snapshot length keeps.
func (w *Writer) RecordSize(n int) int { return recordHeaderSize + min(n, w.snapLen) }

// WritePacket writes one record holding data, which must already carry the
// Writer's link-layer header (none for LinkTypeRaw), cut to the snapshot
// length. The timestamp is truncated to microseconds; one outside the
// file format's range (1970 to 2106) is refused with ErrTimestamp.
func (w *Writer) WritePacket(ts time.Time, data []byte) error {
	if !inRange(ts) {
		return ErrTimestamp
	}
	kept := data[:min(len(data), w.snapLen)]
	if _, err := w.w.Write(w.recordHeader(ts, len(kept), len(data))); err != nil {
		return err
	}
	_, err := w.w.Write(kept)
	return err
}

// WriteIPPacket writes one record holding an IP packet, adding the link
// header the Writer's link type needs: none for LinkTypeRaw, or for
// LinkTypeEthernet an Ethernet header with zero MAC addresses and the
// EtherType of the packet's IP version. It is how a NIC, whose frames
// start at the IP header, is captured. Other link types are written as
// WritePacket would. The snapshot length counts the link header.
func (w *Writer) WriteIPPacket(ts time.Time, ip []byte) error {
	if w.linkType != LinkTypeEthernet {
		return w.WritePacket(ts, ip)
	}
	if !inRange(ts) {
		return ErrTimestamp
	}
	orig := ethernetHeaderSize + len(ip)
	incl := min(orig, w.snapLen)
	w.recordHeader(ts, incl, orig)
	eth := w.hdr[recordHeaderSize:]
	clear(eth[:12]) // destination and source MAC
	etherType := uint16(etherTypeIPv4)
	if len(ip) > 0 && ip[0]>>4 == 6 {
		etherType = etherTypeIPv6
	}
	binary.BigEndian.PutUint16(eth[12:], etherType)
	if _, err := w.w.Write(w.hdr[:recordHeaderSize+min(incl, ethernetHeaderSize)]); err != nil {
		return err
	}
	if incl <= ethernetHeaderSize {
		return nil
	}
	_, err := w.w.Write(ip[:incl-ethernetHeaderSize])
	return err
}

// inRange reports whether a record header can hold ts: its seconds field is
// an unsigned 32-bit count from 1970.
func inRange(ts time.Time) bool {
	s := ts.Unix()
	return s >= 0 && s <= math.MaxUint32
}

// recordHeader fills and returns the record header for incl captured
// bytes of a packet of orig bytes.
func (w *Writer) recordHeader(ts time.Time, incl, orig int) []byte {
	h := w.hdr[:recordHeaderSize]
	binary.LittleEndian.PutUint32(h[0:], uint32(ts.Unix()))
	binary.LittleEndian.PutUint32(h[4:], uint32(ts.Nanosecond()/1000))
	binary.LittleEndian.PutUint32(h[8:], uint32(incl))
	binary.LittleEndian.PutUint32(h[12:], uint32(orig))
	return h
}
