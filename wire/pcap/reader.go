package pcap

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// Reader reads records from a classic pcap file.
type Reader struct {
	r        io.Reader
	order    binary.ByteOrder
	nanos    bool // timestamps are in nanoseconds
	linkType LinkType
	snapLen  uint32
	hdr      [recordHeaderSize]byte
	buf      []byte // reused for every record
}

// NewReader reads the global header of a pcap file from r and returns a
// Reader for its records. Either byte order and either timestamp
// resolution is accepted.
func NewReader(r io.Reader) (*Reader, error) {
	var h [globalHeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("pcap: reading global header: %w", err)
	}
	rd := &Reader{r: r}
	switch binary.LittleEndian.Uint32(h[0:]) {
	case magicMicros:
		rd.order = binary.LittleEndian
	case magicNanos:
		rd.order, rd.nanos = binary.LittleEndian, true
	default:
		switch binary.BigEndian.Uint32(h[0:]) {
		case magicMicros:
			rd.order = binary.BigEndian
		case magicNanos:
			rd.order, rd.nanos = binary.BigEndian, true
		default:
			return nil, ErrNotPcap
		}
	}
	if major := rd.order.Uint16(h[4:]); major != versionMajor {
		return nil, fmt.Errorf("%w: version %d", ErrNotPcap, major)
	}
	rd.snapLen = rd.order.Uint32(h[16:])
	// The top bits of the link-type word may carry an FCS length
	// (LINKTYPE_FCS); only the low 16 bits name the link type.
	rd.linkType = LinkType(rd.order.Uint32(h[20:]) & 0xFFFF)
	return rd, nil
}

// LinkType returns the link-layer header type of every record.
func (r *Reader) LinkType() LinkType { return r.linkType }

// SnapLen returns the file's snapshot length: no record holds more bytes.
func (r *Reader) SnapLen() uint32 { return r.snapLen }

// Record is one record of a capture.
type Record struct {
	// Data is the captured bytes, valid until the next call.
	Data []byte
	// Time is the record's timestamp.
	Time time.Time
	// OrigLen is the packet's length when it was captured; more than
	// len(Data) when the snapshot length cut the packet.
	OrigLen int
}

// Next returns the next record's captured bytes and timestamp. The bytes
// are valid until the next call. At the end of the file it returns io.EOF;
// a file cut inside a record gives io.ErrUnexpectedEOF.
func (r *Reader) Next() (data []byte, ts time.Time, err error) {
	rec, err := r.NextRecord()
	return rec.Data, rec.Time, err
}

// NextRecord is Next with the record's original length.
func (r *Reader) NextRecord() (Record, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return Record{}, err // io.EOF only if cleanly at a record boundary
	}
	sec := r.order.Uint32(r.hdr[0:])
	frac := r.order.Uint32(r.hdr[4:])
	n := r.order.Uint32(r.hdr[8:])
	orig := r.order.Uint32(r.hdr[12:])
	if n > MaxRecordSize {
		return Record{}, fmt.Errorf("%w: %d bytes", ErrRecordTooLarge, n)
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	data := r.buf[:n]
	if _, err := io.ReadFull(r.r, data); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Record{}, err
	}
	nsec := int64(frac)
	if !r.nanos {
		nsec *= 1000
	}
	return Record{Data: data, Time: time.Unix(int64(sec), nsec), OrigLen: int(orig)}, nil
}
