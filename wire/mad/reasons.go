package mad

import "fmt"

// RejReason is a REJ's reason (Table 109; the kernel's ib_cm_rej_reason).
type RejReason uint16

const (
	RejNoQP                      RejReason = 1
	RejNoEEC                     RejReason = 2
	RejNoResources               RejReason = 3
	RejTimeout                   RejReason = 4
	RejUnsupportedRequest        RejReason = 5
	RejInvalidCommID             RejReason = 6
	RejInvalidCommInstance       RejReason = 7
	RejInvalidServiceID          RejReason = 8 // nobody listens
	RejInvalidTransportType      RejReason = 9
	RejStaleConn                 RejReason = 10
	RejRDCNotExist               RejReason = 11
	RejInvalidGID                RejReason = 12
	RejInvalidLID                RejReason = 13
	RejInvalidSL                 RejReason = 14
	RejInvalidTrafficClass       RejReason = 15
	RejInvalidHopLimit           RejReason = 16
	RejInvalidPacketRate         RejReason = 17
	RejInvalidAltGID             RejReason = 18
	RejInvalidAltLID             RejReason = 19
	RejInvalidAltSL              RejReason = 20
	RejInvalidAltTrafficClass    RejReason = 21
	RejInvalidAltHopLimit        RejReason = 22
	RejInvalidAltPacketRate      RejReason = 23
	RejPortCMRedirect            RejReason = 24
	RejPortRedirect              RejReason = 25
	RejInvalidMTU                RejReason = 26
	RejInsufficientRespResources RejReason = 27
	RejConsumerDefined           RejReason = 28 // rdma_reject
	RejInvalidRNRRetry           RejReason = 29
	RejDuplicateLocalCommID      RejReason = 30
	RejInvalidClassVersion       RejReason = 31
	RejInvalidFlowLabel          RejReason = 32
	RejInvalidAltFlowLabel       RejReason = 33
)

var rejNames = [...]string{
	RejNoQP: "no QP", RejNoEEC: "no EEC", RejNoResources: "no resources", RejTimeout: "timeout",
	RejUnsupportedRequest: "unsupported request", RejInvalidCommID: "invalid communication ID",
	RejInvalidCommInstance: "invalid communication instance", RejInvalidServiceID: "invalid service ID",
	RejInvalidTransportType: "invalid transport service type", RejStaleConn: "stale connection",
	RejRDCNotExist: "RDC does not exist", RejInvalidGID: "primary remote GID rejected",
	RejInvalidLID: "primary remote LID rejected", RejInvalidSL: "invalid primary SL",
	RejInvalidTrafficClass: "invalid primary traffic class", RejInvalidHopLimit: "invalid primary hop limit",
	RejInvalidPacketRate: "invalid primary packet rate", RejInvalidAltGID: "alternate remote GID rejected",
	RejInvalidAltLID: "alternate remote LID rejected", RejInvalidAltSL: "invalid alternate SL",
	RejInvalidAltTrafficClass: "invalid alternate traffic class", RejInvalidAltHopLimit: "invalid alternate hop limit",
	RejInvalidAltPacketRate: "invalid alternate packet rate", RejPortCMRedirect: "port and CM redirection",
	RejPortRedirect: "port redirection", RejInvalidMTU: "invalid path MTU",
	RejInsufficientRespResources: "insufficient responder resources", RejConsumerDefined: "consumer defined",
	RejInvalidRNRRetry: "invalid RNR retry count", RejDuplicateLocalCommID: "duplicate local communication ID",
	RejInvalidClassVersion: "unsupported class version", RejInvalidFlowLabel: "invalid primary flow label",
	RejInvalidAltFlowLabel: "invalid alternate flow label",
}

func (r RejReason) String() string {
	if int(r) < len(rejNames) && rejNames[r] != "" {
		return rejNames[r]
	}
	return fmt.Sprintf("REJ reason %d", uint16(r))
}

// SIDRStatus is a SIDR_REP's status (Table 121).
type SIDRStatus uint8

const (
	SIDRQPValid          SIDRStatus = 0
	SIDRServiceIDUnknown SIDRStatus = 1 // nobody listens
	SIDRRejected         SIDRStatus = 2
	SIDRNoQP             SIDRStatus = 3
	SIDRRedirect         SIDRStatus = 4
	SIDRUnsupportedVer   SIDRStatus = 5
)
