package rnic_test

import (
	"context"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic"
)

// Connection details as text and JSON, and their exchange over a
// net.Conn (issue 9, item 10).

var (
	ep4 = rnic.Endpoint{GID: rnic.GIDFromAddr(netip.MustParseAddr("10.0.0.1")), QPN: 0x11, PSN: 0x123456}
	ep6 = rnic.Endpoint{GID: rnic.GIDFromAddr(netip.MustParseAddr("fe80::1:2")), QPN: 0xFFFFFF, PSN: 0}
	rr  = rnic.RemoteRegion{Addr: 0xc000100000, Len: 4096, RKey: 0x1100}
	rrH = rnic.RemoteRegion{Addr: 1<<64 - 4096, Len: 4096, RKey: 0xFFFFFFFF}
)

func TestEndpointGolden(t *testing.T) {
	cases := []struct {
		v          encoding.TextMarshaler
		text, json string
	}{
		{ep4, "gid=::ffff:10.0.0.1 qpn=0x11 psn=0x123456", `{"gid":"::ffff:10.0.0.1","qpn":17,"psn":1193046}`},
		{ep6, "gid=fe80::1:2 qpn=0xffffff psn=0x0", `{"gid":"fe80::1:2","qpn":16777215,"psn":0}`},
		{rr, "addr=0xc000100000 len=4096 rkey=0x1100", `{"addr":"0xc000100000","len":4096,"rkey":4352}`},
		{rrH, "addr=0xfffffffffffff000 len=4096 rkey=0xffffffff", `{"addr":"0xfffffffffffff000","len":4096,"rkey":4294967295}`},
	}
	for _, c := range cases {
		text := must(c.v.MarshalText())
		if string(text) != c.text || c.v.(interface{ String() string }).String() != c.text {
			t.Errorf("text %q, want %q", text, c.text)
		}
		js := must(json.Marshal(c.v))
		if string(js) != c.json {
			t.Errorf("JSON %s, want %s", js, c.json)
		}
		// And back, from both.
		switch v := c.v.(type) {
		case rnic.Endpoint:
			var a, b rnic.Endpoint
			must0(t, a.UnmarshalText(text))
			must0(t, json.Unmarshal(js, &b))
			if a != v || b != v {
				t.Errorf("round trip of %v: text %v, JSON %v", v, a, b)
			}
		case rnic.RemoteRegion:
			var a, b rnic.RemoteRegion
			must0(t, a.UnmarshalText(text))
			must0(t, json.Unmarshal(js, &b))
			if a != v || b != v {
				t.Errorf("round trip of %v: text %v, JSON %v", v, a, b)
			}
		}
	}
}

// TestEndpointParseForms: the other spellings the parsers accept.
func TestEndpointParseForms(t *testing.T) {
	cases := []struct {
		in   string
		want rnic.Endpoint
	}{
		{"qpn=17 psn=1193046 gid=10.0.0.1", ep4},
		{"  gid=0000:0000:0000:0000:0000:ffff:0a00:0001\tqpn=0x11   psn=0x123456 ", ep4},
		{"gid=::ffff:10.0.0.1 qpn=0o21 psn=0x123456 future=1", ep4},
	}
	for _, c := range cases {
		var e rnic.Endpoint
		if err := e.UnmarshalText([]byte(c.in)); err != nil || e != c.want {
			t.Errorf("%q: %v, %v", c.in, e, err)
		}
	}
	var r rnic.RemoteRegion
	if err := json.Unmarshal([]byte(`{"addr":824634769408,"len":4096,"rkey":4352}`), &r); err != nil || r != rr {
		t.Errorf("addr as a JSON number: %v, %v", r, err)
	}
}

