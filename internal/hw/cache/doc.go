// Package cache models the on-chip SRAM caches of an RNIC: one generic
// set-associative cache (LRU, FIFO or random replacement), instantiated once
// per host-memory table the NIC reads on its data path.
//
// # What it models
//
// A hardware RNIC keeps its per-object state in host memory: QP contexts
// (QPC), memory protection table entries (MPT), memory translation table
// entries (MTT) and CQ contexts (CQC). Reading host memory costs a PCIe round
// trip, so the NIC keeps the entries it is working on in a small on-chip SRAM.
// The NIC asks the cache first; on a miss it reads the entry from the host
// table (in the timing model: a PCIe read of Config.EntryBytes) and fills the
// cache, evicting the least recently used entry of the set when the set is
// full. When the SRAM is too small for the working set (many QPs, large MRs)
// misses dominate and throughput collapses; that is the effect the simulator
// studies, so the geometry is faithful and the counters are exact:
//
//	NIC lookup ──► Lookup ──hit──► entry
//	                  │miss
//	                  ▼
//	           host table read (PCIe, EntryBytes) ──► Fill ──► entry
//	                                                   │set full
//	                                                   ▼
//	                                            evict set's LRU entry
//
// Get does the whole sequence in one call.
//
// # Geometry
//
//	entries = CapacityBytes / EntryBytes   (rounded down)
//	ways    = Ways, or entries when Ways is 0 or >= entries (fully associative)
//	sets    = entries / ways               (rounded down to whole sets)
//	set     = mix(hash(key)) mod sets
//
// When entries is not a multiple of ways the leftover entries are dropped, as
// a hardware designer would not build a partial set; Entries reports the
// capacity actually modelled. mix is the MurmurHash3 64-bit finalizer, a
// bijection that spreads sequential keys (QPNs, page numbers) across the sets
// so that the caller's hash can be as simple as the identity. CapacityBytes 0
// models a NIC without that cache: every lookup misses and nothing is stored.
//
// Replacement is chosen by Config.Policy: true LRU within a set (the
// default), FIFO (hits do not reorder), or Random (a way drawn from a
// splitmix64 generator seeded by Config.Seed, so runs are reproducible).
// The order is kept as a doubly linked list per set in fixed arrays, with
// free slots at its tail under every policy. Sets of at most 8 ways are searched by comparing all the
// set's tags at once, as a hardware comparator per way would; wider sets (a
// fully associative MTT cache of tens of thousands of entries) use a hash
// index from key to slot, where a scan would cost a nanosecond per way. Both
// live in arrays sized at New, so Lookup, Fill, Get, Invalidate, InvalidateFunc
// and Flush never allocate.
//
// # Counters
//
// Stats reports hits, misses, fills (entries written into a free or evicted
// slot, one per host-table read that was cached), updates (Fill of a key
// already cached), evictions and invalidations (entries dropped by
// Invalidate, InvalidateFunc or Flush). Starting from an empty cache,
// Entries = Fills - Evictions - Invalidations.
//
// A Cache is not safe for concurrent use: like the SRAM it models, it has one
// owner, the NIC engine that serves the objects it caches.
package cache
