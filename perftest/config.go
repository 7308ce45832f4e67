package perftest

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
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
	maxSL         = 15
	defDuration   = 5 // DEF_DURATION: --run_infinitely's report interval
	defJSONFile   = "perftest_out.json"
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
	GIDIndex  int         // -x: GID index (negative: chosen automatically, rnic.AddrGIDIndex)
	TxDepth   int         // -t (0: 128 for bw, 1 for latency)
	RxDepth   int         // -r (0: 512 for send tests, 1 for the others)
	CQMod     int         // -Q: one signaled WR every CQMod (0: 100)
	Inline    int         // -I: max inline size (negative: perftest's default for the test)
	QPTimeout int         // -u: local ACK timeout, 4.096 µs × 2^u (negative: 14; 0: none)
	Conn      rnic.QPType // -c: RC, UC or UD (0: RC)
	Atomic    AtomicType  // -A: FETCH_AND_ADD or CMP_AND_SWAP

	ReportGbits bool // --report_gbits: Gb/s instead of MB/s
	NoPeak      bool // -N: do not compute the peak bandwidth

	Duplex        bool // -b: bidirectional (bw tests): both sides send
	Reversed      bool // --reversed: the server sends, the client receives (both sides give it)
	PostList      int  // -l: post lists of this many work requests (bw tests; 0: 1)
	Events        bool // -e: sleep on CQ events instead of polling (not WRITE tests)
	RunInfinitely bool // --run_infinitely: run until stopped, a report every Duration (5) seconds (bw tests)
	MRPerQP       bool // --mr_per_qp: one memory region per QP instead of one shared

	Histogram bool // -H: print every latency sample, sorted (latency tests)
	Unsorted  bool // -U: print every latency sample, unsorted (latency tests)

	TrafficClass int // --tclass: the GRH traffic class, the IP TOS or traffic class on the wire
	SL           int // -S: service level, the arbiter's priority level in rnic

	CPUUtil     bool   // --cpu_util: CPU utilization in the report (-D runs)
	OutJSON     bool   // --out_json: write the report as JSON too
	OutJSONFile string // --out_json_file (empty: perftest_out.json)

	// The software rate limiter (--rate_limit, --rate_units,
	// --rate_limit_type, --burst_size).
	RateLimit     float64       // messages, MB/s or Gb/s (0: no limiter)
	RateUnits     RateUnits     // (0: Gb/s)
	RateLimitType RateLimitType // (0: as perftest, HW, which falls back to SW on RoCE)
	BurstSize     int           // messages per burst (0: the tx depth)

	// ReportCounters is -W: counters whose change is printed after each
	// result line, comma-separated, as paths in a port's sysfs directory
	// (hw_counters/out_of_sequence, counters/port_xmit_data).
	ReportCounters string

	// Open opens the device that carries the traffic, for the local
	// address. Run closes it when it returns. Required.
	Open func(local netip.Addr) (*rnic.Device, error)

	// Listener, if set, is where the server accepts the client instead of
	// listening on Port itself (tests pass one on a free port). Run
	// closes it once the client is in.
	Listener net.Listener

	// ExchangeConn, if set, is the exchange's connection, already made:
	// no TCP (Peer non-empty still makes this side the client). Run
	// closes it.
	ExchangeConn net.Conn

	// Clock, if set, runs the test in virtual time, on the clock's
	// hardware profile: Run is called from a thread of the clock, Open
	// opens the device on it (rnic.Options.Clock), ExchangeConn is one
	// end of the clock's Pipe and Local the device's address. The report's
	// times are the clock's, and the run is deterministic. Waits for
	// completions sleep on the CQ (CQ.Wait) and write_lat waits for the
	// peer's WRITE with the clock's WaitWrite (which needs its
	// WatchWrites). Not in virtual time: -e (its completion channel is a
	// Go channel), -D and --run_infinitely (they end on the wall clock),
	// --cpu_util and --rate_limit.
	Clock *rnic.VirtualClock

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

// RateUnits are the units of --rate_limit (--rate_units).
type RateUnits int

const (
	RateGbps RateUnits = iota // g: Gb/s (perftest's default)
	RateMBps                  // M: MiB/s
	RatePps                   // p: messages per second
)

// ParseRateUnits parses --rate_units: M, g or p.
func ParseRateUnits(s string) (RateUnits, error) {
	switch s {
	case "g":
		return RateGbps, nil
	case "M":
		return RateMBps, nil
	case "p":
		return RatePps, nil
	}
	return 0, fmt.Errorf("perftest: invalid rate limit units %q: please use M, g or p", s)
}

