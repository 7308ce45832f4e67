package transport

// Counter names a NIC counter. Names follow Linux `rdma statistic` (the
// mlx5 hardware counters and the IB port counters) where one exists; the
// rest are this NIC's own pipeline and drop counters.
//
// The first numQPCounters counters are also kept per QP.
type Counter uint16

const (
	// Per-QP and per-device.
	TxPackets Counter = iota // port_xmit_packets
	TxBytes                  // port_xmit_data (bytes, not IB's 4-byte words)
	RxPackets                // port_rcv_packets
	RxBytes                  // port_rcv_data
	RxWriteRequests
	RxReadRequests
	RxAtomicRequests
	RxSendRequests
	OutOfSequence      // requests received ahead of the expected PSN
	DuplicateRequest   // requests received behind the expected PSN
	PacketSeqErr       // PSN sequence error NAKs received
	ImpliedNAKSeqErr   // responses that skipped an outstanding READ/atomic
	LocalAckTimeoutErr // retransmission timeouts
	RNRNAKRetryErr     // RNR NAKs received (and retried)
	RNRNAKSent         // RNR NAKs sent (no receive WQE)
	OutOfBuffer        // messages dropped for lack of a receive WQE (UC/UD)
	SeqNAKSent         // PSN sequence error NAKs sent
	ReqRemoteInvalidRequest
	ReqRemoteAccessErrors
	RespRemoteAccessErrors
	RespLocalLengthError
	ReqCQEError
	RespCQEError
	ReqCQEFlushError
	RespCQEFlushError
	RetransPackets // packets sent again (go-back-N, READ resumes)
	AcksSent
	AcksReceived
	ReadResponsesSent
	ReadRespAhead     // READ responses kept past a gap (placed before the gap filled)
	ReadReplayAborted // duplicate READs not answered: the region went away since the original
	RetryWindowCuts   // local ACK timeouts after which the requester resent one request, not all (see reqState)
	ReadBudgetWaits   // times a QP's READ waited for the NIC's budget of outstanding READ responses
	RxInvalidRequests // requests refused as invalid (opcode sequence, length, rights, resources): NAKed on RC, dropped on UC
	RxUCDropped       // UC packets dropped after a gap or an invalid request, until the next FIRST or ONLY
	HostMemErrors     // DMA accesses the host bus failed (host memory unreachable behind a valid translation)
	NPECNMarked       // np_ecn_marked_roce_packets: RoCE packets received with ECN Congestion Experienced (Config.DCQCN)
	NPCNPSent         // np_cnp_sent: congestion notification packets sent
	RPCNPHandled      // rp_cnp_handled: congestion notification packets that cut a QP's rate
	numQPCounters

	// Device only.
	RxICRCErrors     Counter = iota - 1 // rx_icrc_encapsulated: frames whose ICRC did not verify
	RxICRCUnverified                    // frames whose IP header was rebuilt by the link (ICRC not checkable)
	RxMalformed                         // frames that are not valid RoCEv2 (see the wire errors)
	RxUnknownQP                         // frames for a QPN with no QP
	RxBadState                          // frames for a QP in a state that takes none
	RxBadPKey
	RxBadQKey
	RxWrongTransport // opcode of another transport than the QP's
	RxGhostResponse  // responses for PSNs not outstanding, or malformed
	RxBadAddress     // frames for a connected QP from another address than its peer
	RxLateResponse   // responses already acknowledged, or past a gap being recovered
	RxDiscards       // frames dropped because the receive queue was full
	RxCNPIgnored     // rp_cnp_ignored: congestion notification packets received, with nothing to react to them (no congestion control, or no such QP)
	Doorbells
	QPCCacheHit
	QPCCacheMiss
	CQCCacheHit
	CQCCacheMiss
	CQOverruns
	TxICRCOffloaded // frames sent without an ICRC: the link delivers them intact (link.Intact), as checksum offload on a loopback device
	RxICRCOffloaded // frames taken without checking the ICRC, for the same reason
	TxPayloadRefs   // frames sent by reference: their payload stays in the sender's registered memory and the receiver's DMA engine copies it from there (link/mem; Config.PayloadRefs)
	RxRefRevoked    // frames sent by reference dropped on arrival: the sender had deregistered the region, or destroyed or reset the QP, since
	numCounters
)

