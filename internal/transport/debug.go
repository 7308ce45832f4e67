package transport

import (
	"fmt"
	"strings"
)

// DebugState describes a QP's transport state, for failure messages and
// the debugger; the format is not stable.
func (e *Engine) DebugState(qp *QP) string {
	var b strings.Builder
	r, s := &qp.req, &qp.resp
	fmt.Fprintf(&b, "qp %#x %v state %v now %d\n", qp.QPN, qp.Type, qp.attr.State, e.now)
	fmt.Fprintf(&b, "  req: psn %v una %v max %v next %d off %d comp %d sq.ci %d sq.pi %d rdAtomic %d retries %d rnr %d rnrWait %v retry %v recovering %v\n",
		r.psn, r.una, r.maxPSN, r.next, r.off, r.compIdx, qp.sq.ci.Load(), qp.sq.pi.Load(), r.rdAtomic, r.retries, r.rnrRetries, r.rnrWait, r.retry, r.recovering)
	for i := qp.sq.ci.Load(); i != qp.sq.fetched; i++ {
		w := qp.sq.slot(i)
		fmt.Fprintf(&b, "    wqe %d: %v len %d state %d first %v last %v\n", i, w.op, w.length, w.state, w.firstPSN, w.lastPSN)
	}
	fmt.Fprintf(&b, "  resp: epsn %v msn %d nakSent %v msg %d haveRecv %v queue %d ack %v ackPSN %v\n",
		s.epsn, s.msn, s.nakSent, s.msg, s.haveRecv, s.queue.n, s.ack, s.ackPSN)
	fmt.Fprintf(&b, "  timers: retrans %d rnr %d queued %d; heap %d; arbiter ready %d; requesterReady %v\n",
		qp.timer.retransAt, qp.timer.rnrAt, qp.timer.queuedAt, len(e.timers), e.arb.Ready(), e.req.requesterReady(qp))
	return b.String()
}
