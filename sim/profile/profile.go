package profile

import "github.com/rnic/rnic/sim/timing"

// HardwareProfile names every parameter of the timing model.
type HardwareProfile struct {
	// Name identifies the profile ("cx6"); Description says what it
	// models, in one line.
	Name        string `toml:"name"`
	Description string `toml:"description"`

	Link   Link   `toml:"link"`
	PCIe   PCIe   `toml:"pcie"`
	Caches Caches `toml:"caches"`
	DMA    DMA    `toml:"dma"`
	Engine Engine `toml:"engine"`
	Atomic Atomic `toml:"atomic"`
	DCQCN  DCQCN  `toml:"dcqcn"`
	TIMELY TIMELY `toml:"timely"`
	Host   Host   `toml:"host"`
	Switch Switch `toml:"switch"`
	// Topology wires the fabric's switches.
	Topology Topology `toml:"topology"`
}

// Link is the NIC's Ethernet port and the cable to the switch.
type Link struct {
	// RateGbps is the line rate (1e9 bit/s).
	RateGbps float64 `toml:"rate_gbps"`
	// PropagationNs is the one-way cable delay (about 5 ns per metre).
	PropagationNs int64 `toml:"propagation_ns"`
	// MTUBytes is the RoCE path MTU (payload bytes per packet): 256, 512,
	// 1024, 2048 or 4096.
	MTUBytes int `toml:"mtu_bytes"`
	// VLAN adds a 4-byte 802.1Q tag to every frame (PFC priorities).
	VLAN bool `toml:"vlan"`
}

// PCIe is the NIC's host interface and the host's memory behind it.
type PCIe struct {
	// Gen and Lanes give the link; its bandwidth per direction is derived
	// from them unless BandwidthGBytesPerS is set.
	Gen   int `toml:"gen"`
	Lanes int `toml:"lanes"`
	// BandwidthGBytesPerS overrides the derived TLP-layer bandwidth per
	// direction, in GB/s (1e9 bytes); 0 derives it from Gen and Lanes.
	BandwidthGBytesPerS float64 `toml:"bandwidth_gbytes_per_s"`
	// MaxPayloadBytes (MPS) and MaxReadRequestBytes (MRRS).
	MaxPayloadBytes     int `toml:"max_payload_bytes"`
	MaxReadRequestBytes int `toml:"max_read_request_bytes"`
	// TLP framing per TLP: memory read request, completion with data,
	// memory write (24, 20, 24 with 64-bit addresses, per pcie-bench).
	ReadRequestOverheadBytes int `toml:"read_request_overhead_bytes"`
	CompletionOverheadBytes  int `toml:"completion_overhead_bytes"`
	WriteOverheadBytes       int `toml:"write_overhead_bytes"`
	// ReadLatency is the unloaded DMA read latency by size, measured;
	// linear in between, flat below the first point, extrapolated past
	// the last.
	ReadLatency []timing.Point `toml:"read_latency"`
	// WriteVisibilityNs is the time from a posted write's last byte
	// leaving the NIC until the host CPU can see it (a CQE).
	WriteVisibilityNs int64 `toml:"write_visibility_ns"`
	// MMIOWriteNs is the unloaded time from a CPU store to a NIC register
	// (doorbell) until the NIC sees it.
	MMIOWriteNs int64 `toml:"mmio_write_ns"`
	// MaxOutstandingReads bounds read requests in flight (PCIe tags);
	// 0 is unlimited.
	MaxOutstandingReads int `toml:"max_outstanding_reads"`
}

// Cache is one on-chip SRAM cache of a host-memory table. A miss costs a
// PCIe read of EntryBytes.
type Cache struct {
	// CapacityBytes is the SRAM's size; Entries says it in entries
	// instead (CapacityBytes = Entries × EntryBytes). A profile gives one
	// of the two (both only if they agree); --set of one clears the other.
	CapacityBytes int `toml:"capacity_bytes"`
	Entries       int `toml:"entries"`
	EntryBytes    int `toml:"entry_bytes"`
	// Ways is the associativity; 0 means fully associative.
	Ways int `toml:"ways"`
	// Policy is the replacement policy: "lru" (the default), "fifo" or
	// "random" (reproducible: a fixed seed per cache).
	Policy string `toml:"policy"`
	// OutstandingMisses is the depth of the cache's miss table: how many
	// of its misses may be reading the host at once; a miss beyond waits
	// for an entry to free (0: unbounded). It binds where steps are
	// parked with their reads (engine.misses_in_flight).
	OutstandingMisses int `toml:"outstanding_misses"`
}

