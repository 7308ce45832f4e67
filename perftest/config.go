package perftest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/rnic/rnic"
)

// perftest's defaults and limits (perftest_parameters.h).
const (
	DefaultPort   = 18515
	defSizeBW     = 65536
	defSizeLat    = 2
	defSizeAtomic = 8
	defIters      = 1000
	defItersWB    = 5000 // write_bw
	defTxBW       = 128
	defTxLat      = 1
	defRxSend     = 512
	defRxRDMA     = 1
	defCQMod      = 100
	maxSize       = 8 << 20 // -a: sizes 2 … 8 MiB
	minIter       = 5
	maxIter       = 100000000
	maxTx         = 15000
	maxRx         = 16384
	maxInline     = 912
	maxQPs        = 16384
	ucMaxRx       = 16000
	cqModOffSize  = 8192 // CQ moderation is turned off above this size
	defPageSize   = 4096 // the cycle buffer this side announces
	defCacheLine  = 64
	noPeakIters   = 20000 // more bw iterations than this: no peak computed
	defInlineW    = 220   // DEF_INLINE_WRITE (latency tests)
	defInlineS    = 236   // DEF_INLINE_SEND_RC_UC_XRC
	defInlineSUD  = 188   // DEF_INLINE_SEND_UD
	udAddition    = 40    // the GRH in front of a UD receive
	defQKey       = 0x11111111
	atomicAdd     = 1 // ATOMIC_ADD_VALUE
	atomicSwap    = 0 // ATOMIC_SWAP_VALUE (compare is 0 too)
)

// Config is a test's parameters: perftest's command line. Start from
// NewConfig, which sets perftest's defaults; a negative value in a field
// documented so means "perftest's default".
type Config struct {
	Test Test

	// Peer is the server's host name or address (the client's positional
	// argument). Empty: this side is the server.
	Peer string
	// Port is the TCP port of the exchange (-p, 18515).
	Port int
	// Local is the NIC's IP address (-d). Invalid: the address of the
	// TCP connection's local end.
	Local netip.Addr

	Size      int         // -s: message size (0: 65536 for bw, 2 for latency, 8 for atomics)
	All       bool        // -a: every size from 2 to 8 MiB
	Iters     int         // -n (0: 5000 for write_bw, 1000 for the others)
	Duration  int         // -D: run for this many seconds instead of Iters
	Margin    int         // -f: seconds at each end of a -D run left out (negative: Duration/4)
	QPs       int         // -q: QPs (bw tests only; 0: 1)
	MTU       int         // -m: path MTU in bytes (0: the port's active MTU)
	GIDIndex  int         // -x: GID index (negative: chosen automatically, 0)
	TxDepth   int         // -t (0: 128 for bw, 1 for latency)
	RxDepth   int         // -r (0: 512 for send tests, 1 for the others)
	CQMod     int         // -Q: one signaled WR every CQMod (0: 100)
	Inline    int         // -I: max inline size (negative: perftest's default for the test)
	QPTimeout int         // -u: local ACK timeout, 4.096 µs × 2^u (negative: 14; 0: none)
	Conn      rnic.QPType // -c: RC, UC or UD (0: RC)
	Atomic    AtomicType  // -A: FETCH_AND_ADD or CMP_AND_SWAP

	ReportGbits bool // --report_gbits: Gb/s instead of MB/s
	NoPeak      bool // -N: do not compute the peak bandwidth

	// Open opens the device that carries the traffic, for the local
	// address. Run closes it when it returns. Required.
	Open func(local netip.Addr) (*rnic.Device, error)

	// Listener, if set, is where the server accepts the client instead of
	// listening on Port itself (tests pass one on a free port). Run
	// closes it once the client is in.
	Listener net.Listener

	// Out receives the report (stdout); Err receives warnings and, for
	// long runs, a progress line per second (stderr). nil discards.
	Out, Err io.Writer

	// Timeout bounds each exchange step and each wait for the peer's
	// traffic without progress (DefaultTimeout if zero).
	Timeout time.Duration
}

// NewConfig returns perftest's defaults for test t.
func NewConfig(t Test) Config {
	return Config{Test: t, Port: DefaultPort, Margin: -1, GIDIndex: -1, Inline: -1, QPTimeout: -1, Conn: rnic.RC, Atomic: FetchAndAdd, QPs: 1}
}

