package pcap

import "encoding/binary"

const (
	ethernetHeaderSize = 14
	sllHeaderSize      = 16

	etherTypeIPv4  = 0x0800
	etherTypeIPv6  = 0x86DD
	etherTypeVLAN  = 0x8100 // IEEE 802.1Q
	etherTypeQinQ  = 0x88A8 // IEEE 802.1ad
	vlanHeaderSize = 4
)

// IPPacket strips the link-layer framing of a record of the given link type
// and returns the IP packet it carries (IPv4 or IPv6), or false if the
// record carries something else (ARP, an unknown link type, a runt).
// Ethernet may carry 802.1Q/802.1ad VLAN tags. Bytes after the IP packet,
// such as Ethernet minimum-frame padding, are cut off using the IP length
// field when it fits in the record; a record whose IP length claims more
// than it holds is returned whole, for the IP parser to reject.
func IPPacket(linkType LinkType, data []byte) ([]byte, bool) {
	var etherType uint16
	switch linkType {
	case LinkTypeEthernet:
		if len(data) < ethernetHeaderSize {
			return nil, false
		}
		etherType, data = binary.BigEndian.Uint16(data[12:]), data[ethernetHeaderSize:]
		for etherType == etherTypeVLAN || etherType == etherTypeQinQ {
			if len(data) < vlanHeaderSize {
				return nil, false
			}
			etherType, data = binary.BigEndian.Uint16(data[2:]), data[vlanHeaderSize:]
		}
	case LinkTypeLinuxSLL:
		if len(data) < sllHeaderSize {
			return nil, false
		}
		etherType, data = binary.BigEndian.Uint16(data[14:]), data[sllHeaderSize:]
	case LinkTypeRaw:
		if len(data) == 0 {
			return nil, false
		}
		switch data[0] >> 4 {
		case 4:
			etherType = etherTypeIPv4
		case 6:
			etherType = etherTypeIPv6
		}
	}
	switch etherType {
	case etherTypeIPv4:
		if len(data) < 20 || data[0]>>4 != 4 {
			return nil, false
		}
		if n := int(binary.BigEndian.Uint16(data[2:])); n >= 20 && n <= len(data) {
			data = data[:n]
		}
		return data, true
	case etherTypeIPv6:
		if len(data) < 40 || data[0]>>4 != 6 {
			return nil, false
		}
		if n := 40 + int(binary.BigEndian.Uint16(data[4:])); n <= len(data) {
			data = data[:n]
		}
		return data, true
	}
	return nil, false
}