func TestEndpointParseErrors(t *testing.T) {
	cases := []struct {
		name, in, want string
		json           bool
		region         bool
	}{
		{"empty", "", "gid missing", false, false},
		{"no-psn", "gid=::1 qpn=1", "psn missing", false, false},
		{"not-kv", "gid=::1 qpn=1 psn", `"psn" is not key=value`, false, false},
		{"empty-key", "gid=::1 qpn=1 psn=2 =3", "not key=value", false, false},
		{"twice", "gid=::1 qpn=1 qpn=2 psn=3", "qpn given twice", false, false},
		{"qpn-25-bits", "gid=::1 qpn=0x1000000 psn=0", "qpn 0x1000000 exceeds 24 bits", false, false},
		{"psn-25-bits", "gid=::1 qpn=1 psn=16777216", "psn 0x1000000 exceeds 24 bits", false, false},
		{"qpn-negative", "gid=::1 qpn=-1 psn=0", `qpn "-1" is not a number`, false, false},
		{"bad-gid", "gid=10.0.0.300 qpn=1 psn=0", "gid", false, false},
		{"gid-zone", "gid=fe80::1%eth0 qpn=1 psn=0", "gid", false, false},
		{"json-not-object", `[1]`, "Endpoint", true, false},
		{"json-no-gid", `{"qpn":1,"psn":2}`, "gid missing", true, false},
		{"json-no-qpn", `{"gid":"::1","psn":2}`, "qpn missing", true, false},
		{"json-no-psn", `{"gid":"::1","qpn":2}`, "psn missing", true, false},
		{"json-qpn-big", `{"gid":"::1","qpn":16777216,"psn":2}`, "exceeds 24 bits", true, false},
		{"json-qpn-negative", `{"gid":"::1","qpn":-1,"psn":2}`, "Endpoint", true, false},
		{"json-gid-number", `{"gid":1,"qpn":1,"psn":2}`, "Endpoint", true, false},
		{"region-no-rkey", "addr=0x1000 len=1", "rkey missing", false, true},
		{"region-rkey-33-bits", "addr=0x1000 len=1 rkey=0x100000000", "exceeds 32 bits", false, true},
		{"region-wraps", "addr=0xfffffffffffff001 len=4096 rkey=1", "wrap around", false, true},
		{"region-addr-65-bits", "addr=0x10000000000000000 len=1 rkey=1", "not a number", false, true},
		{"region-json-no-addr", `{"len":1,"rkey":1}`, "addr missing", true, true},
		{"region-json-addr-bool", `{"addr":true,"len":1,"rkey":1}`, "neither a string nor", true, true},
		{"region-json-addr-text", `{"addr":"zz","len":1,"rkey":1}`, "not a number", true, true},
		{"region-json-wraps", `{"addr":"0xffffffffffffffff","len":2,"rkey":1}`, "wrap around", true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			switch {
			case c.region && c.json:
				var r rnic.RemoteRegion
				err = json.Unmarshal([]byte(c.in), &r)
			case c.region:
				var r rnic.RemoteRegion
				err = r.UnmarshalText([]byte(c.in))
			case c.json:
				var e rnic.Endpoint
				err = json.Unmarshal([]byte(c.in), &e)
			default:
				var e rnic.Endpoint
				err = e.UnmarshalText([]byte(c.in))
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%q: %v, want an error mentioning %q", c.in, err, c.want)
			}
		})
	}
}

// The unmarshalers take any input: an error or a value that marshals back
// to itself, never a panic.

func FuzzEndpointText(f *testing.F) {
	for _, s := range []string{ep4.String(), ep6.String(), "gid=::1 qpn=1 psn=1 x=", "qpn== psn=0x gid=::ffff:1.2.3.4"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var e rnic.Endpoint
		if e.UnmarshalText(b) != nil {
			return
		}
		var back rnic.Endpoint
		if err := back.UnmarshalText(must(e.MarshalText())); err != nil || back != e {
			t.Fatalf("%q parsed as %v, which round-trips to %v, %v", b, e, back, err)
		}
	})
}

