package transport

import (
	"fmt"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/hw/bus"
	"github.com/rnic/rnic/internal/hw/cache"
	"github.com/rnic/rnic/internal/hw/dma"
	"github.com/rnic/rnic/internal/hw/sched"
)

// FirstQPN is the first QP number a device hands out: 0 and 1 are the
// special QPs (SMI, GSI), and the numbers up to 0x10 are reserved, as on
// rxe.
const FirstQPN = 0x11

// CoreConfig is one RNIC's hardware: the sizes of its tables and queues
// (ibv_device_attr's limits), its SRAM caches, DMA engines and arbiter,
// and the protocol engine's settings. Both clocks build a device from it
// (NewCore): internal/nic in real time, sim/nicmodel in virtual time.
// Zero fields take the defaults of a mid-range RNIC (Defaults).
type CoreConfig struct {
	MaxQP, MaxCQ, MaxMR, MaxSRQ int
	MaxQPWR, MaxSGE, MaxInline  int
	MaxCQE, MaxSRQWR            int
	PageShift                   uint8 // the default MTT page size: 12 is 4 KiB

	QPCCache, CQCCache, MPTCache, MTTCache cache.Config
	DMAEngines                             int
	Arbiter                                sched.Config // Queues is derived from MaxQP
	MaxUnackedPSNs                         uint32
	MaxQPRdAtom                            uint8
	// MaxReadPSNs bounds the READ response packets outstanding on the
	// whole device (Config.MaxReadPSNs); 0: no bound; at most
	// MaxReadBudget.
	MaxReadPSNs uint32

	// Host is the DMA bus to host memory; nil: the program's own memory
	// (a bus.Local).
	Host bus.Mapper
	// UTLB gives the ATU its micro-TLB (atu.Config.UTLB), BestPageSize
	// its choice of MTT page (atu.Config.BestPageSize).
	UTLB, BestPageSize bool

	// Engine carries what the driver of a clock adds: the MTU, the GID,
	// and its hooks (Kick, Event, Trace, Doorbell, Billing, Metadata).
	// NewCore fills in the tables, the ATU, the DMA cluster and the
	// fields above.
	Engine Config
}

// Defaults fills unset fields with the defaults of a mid-range RNIC.
// MaxReadBudget is the largest MaxReadPSNs: half the 24-bit PSN space,
// beyond which PSN order is ambiguous.
const MaxReadBudget = 1 << 23

func (c *CoreConfig) Defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxQP, 16384)
	def(&c.MaxCQ, 16384)
	def(&c.MaxMR, 65536)
	def(&c.MaxSRQ, 1024)
	def(&c.MaxQPWR, 16384)
	def(&c.MaxSGE, 32)
	def(&c.MaxInline, 256)
	def(&c.MaxCQE, 1<<20)
	def(&c.MaxSRQWR, 16384)
	def(&c.DMAEngines, 4)
	if c.PageShift == 0 {
		c.PageShift = 12
	}
	if c.MaxQPRdAtom == 0 {
		c.MaxQPRdAtom = 16
	}
	if c.QPCCache == (cache.Config{}) {
		c.QPCCache = cache.Config{Name: "qpc", CapacityBytes: 1024 * 256, EntryBytes: 256, Ways: 8}
	}
	if c.CQCCache == (cache.Config{}) {
		c.CQCCache = cache.Config{Name: "cqc", CapacityBytes: 512 * 64, EntryBytes: 64, Ways: 8}
	}
	if c.MPTCache == (cache.Config{}) {
		c.MPTCache = cache.Config{Name: "mpt", CapacityBytes: 1024 * 64, EntryBytes: 64, Ways: 8}
	}
	if c.MTTCache == (cache.Config{}) {
		c.MTTCache = cache.Config{Name: "mtt", CapacityBytes: 8192 * 8, EntryBytes: 8, Ways: 8}
	}
	if c.Arbiter == (sched.Config{}) {
		c.Arbiter = sched.Config{Levels: 8, Mode: sched.DWRR, Quantum: 65536, BurstLimit: 16}
	}
}

