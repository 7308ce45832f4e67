// Package sim is the discrete-event kernel that runs the NIC model in
// virtual time: a clock in nanoseconds, a queue of future events and one
// seeded random number generator.
//
// # Why a kernel of its own
//
// The protocol engine (internal/transport) is sans-IO: it never reads a
// clock, starts a goroutine or sleeps. Time comes in as an argument
// (Receive(now, …), Run(now, …), Tick(now)) and deadlines go out
// (NextDeadline). In real time a driver arms one timer at the earliest
// deadline; here the driver schedules an event instead, so the same code
// runs as a timing model of a hardware RNIC, as in TigerBeetle's VOPR and
// FoundationDB's simulator.
//
// # Determinism
//
// A simulation is a pure function of its seed and its inputs: the same
// seed and the same calls produce the same sequence of events, byte for
// byte. To keep it so:
//
//   - there are no goroutines and no wall clock inside a simulation;
//   - events due at the same time run in the order they were scheduled
//     (each carries a sequence number), never in map or heap order;
//   - all randomness comes from Sim.Rand, one PCG stream seeded by New.
//     A component that draws from anything else (math/rand's global
//     source, time.Now, map iteration order) breaks replay.
//
// # Cost
//
// Scheduling copies an Event by value into a slab and pushes a 24-byte
// key onto a 4-ary heap; neither allocates once the slices have grown to
// the simulation's peak size. Timers (Timer) are cancelled and moved by
// bumping a generation counter, so the protocol engine's retransmission
// deadline, which moves on every ACK, costs a store rather than a heap
// operation. See BenchmarkEngine for events per second.
package sim