// RateLimitType is --rate_limit_type.
type RateLimitType int

const (
	RateLimitDefault RateLimitType = iota // not given: HW, which falls back to SW on a RoCE port
	RateLimitSW                           // SW: perftest's own limiter, bursts with gaps
	RateLimitHW                           // HW: the QP's static rate; refused, rnic has none
	RateLimitPP                           // PP: packet pacing; refused, Raw Ethernet only
)

// ParseRateLimitType parses --rate_limit_type: HW, SW or PP.
func ParseRateLimitType(s string) (RateLimitType, error) {
	switch s {
	case "SW":
		return RateLimitSW, nil
	case "HW":
		return RateLimitHW, nil
	case "PP":
		return RateLimitPP, nil
	}
	return 0, fmt.Errorf("perftest: invalid rate limit type %q: please use HW, SW or PP", s)
}

// hwRates are the rates an HW rate limit may be given in, in Gb/s (the
// ibv_rate values perftest accepts).
var hwRates = []float64{2.5, 5, 10, 14, 20, 25, 30, 40, 56, 60, 80, 100, 112, 120, 168, 200, 300}

// params are the parameters in force: Config after perftest's defaults
// and dependencies (parser, force_dependecies), then the exchange.
type params struct {
	Config
	// client is perftest's machine == CLIENT: the side that sends (the
	// TCP client, or with --reversed the TCP server). tcpClient is the
	// side with a server name: it connects, and writes first in every
	// exchange step.
	client    bool
	tcpClient bool
	duration  bool
	iters     int // per QP; 0 in duration mode
	margin    int
	txDepth   int
	rxDepth   int
	cqMod     int
	inline    int
	noPeak    bool
	outReads  int
	gidIndex  int
	postList  int

	rateType  RateLimitType // in force: none (0), SW
	rateHWSW  bool          // an HW limit (the default type) that falls back to SW at connect
	burstSize int
	cpuUtil   bool // --cpu_util in a -D run

	// What perftest prints while it checks its parameters, to stdout and
	// stderr: Run prints it first.
	notes, warnings []string

	cycleBuffer int // the larger of both sides'
	cacheLine   int
	mtu         rnic.MTU // path MTU: the smaller of both sides'

	// A Worker's additions to the program (WorkerConfig): nil and zero
	// in a program's run.
	observer    Observer
	random      *rand.Rand
	fixedRemote bool
	rate        float64       // messages per second per QP
	stop        time.Duration // the clock's time after which QPs post their last
	recvEvery   time.Duration
	metadata    bool // the regions hold no bytes: write_lat waits for the WRITE, not its byte
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
	if c.Clock != nil && c.ExchangeConn == nil {
		return nil, errors.New("perftest: virtual time (Config.Clock) needs Config.ExchangeConn, one end of the clock's Pipe")
	}
	if c.Clock != nil && !c.Local.IsValid() {
		return nil, errors.New("perftest: virtual time (Config.Clock) needs Config.Local, the device's address")
	}
	return c.params(false)
}

