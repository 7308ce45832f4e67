package transport

// requester is the send side of the engine's QPs (IBTA §9.7.1, rxe's
// rxe_req.c): it turns posted WQEs into request packets within each QP's
// window, resends from the oldest unacknowledged PSN when the completer
// asks it to, and keeps the device-wide budget of READ response packets
// outstanding (Config.MaxReadPSNs), which shrinks after READ timeouts.
type requester struct {
	e *Engine

	// The read budget: response PSNs outstanding, what may be outstanding
	// now (MaxReadPSNs, less after timeouts), and the QPs waiting for room.
	readPSNs    uint32
	readBudget  uint32
	readWaiters []*QP

	// A burst's packets and their payloads (sendBurst's scratch).
	burst [MaxGatherBurst]request
	dsts  [MaxGatherBurst][]byte
}

// responder is the receive side for requests (IBTA §9.7.3-§9.7.5, rxe's
// rxe_resp.c): it checks each request's PSN, rights and resources,
// places SEND and WRITE payloads, executes atomics, queues READ and atomic
// responses in PSN order, and sends ACKs (coalesced) and NAKs.
type responder struct {
	e *Engine

	ackList []*QP // QPs with an ACK to send after this batch

	// A burst's READ responses and their payloads (sendReadBurst's).
	burst [MaxGatherBurst]readResponse
	dsts  [MaxGatherBurst][]byte
}

// completer is the receive side for responses (IBTA §9.7.5.1, rxe's
// rxe_comp.c): it matches ACKs, NAKs and READ/atomic responses to the
// oldest outstanding WQEs, places READ data (resuming past gaps), writes
// completions in order, and on a timeout or NAK tells the requester where
// to resend from.
type completer struct {
	e *Engine
	// orig holds an atomic's original value on its way to the requester's
	// buffer: an array on the stack would escape to the heap through the
	// scatter, an allocation per atomic.
	orig [8]byte
}
