package sched

// Stats are the arbiter's counters, all monotonic.
type Stats struct {
	// Doorbells counts Ring calls.
	Doorbells uint64
	// Coalesced counts doorbells absorbed because the queue was already
	// ready (or already rung during its turn).
	Coalesced uint64
	// Grants counts turns handed out by Next.
	Grants uint64
	// LevelGrants counts turns per level.
	LevelGrants [MaxLevels]uint64
	// Rounds counts round-robin rounds started, summed over levels.
	Rounds uint64
	// Packets and Bytes sum what Done reported.
	Packets, Bytes uint64
	// Removed counts Remove calls that took a queue off a ready list or
	// out of service.
	Removed uint64
	// Refused counts turns the Gate refused.
	Refused uint64
}