// params are the parameters in force: Config after perftest's defaults
// and dependencies (parser, force_dependecies), then the exchange.
type params struct {
	Config
	client   bool
	duration bool
	iters    int // per QP; 0 in duration mode
	margin   int
	txDepth  int
	rxDepth  int
	cqMod    int
	inline   int
	noPeak   bool
	outReads int
	gidIndex int

	cycleBuffer int // the larger of both sides'
	cacheLine   int
	mtu         rnic.MTU // path MTU: the smaller of both sides'
}

// resolve checks c and fills in perftest's defaults and dependencies.
func (c Config) resolve() (*params, error) {
	t := c.Test
	if t < WriteBW || t > SendLat {
		return nil, fmt.Errorf("perftest: unknown test %d", int(t))
	}
	if c.Open == nil {
		return nil, errors.New("perftest: Config.Open is required")
	}
	p := &params{Config: c, client: c.Peer != "", cycleBuffer: defPageSize, cacheLine: defCacheLine}
	if p.Conn == 0 {
		p.Conn = rnic.RC
	}
	if p.Port == 0 {
		p.Port = DefaultPort
	}
	if p.QPs == 0 {
		p.QPs = 1
	}
	verb, lat := t.Verb(), t.Kind() == LAT
	switch {
	case p.Port < 1 || p.Port > 65535:
		return nil, fmt.Errorf("perftest: port %d out of range", p.Port)
	case p.Conn != rnic.RC && p.Conn != rnic.UC && p.Conn != rnic.UD:
		return nil, fmt.Errorf("perftest: connection type %v not supported (RC, UC or UD)", p.Conn)
	case p.Conn == rnic.UC && (verb == VerbRead || verb == VerbAtomic):
		return nil, errors.New("perftest: UC connection not possible in READ/ATOMIC verbs")
	case p.Conn == rnic.UD && verb != VerbSend:
		return nil, errors.New("perftest: UD connection only possible in SEND verb")
	case p.QPs < 1 || p.QPs > maxQPs:
		return nil, fmt.Errorf("perftest: number of QPs %d out of range [1, %d]", p.QPs, maxQPs)
	case p.QPs > 1 && lat:
		return nil, errors.New("perftest: multiple QPs only available on bw tests")
	case p.QPTimeout > 31:
		return nil, fmt.Errorf("perftest: QP timeout %d out of range [0, 31]", p.QPTimeout)
	case p.Inline > maxInline:
		return nil, fmt.Errorf("perftest: max inline %d out of range [0, %d]", p.Inline, maxInline)
	case p.Inline > 0 && (verb == VerbRead || verb == VerbAtomic):
		return nil, errors.New("perftest: inline feature not available on READ/Atomic verbs")
	case p.Iters != 0 && (p.Iters < minIter || p.Iters > maxIter):
		return nil, fmt.Errorf("perftest: iteration number %d out of range [%d, %d]", p.Iters, minIter, maxIter)
	case p.TxDepth < 0 || p.TxDepth > maxTx:
		return nil, fmt.Errorf("perftest: tx depth %d out of range [1, %d]", p.TxDepth, maxTx)
	case p.RxDepth < 0 || p.RxDepth > maxRx:
		return nil, fmt.Errorf("perftest: rx depth %d out of range [1, %d]", p.RxDepth, maxRx)
	case p.RxDepth > defRxRDMA && verb != VerbSend:
		return nil, errors.New("perftest: on RDMA verbs rx depth can be only 1")
	case p.CQMod < 0 || p.CQMod > 1024:
		return nil, fmt.Errorf("perftest: CQ moderation %d out of range [1, 1024]", p.CQMod)
	case p.Size < 0 || p.Size > 1<<31-1:
		return nil, fmt.Errorf("perftest: message size %d out of range [1, %d]", p.Size, 1<<31-1)
	case verb == VerbAtomic && p.Size != 0 && p.Size != defSizeAtomic:
		return nil, errors.New("perftest: message size cannot be changed for Atomic tests")
	case p.Atomic != CmpAndSwap && p.Atomic != FetchAndAdd:
		return nil, fmt.Errorf("perftest: invalid atomic type %d", p.Atomic)
	case p.MTU != 0 && !validMTU(p.MTU):
		return nil, fmt.Errorf("perftest: invalid MTU %d (want 256, 512, 1024, 2048 or 4096)", p.MTU)
	case p.Duration < 0:
		return nil, fmt.Errorf("perftest: duration %d must be positive", p.Duration)
	case p.Duration > 0 && p.All:
		return nil, errors.New("perftest: duration mode does not support running on all sizes")
	case p.GIDIndex > 64:
		return nil, fmt.Errorf("perftest: GID index %d out of range [0, 64]", p.GIDIndex)
	}

	// Defaults (init_perftest_params).
	if p.Size == 0 {
		switch {
		case verb == VerbAtomic:
			p.Size = defSizeAtomic
		case lat:
			p.Size = defSizeLat
		default:
			p.Size = defSizeBW
		}
	}
	p.iters = p.Iters
	if p.iters == 0 {
		p.iters = defIters
		if t == WriteBW {
			p.iters = defItersWB
		}
	}
	p.txDepth = p.TxDepth
	if p.txDepth == 0 {
		p.txDepth = defTxBW
		if lat {
			p.txDepth = defTxLat
		}
	}
	p.rxDepth = p.RxDepth
	if p.rxDepth == 0 {
		p.rxDepth = defRxRDMA
		if verb == VerbSend {
			p.rxDepth = defRxSend
		}
	}
	p.cqMod = p.CQMod
	if p.cqMod == 0 {
		p.cqMod = defCQMod
	}
	p.gidIndex = max(p.GIDIndex, 0)
	p.noPeak = p.NoPeak
	p.duration = p.Duration > 0
	p.margin = p.Margin
	if p.duration && p.margin < 0 {
		p.margin = p.Duration / 4
	}
	if p.duration && !(p.Duration > 2*p.margin) {
		return nil, fmt.Errorf("perftest: duration %d must be more than twice the margin %d", p.Duration, p.margin)
	}
	p.inline = defaultInline(t, p.Conn, p.Inline)

	// Dependencies (force_dependecies), in perftest's order.
	if !p.duration {
		p.txDepth = min(p.txDepth, p.iters)
		if verb == VerbSend {
			p.rxDepth = min(p.rxDepth, p.iters)
		}
		if (p.Conn == rnic.UD || p.Conn == rnic.UC) && p.rxDepth == defRxSend {
			p.rxDepth = min(p.iters, ucMaxRx)
		}
	}
	if p.Size > cqModOffSize && p.Conn != rnic.UD && !p.All && p.CQMod == 0 {
		p.cqMod = 1
	}
	p.cqMod = min(p.cqMod, p.txDepth)
	if p.All {
		p.Size = maxSize
	}
	if p.duration {
		p.iters = 0
		p.noPeak = true
	}
	if verb == VerbSend && !lat && !p.client {
		p.noPeak = true
	}
	if verb == VerbSend && p.rxDepth%2 == 1 && !p.All {
		p.rxDepth++
	}
	if !p.duration && p.iters > noPeakIters && !lat {
		p.noPeak = true
	}
	return p, nil
}

