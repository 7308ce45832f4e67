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
// A "host page" is a bus address (internal/hw/bus): the MTT holds, for
// each page of a region, where its bytes lie in the region's address space
// on the DMA bus, and Translate returns extents of that space, as a
// hardware MTT holds DMA addresses. The DMA engines read and write them
// through the bus (Config.Host). RegMR with a buffer of the program's own
// memory maps it on the bus (each buffer a space of its own) and DeregMR
// unmaps it; a region may instead name memory the bus already reaches
// (another process's), or none at all (the simulator's metadata mode). A
// page at either end of a region may be partial; its entry records the
// page offset its bytes start at.
package atu
