package wire

// The opcode table is built once, from the structure of IBTA Table 38: an
// opcode is a transport (top three bits) and an operation (low five bits),
// and an operation means the same thing and carries the same headers on
// every transport that defines it; UD adds a DETH. Header offsets and
// lengths are derived from the header flags, so they cannot disagree.

// operations describes each operation code (the low five bits of an opcode).
var operations = [32]struct {
	name  string
	flags OpFlags
}{
	0x00: {"SEND_FIRST", FlagRequest | FlagSend | FlagPayload | FlagFirst | FlagConsumesRecvWQE},
	0x01: {"SEND_MIDDLE", FlagRequest | FlagSend | FlagPayload | FlagConsumesRecvWQE},
	0x02: {"SEND_LAST", FlagRequest | FlagSend | FlagPayload | FlagLast | FlagConsumesRecvWQE | FlagCompletes},
	0x03: {"SEND_LAST_IMM", FlagRequest | FlagSend | FlagPayload | FlagLast | FlagConsumesRecvWQE | FlagCompletes | FlagImmDt | FlagImm},
	0x04: {"SEND_ONLY", FlagRequest | FlagSend | FlagPayload | FlagFirst | FlagLast | FlagConsumesRecvWQE | FlagCompletes},
	0x05: {"SEND_ONLY_IMM", FlagRequest | FlagSend | FlagPayload | FlagFirst | FlagLast | FlagConsumesRecvWQE | FlagCompletes | FlagImmDt | FlagImm},
	0x06: {"RDMA_WRITE_FIRST", FlagRequest | FlagWrite | FlagPayload | FlagFirst | FlagRETH},
	0x07: {"RDMA_WRITE_MIDDLE", FlagRequest | FlagWrite | FlagPayload},
	0x08: {"RDMA_WRITE_LAST", FlagRequest | FlagWrite | FlagPayload | FlagLast},
	0x09: {"RDMA_WRITE_LAST_IMM", FlagRequest | FlagWrite | FlagPayload | FlagLast | FlagConsumesRecvWQE | FlagCompletes | FlagImmDt | FlagImm},
	0x0A: {"RDMA_WRITE_ONLY", FlagRequest | FlagWrite | FlagPayload | FlagFirst | FlagLast | FlagRETH},
	0x0B: {"RDMA_WRITE_ONLY_IMM", FlagRequest | FlagWrite | FlagPayload | FlagFirst | FlagLast | FlagRETH | FlagConsumesRecvWQE | FlagCompletes | FlagImmDt | FlagImm},
	0x0C: {"RDMA_READ_REQUEST", FlagRequest | FlagReadReq | FlagFirst | FlagLast | FlagRETH},
	0x0D: {"RDMA_READ_RESP_FIRST", FlagResponse | FlagReadResp | FlagPayload | FlagFirst | FlagAETH},
	0x0E: {"RDMA_READ_RESP_MIDDLE", FlagResponse | FlagReadResp | FlagPayload},
	0x0F: {"RDMA_READ_RESP_LAST", FlagResponse | FlagReadResp | FlagPayload | FlagLast | FlagAETH},
	0x10: {"RDMA_READ_RESP_ONLY", FlagResponse | FlagReadResp | FlagPayload | FlagFirst | FlagLast | FlagAETH},
	0x11: {"ACK", FlagResponse | FlagAck | FlagFirst | FlagLast | FlagAETH},
	0x12: {"ATOMIC_ACK", FlagResponse | FlagAck | FlagFirst | FlagLast | FlagAETH | FlagAtomicAckETH},
	0x13: {"CMP_SWAP", FlagRequest | FlagAtomic | FlagFirst | FlagLast | FlagAtomicETH},
	0x14: {"FETCH_ADD", FlagRequest | FlagAtomic | FlagFirst | FlagLast | FlagAtomicETH},
	// 0x15 is RESYNC, defined for RD only.
	0x16: {"SEND_LAST_INV", FlagRequest | FlagSend | FlagPayload | FlagLast | FlagConsumesRecvWQE | FlagCompletes | FlagIETH | FlagInv},
	0x17: {"SEND_ONLY_INV", FlagRequest | FlagSend | FlagPayload | FlagFirst | FlagLast | FlagConsumesRecvWQE | FlagCompletes | FlagIETH | FlagInv},
	// IBTA 1.5 (RC only): both are answered with a zero-length RDMA READ
	// RESPONSE ONLY, and replayed like a READ when duplicated.
	0x1C: {"FLUSH", FlagRequest | FlagFlush | FlagFirst | FlagLast | FlagFETH | FlagRETH},
	0x1D: {"ATOMIC_WRITE", FlagRequest | FlagAtomicWrite | FlagPayload | FlagFirst | FlagLast | FlagRETH},
}

// transports lists, per transport, the operations it defines (a bit per
// operation code) and the headers it adds to each.
var transports = [...]struct {
	t     Transport
	ops   uint32
	extra OpFlags
}{
	{TransportRC, (1<<0x18-1)&^(1<<0x15) | 1<<0x1C | 1<<0x1D, 0}, // 0x00–0x14, 0x16, 0x17, FLUSH, ATOMIC_WRITE
	{TransportUC, 1<<0x0C - 1, 0},                                // sends and writes
	{TransportUD, 1<<0x04 | 1<<0x05, FlagDETH},                   // SEND_ONLY, SEND_ONLY_IMM
}

var opcodeTable = buildOpcodeTable()

func buildOpcodeTable() (tab [256]OpcodeInfo) {
	for i := range tab {
		tab[i].off = [numHeaders]int8{-1, -1, -1, -1, -1, -1, -1, -1}
	}
	for _, tr := range transports {
		for code, op := range operations {
			if tr.ops&(1<<code) == 0 {
				continue
			}
			opcode := Opcode(tr.t)<<5 | Opcode(code)
			tab[opcode] = newOpcodeInfo(tr.t.String()+"_"+op.name, tr.t, op.flags|tr.extra, 0)
		}
	}
	tab[OpCNP] = newOpcodeInfo("CNP", TransportCNP, FlagFirst|FlagLast, CNPReservedSize)
	return tab
}

// newOpcodeInfo lays the headers named by flags out after the BTH in IBTA
// order; reserved bytes follow them.
func newOpcodeInfo(name string, t Transport, flags OpFlags, reserved int) OpcodeInfo {
	info := OpcodeInfo{Name: name, Transport: t, Flags: flags, HdrLen: BTHSize}
	for h := Header(0); h < numHeaders; h++ {
		info.off[h] = -1
		if flags.Has(h.Flag()) {
			info.off[h] = int8(info.HdrLen)
			info.HdrLen += h.Size()
		}
	}
	info.HdrLen += reserved
	return info
}