// defaultInline is ctx_set_max_inline for a device perftest knows: the
// user's value, or 220 (write) / 236 (send; 188 on UD) for latency tests
// and 0 otherwise. READ and atomics never inline.
func defaultInline(t Test, conn rnic.QPType, user int) int {
	switch {
	case t.Verb() == VerbRead || t.Verb() == VerbAtomic:
		return 0
	case user >= 0:
		return user
	case t == WriteLat:
		return defInlineW
	case t == SendLat && conn == rnic.UD:
		return defInlineSUD
	case t == SendLat:
		return defInlineS
	}
	return 0
}

func validMTU(n int) bool {
	return n == 256 || n == 512 || n == 1024 || n == 2048 || n == 4096
}

// sizes returns the message sizes to run: the one size, or with -a the
// powers of two from 2 up to 8 MiB (up to the MTU for UD sends).
func (p *params) sizes() []int {
	if !p.All {
		return []int{p.Size}
	}
	top := maxSize
	if p.Conn == rnic.UD {
		top = p.mtu.Bytes()
	}
	var s []int
	for n := 2; n <= top; n *= 2 {
		s = append(s, n)
	}
	return s
}

// qpTimeout is the QP's local ACK timeout attribute (-u).
func (p *params) qpTimeout() uint8 {
	if p.QPTimeout < 0 {
		return 14 // perftest's DEF_QP_TIME
	}
	return uint8(p.QPTimeout)
}