// Capacity returns the cache's SRAM size in bytes.
func (c Cache) Capacity() int {
	if c.CapacityBytes > 0 {
		return c.CapacityBytes
	}
	return c.Entries * c.EntryBytes
}

// Caches are the NIC's context caches.
type Caches struct {
	// UTLB is the micro-TLB in front of the MPT and MTT caches (16 MPT
	// and 64 MTT entries, direct mapped; its hits never reach the caches):
	// "on" (the default, as rnic's wall-clock NIC) or "off".
	UTLB string `toml:"utlb"`
	// MTTPages is how a region registered without a page size is cut into
	// MTT pages: "best" (the default, as rnic's wall-clock NIC and mlx5:
	// the largest page its length calls for, so a region takes one or two
	// MTT entries) or "fixed" (the device's page size, 4 KiB unless the
	// program asks otherwise: one MTT entry per 4 KiB).
	MTTPages string `toml:"mtt_pages"`

	QPC Cache `toml:"qpc"` // queue pair contexts
	MPT Cache `toml:"mpt"` // memory protection table (MR/MW keys)
	MTT Cache `toml:"mtt"` // memory translation table (page addresses)
	CQC Cache `toml:"cqc"` // completion queue contexts
}

// DMA is the cluster of DMA engines that move payload.
type DMA struct {
	Engines int `toml:"engines"`
	// DescriptorOverheadNs is an engine's fixed cost per descriptor,
	// besides the PCIe transfer.
	DescriptorOverheadNs int64 `toml:"descriptor_overhead_ns"`
}

// Engine is the protocol engine (requester, responder, completer) and the
// work queue formats it reads and writes.
type Engine struct {
	// Units is the number of parallel processing units; a QP is served by
	// one unit at a time.
	Units int `toml:"units"`
	// TxPacketNs and RxPacketNs are one unit's processing time per packet
	// sent and received.
	TxPacketNs int64 `toml:"tx_packet_ns"`
	RxPacketNs int64 `toml:"rx_packet_ns"`
	// Sizes of what crosses PCIe per work request: a send WQE read by
	// DMA, a CQE written by DMA, a doorbell written by MMIO.
	WQEBytes      int `toml:"wqe_bytes"`
	CQEBytes      int `toml:"cqe_bytes"`
	DoorbellBytes int `toml:"doorbell_bytes"`
	// WQEByMMIO: the host writes small WQEs together with the doorbell
	// (Mellanox "BlueFlame"), saving the WQE fetch, for WQEs of at most
	// WQEByMMIOMaxBytes.
	WQEByMMIO         bool `toml:"wqe_by_mmio"`
	WQEByMMIOMaxBytes int  `toml:"wqe_by_mmio_max_bytes"`
	// RxBufferBytes is the receive packet buffer in front of the units:
	// frames that arrive while it is full are dropped. It must hold the
	// largest frame (mtu_bytes + 80). 0 is lossless: the
	// NIC would pause its link (PFC) rather than drop, which the model
	// approximates by letting the frames wait in the buffer unbounded.
	RxBufferBytes int `toml:"rx_buffer_bytes"`
	// TxBufferBytes is the transmit buffer between the units and the
	// wire: while the packets waiting for the wire would fill it, the
	// arbiter schedules no more send work, so that what it picks next —
	// by priority (the QPs' service levels) and weight — is picked when
	// the wire can take it. While PFC pauses a priority, that priority's
	// packets wait in a buffer of this size of their own: full, the
	// arbiter passes over the QPs of that priority (their traffic class)
	// until the resume, and the others go on. 0: unlimited (the arbiter
	// runs ahead of the wire, priorities cannot reorder what it has
	// handed over, and a paused priority's packets pile up).
	TxBufferBytes int `toml:"tx_buffer_bytes"`
	// MissesInFlight is how many steps waiting for their cache misses and
	// WQE fetches the NIC keeps aside while its units serve other QPs (a
	// QP whose step waits is parked until the reads are back; HanGu's
	// reorder_cap). 0: a unit stalls on its step's reads, serving no one
	// meanwhile.
	MissesInFlight int `toml:"misses_in_flight"`
	// WQEPrefetch is the most send WQEs the NIC reads in one DMA read
	// when a doorbell announces several (a post list): they are fetched
	// from the doorbell's arrival, ahead of the steps that use them, which
	// then wait only for what is not back yet. 0: every step fetches its
	// own WQE.
	WQEPrefetch int `toml:"wqe_prefetch"`
	// ArbiterQuantumBytes is the arbiter's credit per QP per round
	// (deficit weighted round robin over the QPs with work, by wire
	// bytes). A QP that goes idle and comes back waits for the round in
	// progress, every busy QP's quantum: near one MTU the arbiter is
	// close to the per-WQE round robin of RNICs; 0 takes the engine's
	// default (64 KiB), under which a QP of small messages can wait
	// hundreds of microseconds behind 31 busy ones.
	ArbiterQuantumBytes int `toml:"arbiter_quantum_bytes"`
	// ReadBudgetPSNs bounds the READ response packets the NIC has asked
	// for and not yet received, over all its QPs: a READ that would pass
	// it waits (counter read_budget_waits). 0: rnic's default (1024, as
	// the wall-clock NIC); -1: no bound.
	ReadBudgetPSNs int `toml:"read_budget_psns"`
}

