package wire

// PSNMask selects the 24 bits of a packet sequence number.
const PSNMask = 0xFFFFFF

// PSN is a 24-bit packet sequence number. PSNs wrap from 0xFFFFFF to 0, so
// they must never be compared with < or >: use Diff, Before, After and
// InWindow, which treat the space as a circle (as rxe's psn_compare does).
type PSN uint32

// Add returns p+n modulo 2^24.
func (p PSN) Add(n uint32) PSN { return PSN((uint32(p) + n) & PSNMask) }

// Next returns the PSN after p.
func (p PSN) Next() PSN { return p.Add(1) }

// Diff returns the signed distance p−q in [−2^23, 2^23): positive when p is
// after q on the circle.
func (p PSN) Diff(q PSN) int32 { return int32((uint32(p)-uint32(q))<<8) >> 8 }

// Before reports whether p comes before q (p−q < 0).
func (p PSN) Before(q PSN) bool { return p.Diff(q) < 0 }

// After reports whether p comes after q (p−q > 0).
func (p PSN) After(q PSN) bool { return p.Diff(q) > 0 }

// InWindow reports whether p lies in the n PSNs starting at first
// (first ≤ p < first+n on the circle), as a responder checks a request
// against its window of expected PSNs.
func (p PSN) InWindow(first PSN, n uint32) bool {
	return (uint32(p)-uint32(first))&PSNMask < n
}

// String returns the PSN in decimal, as rxe and Wireshark print it.
func (p PSN) String() string { return itoa(uint64(p)) }
