package rnic

import (
	"fmt"
	"net"
)

// The port's GID table, laid out as Linux lays out rxe's (and any RoCE
// device's) for a netdev with one address, so that programs and scripts
// written for rxe find the same indexes (perftest's -x 1):
//
//	GID[0]  fe80::<EUI-64>    RoCE v2  the port's link-local GID
//	GID[1]  ::ffff:a.b.c.d    RoCE v2  the port's IP address (AddrGIDIndex)
//
// (an IPv6 address takes index 1 as it is). Traffic goes from the address:
// the link-local GID is listed, as on rxe, but a link bound to one address
// cannot send from another, so an address vector with sgid_index 0 is
// refused with an error that says to use AddrGIDIndex.

// AddrGIDIndex is the index of the GID that is the port's IP address.
const AddrGIDIndex = 1

// gidTableLen is the number of valid entries of the GID table; the
// port's table has room for gidTableSize (gid_tbl_len), the rest empty,
// as a hardware port's table is larger than the addresses it holds.
const (
	gidTableLen  = 2
	gidTableSize = 16
)

// GIDType is the kind of a GID table entry (enum ibv_gid_type).
type GIDType uint8

const (
	GIDTypeIB     GIDType = 0 // IBV_GID_TYPE_IB
	GIDTypeRoCEv1 GIDType = 1 // IBV_GID_TYPE_ROCE_V1: RoCE over Ethernet, no IP header
	GIDTypeRoCEv2 GIDType = 2 // IBV_GID_TYPE_ROCE_V2: RoCE over UDP/IP, the only kind rnic speaks
)

// String returns the type as ibv_devinfo -v prints it.
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", uint8(t))
}

// GIDEntry is one entry of a port's GID table (struct ibv_gid_entry).
type GIDEntry struct {
	Index int     // gid_index
	GID   GID     // gid
	Type  GIDType // gid_type
}

// gidTable builds the table for the port's address GID; hw is the link's
// hardware address if it has one (link/udp on an Ethernet interface).
func gidTable(addr GID, hw net.HardwareAddr) [gidTableLen]GIDEntry {
	return [gidTableLen]GIDEntry{
		{Index: 0, GID: linkLocalGID(addr, hw), Type: GIDTypeRoCEv2},
		{Index: AddrGIDIndex, GID: addr, Type: GIDTypeRoCEv2},
	}
}

// linkLocalGID is the IPv6 link-local address fe80::/64 with the modified
// EUI-64 interface ID (RFC 4291, appendix A) of the MAC address hw, as the
// kernel gives a netdev. A link without one (link/mem, loopback) gets a
// locally administered MAC 02:00:xx:xx:xx:xx made of the address's last
// four bytes, so the GID is stable and differs between ports.
func linkLocalGID(addr GID, hw net.HardwareAddr) GID {
	mac := [6]byte{0x02, 0x00, addr[12], addr[13], addr[14], addr[15]}
	if len(hw) == 6 {
		copy(mac[:], hw)
	}
	g := GID{0: 0xfe, 1: 0x80}
	g[8], g[9], g[10] = mac[0]^0x02, mac[1], mac[2]
	g[11], g[12] = 0xff, 0xfe
	g[13], g[14], g[15] = mac[3], mac[4], mac[5]
	return g
}

// GID returns the port's GID at index (ibv_query_gid): 0 is the
// link-local GID, AddrGIDIndex (1) the port's IP address. The table's
// other entries, up to gid_tbl_len, are empty: an error says so (where
// ibv_query_gid returns the zero GID).
func (d *Device) GID(index int) (GID, error) {
	if index < 0 || index >= gidTableSize {
		return GID{}, fmt.Errorf("rnic: GID index %d out of range [0, %d]", index, gidTableSize-1)
	}
	if index >= gidTableLen {
		return GID{}, fmt.Errorf("rnic: GID index %d is an empty entry of the GID table (the port's GIDs are at 0 and %d)", index, AddrGIDIndex)
	}
	return d.gids[index].GID, nil
}

// GIDType returns the type of the GID at index (ibv_query_gid_type); an
// empty entry has none.
func (d *Device) GIDType(index int) (GIDType, error) {
	if index < 0 || index >= gidTableSize {
		return 0, fmt.Errorf("rnic: GID index %d out of range [0, %d]", index, gidTableSize-1)
	}
	if index >= gidTableLen {
		return 0, fmt.Errorf("rnic: GID index %d is empty", index)
	}
	return d.gids[index].Type, nil
}

// GIDTable returns the port's valid GID entries (ibv_query_gid_table).
func (d *Device) GIDTable() []GIDEntry {
	t := d.gids
	return t[:]
}

// sourceGID returns the GID an address vector sends from, or an error that
// names the problem.
func (d *Device) sourceGID(index uint8) (GID, error) {
	switch {
	case index == 0:
		return GID{}, fmt.Errorf("rnic: sgid_index 0 is the port's link-local GID %v, which this link cannot send from: use GID index %d, the port's address %v",
			d.gids[0].GID, AddrGIDIndex, d.gids[AddrGIDIndex].GID)
	case int(index) >= gidTableSize:
		return GID{}, fmt.Errorf("rnic: sgid_index %d out of range [0, %d]", index, gidTableSize-1)
	case int(index) >= gidTableLen:
		return GID{}, fmt.Errorf("rnic: sgid_index %d is an empty entry of the GID table: use GID index %d, the port's address %v",
			index, AddrGIDIndex, d.gids[AddrGIDIndex].GID)
	}
	return d.gids[index].GID, nil
}
