// Package atu is the RNIC's address translation unit and the memory tables
// it walks.
//
// Host memory the NIC may touch is described by two tables that, on a
// hardware RNIC, live in host memory and are cached on chip:
//
//	MPT (memory protection table): one entry per memory region (MR) or
//	    memory window (MW), indexed by key>>8. It holds the key, protection
//	    domain, access rights, virtual range and where the region's pages
//	    start in the MTT.
//	MTT (memory translation table): one entry per page of every region,
//	    mapping the region's virtual pages to host pages.
//
// Translate takes (key, virtual address, length, rights) and, after every
// protection check the spec requires (key and key variant, PD, bounds,
// access rights, 8-byte alignment for atomics, the QP a type 2 window is
// bound to), returns the host memory segments that back the range. The DMA
// engines copy to and from those segments; nothing else in the NIC touches
// registered memory.
//
// Both tables are read through set-associative caches (internal/hw/cache),
// which model the on-chip SRAM: a miss is a PCIe read of the entry from
// host memory. Deregistering a region or rebinding a window invalidates its
// cached entries, as the driver's SYNC_TPT command does on hardware.
//
// A "host page" here is a slice of the caller's registered []byte. The Go
// heap does not move, and the MR keeps the buffer alive, so a page slice is
// exactly what a physical page address is to a hardware DMA engine: it
// reaches the registered bytes and nothing else. A page at either end of a
// region may be partial; its entry records the page offset its bytes start at.
package atu