func FuzzEndpointJSON(f *testing.F) {
	for _, v := range []rnic.Endpoint{ep4, ep6} {
		f.Add(must(json.Marshal(v)))
	}
	f.Add([]byte(`{"gid":"::1","qpn":1e3,"psn":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e rnic.Endpoint
		if json.Unmarshal(b, &e) != nil {
			return
		}
		var back rnic.Endpoint
		if err := json.Unmarshal(must(json.Marshal(e)), &back); err != nil || back != e {
			t.Fatalf("%q parsed as %v, which round-trips to %v, %v", b, e, back, err)
		}
	})
}

func FuzzRemoteRegion(f *testing.F) {
	f.Add([]byte(rr.String()), false)
	f.Add(must(json.Marshal(rrH)), true)
	f.Add([]byte(`{"addr":18446744073709551615,"len":0,"rkey":0}`), true)
	f.Fuzz(func(t *testing.T, b []byte, isJSON bool) {
		var r, back rnic.RemoteRegion
		if isJSON {
			if json.Unmarshal(b, &r) != nil {
				return
			}
			if err := json.Unmarshal(must(json.Marshal(r)), &back); err != nil || back != r {
				t.Fatalf("%q: %v round-trips to %v, %v", b, r, back, err)
			}
			return
		}
		if r.UnmarshalText(b) != nil {
			return
		}
		if err := back.UnmarshalText(must(r.MarshalText())); err != nil || back != r {
			t.Fatalf("%q: %v round-trips to %v, %v", b, r, back, err)
		}
	})
}

// FuzzExchange: whatever a peer sends, Exchange returns an error or the
// peer's details, bounded in time and memory.
func FuzzExchange(f *testing.F) {
	f.Add(peerMessage(must(json.Marshal(rnic.PeerInfo{Endpoint: ep4, Regions: []rnic.RemoteRegion{rr}}))))
	f.Add(peerMessage([]byte(`{"endpoint":{"gid":"::1","qpn":1,"psn":1},"regions":[{"addr":"0x1","len":1,"rkey":1}]}`)))
	f.Add([]byte("rnX1\xff\xff\xff\xff"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, peer []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			defer b.Close()
			go io.Copy(io.Discard, b) // take what Exchange sends
			b.Write(peer)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := rnic.Exchange(ctx, a, rnic.PeerInfo{Endpoint: ep6})
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Exchange hung on %q", peer)
		}
		if err == nil && got.Endpoint.QPN > 0xFFFFFF {
			t.Fatalf("accepted %v", got)
		}
	})
}

// peerMessage frames body as Exchange does.
func peerMessage(body []byte) []byte {
	m := append([]byte("rnX1"), binary.BigEndian.AppendUint32(nil, uint32(len(body)))...)
	return append(m, body...)
}

// TestExchange: two sides exchange their details over net.Pipe (no
// buffering at all) and over TCP on 127.0.0.1, each getting the other's,
// and the connection carries on where the exchange ended.
func TestExchange(t *testing.T) {
	pipes := map[string]func(t *testing.T) (net.Conn, net.Conn){
		"net.Pipe": func(t *testing.T) (net.Conn, net.Conn) { return net.Pipe() },
		"tcp": func(t *testing.T) (net.Conn, net.Conn) {
			l := must(net.Listen("tcp", "127.0.0.1:0"))
			defer l.Close()
			acc := make(chan net.Conn, 1)
			go func() { c, _ := l.Accept(); acc <- c }()
			c := must(net.Dial("tcp", l.Addr().String()))
			return c, <-acc
		},
	}
	a := rnic.PeerInfo{Endpoint: ep4, Regions: []rnic.RemoteRegion{rr, rrH}}
	b := rnic.PeerInfo{Endpoint: ep6}
	for name, pipe := range pipes {
		t.Run(name, func(t *testing.T) {
			ca, cb := pipe(t)
			defer ca.Close()
			defer cb.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			type res struct {
				p   rnic.PeerInfo
				err error
			}
			rb := make(chan res, 1)
			go func() { p, err := rnic.Exchange(ctx, cb, b); rb <- res{p, err} }()
			gotA, err := rnic.Exchange(ctx, ca, a)
			must0(t, err)
			r := <-rb
			must0(t, r.err)
			if gotA.Endpoint != b.Endpoint || len(gotA.Regions) != 0 {
				t.Errorf("a got %+v, want %+v", gotA, b)
			}
			if r.p.Endpoint != a.Endpoint || len(r.p.Regions) != 2 || r.p.Regions[0] != rr || r.p.Regions[1] != rrH {
				t.Errorf("b got %+v, want %+v", r.p, a)
			}
			// Nothing after the message was read, and no deadline remains.
			go ca.Write([]byte("after"))
			buf := make([]byte, 5)
			if _, err := io.ReadFull(cb, buf); err != nil || string(buf) != "after" {
				t.Errorf("the connection after the exchange: %q, %v", buf, err)
			}
		})
	}
}

// TestExchangeBadPeer: a peer that sends something else, too much, or
// nothing gets an error, in bounded time.
func TestExchangeBadPeer(t *testing.T) {
	huge := append([]byte("rnX1"), binary.BigEndian.AppendUint32(nil, 1<<31)...)
	cases := []struct {
		name string
		peer []byte
		want string
	}{
		{"not-rnic", []byte("SSH-2.0-OpenSSH\r\n"), "does not speak rnic's exchange"},
		{"too-long", huge, "exceeds 65536"},
		{"short", peerMessage([]byte(`{"endpoint":`))[:10], "EOF"},
		{"bad-json", peerMessage([]byte(`{"endpoint":{"gid":"::1","qpn":1}}`)), "psn missing"},
		{"no-endpoint", peerMessage([]byte(`{"regions":[]}`)), "endpoint missing"},
		{"closed", nil, "EOF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			go func() {
				go io.Copy(io.Discard, b)
				b.Write(c.peer)
				b.Close()
			}()
			_, err := rnic.Exchange(context.Background(), a, rnic.PeerInfo{Endpoint: ep4})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want an error mentioning %q", err, c.want)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go io.Copy(io.Discard, b) // the peer reads but never answers
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := rnic.Exchange(ctx, a, rnic.PeerInfo{Endpoint: ep4}); done <- err }()
		waitBlocked(t, "rnic.readPeerInfo")
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("cancelling did not interrupt Exchange")
		}
	})
	t.Run("deadline", func(t *testing.T) {
		l := must(net.Listen("tcp", "127.0.0.1:0"))
		defer l.Close()
		go func() {
			c, err := l.Accept()
			if err == nil {
				defer c.Close()
				io.Copy(io.Discard, c) // silent peer
			}
		}()
		c := must(net.Dial("tcp", l.Addr().String()))
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := rnic.Exchange(ctx, c, rnic.PeerInfo{Endpoint: ep4}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("too-much-to-send", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		big := rnic.PeerInfo{Endpoint: ep4, Regions: make([]rnic.RemoteRegion, 10000)}
		if _, err := rnic.Exchange(context.Background(), a, big); err == nil || !strings.Contains(err.Error(), "exceed") {
			t.Fatalf("%v", err)
		}
	})
}