// Atomic is the responder's atomic execution: compare-and-swap,
// fetch-and-add and atomic write, each a read-modify-write of host memory
// across PCIe (a read, the operation, a posted write), run on the atomic
// units while the processing units go on. Atomics to one address run one
// after another, and so do atomics to addresses that share a lock bucket:
// the lock is taken before the read and given back when the write has
// left (PCIe keeps a later read behind an earlier posted write).
type Atomic struct {
	// Units is the number of atomic units, each running one
	// read-modify-write at a time. 0: no atomic unit is modelled; every
	// atomic reads and writes host memory right after its step, unbounded
	// and unordered (the model before atomic units).
	Units int `toml:"units"`
	// ALUNs is the operation's time between the read's data and the
	// write.
	ALUNs int64 `toml:"alu_ns"`
	// LockBuckets is the size of the lock table: atomics whose addresses
	// hash to one bucket run one after another. 0: a lock per address
	// (only atomics to the same address wait for each other).
	LockBuckets int `toml:"lock_buckets"`
	// LockHash picks the bucket: "low_bits" (the default) takes the
	// address's low bits above the granule, so addresses a multiple of
	// lock_buckets × lock_granule_bytes apart share a bucket; "mix"
	// hashes every bit of the address.
	LockHash string `toml:"lock_hash"`
	// LockGranuleBytes is the span of memory one lock covers (the
	// address bits below it are ignored): 8 (the default, one atomic
	// word) up to 4096.
	LockGranuleBytes int `toml:"lock_granule_bytes"`
}

// DCQCN is congestion control in the NIC's protocol engine (see
// transport.DCQCN): ECN-capable packets, CNPs for marked ones, and a rate
// per QP cut by CNPs and recovered on a timer and a byte counter.
type DCQCN struct {
	Enabled bool `toml:"enabled"`
	// Preset names the parameter set the values below came from ("paper",
	// "mellanox"; see DCQCNPreset), "" for values of the profile's own.
	// Setting it with --set replaces them all.
	Preset string `toml:"preset"`
	// CNPIntervalNs is the least time between two CNPs of one QP (N).
	CNPIntervalNs int64 `toml:"cnp_interval_ns"`
	// G is the gain of alpha, the estimate of the marked fraction.
	G float64 `toml:"g"`
	// AlphaPeriodNs is how often alpha decays without CNPs (K).
	AlphaPeriodNs int64 `toml:"alpha_period_ns"`
	// IncreasePeriodNs (T) and ByteCounterBytes (B): rate-increase events.
	IncreasePeriodNs int64 `toml:"increase_period_ns"`
	ByteCounterBytes int64 `toml:"byte_counter_bytes"`
	// FastRecovery is the number of increase events (F) of fast recovery.
	FastRecovery int `toml:"fast_recovery"`
	// RateAIMbps and RateHAIMbps are the additive and hyper increase
	// steps of the target rate; MinRateMbps the floor of a cut.
	RateAIMbps  float64 `toml:"rate_ai_mbps"`
	RateHAIMbps float64 `toml:"rate_hai_mbps"`
	MinRateMbps float64 `toml:"min_rate_mbps"`
	// InitialAlpha is alpha before the first CNP.
	InitialAlpha float64 `toml:"initial_alpha"`
	// ClampTarget sets the target rate to the current rate on every CNP
	// (the paper's equations); false moves it only if the rate increased
	// since the last cut (Mellanox's clamp_tgt_rate=0).
	ClampTarget bool `toml:"clamp_target"`
	// CNPTClass is the IP traffic class of CNPs (DSCP << 2; 192 is
	// DSCP 48, priority 6, ConnectX's default); 0: the QP's own.
	CNPTClass int `toml:"cnp_tclass"`
}

