// Package mad is the wire format of management datagrams (MADs): the
// 256-byte messages that the general services interface carries on QP1,
// each a UD SEND with Q_Key GSIQKey to QP 1 (IBTA Vol. 1 §13.4), over
// RoCEv2 like any other UD packet. It holds the common MAD header and the
// communication management (CM) class's messages (§12.6: REQ, MRA, REJ,
// REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP), and the header that
// rdma_cm puts at the start of a REQ's private data (addresses and port).
//
// It sits beside package wire: wire parses the frame (IP, UDP, BTH,
// DETH) and hands over its payload; this package reads and writes the
// MAD in it. MAD is a view over the 256 bytes; MAD.Message decodes the
// CM message it holds into a struct of every field (*REQ, *REP, ...) and
// MAD.SetMessage encodes one, so that a message re-encodes
// byte-identically (TestGolden holds that for every CM MAD captured from
// Linux's CM between two rxe hosts, testdata/cm). Field positions follow
// the spec's tables: a field starts at a byte, at a bit counted from that
// byte's most significant bit, and runs for its width, big-endian.
// Accessors do not check lengths: Parse is the gate.
package mad
