package device

import (
	"fmt"
	"net/netip"

	"github.com/rnic/rnic/internal/nic"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// Config describes one NIC, for either clock: the verbs layer fills it
// from its Options once, a virtual clock's profile replaces the hardware
// it describes (sim/vclock), and Assemble makes the NIC's core from it.
type Config struct {
	Name string     // "": the clock names it
	Addr netip.Addr // GID index 0; invalid: the link's, or the clock assigns one
	MTU  wire.MTU   // the port's active MTU; 0: the largest the link carries
	// Core holds the device's limits (ibv_device_attr) and its hardware:
	// page size, caches, DMA engines, arbiter, windows. Zero fields take
	// transport.CoreConfig's defaults. Its UTLB, BestPageSize and
	// MaxReadPSNs are Assemble's to set, from Choices.
	Core    transport.CoreConfig
	Choices Choices
	// DCQCN turns on congestion control; nil: none.
	DCQCN *transport.DCQCN
	// Trace receives the protocol engine's debug log (nil: off).
	Trace func(string)
}

// Choices are the design choices of rnic's NIC beyond the sizes a
// hardware description gives. Every NIC makes them alike, whichever clock
// runs it; the zero value is rnic's NIC, and a virtual clock's profile
// may describe hardware that chose otherwise.
type Choices struct {
	// NoUTLB removes the micro-TLB in front of the MPT and MTT caches (16
	// MPT and 64 MTT entries, direct mapped: atu.Config.UTLB), so every
	// lookup reaches the caches.
	NoUTLB bool
	// FixedPages keeps every region's MTT pages at the configured page
	// size; by default a region registered without a page size gets the
	// largest page its length calls for (atu.Config.BestPageSize), as
	// mlx5 picks the best page size for contiguous memory.
	FixedPages bool
	// ReadBudgetPSNs bounds the READ response packets the NIC has asked
	// for and not yet received, across its QPs (0: DefaultReadBudgetPSNs;
	// negative: no bound).
	ReadBudgetPSNs int
}

// DefaultReadBudgetPSNs is the READ responses a NIC asks for at once:
// twice what the wall-clock NIC's receive queue holds (512 frames),
// plenty for any bandwidth-delay product (4 MiB in flight at MTU 4096).
const DefaultReadBudgetPSNs = 1024

// Assemble returns the configuration of the NIC's core (transport.NewCore):
// c.Core with the hardware choices applied. It is the one place where
// they are made, for both clocks.
func (c *Config) Assemble() (transport.CoreConfig, error) {
	hw := c.Core
	hw.UTLB = !c.Choices.NoUTLB
	hw.BestPageSize = !c.Choices.FixedPages
	switch b := c.Choices.ReadBudgetPSNs; {
	case b == 0:
		hw.MaxReadPSNs = DefaultReadBudgetPSNs
	case b < 0:
		hw.MaxReadPSNs = 0 // no bound
	case b > transport.MaxReadBudget:
		return hw, fmt.Errorf("device: a READ budget of %d packets is more than half the PSN space (%d)", b, transport.MaxReadBudget)
	default:
		hw.MaxReadPSNs = uint32(b)
	}
	return hw, nil
}

// OpenWall starts a NIC described by c on link l in real time: the
// wall-clock driver and what the verbs layer needs of the NIC.
func OpenWall(c Config, l link.Link) (Wall, NIC, error) {
	hw, err := c.Assemble()
	if err != nil {
		return Wall{}, NIC{}, err
	}
	d, err := nic.New(nic.Config{Name: c.Name, Link: l, Addr: c.Addr, MTU: c.MTU,
		CoreConfig: hw, Trace: c.Trace, DCQCN: c.DCQCN})
	if err != nil {
		return Wall{}, NIC{}, err
	}
	cfg := d.Config()
	return Wall{Device: d}, NIC{Name: c.Name, ATU: d.ATU, QPs: d.QPs, CQs: d.CQs, AHs: d.AHs, GID: d.GID(),
		Core: cfg.CoreConfig, MTU: cfg.MTU}, nil
}
