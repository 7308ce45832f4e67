package cm

import "fmt"

// State is a connection's state in the communication manager (IBTA Vol. 1
// §12.9.6, the kernel's enum ib_cm_state). The active side (Dial) and the
// passive side (a Listener's request) walk different halves:
//
//	active:   Idle ─REQ▶ ReqSent ─MRA◀▶ MRAReqRcvd
//	          ReqSent|MRAReqRcvd ─◀REP, RTU▶─ Established
//	          (a consumer that readies its QP itself: ─◀REP─ RepRcvd ─accept, RTU▶─ Established)
//	passive:  (REQ) ReqRcvd ─◀dup REQ, MRA▶─ MRAReqSent
//	          ReqRcvd|MRAReqSent ─accept, REP▶─ RepSent ─◀RTU─ Established
//	both:     Established ─DREQ▶ DREQSent ─◀DREP─ TimeWait ─timer─ Idle
//	          Established ─◀DREQ─ DREQRcvd ─disconnect, DREP▶─ TimeWait
//	          any live state ─REJ (either way) or retries exhausted─ Idle
//	SIDR:     Idle ─SIDR_REQ▶ SIDRReqSent ─◀SIDR_REP─ Idle
//	          (SIDR_REQ) SIDRReqRcvd ─SIDR_REP▶─ Idle
//
// What each state does with each message and timeout is the table
// transitions, below; a pair the table lacks is a MAD the state does not
// take: it is dropped and counted (cm_rx_dropped).
type State uint8

const (
	Idle        State = iota // no connection (before, or after its end)
	ReqSent                  // active: REQ sent, waiting for REP, MRA or REJ
	MRAReqRcvd               // active: the peer acknowledged the REQ with MRA; waiting longer
	ReqRcvd                  // passive: REQ received, the consumer has not answered
	MRAReqSent               // passive: a duplicate REQ came before the answer; MRA sent
	RepSent                  // passive: REP sent, waiting for RTU
	RepRcvd                  // active: REP received, the consumer readies its QP (then RTU)
	Established              // connected: the QPs are in RTS
	DREQSent                 // DREQ sent, waiting for DREP
	DREQRcvd                 // DREQ received, the consumer has not disconnected (then DREP)
	TimeWait                 // disconnected; the QP numbers rest before reuse
	SIDRReqSent              // UD: SIDR_REQ sent, waiting for SIDR_REP
	SIDRReqRcvd              // UD: SIDR_REQ received, the consumer has not answered
	numStates
)

var stateNames = [numStates]string{
	Idle: "IDLE", ReqSent: "REQ_SENT", MRAReqRcvd: "MRA_REQ_RCVD", ReqRcvd: "REQ_RCVD",
	MRAReqSent: "MRA_REQ_SENT", RepSent: "REP_SENT", RepRcvd: "REP_RCVD", Established: "ESTABLISHED",
	DREQSent: "DREQ_SENT", DREQRcvd: "DREQ_RCVD", TimeWait: "TIMEWAIT", SIDRReqSent: "SIDR_REQ_SENT", SIDRReqRcvd: "SIDR_REQ_RCVD",
}

// String returns the state's name as the kernel's ib_cm names it.
func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// input is what moves a connection: a message received for it (matched
// by its communication IDs and source), its timer, or its consumer.
type input uint8

const (
	inREQ        input = iota // a duplicate REQ (a new REQ makes a connection, it does not move one)
	inMRA                     // MRA of our REQ
	inREJ                     //
	inREP                     //
	inRTU                     //
	inDREQ                    //
	inDREP                    //
	inSIDRREP                 //
	inTimeout                 // the retransmission or time-wait timer
	inAccept                  // the consumer accepts a REQ (sends REP) or SIDR_REQ (SIDR_REP)
	inReject                  // the consumer rejects a REQ or SIDR_REQ
	inDisconnect              // the consumer disconnects (sends DREQ)
	inCommEst                 // the consumer saw a packet on the QP before the RTU (rdma_notify)
	numInputs
)

var inputNames = [numInputs]string{"REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP", "SIDR_REP", "timeout", "accept", "reject", "disconnect", "comm_est"}

func (i input) String() string {
	if i < numInputs {
		return inputNames[i]
	}
	return fmt.Sprintf("input(%d)", uint8(i))
}

// handler does what state s does with an input, and returns the next
// state (the table's rows say which states each handler is for).
type handler func(m *machine, c *conn, ev *event) State

// transitions is the connection state machine: for each state, what each
// input does (the behaviour of Linux's ib_cm where the spec leaves a
// choice, so that either side may be Linux). A nil entry drops the input:
// a message is counted in cm_rx_dropped (a duplicate in
// cm_rx_duplicates), a consumer call returns ErrState.
var transitions = [numStates][numInputs]handler{
	ReqSent: {
		inMRA: (*machine).mraReceived, inREJ: (*machine).rejected, inREP: (*machine).repReceived,
		inTimeout: (*machine).resendOrFail, inDisconnect: (*machine).abandon,
	},
	MRAReqRcvd: {
		inREJ: (*machine).rejected, inREP: (*machine).repReceived,
		inTimeout: (*machine).resendOrFail, inDisconnect: (*machine).abandon,
	},
	ReqRcvd: {
		inREQ: (*machine).sendMRA, inREJ: (*machine).rejected,
		inAccept: (*machine).sendREP, inReject: (*machine).sendREJ, inDisconnect: (*machine).sendREJ,
	},
	MRAReqSent: {
		inREQ: (*machine).resendMRA, inREJ: (*machine).rejected,
		inAccept: (*machine).sendREP, inReject: (*machine).sendREJ, inDisconnect: (*machine).sendREJ,
	},
	RepSent: {
		inREQ: (*machine).duplicate, inREJ: (*machine).rejected, inRTU: (*machine).rtuReceived,
		inDREQ: (*machine).dreqBeforeRTU, inTimeout: (*machine).resendOrFail,
		inReject: (*machine).sendREJ, inDisconnect: (*machine).sendREJ, inCommEst: (*machine).commEst,
	},
	RepRcvd: {
		inREP: (*machine).duplicate, inREJ: (*machine).rejected, inAccept: (*machine).sendRTU,
		inReject: (*machine).sendREJ, inDisconnect: (*machine).sendREJ,
	},
	Established: {
		inREQ: (*machine).duplicate, inREP: (*machine).resendRTU, inRTU: (*machine).duplicate,
		inREJ: (*machine).rejectedLate, inDREQ: (*machine).dreqReceived, inDisconnect: (*machine).sendDREQ,
		inCommEst: (*machine).stay,
	},
	DREQSent: {
		inREP: (*machine).duplicate, inREJ: (*machine).rejectedLate, inDREQ: (*machine).dreqReceived,
		inDREP: (*machine).drepReceived, inTimeout: (*machine).resendOrTimeWait, inDisconnect: (*machine).stay,
	},
	DREQRcvd: {
		inDREQ: (*machine).duplicate, inREJ: (*machine).rejectedLate, inDisconnect: (*machine).sendDREP,
	},
	TimeWait: {
		inDREQ: (*machine).resendDREP, inREP: (*machine).duplicate, inTimeout: (*machine).timeWaitExit,
		inDisconnect: (*machine).stay,
	},
	SIDRReqSent: {
		inSIDRREP: (*machine).sidrRepReceived, inTimeout: (*machine).resendOrFail, inDisconnect: (*machine).abandon,
	},
	SIDRReqRcvd: {
		inAccept: (*machine).sendSIDRREP, inReject: (*machine).sendSIDRREP, inDisconnect: (*machine).sendSIDRREP,
	},
}