// params checks c's flags and fills in perftest's defaults and
// dependencies. A worker's iterations may be any positive number (a
// simulated tenant runs until its stop time).
func (c Config) params(worker bool) (*params, error) {
	t := c.Test
	if c.Clock != nil {
		switch {
		case c.Events:
			return nil, errors.New("perftest: -e is not available in virtual time (a completion channel is a Go channel; waits sleep on the CQ instead)")
		case c.Duration > 0 || c.RunInfinitely:
			return nil, errors.New("perftest: -D and --run_infinitely are not available in virtual time (they end on the wall clock); use -n")
		case c.CPUUtil:
			return nil, errors.New("perftest: --cpu_util is not available in virtual time")
		case c.RateLimit > 0:
			return nil, errors.New("perftest: --rate_limit is not available in virtual time")
		}
	}
	p := &params{Config: c, tcpClient: c.Peer != "", cycleBuffer: defPageSize, cacheLine: defCacheLine}
	p.client = p.tcpClient != c.Reversed // perftest's "fan-in addition"
	if p.Conn == 0 {
		p.Conn = rnic.RC
	}
	if p.Port == 0 {
		p.Port = DefaultPort
	}
	if p.QPs == 0 {
		p.QPs = 1
	}
	if p.PostList == 0 {
		p.PostList = 1
	}
	verb, lat := t.Verb(), t.Kind() == LAT
	if err := p.checkParser(); err != nil {
		return nil, err
	}
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
	case p.Iters != 0 && !worker && (p.Iters < minIter || p.Iters > maxIter):
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
	// perftest picks a RoCE v2 GID of the port's address when -x is not
	// given (get_best_gid_index): on rnic, as on rxe, index 1.
	p.gidIndex = p.GIDIndex
	if p.gidIndex < 0 {
		p.gidIndex = rnic.AddrGIDIndex
	}
	p.noPeak = p.NoPeak
	p.duration = p.Duration > 0 && !p.RunInfinitely
	p.margin = p.Margin
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
	// CQ moderation is off for large messages, except on UD, with -a
	// (one value for every size) and with events.
	if p.Size > cqModOffSize && p.Conn != rnic.UD && !p.All && !p.Events {
		if p.CQMod == 0 {
			p.cqMod = 1
		} else if p.cqMod > 1 {
			p.note("Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results")
		}
	}
	p.cqMod = min(p.cqMod, p.txDepth)
	if p.All {
		p.Size = maxSize
	}
	p.postList = p.PostList
	if p.postList > 1 {
		switch {
		case lat:
			return nil, errors.New("perftest: post list is supported in BW tests only")
		case !p.duration && p.iters%p.postList != 0:
			return nil, fmt.Errorf("perftest: number of iterations %d must be a multiple of post list size %d", p.iters, p.postList)
		case p.CQMod == 0:
			p.cqMod = p.postList
			p.note("Post List requested - CQ moderation will be the size of the post list")
		case p.postList%p.cqMod != 0:
			return nil, fmt.Errorf("perftest: post list size %d must be a multiple of CQ moderation %d", p.postList, p.cqMod)
		}
		if p.postList > p.txDepth {
			// perftest would wait forever for room for a whole list.
			return nil, fmt.Errorf("perftest: post list size %d is larger than the tx depth %d: no list would fit", p.postList, p.txDepth)
		}
	}
	if p.duration {
		p.iters = 0
		p.noPeak = true
		if p.Events {
			return nil, errors.New("perftest: duration mode doesn't work with events")
		}
		p.cpuUtil = p.CPUUtil
	} else if p.CPUUtil {
		p.warn(" CPU Utilization works only with Duration mode.")
	}
	if verb == VerbSend && !lat && !p.client && !p.Duplex {
		p.noPeak = true
	}
	if p.RunInfinitely {
		p.noPeak = true
		switch {
		case p.Events:
			return nil, errors.New("perftest: run_infinitely does not support events feature yet")
		case lat:
			return nil, errors.New("perftest: run_infinitely exists only in BW tests for now")
		case p.Duplex && verb == VerbSend:
			return nil, errors.New("perftest: run_infinitely mode is not supported in SEND Bidirectional BW test")
		case p.RateLimit > 0:
			return nil, errors.New("perftest: run_infinitely does not support rate limit feature yet")
		case p.All:
			// perftest's --run_infinitely silently replaces -a.
			return nil, errors.New("perftest: --run_infinitely and -a (all sizes) exclude each other")
		}
		if p.Duration == 0 {
			p.Duration = defDuration // the report interval
		}
		p.duration = true
		p.iters = 0
	}
	if err := p.resolveRateLimit(); err != nil {
		return nil, err
	}
	if verb == VerbSend && p.rxDepth%2 == 1 && !p.All {
		p.rxDepth++
	}
	if !p.duration && p.iters > noPeakIters && !lat {
		p.noPeak = true
	}
	if p.duration && p.Margin < 0 {
		p.margin = p.Duration / 4
	}
	if p.duration && !(p.Duration > 2*p.margin) {
		return nil, fmt.Errorf("perftest: duration %d must be more than twice the margin %d", p.Duration, p.margin)
	}
	return p, nil
}

