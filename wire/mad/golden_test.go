package mad_test

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/mad"
	"github.com/rnic/rnic/wire/pcap"
)

// captured is a MAD to QP1 from a capture.
type captured struct {
	file string
	num  int
	mad  mad.MAD
}

// readMADs returns every MAD sent to QP1 in the CM captures: rping's
// connection (testdata/roce/rdmacm_rping.pcap) and, in testdata/cm, a
// REQ nobody listens for (rdmacm_rej), udaddy's SIDR exchange and
// ucmatose's connection, all between two rxe hosts on Linux 6.1 (the
// rxe-peer harness; testdata/cm/README.md).
func readMADs(t *testing.T) []captured {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "cm", "*.pcap"))
	paths = append(paths, filepath.Join("..", "..", "testdata", "roce", "rdmacm_rping.pcap"))
	var out []captured
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := pcap.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for num := 1; ; num++ {
			data, _, err := r.Next()
			if err != nil {
				break
			}
			ip, ok := pcap.IPPacket(r.LinkType(), data)
			if !ok {
				continue
			}
			var p wire.Packet
			if err := p.Parse(append([]byte(nil), ip...)); err != nil || p.BTH.DestQP() != mad.GSIQPN {
				continue
			}
			if p.Op != wire.OpUDSendOnly || p.DETH.QKey() != mad.GSIQKey || p.DETH.SrcQP() != mad.GSIQPN {
				t.Errorf("%s #%d: to QP1 as %v, Q_Key %#x from QP %d; want a UD SEND with the GSI Q_Key from QP1", filepath.Base(path), num, p.Op, p.DETH.QKey(), p.DETH.SrcQP())
			}
			m, err := mad.Parse(p.Payload)
			if err != nil || len(p.Payload) != mad.Size {
				t.Errorf("%s #%d: %d bytes: %v", filepath.Base(path), num, len(p.Payload), err)
				continue
			}
			out = append(out, captured{filepath.Base(path), num, m})
		}
		f.Close()
	}
	return out
}

// reencode decodes m and encodes its header and message into a new MAD.
func reencode(t *testing.T, m mad.MAD) mad.MAD {
	n := mad.MAD(make([]byte, mad.Size))
	h := m.Header()
	n.SetHeader(&h)
	msg, err := m.Message()
	if err != nil {
		t.Errorf("attribute %v in a capture: %v", m.Attr(), err)
		return n
	}
	n.SetMessage(msg)
	return n
}

// message decodes the first message of attribute a in file.
func message[T mad.Message](t *testing.T, mads []captured, file string, a mad.Attr) T {
	t.Helper()
	for _, c := range mads {
		if c.file == file && c.mad.Attr() == a {
			msg, err := c.mad.Message()
			if err != nil {
				t.Fatal(err)
			}
			return msg.(T)
		}
	}
	t.Fatalf("no %v in %s", a, file)
	var zero T
	return zero
}

