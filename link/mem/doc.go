// Package mem is the in-process link: it connects software NICs that live
// in one process, with seeded, deterministic fault injection. It plays the
// role of gVisor's link/pipe and wireguard-go's conn/bindtest, and its fault
// options follow TigerBeetle's packet simulator.
//
// # Topology
//
// A Switch connects any number of Ports; each Port is one NIC's link.Link.
// A frame goes to the port whose address equals the frame's IP destination
// (IPv4 bytes 16..19, IPv6 bytes 24..39). Addresses are normalized with
// netip.Addr.Unmap, so a port given an IPv4-mapped IPv6 address receives
// plain IPv4 frames and the reverse. Pipe is the common two-NIC case: a
// private switch with two ports.
//
// # Outbound flow
//
// Everything happens in the sender's Send, in this order:
//
//  1. Closed check: Send on a closed port releases every frame (ClosedDrops).
//  2. Fault decisions (only if the port has faults), per frame: loss,
//     corruption, duplication, then the frame's timing (jitter, reorder)
//     and, for a duplicate, the copy's timing. A frame longer than the MTU
//     skips them, drawing nothing, and is dropped in step 4.
//  3. Scheduling: a frame whose delay is zero is forwarded at once, inside
//     Send; others go onto the port's delay line, a time-ordered queue run
//     by one goroutine per port (started on the first delayed frame,
//     stopped by Close). Frames due at the same time keep send order.
//  4. Routing, at forwarding time (so a delayed frame meets the switch as
//     it is when the frame arrives): frames longer than the MTU are dropped
//     (Oversize), and so are frames whose destination has no port
//     (NoRoute); consecutive frames for the same destination are handed
//     over in one Dispatcher.Deliver call, as a sub-slice of the batch
//     being forwarded, so the no-fault path neither copies nor allocates.
//  5. Backpressure: a NIC's receive queue is bounded (a link.Receiver),
//     and it takes only what fits (TryDeliver). By default the switch is
//     lossless, as a fabric with PFC: what the NIC has no room for waits
//     in the receiving port's ingress queue, in order, until the NIC calls
//     Drained. Send never blocks on it, so NICs sending to each other
//     cannot deadlock; instead each port counts its frames that wait
//     (Backlog, a link.Backlogger), the sending NIC's arbiter holds back
//     new requests (and, when worse, READ responses) while that is high,
//     and the switch wakes the NIC (link.Waker) when it has fallen to
//     link.ResumeBacklog. A port made WithBuffer(n) is lossy: at most n of
//     its frames wait and the rest are dropped (Overflow), as a switch
//     without PFC drops, and it never pauses its NIC.
//
// # Fault model and determinism
//
// Faults apply to the frames a port sends (egress). Each port draws its
// decisions from its own math/rand/v2 PCG seeded with (Faults.Seed, a hash
// of the port's address), so two ports with the same Seed make different
// decisions. Each fault that is on draws once per frame, in the order of
// step 2 (jitter draws its extra delay; corruption draws a second number,
// the bit to flip, when it hits); a fault that is off, and an oversize
// frame, draw nothing. Hence the sequence of decisions depends only on the
// Faults and on the sequence of frames sent on the port: the same seed and
// the same frames drop, corrupt, duplicate and hold back the same frames.
// SetFaults re-seeds, restarting the sequence. With several goroutines sending on one port the sequence of
// frames is the order in which they take the port's lock, which the
// scheduler decides; single-sender tests are exactly reproducible.
//
// Delay, jitter and reorder hold frames in real time (time.Now on the
// monotonic clock), so which frames are delayed by how much is
// deterministic but the interleaving with other ports' traffic is not;
// link/sim is the virtual-time link for exact timing. Inside a
// testing/synctest bubble (ports made inside it) the delay line runs on the
// bubble's clock, so delays are exact and delivery order reproducible; this
// package's timing tests work that way.
//
// Corruption flips one bit of the UDP payload, from the BTH through the
// ICRC, so that the receiver's ICRC check is what catches it. It never
// touches the IP or UDP headers: a flipped address or port would misroute
// the frame or have it dropped before the ICRC is checked, testing routing
// instead of integrity (and the ICRC masks several IP fields anyway, so a
// flip there might go unnoticed by design).
//
// # Ownership and concurrency
//
// Send takes ownership of every buffer; each one is either delivered (the
// receiving NIC then owns it) or released by the port and counted in
// exactly one drop counter, so for a quiescent set of ports
//
//	Σ TxFrames + Σ Duplicated = Σ RxFrames + Σ (Dropped + Oversize +
//	                            NoRoute + Unattached + ClosedDrops +
//	                            Overflow + Waiting)
//
// where drops are counted on the sending port, because the sender is the
// one that knows why its frame did not arrive.
//
// Send may be called concurrently from several goroutines. No lock is held
// while Deliver runs, so a dispatcher may call Send from inside Deliver.
// Deliver into one dispatcher may run concurrently (from several senders
// and from the delay line); a NIC's dispatcher queues and returns, and must
// be safe for that. Close waits for Deliver calls into its port that are in
// flight, so it must not be called from inside its own dispatcher.
package mem
