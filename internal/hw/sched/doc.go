// Package sched models the doorbell and arbiter of an RNIC: the scheduling
// centre that decides which queue pair the protocol engine serves next and
// how much it may send in one turn.
//
// # The hardware
//
// When the host posts a work request it writes the WQE into the send queue
// in host memory and rings the QP's doorbell (a write to a doorbell page).
// The NIC does not serve QPs in doorbell order: a doorbell only marks the QP
// ready, and repeated doorbells for a ready QP are absorbed, as a hardware
// doorbell FIFO merges rings of one QP. An arbiter then picks among the
// ready QPs:
//
//   - strict priority between levels (traffic classes or service levels):
//     a level is served only while every higher level (lower number) is empty;
//   - inside one level, round robin weighted by packets (WRR) or deficit
//     round robin weighted by bytes (DWRR, Shreedhar and Varghese 1996);
//   - a burst limit per turn, so that a QP with a huge message cannot hold
//     the engine: it yields after BurstLimit packets and waits its turn.
//
// Per-QP rate limiting for congestion control (DCQCN and friends) plugs in
// through Gate: a limiter that can refuse or shrink a turn.
//
// # A turn
//
//	Ring(q) ─► ready ─► Next() ─► q, Grant{Packets, Bytes} ─► engine sends ─► Done(q, packets, bytes, more)
//	                ▲                                                                  │
//	                └──────────── more, or rung while in service ◄─────────────────────┘
//
// The engine sends at most Grant.Packets packets and starts a packet only
// while it has sent fewer than Grant.Bytes bytes this turn (so the last
// packet may overshoot the grant; DWRR carries the overshoot into the next
// round as a negative deficit). It then reports what it sent with Done.
//
// # Ready lists
//
// Per-queue state is 16 bytes in a table indexed by the queue's index. The
// table grows to the highest index used (Config.Queues sizes it up front),
// and its zero value is an idle queue at level 0 with weight 1, so an idle
// QP costs 16 bytes (256 KiB for 16,384 QPs) and the engine should map QPNs
// to dense indices. The ready lists are intrusive doubly linked lists
// threaded through that table by index, so Ring, Next, Done and Remove are
// O(1) and never allocate once the table holds the index.
//
// Each level has two lists, the current round and the next round. Next
// takes the head of the current list; when it is empty the lists swap and a
// new round starts. A queue that ends a turn with credit left (it stopped at
// the burst limit) goes to the tail of the current round, so a heavy queue's
// round is cut into bursts interleaved with the other queues' turns; a queue
// that used its credit is topped up (deficit += Quantum×weight, or
// BurstLimit×weight packets in WRR) and goes to the next round. A newly rung
// queue joins the next round too, exactly as it would join the tail of a
// classic DRR active list. A bitmap of non-empty levels gives the highest
// ready level in one instruction.
//
// This arrangement, rather than a plain DRR list, is what keeps the burst
// limit and the weights compatible: with one list and a burst limit, every
// queue would get one burst per cycle whatever its weight.
//
// # Ownership
//
// An Arbiter is owned by one NIC engine and is not safe for concurrent use.
// It never reads a clock, starts a goroutine or takes a lock: doorbells,
// grants and reports come in and go out as calls, so the same code runs in
// real time and in the simulator's virtual time.
package sched