// TestGolden: every CM MAD that Linux's CM sent between two rxe hosts
// parses, and decoding it into its message's fields and encoding them
// again gives the captured bytes exactly (so no bit of a message falls
// outside a field or lands in the wrong one); the fields an independent
// decoder (Wireshark 4.0's, and the data packets of the same captures)
// shows have those values.
func TestGolden(t *testing.T) {
	mads := readMADs(t)
	seen := map[mad.Attr]int{}
	for _, c := range mads {
		h := c.mad.Header()
		if h.Class != mad.ClassCM || h.ClassVersion != mad.ClassVersionCM || h.Method != mad.MethodSend {
			t.Errorf("%s #%d: class %#x version %d method %#x", c.file, c.num, h.Class, h.ClassVersion, h.Method)
		}
		seen[c.mad.Attr()]++
		if got := reencode(t, c.mad); !bytes.Equal(got, c.mad) {
			for i := range got {
				if got[i] != c.mad[i] {
					t.Errorf("%s #%d %v: byte %d re-encoded %#02x, captured %#02x", c.file, c.num, c.mad.Attr(), i, got[i], c.mad[i])
					break
				}
			}
		}
	}
	for _, a := range []mad.Attr{mad.AttrREQ, mad.AttrREP, mad.AttrRTU, mad.AttrREJ, mad.AttrDREQ, mad.AttrDREP, mad.AttrSIDRREQ, mad.AttrSIDRREP} {
		if seen[a] == 0 {
			t.Errorf("no %v in the captures", a)
		}
	}
	t.Logf("%d MADs: %v", len(mads), seen)

	// rping's REQ and REP, as Wireshark decodes them, but for the
	// primary path's flow label and packet rate: bytes 88-91 of the REQ
	// are 1d ef 90 00, a flow label of 0x1def9 in the top 20 bits and a
	// packet rate of 0 in the low 6 (Table 106), which Wireshark 4.0
	// shows as 0x001de and 0x1d.
	req := *message[*mad.REQ](t, mads, "rdmacm_rping.pcap", mad.AttrREQ)
	want := mad.REQ{
		LocalCommID: 0x14781e41, ServiceID: mad.ServiceID(mad.PortSpaceTCP, 7174), LocalCAGUID: 0x505400fffec6120c,
		LocalQPN: 0x1c, ResponderResources: 1, InitiatorDepth: 1, RemoteCMResponseTimeout: 0x14,
		StartingPSN: 0xf66a16, LocalCMResponseTimeout: 0x14, RetryCount: 7, PKey: 0xffff, PathMTU: 3,
		RNRRetryCount: 7, MaxCMRetries: 15,
		Primary: mad.Path{LocalLID: 0xffff, RemoteLID: 0xffff, LocalGID: wire.GIDFromAddr(netip.MustParseAddr("198.18.0.12")),
			RemoteGID: wire.GIDFromAddr(netip.MustParseAddr("198.18.0.11")), FlowLabel: 0x1def9, PacketRate: 0, HopLimit: 0x40, LocalAckTimeout: 0x13},
		PrivateData: req.PrivateData,
	}
	if req != want {
		t.Errorf("rping's REQ:\n got %+v\nwant %+v", req, want)
	}
	cma, err := mad.DecodeCMAHeader(req.PrivateData[:], req.ServiceID)
	if wantCMA := (mad.CMAHeader{Src: netip.MustParseAddrPort("198.18.0.12:37549"), Dst: netip.MustParseAddrPort("198.18.0.11:7174")}); err != nil || cma != wantCMA {
		t.Errorf("rping's rdma_cm header: %+v %v, want %+v", cma, err, wantCMA)
	}
	var p [mad.REQPrivateLen]byte
	cma.Encode(p[:])
	if !bytes.Equal(p[:mad.CMAHeaderSize], req.PrivateData[:mad.CMAHeaderSize]) {
		t.Errorf("rdma_cm header re-encoded %x, captured %x", p[:mad.CMAHeaderSize], req.PrivateData[:mad.CMAHeaderSize])
	}
	rep := message[*mad.REP](t, mads, "rdmacm_rping.pcap", mad.AttrREP)
	if rep.LocalCommID != 0x7751a115 || rep.RemoteCommID != 0x14781e41 || rep.LocalQPN != 0x1c || rep.StartingPSN != 0x15aa93 ||
		rep.TargetACKDelay != 0x0f || rep.RNRRetryCount != 7 || rep.LocalCAGUID != 0x505400fffec6120b || rep.ResponderResources != 1 {
		t.Errorf("rping's REP: %+v", rep)
	}
	// A REQ for a port nobody listens on: REJ reason 8 to the REQ.
	rej := message[*mad.REJ](t, mads, "rdmacm_rej.pcap", mad.AttrREJ)
	if rej.Reason != uint16(mad.RejInvalidServiceID) || rej.MessageRejected != 0 || rej.RemoteCommID != message[*mad.REQ](t, mads, "rdmacm_rej.pcap", mad.AttrREQ).LocalCommID {
		t.Errorf("the REJ: %+v", rej)
	}
	// udaddy's SIDR: the service ID of UDP port 7174, and the reply
	// names the server's UD QP (the one the client's datagrams go to,
	// QPN 0x11) and rdma_cm's UD Q_Key (RDMA_UDP_QKEY).
	sreq := message[*mad.SIDRREQ](t, mads, "rdmacm_udaddy.pcap", mad.AttrSIDRREQ)
	srep := message[*mad.SIDRREP](t, mads, "rdmacm_udaddy.pcap", mad.AttrSIDRREP)
	if sreq.ServiceID != mad.ServiceID(mad.PortSpaceUDP, 7174) || sreq.PKey != 0xffff {
		t.Errorf("udaddy's SIDR_REQ: %+v", sreq)
	}
	if srep.RequestID != sreq.RequestID || srep.Status != uint8(mad.SIDRQPValid) || srep.QPN != 0x11 || srep.QKey != 0x01234567 || srep.ServiceID != sreq.ServiceID {
		t.Errorf("udaddy's SIDR_REP: %+v", srep)
	}
}
