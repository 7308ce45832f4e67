package hostif

// The connection manager's part of the host interface: how rnic's
// librdmacm reaches the CM of a NIC process (package cm), as Linux's
// librdmacm reaches the kernel's through /dev/infiniband/rdma_cm (ucma).
// A NIC serves it on a socket of its own beside its verbs socket,
// NAME.rdmacm in the run directory, with the same framing (Header,
// little-endian fields, one SOCK_SEQPACKET datagram each).
//
// A program opens two kinds of connection to a NIC's CM socket, each
// starting with CMHello: a command connection (request, reply, in
// order), and one events connection per event channel that uses the
// NIC, on which the NIC pushes CMEvent messages and which the program
// never writes after its hello. An rdma_cm id lives on one NIC; it is
// created on a command connection naming the channel (the token the
// events connection's hello returned) that its events go to. When a
// command connection closes, its ids are destroyed as rdma_destroy_id
// destroys them.
//
// The CM does the protocol; the program readies its QP itself, with
// the attributes CMInitQPAttr gives (ucma's INIT_QP_ATTR), before it
// accepts (passive: the REP goes) or confirms a CONNECT_RESPONSE
// (active: the RTU goes), as librdmacm does on Linux.

// CMVersion is the CM protocol's version. 2: CMSetOption, CMSetPath,
// CMBind of the wildcard address (a wildcard id's part on each NIC holds
// its port), CMConnect only after the route.
const CMVersion = 2

// The CM socket's operations (continuing the verbs socket's numbers).
const (
	OpCMHello        Op = 100 // u32 version, u8 kind (CMCommand, CMEvents) → u32 token (events)
	OpCMCreateID     Op = 101 // u32 token, u16 port space, u8 QP type, u64 uid → u32 id
	OpCMDestroyID    Op = 102 // u32 id
	OpCMBind         Op = 103 // u32 id, addr (the NIC's, or 0.0.0.0 or ::) → u16 port (the one taken, for port 0)
	OpCMResolveAddr  Op = 104 // u32 id, addr src, addr dst → (event ADDR_RESOLVED)
	OpCMResolveRoute Op = 105 // u32 id → (event ROUTE_RESOLVED)
	OpCMListen       Op = 106 // u32 id, u32 backlog
	OpCMConnect      Op = 107 // u32 id, conn param
	OpCMAccept       Op = 108 // u32 id, conn param (passive: REP or SIDR_REP; active after CONNECT_RESPONSE: RTU)
	OpCMReject       Op = 109 // u32 id, u8 reason (28 or 35... the consumer's), bytes private data
	OpCMDisconnect   Op = 110 // u32 id
	OpCMInitQPAttr   Op = 111 // u32 id, u8 state → QP attributes
	OpCMNotify       Op = 112 // u32 id, u32 event (IBV_EVENT_COMM_EST)
	OpCMMigrate      Op = 113 // u32 id, u32 token: the id's events go to that events connection (rdma_migrate_id)
	OpCMSetOption    Op = 114 // u32 id, u32 option (CMOpt*), u32 value: rdma_set_option's, with the kernel's rules
	OpCMSetPath      Op = 115 // u32 id, 16 bytes DGID, u8 MTU, u8 hop limit, u8 traffic class, u32 flow label, u8 packet lifetime (→ event ROUTE_RESOLVED)
	OpCMEvent        Op = 120 // pushed on an events connection: an event
)

// The options of CMSetOption: rdma_set_option's RDMA_OPTION_ID_*.
const (
	CMOptTOS        = 0 // RDMA_OPTION_ID_TOS: the route's traffic class
	CMOptReuseAddr  = 1 // RDMA_OPTION_ID_REUSEADDR: ids that all have it share a port until one listens
	CMOptAFOnly     = 2 // RDMA_OPTION_ID_AFONLY: the id serves its own address family only
	CMOptAckTimeout = 3 // RDMA_OPTION_ID_ACK_TIMEOUT: the route's packet lifetime (the QP's timeout is the program's library's)
)

// The kinds of CM connection (CMHello).
const (
	CMCommand = 0
	CMEvents  = 1
)

// CMAddr is an address on the wire of the CM socket: u8 family (4 or 6),
// 16 bytes of address (IPv4 in the last 4), u16 port.
const CMAddrLen = 1 + 16 + 2

// CMConnParam is rdma_conn_param on the CM socket: u32 QPN, u8
// responder_resources, u8 initiator_depth, u8 flow_control, u8
// retry_count, u8 rnr_retry_count, u8 srq, bytes private data.

// CMEvent's fields: u64 uid (the id's, as CMCreateID gave it; 0 for a
// new passive id), u32 id, u32 listen id and u64 listen uid
// (CONNECT_REQUEST: the listener's), u32 event (enum rdma_cm_event_type), i32 status, addr
// src, addr dst (a new id's), conn param (the peer's: REQ or REP), u32
// UD QPN, u32 UD Q_Key, bytes private data.

// rdma_cm's event types (enum rdma_cm_event_type).
const (
	CMEventAddrResolved    = 0
	CMEventAddrError       = 1
	CMEventRouteResolved   = 2
	CMEventRouteError      = 3
	CMEventConnectRequest  = 4
	CMEventConnectResponse = 5
	CMEventConnectError    = 6
	CMEventUnreachable     = 7
	CMEventRejected        = 8
	CMEventEstablished     = 9
	CMEventDisconnected    = 10
	CMEventDeviceRemoval   = 11
	CMEventTimewaitExit    = 15
)

// CMInitQPAttr's reply: u32 mask (IBV_QP_*), u8 state, u8 path MTU, u32
// dest QPN, u32 RQ PSN, u32 SQ PSN, u8 max_dest_rd_atomic, u8
// max_rd_atomic, u8 min_rnr_timer, u8 timeout, u8 retry_cnt, u8
// rnr_retry, u32 Q_Key, u16 P_Key index, u8 port, u32 access flags,
// 16 bytes DGID, u8 SGID index, u8 hop limit, u32 flow label, u8
// traffic class.
