// Package perftest runs the benchmarks of perftest (linux-rdma/perftest,
// ib_write_bw and friends) on rnic devices, compatible on the wire with
// the real programs: the same out-of-band exchange over TCP, the same RDMA
// operations, the same measurements and the same output. An rnic server
// can be driven by a real ib_write_bw client and the reverse.
//
// # Tests
//
//	write_bw read_bw send_bw atomic_bw     bandwidth (Test.Kind() == BW)
//	write_lat read_lat send_lat            latency   (Test.Kind() == LAT)
//
// Each runs as a server (Config.Peer empty: it listens on TCP port 18515)
// or as a client (Config.Peer names the server). The flags and defaults
// are perftest's (Config mirrors struct perftest_parameters); the
// dependencies between them (tx depth capped at the iterations, CQ
// moderation capped at the tx depth, ...) are applied as perftest's
// force_dependecies does, and a flag perftest refuses is refused with its
// reason.
//
// As in perftest, the side that connects (and writes first in each
// exchange step) and the side that sends the test's traffic are two
// things: --reversed (Config.Reversed, on both sides) makes the server
// send. -b (Duplex) makes both send, with perftest's extra
// synchronization and report exchange, each side printing the sum. The
// two sides do not tell each other -s, -a, -b, -l or --reversed: both
// must be given the same.
//
// # Out-of-band exchange
//
// perftest has no framing: in every step the client writes first and then
// reads the same number of bytes, the server reads first and then writes
// (ctx_xchg_data, ctx_hand_shake). Conn implements the steps:
//
//  1. version           16 bytes, "6.06" NUL-padded; a peer older than 5.70 is refused
//  2. cycle buffer       4 bytes, big-endian (the larger of both sides is used)
//  3. cache line size    4 bytes, big-endian (the larger is used)
//  4. MTU                2 bytes, "%d\0" of enum ibv_mtu (the smaller is used)
//  5. QP info          108 bytes per message (Dest), repeated by the tests' scripts
//  6. bw report         5 × 8 bytes (bw tests only), big-endian
//  7. close             one more QP info, then "done\0" each way
//
// Which QP-info rounds a test does, and with how many messages (one per QP
// in some rounds, one in others), follows each program's main(): see
// script.go.
//
// # Measurements
//
// Time stamps are time.Now on the monotonic clock, in nanoseconds, taken
// where perftest reads its cycle counter; the reports are computed with
// perftest's formulas (print_report_bw, print_report_lat), with one cycle
// being one nanosecond.
//
// # Workers
//
// RunWorker runs one application thread's part of a test on QPs its
// caller created and connected: the same loops (runBW, runWriteLat, ...),
// without the exchange and the report. rnic sim runs its hosts' threads
// as Workers (sim/perf), so the seven workloads exist once for both
// clocks. An Observer sees each post and each completed operation on the
// clock's time; WorkerConfig's additions (random offsets, one remote
// word, a stop time, a pace per QP, a receive poster at a rate) are what
// the simulator's tenants need and perftest has no flag for.
//
// # Devices
//
// Config.Open opens the rnic device that carries the traffic for a local
// address: the caller decides the link (link/mem in tests, UDP sockets on
// real networks), which is the only thing that differs between them.
package perftest
