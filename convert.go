package rnic

import (
	"fmt"
	"unsafe"

	"github.com/rnic/rnic/internal/transport"
)

// The API's work requests and completions meet the protocol engine's own
// types at the boundary; nothing on the data path allocates
// (TestDataPathAllocs counts).
//
// A work request is converted one at a time into a value on the stack and
// written into the send queue from there. Its SGL is not copied at all:
// SGE and transport.SGE have identical underlying types (the same field
// names and types in the same order), so Go converts a *SGE into a
// *transport.SGE without unsafe.Pointer, and the compiler rejects the
// conversion the day the two differ; unsafe.Slice then gives the slice
// over the caller's own array. Copying SGEs into a fixed stack array
// instead would bound the SGL (or allocate past the bound). The send
// queue copies each SGE once, as a NIC's WQE fetch does.
//
// Completions go the other way and are not converted at all: WC has
// transport.WC's fields in the same order, each of the same size, and
// the status, opcode and flag types carry the engine's values
// (TestConstantsMatchEngine), so the engine writes completions straight
// into the caller's []WC, reinterpreted as []transport.WC (wcs). The
// assertions below make the build fail if an offset or the size ever
// differs. A per-completion copy through a stack array, the alternative,
// costs ~70 ns on every empty busy poll (clearing the array, a second
// loop), a quarter of the poll itself; SendWR cannot be reinterpreted that
// way, since its SGL, AH and Bind fields have different types.

// Each of these fails to compile unless the two offsets (or sizes) are
// equal: [n]struct{} is assignable to [0]struct{} only for n == 0.
var (
	_ [0]struct{} = [unsafe.Sizeof(WC{}) - unsafe.Sizeof(transport.WC{})]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(WC{}.Status) - unsafe.Offsetof(transport.WC{}.Status)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(WC{}.Opcode) - unsafe.Offsetof(transport.WC{}.Opcode)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(WC{}.Flags) - unsafe.Offsetof(transport.WC{}.Flags)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(WC{}.VendorErr) - unsafe.Offsetof(transport.WC{}.VendorErr)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(WC{}.ByteLen) - unsafe.Offsetof(transport.WC{}.ByteLen)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(WC{}.ImmData) - unsafe.Offsetof(transport.WC{}.ImmData)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(WC{}.InvalidatedRKey) - unsafe.Offsetof(transport.WC{}.InvalidatedRKey)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(WC{}.QPNum) - unsafe.Offsetof(transport.WC{}.QPNum)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(WC{}.SrcQP) - unsafe.Offsetof(transport.WC{}.SrcQP)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(WC{}.PKeyIndex) - unsafe.Offsetof(transport.WC{}.PKeyIndex)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(WC{}.SL) - unsafe.Offsetof(transport.WC{}.SL)]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(WC{}.Status) - unsafe.Sizeof(transport.WC{}.Status)]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(WC{}.Opcode) - unsafe.Sizeof(transport.WC{}.Opcode)]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(WC{}.Flags) - unsafe.Sizeof(transport.WC{}.Flags)]struct{}{}
)

// wcs returns w as the engine's completion slice, sharing w's array.
func wcs(w []WC) []transport.WC {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*transport.WC)(unsafe.Pointer(&w[0])), len(w))
}

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
		Flush: transport.FlushInfo(wr.Flush),
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
