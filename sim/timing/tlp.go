package timing

// TLP framing overheads in bytes per TLP, as in the pcie-bench model
// (github.com/pcie-bench/pcie-model, model/pcie.py): 8 bytes of data link
// layer and physical framing (start, sequence number, LCRC, end), a 4-byte
// TLP header DW0, and the type-specific rest of the header, with 64-bit
// addresses and no ECRC.
const (
	// ReadReqOverheadBytes is a memory read request (MRd): 8 + 4 + 12.
	// It carries no data.
	ReadReqOverheadBytes = 24
	// CplOverheadBytes is a completion with data (CplD): 8 + 4 + 8.
	CplOverheadBytes = 20
	// WriteOverheadBytes is a memory write (MWr), posted: 8 + 4 + 12.
	WriteOverheadBytes = 24
)

// ReadTLPs returns how many request TLPs (upstream, device to host) and
// completion TLPs (downstream) a DMA read of n bytes takes when requests
// are at most mrrs bytes (Max_Read_Request_Size) and completions at most
// mps bytes (Max_Payload_Size). Each request is answered by its own
// completions; the host is assumed to complete at MPS granularity from
// an aligned address (no extra completion at a read completion boundary).
func ReadTLPs(n, mrrs, mps int) (requests, completions int) {
	if n <= 0 {
		return 0, 0
	}
	full := n / mrrs
	requests = full
	completions = full * ceilDiv(mrrs, mps)
	if rest := n % mrrs; rest > 0 {
		requests++
		completions += ceilDiv(rest, mps)
	}
	return requests, completions
}

// WriteTLPs returns how many memory write TLPs carry n bytes with a
// Max_Payload_Size of mps.
func WriteTLPs(n, mps int) int {
	if n <= 0 {
		return 0
	}
	return ceilDiv(n, mps)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
