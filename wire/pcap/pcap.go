// Package pcap reads and writes classic libpcap capture files, the format
// tcpdump, Wireshark and tshark all read, so that frames a NIC sends or
// receives can be inspected with standard tools and so that real captures
// can drive tests.
//
// A file is a 24-byte global header followed by records, each a 16-byte
// header and the captured bytes:
//
//	global header: magic, version 2.4, thiszone, sigfigs, snaplen, link type
//	record header: seconds, micro- or nanoseconds, captured length, original length
//
// The magic number gives the byte order (files are written in the writer's
// native order) and the timestamp resolution (0xa1b2c3d4 microseconds,
// 0xa1b23c4d nanoseconds). pcapng is not supported; convert with
// "tshark -F pcap".
package pcap

import "errors"

// LinkType is the link-layer header type of a capture (the LINKTYPE_
// values of tcpdump.org): what comes before the IP header in each record.
type LinkType uint32

// Link types this package understands.
const (
	// LinkTypeEthernet: IEEE 802.3 Ethernet, optionally 802.1Q tagged.
	LinkTypeEthernet LinkType = 1
	// LinkTypeRaw: no link header; each record starts at the IP header.
	// It is the natural type for a NIC's frames.
	LinkTypeRaw LinkType = 101
	// LinkTypeLinuxSLL: Linux "cooked" capture (tcpdump -i any).
	LinkTypeLinuxSLL LinkType = 113
)

// String returns the link type's tcpdump name.
func (t LinkType) String() string {
	switch t {
	case LinkTypeEthernet:
		return "ETHERNET"
	case LinkTypeRaw:
		return "RAW"
	case LinkTypeLinuxSLL:
		return "LINUX_SLL"
	}
	return "LINKTYPE(" + itoa(uint32(t)) + ")"
}

// Errors returned by Reader and Writer.
var (
	// ErrNotPcap: the file does not start with a classic pcap magic number.
	ErrNotPcap = errors.New("pcap: not a classic pcap file")
	// ErrRecordTooLarge: a record claims more bytes than MaxRecordSize,
	// which only a corrupt file does.
	ErrRecordTooLarge = errors.New("pcap: record too large")
	// ErrTimestamp: Writer cannot represent a timestamp before 1970 or
	// after 2106.
	ErrTimestamp = errors.New("pcap: timestamp out of range")
)

// MaxRecordSize bounds the captured length of one record, so that a
// corrupt length cannot make the reader allocate gigabytes. It is the
// largest snapshot length tcpdump uses.
const MaxRecordSize = 262144

// Magic numbers of the global header, as read in the writer's byte order.
const (
	magicMicros = 0xa1b2c3d4
	magicNanos  = 0xa1b23c4d
)

const (
	globalHeaderSize = 24
	recordHeaderSize = 16
	versionMajor     = 2
	versionMinor     = 4
)

func itoa(v uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
