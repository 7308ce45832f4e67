package transport

import "github.com/rnic/rnic/wire"

// QPResource is one QP as the kernel's resource tracking reports it
// ("rdma resource show qp"): its number, service, state and the PSNs it
// has reached, read from the QP context.
type QPResource struct {
	QPN   uint32
	Type  QPType
	State QPState
	// Port is the QP's port (1; 0 would be one not yet assigned).
	Port uint8
	PD   uint32
	// SQPSN is the next PSN the requester sends; RQPSN the PSN the
	// responder expects next (ibv_query_qp's sq_psn and rq_psn as rxe
	// reports them: where the QP is now, not where it started).
	SQPSN, RQPSN wire.PSN
	// DestQPN is the peer's QPN (RC and UC).
	DestQPN uint32
}

// QPResources appends every QP of the engine to dst, in QPN order. The
// caller holds the engine lock: the PSNs are the engine's to change.
func (e *Engine) QPResources(dst []QPResource) []QPResource {
	e.cfg.QPs.Each(func(qp *QP) {
		if qp.engine != e || qp.destroyed {
			return
		}
		dst = append(dst, QPResource{
			QPN: qp.QPN, Type: qp.Type, State: qp.attr.State, Port: qp.attr.Port, PD: qp.PD,
			SQPSN: qp.req.psn, RQPSN: qp.resp.epsn, DestQPN: qp.attr.DestQPN,
		})
	})
	return dst
}
