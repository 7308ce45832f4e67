// Package transport is the RNIC's protocol engine: RoCEv2 reliable
// connection (RC), unreliable connection (UC) and unreliable datagram (UD)
// transport, as IBTA Volume 1 chapter 9 specifies it, for the QPs of one
// device. It is sans-IO: it never reads a clock, starts a goroutine or
// touches a socket. A driver (internal/nic in real time, sim/nicmodel in
// virtual time) feeds it frames, doorbells and the time, and takes the
// frames it made; NewCore assembles it with the rest of the device (the
// QPC and CQC tables, the ATU, the DMA engines) from one CoreConfig.
//
// The engine has the spec's three parts, each its own type (as rxe's
// rxe_req.c, rxe_resp.c and rxe_comp.c), sharing the engine's services:
// the arbiter, the outbox, the ATU and DMA engines (reached through
// translate, gather and scatter), the bill of the current step, the
// counters and the timer heap.
//
// Outbound flow (Run, one arbiter grant at a time):
//
//	post ─▶ SQ ring ─▶ doorbell (Ring) ─▶ arbiter ─▶ serve(qp)
//	    responder.serveResponses   READ responses and atomic ACKs, in PSN order, first
//	    requester.serveRequests    then new requests and resends, within the QP's window
//	        └─ sendRequest: WQE ─▶ ATU (lkey) ─▶ DMA gather ─▶ headers, ICRC ─▶ outbox
//
// Inbound flow (Receive, one frame at a time):
//
//	frame ─▶ wire.Parse (ICRC, headers) ─▶ QPC lookup ─▶ by opcode:
//	    request  ─▶ responder.responderRecv ─▶ PSN check, ATU (rkey), DMA scatter,
//	                atomics, RQ/SRQ WQE ─▶ CQE; ACK/NAK queued (flushAcks coalesces)
//	    response ─▶ completer.completerRecv ─▶ match to the oldest WQEs, place READ
//	                data (DMA scatter), CQEs in order; NAK/timeout ─▶ requester rewinds
//
// Bursts, for host memory reached with a system call per access (another
// process's: SetGatherBurst, SetPlaceBurst; off by default): the
// requester gathers the payloads of a run of packets of one message with
// one DMA access, and received WRITE, SEND and READ response payloads
// wait to be placed together (placement.go), at the latest before the
// receive batch's ACKs; a fault of a burst's access falls back to packet
// by packet, so errors are reported as without bursts.
//
// Timers (Tick): the retransmission and RNR timers of each QP fire into the
// completer (retransTimeout, rnrTimeout), which rewinds the requester.
//
// The control path (control.go: CreateQP, Modify, Destroy, SRQs, memory
// windows) runs under the driver's lock between steps, never in the middle
// of a packet.
package transport