var counterNames = [numCounters]string{
	TxPackets:               "tx_packets",
	TxBytes:                 "tx_bytes",
	RxPackets:               "rx_packets",
	RxBytes:                 "rx_bytes",
	RxWriteRequests:         "rx_write_requests",
	RxReadRequests:          "rx_read_requests",
	RxAtomicRequests:        "rx_atomic_requests",
	RxSendRequests:          "rx_send_requests",
	OutOfSequence:           "out_of_sequence",
	DuplicateRequest:        "duplicate_request",
	PacketSeqErr:            "packet_seq_err",
	ImpliedNAKSeqErr:        "implied_nak_seq_err",
	LocalAckTimeoutErr:      "local_ack_timeout_err",
	RNRNAKRetryErr:          "rnr_nak_retry_err",
	RNRNAKSent:              "rnr_nak_sent",
	OutOfBuffer:             "out_of_buffer",
	SeqNAKSent:              "seq_nak_sent",
	ReqRemoteInvalidRequest: "req_remote_invalid_request",
	ReqRemoteAccessErrors:   "req_remote_access_errors",
	RespRemoteAccessErrors:  "resp_remote_access_errors",
	RespLocalLengthError:    "resp_local_length_error",
	ReqCQEError:             "req_cqe_error",
	RespCQEError:            "resp_cqe_error",
	ReqCQEFlushError:        "req_cqe_flush_error",
	RespCQEFlushError:       "resp_cqe_flush_error",
	RetransPackets:          "roce_retrans_packets",
	AcksSent:                "acks_sent",
	AcksReceived:            "acks_received",
	ReadResponsesSent:       "read_responses_sent",
	ReadRespAhead:           "read_resp_ahead",
	ReadReplayAborted:       "read_replay_aborted",
	RetryWindowCuts:         "retry_window_cuts",
	ReadBudgetWaits:         "read_budget_waits",
	RxInvalidRequests:       "rx_invalid_requests",
	RxUCDropped:             "rx_uc_dropped",
	HostMemErrors:           "host_mem_errors",
	RxICRCErrors:            "rx_icrc_encapsulated",
	RxICRCUnverified:        "rx_icrc_unverified",
	RxMalformed:             "rx_malformed",
	RxUnknownQP:             "rx_unknown_qpn",
	RxBadState:              "rx_bad_qp_state",
	RxBadPKey:               "rx_bad_pkey",
	RxBadQKey:               "rx_bad_qkey",
	RxWrongTransport:        "rx_wrong_transport",
	RxGhostResponse:         "rx_ghost_response",
	RxBadAddress:            "rx_bad_address",
	RxLateResponse:          "rx_late_response",
	RxDiscards:              "rx_discards",
	RxCNPIgnored:            "rp_cnp_ignored",
	NPECNMarked:             "np_ecn_marked_roce_packets",
	NPCNPSent:               "np_cnp_sent",
	RPCNPHandled:            "rp_cnp_handled",
	Doorbells:               "doorbells",
	QPCCacheHit:             "qpc_cache_hit",
	QPCCacheMiss:            "qpc_cache_miss",
	CQCCacheHit:             "cqc_cache_hit",
	CQCCacheMiss:            "cqc_cache_miss",
	CQOverruns:              "cq_overruns",
	TxICRCOffloaded:         "tx_icrc_offloaded",
	RxICRCOffloaded:         "rx_icrc_offloaded",
	TxPayloadRefs:           "tx_payload_refs",
	RxRefRevoked:            "rx_ref_revoked",
}

// String returns the counter's name as `rnic stat` prints it.
func (c Counter) String() string {
	if c < numCounters {
		return counterNames[c]
	}
	return "counter?"
}

// NumCounters is the number of device counters; NumQPCounters the number
// kept per QP (the first ones).
const (
	NumCounters   = int(numCounters)
	NumQPCounters = int(numQPCounters)
)

// Counters is a set of counter values indexed by Counter.
type Counters [numCounters]uint64

// QPCounters is the per-QP subset.
type QPCounters [numQPCounters]uint64
