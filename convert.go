package rnic

import (
	"fmt"
	"unsafe"

	"github.com/rnic/rnic/internal/transport"
)

// The API's work requests and completions are converted into the protocol
// engine's own types at the boundary, one at a time, into values on the
// stack: nothing on the data path allocates (TestDataPathAllocs counts).
//
// An SGL is not copied at all. SGE and transport.SGE have identical
// underlying types (the same field names and types in the same order),
// so Go converts a *SGE into a *transport.SGE without unsafe.Pointer, and
// the compiler rejects the conversion the day the two differ; unsafe.Slice
// then gives the slice over the caller's own array. The alternatives are
// worse: copying SGEs into a fixed stack array bounds the SGL (or
// allocates past the bound), and converting the whole SendWR by pointer
// would need unsafe.Pointer between struct types that are merely laid out
// alike (SendWR's SGL, AH and Bind fields have different types), which no
// compiler check protects. The send queue copies each SGE once, as a
// NIC's WQE fetch does.

// sgl returns s as the engine's SGE slice, sharing s's array.
func sgl(s []SGE) []transport.SGE {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*transport.SGE)(&s[0]), len(s))
}

// sendWR converts wr into t for qp; it refuses an address handle that was
// destroyed or belongs to another protection domain.
func (qp *QP) sendWR(wr *SendWR, t *transport.SendWR) error {
	*t = transport.SendWR{
		WRID:           wr.WRID,
		Opcode:         transport.WROpcode(wr.Opcode),
		Flags:          transport.SendFlags(wr.Flags),
		SGL:            sgl(wr.SGL),
		ImmData:        wr.ImmData,
		InvalidateRKey: wr.InvalidateRKey,
		RemoteAddr:     wr.RemoteAddr,
		RKey:           wr.RKey,
		CompareAdd:     wr.CompareAdd,
		Swap:           wr.Swap,
		RemoteQPN:      wr.RemoteQPN,
		RemoteQKey:     wr.RemoteQKey,
		Bind: transport.MWBindInfo{
			MW: wr.Bind.MW, NewKey: wr.Bind.NewKey, MR: wr.Bind.MR,
			Addr: wr.Bind.Addr, Length: wr.Bind.Length, Access: atuAccess(wr.Bind.Access),
		},
	}
	if ah := wr.AH; ah != nil {
		if ah.pd != qp.pd {
			return fmt.Errorf("%w: address handle of another protection domain", transport.ErrInvalidWR)
		}
		if ah.dead.Load() {
			return fmt.Errorf("%w: address handle was destroyed", ErrClosed)
		}
		t.AH = ah.ah
	}
	return nil
}

// recvWR converts wr into t.
func recvWR(wr *RecvWR, t *transport.RecvWR) {
	*t = transport.RecvWR{WRID: wr.WRID, SGL: sgl(wr.SGL)}
}

// set fills w from the engine's completion t.
func (w *WC) set(t *transport.WC) {
	*w = WC{
		WRID:            t.WRID,
		Status:          WCStatus(t.Status),
		Opcode:          WCOpcode(t.Opcode),
		Flags:           WCFlags(t.Flags),
		VendorErr:       t.VendorErr,
		ByteLen:         t.ByteLen,
		ImmData:         t.ImmData,
		InvalidatedRKey: t.InvalidatedRKey,
		QPNum:           t.QPNum,
		SrcQP:           t.SrcQP,
		PKeyIndex:       t.PKeyIndex,
		SL:              t.SL,
	}
}