// The largest values a configuration may ask for: beyond them a table or
// a queue's ring would not fit the index types (QPNs and CQNs are 24
// bits) or a ring's size would not fit memory. They are well above what
// hardware RNICs offer (ConnectX: 32K WRs, 30 SGEs, 4M CQEs).
const (
	maxQPs      = 1<<24 - FirstQPN
	maxObjects  = 1 << 24 // CQs, MRs, SRQs
	maxWR       = 1 << 16
	maxSGE      = 256
	maxInline   = 4096
	maxCQE      = 1 << 22
	maxDMAUnits = 256
)

// Validate reports the first field of a configuration (defaults filled
// in) out of range.
func (c *CoreConfig) Validate() error {
	for _, f := range []struct {
		name     string
		v, limit int
	}{
		{"MaxQP", c.MaxQP, maxQPs}, {"MaxCQ", c.MaxCQ, maxObjects}, {"MaxMR", c.MaxMR, maxObjects - 1},
		{"MaxSRQ", c.MaxSRQ, maxObjects}, {"MaxQPWR", c.MaxQPWR, maxWR}, {"MaxSGE", c.MaxSGE, maxSGE},
		{"MaxInline", c.MaxInline, maxInline}, {"MaxCQE", c.MaxCQE, maxCQE}, {"MaxSRQWR", c.MaxSRQWR, maxWR},
		{"DMAEngines", c.DMAEngines, maxDMAUnits},
	} {
		if f.v < 1 || f.v > f.limit {
			return fmt.Errorf("%s %d out of range [1, %d]", f.name, f.v, f.limit)
		}
	}
	if c.PageShift < 12 || c.PageShift > 30 {
		return fmt.Errorf("page size 2^%d out of range [4 KiB, 1 GiB]", c.PageShift)
	}
	return nil
}

// Core is one RNIC's hardware, assembled: the QPC and CQC tables, the
// ATU with its MPT and MTT, the DMA engine cluster, and the protocol
// engine with its arbiter and context caches. It does nothing by itself:
// a driver runs the engine on a clock.
type Core struct {
	Config CoreConfig // with the defaults filled in
	Host   bus.Mapper
	ATU    *atu.ATU
	DMA    *dma.Cluster
	QPs    *Table[QP]
	CQs    *Table[CQ]
	AHs    *AHTable
	Engine *Engine
}

// NewCore builds a device from cfg (defaults filled in, then validated).
func NewCore(cfg CoreConfig) (*Core, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Host == nil {
		cfg.Host = new(bus.Local)
	}
	u, err := atu.New(atu.Config{MaxMR: cfg.MaxMR, PageShift: cfg.PageShift, MPTCache: cfg.MPTCache, MTTCache: cfg.MTTCache, Host: cfg.Host, UTLB: cfg.UTLB, BestPageSize: cfg.BestPageSize})
	if err != nil {
		return nil, err
	}
	dm, err := dma.New(cfg.DMAEngines, cfg.Host)
	if err != nil {
		return nil, err
	}
	c := &Core{Config: cfg, Host: cfg.Host, ATU: u, DMA: dm, QPs: NewTable[QP](FirstQPN, cfg.MaxQP), CQs: NewTable[CQ](1, cfg.MaxCQ), AHs: new(AHTable)}
	e := cfg.Engine
	if e.DCQCN != nil {
		if err := e.DCQCN.Validate(); err != nil {
			return nil, err
		}
		cc := *e.DCQCN // the engine's own copy
		e.DCQCN = &cc
	}
	e.ATU, e.DMA, e.QPs, e.CQs, e.AHs = u, dm, c.QPs, c.CQs, c.AHs
	e.QPCCache, e.CQCCache = cfg.QPCCache, cfg.CQCCache
	e.Arbiter = cfg.Arbiter
	e.Arbiter.Queues = min(cfg.MaxQP, 1024)
	e.MaxQPRdAtom, e.MaxQPInitRdAtom = cfg.MaxQPRdAtom, cfg.MaxQPRdAtom
	e.MaxUnackedPSNs, e.MaxReadPSNs = cfg.MaxUnackedPSNs, cfg.MaxReadPSNs
	if c.Engine, err = NewEngine(e); err != nil {
		return nil, err
	}
	return c, nil
}
