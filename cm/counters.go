package cm

import (
	"strings"

	"github.com/rnic/rnic/wire/mad"
)

// msgAttrs are the CM messages, in the order of the counters' arrays.
var msgAttrs = [...]mad.Attr{mad.AttrREQ, mad.AttrMRA, mad.AttrREJ, mad.AttrREP, mad.AttrRTU,
	mad.AttrDREQ, mad.AttrDREP, mad.AttrSIDRREQ, mad.AttrSIDRREP}

const numMsgs = len(msgAttrs)

// attrIndex is a CM message's index in the counters' arrays.
func attrIndex(a mad.Attr) int {
	for i, x := range msgAttrs {
		if x == a {
			return i
		}
	}
	return 0
}

// Counters are a device's CM counters. Rx, Tx, TxRetries and
// RxDuplicates count by message as Linux's CM does in
// /sys/class/infiniband_cm/DEV/1/{cm_rx_msgs,cm_tx_msgs,cm_tx_retries,cm_rx_duplicates}.
type Counters struct {
	Rx, Tx, TxRetries, RxDuplicates [numMsgs]uint64
	RxMalformed                     uint64 // not a MAD (short, base or class version)
	RxNotCM                         uint64 // another class or method, or LAP/APR/ClassPortInfo
	RxUnknown                       uint64 // for no connection of ours
	RxBadSource                     uint64 // from another source than the connection's peer, with the wrong IDs or QPN, or not from a QP1
	RxDropped                       uint64 // a message the connection's state does not take, or a request a full backlog refused
	Rejects                         uint64 // REQs and SIDR_REQs answered with a refusal outside any connection (no listener, stale, transport)
	Timeouts                        uint64 // exchanges that ended for want of an answer after every retry
	TxDropped                       uint64 // MADs not sent: QP1's send queue and backlog full
}

// Named returns the counters with their names (cm_rx_msgs_req, ...).
func (c *Counters) Named() []NamedCounter {
	var out []NamedCounter
	for _, g := range []struct {
		prefix string
		v      *[numMsgs]uint64
	}{{"cm_rx_msgs_", &c.Rx}, {"cm_tx_msgs_", &c.Tx}, {"cm_tx_retries_", &c.TxRetries}, {"cm_rx_duplicates_", &c.RxDuplicates}} {
		for i, a := range msgAttrs {
			out = append(out, NamedCounter{g.prefix + strings.ToLower(a.String()), g.v[i]})
		}
	}
	return append(out,
		NamedCounter{"cm_rx_malformed", c.RxMalformed}, NamedCounter{"cm_rx_not_cm", c.RxNotCM},
		NamedCounter{"cm_rx_unknown", c.RxUnknown}, NamedCounter{"cm_rx_bad_source", c.RxBadSource},
		NamedCounter{"cm_rx_dropped", c.RxDropped}, NamedCounter{"cm_rejects", c.Rejects},
		NamedCounter{"cm_timeouts", c.Timeouts}, NamedCounter{"cm_tx_dropped", c.TxDropped})
}

// NamedCounter is one counter and its name.
type NamedCounter struct {
	Name  string
	Value uint64
}