// checkParser applies the checks perftest's parser makes on the flags
// this package added to its first set.
func (p *params) checkParser() error {
	verb, lat := p.Test.Verb(), p.Test.Kind() == LAT
	switch {
	case p.SL < 0 || p.SL > maxSL:
		return fmt.Errorf("perftest: service level %d out of range: only %d service levels", p.SL, maxSL)
	case p.TrafficClass < 0 || p.TrafficClass > 255:
		return fmt.Errorf("perftest: traffic class %d out of range [0, 255]", p.TrafficClass)
	case p.Events && verb == VerbWrite:
		return errors.New("perftest: events feature not available on WRITE verb")
	case p.Duplex && lat:
		return errors.New("perftest: bidirectional is only available in BW test")
	case p.Histogram && !lat:
		return errors.New("perftest: -H (report histogram) available only on latency tests")
	case p.Unsorted && !lat:
		return errors.New("perftest: -U (report unsorted) available only on latency tests")
	case p.PostList < 1:
		return fmt.Errorf("perftest: post list size %d must be at least 1", p.PostList)
	case p.RateLimit < 0 || p.RateLimit == 0 && (p.RateLimitType != RateLimitDefault || p.RateUnits != RateGbps):
		return errors.New("perftest: rate limit must be positive (--rate_limit)")
	case p.RateUnits < RateGbps || p.RateUnits > RatePps:
		return fmt.Errorf("perftest: invalid rate limit units %d", p.RateUnits)
	case p.RateLimitType < RateLimitDefault || p.RateLimitType > RateLimitPP:
		return fmt.Errorf("perftest: invalid rate limit type %d", p.RateLimitType)
	case p.BurstSize < 0:
		return fmt.Errorf("perftest: burst size %d must be non-negative", p.BurstSize)
	case p.OutJSONFile != "" && !p.OutJSON:
		// perftest writes no file without --out_json; rnic says so.
		return errors.New("perftest: --out_json_file needs --out_json")
	}
	return nil
}

// resolveRateLimit applies perftest's rules for the rate limiter: an HW
// limit (the default type) needs a rate of the ibv_rate table and no
// packet units, and on a RoCE port falls back to the software limiter
// (with perftest's message, printed at connect); asked for explicitly, it
// is refused, as the QP refuses it, and packet pacing is Raw Ethernet's.
func (p *params) resolveRateLimit() error {
	verb, lat := p.Test.Verb(), p.Test.Kind() == LAT
	t := p.RateLimitType
	if p.RateLimit > 0 && t == RateLimitDefault {
		t = RateLimitHW
	}
	if p.BurstSize > 0 && t == RateLimitDefault {
		return errors.New("perftest: can't enable burst mode when rate limiter is off (--burst_size without --rate_limit)")
	}
	p.burstSize = p.BurstSize
	if p.burstSize == 0 {
		if t == RateLimitSW {
			p.warn(fmt.Sprintf(" Setting burst size to tx depth = %d", p.txDepth))
		}
		p.burstSize = p.txDepth
	}
	switch t {
	case RateLimitSW:
		if !(p.Test.Kind() == BW) || verb == VerbAtomic || (verb == VerbSend && p.Duplex) {
			return errors.New("perftest: SW rate limiter cannot be executed on non-BW, ATOMIC or bidirectional SEND tests")
		}
		p.rateType = RateLimitSW
	case RateLimitHW:
		var gbps float64
		switch p.RateUnits {
		case RateMBps:
			gbps = p.RateLimit * 8 * 1024 * 1024 / 1e9
		case RateGbps:
			gbps = p.RateLimit
		case RatePps:
			return errors.New("perftest: pps rate limit units is not supported when setting HW rate limit")
		}
		if gbps > 0 && !slices.Contains(hwRates, p.RateLimit) {
			return fmt.Errorf("perftest: unknown rate limit value %g: an HW rate limit is one of %v Gb/s (--rate_limit_type SW takes any)", p.RateLimit, hwRates)
		}
		if p.RateLimitType == RateLimitHW {
			return errors.New("perftest: --rate_limit_type HW: the QP failed to accept HW rate limit (rnic has no hardware rate limiter, and a RoCE port takes none); use --rate_limit_type SW")
		}
		// perftest on RoCE: "The QP failed to accept HW rate limit,
		// providing SW rate limit". Where its SW limiter would not run,
		// rnic refuses rather than ignore the limit.
		if lat || (verb == VerbSend && p.Duplex) {
			return errors.New("perftest: the rate limit falls back to the SW rate limiter, which runs only in BW tests that are not bidirectional SEND")
		}
		p.rateType, p.rateHWSW = RateLimitSW, true
	case RateLimitPP:
		return errors.New("perftest: --rate_limit_type PP: packet pacing is only supported for Raw Ethernet")
	}
	return nil
}

// note records a line perftest prints on stdout after a result line.
func (p *params) note(s string) { p.notes = append(p.notes, s) }

// warn records a line perftest prints on stderr.
func (p *params) warn(s string) { p.warnings = append(p.warnings, s) }

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
