// Package fabric is the network of the simulator: hosts, each with one
// link to a leaf switch of a topology of output-queued switches (one
// switch, a leaf-spine or a k-ary fat tree), moving frames in virtual
// time driven by a sim.Sim.
//
// # Topology and the path of a frame
//
//	NIC ──Send──▶ host egress queue ─serialize─▶ cable ─propagate─▶ leaf
//	switch ─forward (latency)─▶ output queue of the next hop
//	       ─serialize─▶ cable ─propagate─▶ next switch … ─▶ destination NIC
//
// A switch forwards a frame for a host of another leaf to one of the
// ports on a shortest path towards that leaf, chosen by ECMP: a hash of
// the two hosts and the frame's entropy (the UDP source port, which
// RoCEv2 varies per QP), seeded per switch, so a flow keeps to one path
// and its frames stay in order.
//
// Each of the two queues on the way is an egress port: a FIFO with a byte
// limit (tail drop beyond it) in front of a transmitter that serializes
// frames at line rate with the Ethernet per-frame overheads
// (timing.WireBytes). The switch's output queues also mark ECN-capable
// frames by queue depth (RED-style, the random draws from Sim.Rand). The
// switch is store-and-forward: a frame is forwarded once its last bit has
// arrived.
//
// # Two kinds of port
//
// By default every port is an analytic FIFO. The transmitter and the
// queue occupancy are analytic (timing.Wire):
// enqueueing a frame computes when its last bit leaves and when it reaches
// the far end, and a frame leaves the buffer when its last bit is sent.
// The only events are arrivals, one per frame per hop, and each egress
// keeps at most one arrival event scheduled (for its oldest frame in
// flight), so the event queue holds at most two events per host whatever
// the load. A fabric of two hosts needs no arrival event at the switch:
// each output port has a single input, so the switch forwards a frame as
// it is sent, at its computed arrival time (see Fabric.send).
//
// A switch with a shared buffer, PFC or priority queues schedules its
// ports instead: a port keeps a queue per priority (Frame.Prio, from the
// DSCP) and, when its transmitter frees (one event per frame), sends the
// highest priority that is ready and not paused. Its memory management
// unit holds one buffer for all ports with dynamic thresholds (a queue or
// an ingress may use alpha times what is free), as the shared-buffer
// switches of RoCE fabrics do (HPCC's ns-3 models the same Broadcom MMU):
//
//   - a lossy frame is dropped when its egress queue is over its
//     threshold or the buffer is full;
//   - a lossless frame (a PFC priority) is accounted to the ingress port
//     and priority it came in by; past that ingress's threshold the
//     switch sends a PFC pause back over the link, which stops that
//     priority of the upstream port's transmitter when it arrives, and
//     frames still in flight land in the ingress's headroom. When the
//     ingress drains under its threshold by the resume offset, a resume
//     follows. Upstream queues then fill and pause their own upstream:
//     pauses spread hop by hop towards the senders, and flows that share
//     a paused port with the congested ones wait too (head-of-line
//     blocking).
//
// Counters per port and per priority (PortStats, QueueStats) record
// frames, drops, ECN marks, pauses and resumes sent and received, and the
// time each priority was paused.
//
// # The frame carrier
//
// Frames move as Frame values in ring buffers, never as pointers to
// per-frame allocations. A Frame carries either
//
//   - a real frame: Buf is a *link.Buf holding a whole RoCEv2 packet from
//     the IP header through the ICRC (see package link); Len is its
//     length, the destination comes from its IP header, and ECN marking
//     rewrites its IP header (IPv4 TOS with the header checksum fixed, or
//     IPv6 traffic class; the ICRC masks both, so it stays valid); or
//   - a metadata-only frame: Buf is nil, Len is the length the frame would
//     have (it alone sets serialization time and buffer occupancy), and a
//     small fixed record (Meta) stands in for the headers a model needs;
//     ECN marking sets the ECN field.
//
// Both kinds share every queue, so a simulation can mix real NICs with
// synthetic traffic.
//
// # Ownership
//
// As with link.Link, sending hands the frame (and its Buf) to the fabric,
// and delivery hands it to the receiver. A frame the fabric drops is
// released and counted on the port that dropped it: tail drops on the
// egress port (PortStats.Drops), frames too long, without a route or
// without a receiver on the host (HostStats).
package fabric