// TIMELY is delay-based congestion control in the NIC's protocol engine
// (see transport.TIMELY), instead of DCQCN: each RC QP times one
// ACK-requesting packet at a time and moves its rate by the RTT and its
// gradient.
type TIMELY struct {
	Enabled bool `toml:"enabled"`
	// Alpha weighs a new RTT difference in the gradient's average; Beta
	// is the multiplicative decrease factor.
	Alpha float64 `toml:"alpha"`
	Beta  float64 `toml:"beta"`
	// DeltaMbps is the additive increase step; MinRateMbps the floor.
	DeltaMbps   float64 `toml:"delta_mbps"`
	MinRateMbps float64 `toml:"min_rate_mbps"`
	// TLowNs and THighNs bound the RTTs the gradient rules; MinRTTNs
	// normalizes the gradient.
	TLowNs   int64 `toml:"t_low_ns"`
	THighNs  int64 `toml:"t_high_ns"`
	MinRTTNs int64 `toml:"min_rtt_ns"`
	// HAIThreshold is the falling-gradient samples in a row before the
	// increase is that many steps at once (0: never).
	HAIThreshold int `toml:"hai_threshold"`
}

// Lock hashes of Atomic.LockHash.
const (
	LockHashLowBits = "low_bits"
	LockHashMix     = "mix"
)

// Host is the CPU side of the verbs data path.
type Host struct {
	// PostSendNs is the CPU time to build a WQE and ring the doorbell;
	// PollCQNs to poll one CQE.
	PostSendNs int64 `toml:"post_send_ns"`
	PollCQNs   int64 `toml:"poll_cq_ns"`
}

// Switch is the output-queued switch of the simulated fabric.
type Switch struct {
	// BufferBytes is each output port's queue limit; frames beyond it are
	// dropped (tail drop). 0 is unlimited.
	BufferBytes int `toml:"buffer_bytes"`
	// LatencyNs is the forwarding delay from a frame's arrival to its
	// enqueue at the output port.
	LatencyNs int64 `toml:"latency_ns"`
	// ECN marking of ECN-capable frames by queue depth at enqueue, as RED
	// does: never below ECNMinBytes, with a probability rising linearly to
	// ECNMaxProbability at ECNMaxBytes, always above.
	ECN               bool    `toml:"ecn"`
	ECNMinBytes       int     `toml:"ecn_min_bytes"`
	ECNMaxBytes       int     `toml:"ecn_max_bytes"`
	ECNMaxProbability float64 `toml:"ecn_max_probability"`
	// SharedBufferBytes, if not 0, replaces the buffer per port by one
	// buffer shared by all of a switch's ports (BufferBytes is then not
	// used), with dynamic thresholds: a lossy queue may hold EgressAlpha
	// times the free buffer (0: only the buffer's size limits it).
	SharedBufferBytes int     `toml:"shared_buffer_bytes"`
	EgressAlpha       float64 `toml:"egress_alpha"`
	// PriorityQueues keeps the eight priorities (DSCP/8) apart at every
	// port, strict priority; a shared buffer or PFC implies it.
	PriorityQueues bool `toml:"priority_queues"`
	// PFC makes priority PFCPriority lossless (needs the shared buffer):
	// an ingress pauses its upstream once it holds PFCAlpha times the
	// free buffer, resumes PFCResumeOffsetBytes under it, and keeps
	// PFCHeadroomBytes per port for what arrives while a pause travels.
	PFC                  bool    `toml:"pfc"`
	PFCPriority          int     `toml:"pfc_priority"`
	PFCAlpha             float64 `toml:"pfc_alpha"`
	PFCHeadroomBytes     int     `toml:"pfc_headroom_bytes"`
	PFCResumeOffsetBytes int     `toml:"pfc_resume_offset_bytes"`
}

// Topology wires the switches of the simulated fabric: "star" (one
// switch), "leaf-spine" (Leaves leaves of HostsPerLeaf hosts, each linked
// to all Spines spines) or "fat-tree" (k-ary, k³/4 hosts). Hosts fill the
// first leaf before the next. Switch-to-switch links run at UplinkGbps
// (0: the hosts' rate) with UplinkPropagationNs of cable.
type Topology struct {
	Kind                string  `toml:"kind"`
	Leaves              int     `toml:"leaves"`
	Spines              int     `toml:"spines"`
	HostsPerLeaf        int     `toml:"hosts_per_leaf"`
	K                   int     `toml:"k"`
	UplinkGbps          float64 `toml:"uplink_gbps"`
	UplinkPropagationNs int64   `toml:"uplink_propagation_ns"`
}
