// Package sniff records the frames a link carries, as tcpdump does on a
// host's interface and gVisor's link/sniffer does for netstack: Link wraps
// any link.Link and shows every frame it sends and receives to a pcap
// file (which tshark and Wireshark decode as RoCEv2 on UDP 4791), to a
// callback, or both. Summary turns a frame into one tshark-like line.
//
// # Where frames are seen
//
//	NIC ──Send──▶ sniff.Link ──Send──▶ inner link ──▶ wire
//	NIC ◀─Deliver── sniff.Link ◀─Deliver── inner link ◀── wire
//
// A frame is recorded on its way through, before the buffer is handed on:
// Send and Deliver pass buffer ownership (see link.Link), so once the
// frame has gone to the inner link or to the NIC it may already be
// released and reused, and the Link never touches it again. Hence a sent
// frame is recorded even if the wire then loses it, as tcpdump records
// what leaves an interface.
//
// # What the wire carried
//
// The NIC builds whole frames, but a link on kernel sockets leaves some
// header fields to the kernel (link/udp: the IPv6 UDP checksum). Such a
// link says so by implementing link.WireWriter, and the Link records a
// copy of each frame with those fields as the wire carries them, so that
// a capture shows what tcpdump on the interface would have shown.
//
// With neither a pcap writer nor a callback configured, the Link only
// forwards: Send calls the inner Send and Attach hands the NIC's
// dispatcher straight to the inner link, so nothing is added per frame.
package sniff
