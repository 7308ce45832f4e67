package cm

import (
	"net/netip"

	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/mad"
)

// reqParams are what a consumer chooses of its REQ (its QP and
// rdma_conn_param); rdmacmREQ fills in the rest as rdma_cm does.
type reqParams struct {
	qpn, psn             uint32
	responder, initiator uint8
	retry, rnrRetry, mtu uint8
	flowCtl, srq         bool
	private              []byte // the application's, after rdma_cm's header
}

// rdmacmREQ is the REQ rdma_cm sends from src for the service at dst of
// port space ps: rdma_cm's values over RoCE (Linux 6.1, testdata/cm),
// its header and the application's private data.
func rdmacmREQ(ps mad.PortSpace, src, dst netip.AddrPort, p *reqParams) *mad.REQ {
	req := &mad.REQ{
		ServiceID: mad.ServiceID(ps, dst.Port()), LocalQPN: p.qpn,
		ResponderResources: p.responder, InitiatorDepth: p.initiator,
		RemoteCMResponseTimeout: CMResponseTimeout, LocalCMResponseTimeout: CMResponseTimeout,
		StartingPSN: p.psn, RetryCount: p.retry, RNRRetryCount: p.rnrRetry, EndToEndFlowControl: p.flowCtl,
		MaxCMRetries: MaxCMRetries, PKey: 0xFFFF, PathMTU: p.mtu, SRQ: p.srq,
		Primary: mad.Path{LocalLID: 0xFFFF, RemoteLID: 0xFFFF,
			LocalGID: wire.GIDFromAddr(src.Addr()), RemoteGID: wire.GIDFromAddr(dst.Addr()),
			FlowLabel: (uint32(src.Port())*31 + uint32(dst.Port())) & 0xFFFFF, HopLimit: 64, LocalAckTimeout: AckTimeout},
	}
	h := mad.CMAHeader{Src: src, Dst: dst}
	h.Encode(req.PrivateData[:])
	copy(req.PrivateData[mad.CMAHeaderSize:], p.private)
	return req
}

// rdmacmSIDRREQ is the SIDR_REQ rdma_cm sends from src for the UD
// service at dst of port space ps.
func rdmacmSIDRREQ(ps mad.PortSpace, src, dst netip.AddrPort, private []byte) *mad.SIDRREQ {
	req := &mad.SIDRREQ{PKey: 0xFFFF, ServiceID: mad.ServiceID(ps, dst.Port())}
	h := mad.CMAHeader{Src: src, Dst: dst}
	h.Encode(req.PrivateData[:])
	copy(req.PrivateData[mad.CMAHeaderSize:], private)
	return req
}
