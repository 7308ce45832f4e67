// Package udp is the link that carries RoCEv2 over kernel UDP sockets
// (port 4791, IPv4 and IPv6), so that a software NIC talks to Linux
// Soft-RoCE, to hardware RNICs and to other rnic processes. It plays the
// role of wireguard-go's conn.StdNetBind: batched system calls
// (sendmmsg, recvmmsg), UDP GSO and GRO where they are correct, and typed
// fallbacks (FeatureError) where they are not available.
//
// # Frames and datagrams
//
// The NIC builds whole frames, IP header to ICRC (see package link). The
// kernel writes the IP and UDP headers itself, so the link sends only the
// UDP payload (BTH onwards) of each frame, to the frame's IP destination
// and UDP destination port, from one unconnected socket bound to
// Options.Addr and Options.Port. The ICRC covers header fields the kernel
// writes, so Send drops (Stats.Mismatch) every frame whose headers differ
// from what the kernel will write: source address and port (the NIC builds
// every frame with SourcePort, link.SourcePorter), IPv4 options, flags and
// ID.
//
// # The IPv4 ID
//
// The socket sets IP_PMTUDISC_DO (DF). Linux then writes IPv4 ID 0:
// ip_select_ident_segs gives an unconnected socket's DF datagrams ID 0,
// where a connected socket would get a per-socket counter and a non-DF
// datagram a hashed ID. The NIC builds frames with ID 0 and DF, so the
// ICRC it computed is the ICRC of the datagram on the wire.
// TestKernelIPv4Header captures what the kernel sends, through a raw
// socket of its own, for one and for 64 frames per sendmmsg, with and
// without a TOS control message: every datagram has ID 0 and DF, equals
// the frame up to the masked fields, and passes wire.CheckICRC.
//
// # Fields the ICRC masks
//
// The ICRC masks the TTL or hop limit, the traffic class and the UDP
// checksum, so the link could leave them to the kernel; it does not,
// because a capture of the NIC's frames (link/sniff, rnic perf --pcap)
// must be what the wire carried. Each datagram gets the frame's traffic
// class (IP_TOS, IPV6_TCLASS) and its TTL or hop limit (IP_TTL,
// IPV6_HOPLIMIT) as control messages; IPv4 goes without a UDP checksum
// (SO_NO_CHECK: 0, as the frame says and as rxe sends), and IPv6 without
// automatic flow labels. An IPv6 socket must compute the UDP checksum (and
// GSO needs it): the link says so through link.WireWriter, and a capture
// computes it too. On receive, the rebuilt headers take the TTL or hop
// limit and the traffic class the kernel reports. TestKernelIPv4Header,
// TestKernelIPv6Header and TestCaptureIsWire compare captures with what a
// raw socket sees.
//
// # GSO: IPv6 only
//
// UDP_SEGMENT lets one sendmsg carry a run of equal-size frames to one
// destination, which the kernel cuts into datagrams late (or on loopback,
// at the receiving socket). For IPv4 it cannot be used: inet_gso_segment
// gives the segments IDs 0, 1, 2, ... (only TCP has FIXEDID), and the ICRC
// covers the ID, so every segment but the first would fail its ICRC at the
// peer. TestGSOIPv4IDs measures exactly that, with a BPF filter on the
// receiving socket that reports each segment's ID (raw sockets on
// loopback see the datagram before segmentation). IPv6 has no ID, and
// each segment gets its own payload length and UDP length, which is all
// the ICRC covers, so IPv6 links use GSO by default (Options.GSO). A GSO
// send that the kernel refuses with EIO (a device without checksum
// offload) turns GSO off and the frames go again one per datagram
// (Stats.GSOFallbacks, Features().GSOErr).
//
// # Receiving, and what the ICRC can prove
//
// A UDP socket returns the payload and the sender's address and port, not
// the IP header. The link writes IP and UDP headers in front of the
// payload (the receive buffers leave room for them) so the NIC gets a
// whole frame:
//
//   - IPv6: every field the ICRC covers (payload length, next header,
//     addresses, UDP ports and length) is known, and the fields it masks
//     (traffic class, flow label, hop limit, checksum) do not matter, so
//     the rebuilt frame is, for the ICRC, the frame that was sent. IPv6
//     frames are delivered unflagged and the NIC verifies their ICRC
//     without any privilege. (RoCEv2 uses no extension headers; rxe could
//     not compute the ICRC of a packet with one either.)
//   - IPv4: the ID and the flags are not reported. The rebuilt header says
//     ID 0 and DF, which is right for a link/udp peer, but rxe sends a
//     random ID, so such frames carry link.FlagIPRebuilt and the NIC counts
//     them as unverified (rx_icrc_unverified) instead of checking them.
//
// Raw receive (Options.Raw, IPv4) fixes that when the process may open a
// raw socket (CAP_NET_RAW): an AF_INET SOCK_RAW IPPROTO_UDP socket, bound
// to Addr and filtered by a classic BPF program to unfragmented datagrams
// to Addr:Port, sees each datagram with the IP header its sender's kernel
// wrote. Those frames go to the NIC unflagged and their ICRC is verified.
// The UDP socket stays bound, so the kernel does not answer peers with
// ICMP port unreachable, but a drop-all filter keeps it from queueing the
// same datagrams a second time. RawAuto falls back to rebuilt headers
// without the privilege (Features().RawErr says why); RawOn makes it an
// error. ICRCVerified tells which case a link is in.
//
// The receive buffers are link.MaxFrame bytes, the largest RoCE frame,
// whatever the MTU: a larger datagram is not RoCE and is dropped
// (RxOversize). With GRO (Options.GRO, by default on for IPv6, never with
// raw receive) the kernel may merge a flow's datagrams into one
// super-datagram of up to 64 KiB with a UDP_GRO control message giving
// the segment size; the link reads those into 64 KiB buffers of its own
// and copies each segment into its own link.Buf, because a link.Buf cannot
// share memory with another. That copy is the price of GRO; the system
// calls and kernel traversals it saves are worth more (see the
// benchmarks). The traffic class (ECN) comes from IP_RECVTOS or
// IPV6_RECVTCLASS into the rebuilt header, and the kernel's drop count
// from SO_RXQ_OVFL (Stats.KernelDrops).
//
// # Concurrency and ownership
//
// Send may run in several goroutines at once; each takes a scratch vector
// from a pool, so the steady state allocates nothing. It waits for room
// in the local socket buffer, never for the receiver. One goroutine per
// link (routineReceive) reads the socket through the runtime poller and
// hands each recvmmsg batch to the dispatcher in one Deliver call; Close
// closes the sockets, which wakes it, and waits for it to return its
// buffers, so no Deliver starts after Close returns. Every frame handed
// to Send is released exactly once and counted in exactly one Stats field
// (see Stats for the balance).
//
// A NIC's receive queue is bounded (a link.Receiver): the link offers it
// each batch with TryDeliver, keeps what it had no room for, and stops
// reading the socket until the NIC calls Drained, so that the kernel's
// socket buffer (8 MiB asked for; root may force it past
// net.core.rmem_max) holds the frames that follow instead of the NIC
// dropping them. UDP has no backpressure: a sender that outruns its
// receiver for long enough overflows that buffer, and the kernel's drops
// are counted (KernelDrops). A busy-polling NIC drives the same ring
// itself (Poll, a link.Poller), without blocking.
//
// # Platforms
//
// Everything above is Linux (the _linux.go files). Elsewhere a portable
// fallback (sock_default.go) sends and receives one datagram per system
// call through net.UDPConn, with no raw receive, GSO or GRO, and no DF
// control: its IPv4 ID is the kernel's choice, so a peer that verifies
// the ICRC rejects its IPv4 frames.
package udp
