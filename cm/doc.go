// Package cm is RDMA CM for rnic devices: the InfiniBand connection
// manager (IBTA Vol. 1 chapter 12) on QP1 over RoCEv2, with rdma_cm's
// conventions (service IDs from ports, its header in the REQ's private
// data), and a Go API to connect with it: Dial and Listen give RC QPs
// connected to a peer's, DialUD and ListenUD UD endpoints that know the
// peer's QP. The peer may be another rnic device, in this process or
// another, or Linux's rdma_cm over rxe or a hardware RNIC (rping and
// udaddy interoperate: scripts/interop.sh --cm).
//
// Where it sits: a connection manager is a consumer of the NIC, not a
// part of it, as the kernel's ib_cm is. Per device, an agent (agent.go)
// owns QP1, the general services interface (rnic.GSI: a UD QP numbered 1
// with Q_Key 0x80010000), posts receive buffers for MADs, sends MADs
// with address handles to the peers' GIDs, and runs one timer. The
// protocol itself is the machine (machine.go, receive.go): sans-IO, it
// takes received MADs (wire/mad parses them), consumer calls and the
// clock, and gives MADs to send and events to the connections' owners.
//
//	peer ─RoCEv2 UD─▶ QP1 ─▶ agent (GRH: source GID) ─▶ machine.receive ─▶ match ─▶ transitions[state][input]
//	Dial/Accept/Close ─▶ agent.do ─▶ machine ─▶ MAD ─▶ agent.send ─▶ QP1 ─▶ peer
//	timer ─▶ machine.tick ─▶ resend, fail (unreachable) or leave the time wait
//
// A connection's states are the spec's and Linux's (State); what each
// state does with each message, timeout and consumer call is one table,
// transitions (state.go). Timeouts and retries are rdma_cm's over RoCE
// on Linux 6.1: a REQ waits 6.1 s for its answer and is sent 16 times
// (about 98 s before Dial fails with ErrUnreachable), a REP 4.1 s, 16
// times; an MRA (sent for a REQ that comes again before the consumer
// accepted) asks for 68.7 s; the time wait is 2 s. Every MAD is untrusted
// input: a malformed one, one for no connection, one from another host
// than a connection's peer or naming the wrong IDs or QP is dropped and
// counted (Counters, CountersOf), never ending a connection it does not
// own; a REQ for a port nobody listens on is answered with REJ reason 8
// and a DREQ for an unknown connection with a DREP, as Linux answers.
//
// A device answers CM messages once its agent runs: Start, Dial, Listen,
// DialUD or ListenUD start it; it runs until the device closes. QP1 is
// not modelled in virtual time: on a device of a rnic.VirtualClock these
// fail, saying so.
//
// The NIC processes of the host (rnic nic) run the same machine for
// their programs: ServeHost serves rdma_cm ids on the NIC's CM socket to
// rnic's librdmacm (provider/rdmacm), which readies the programs' QPs
// itself as Linux's librdmacm does (docs/verbs.md, "RDMA CM").
package cm
