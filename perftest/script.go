package perftest

import (
	"context"
	"fmt"
	"io"
)

// The tests' scripts: which exchange rounds each program does, in which
// order with the RDMA traffic and the printing, as their main()s in
// perftest 4.5 do. "all" rounds carry one QP-info message per QP, "one"
// rounds a single message (QP 0's). A perftest peer expects exactly this
// sequence; any other would deadlock or misparse.
//
//	write_bw, read_bw, atomic_bw: all, connect, all (print), one;
//	    client: traffic; both: one ("finished"), bw report, close
//	  with -b: both, per size: one, traffic, (with -a: one), bw report;
//	    close
//	send_bw: all, connect, one, all (print); per size: one, traffic
//	    (-b: bw report), (with -a: one more); close
//	write_lat: one, all, connect, all (print), one; traffic; no close
//	read_lat: one, all, connect, all (print), one;
//	    server: close; client: traffic, close
//	send_lat: all, connect, one, all (print); per size: one, traffic; close
func (s *session) script(ctx context.Context) error {
	switch s.p.Test {
	case WriteBW, ReadBW, AtomicBW:
		return s.rdmaBW(ctx)
	case SendBW:
		return s.sendBW(ctx)
	case WriteLat:
		return s.writeLat(ctx)
	case ReadLat:
		return s.readLat(ctx)
	case SendLat:
		return s.sendLat(ctx)
	}
	return fmt.Errorf("perftest: unknown test %v", s.p.Test)
}

// roundAll exchanges one QP-info message per QP; the answers become the
// remote QPs' information. With print, each remote QP is printed after
// its message, as perftest does in its second round.
func (s *session) roundAll(step string, print bool) error {
	for i, q := range s.res.qps {
		d, err := s.x.HandShake(fmt.Sprintf("%s, QP %d", step, i), q.my)
		if err != nil {
			return err
		}
		q.rem = d
		if print {
			printDest(s.out, s.p.Test.Verb(), "remote", d)
		}
	}
	return nil
}

// roundOne exchanges QP 0's message: a synchronization point.
func (s *session) roundOne(step string) error {
	_, err := s.x.HandShake(step, s.res.qps[0].my)
	return err
}

// connect connects the QPs and prints the local ones.
func (s *session) connect() error {
	if err := s.res.connect(); err != nil {
		return err
	}
	if s.p.rateHWSW && s.errw != nil {
		// ctx_connect: a RoCE QP takes no static rate.
		fmt.Fprintln(s.errw, "The QP failed to accept HW rate limit, providing SW rate limit")
	}
	for _, q := range s.res.qps {
		s.r.Local = append(s.r.Local, q.my)
	}
	return nil
}

func (s *session) printLocal() {
	for _, q := range s.res.qps {
		printDest(s.out, s.p.Test.Verb(), "local", q.my)
	}
}

// remotes records the remote QPs' information in the result.
func (s *session) remotes() {
	for _, q := range s.res.qps {
		s.r.Remote = append(s.r.Remote, q.rem)
	}
}

func (s *session) closeExchange() error { return s.x.CloseExchange(s.res.qps[0].my) }

// printBW prints a bandwidth result line (print_full_bw_report): with
// the CPU utilization under --cpu_util, to the JSON file under
// --out_json, with the -W counters.
func (s *session) printBW(r BWReport) {
	line := formatBW(r, s.p.ReportGbits)
	if s.p.cpuUtil {
		line = withCPU(line, s.cpu)
	}
	io.WriteString(s.out, line)
	s.r.BW = append(s.r.BW, r)
	s.writeJSON(jsonBW(r, s.p, s.cpu))
	s.printCounters()
}

// printLat prints a latency result (print_report_lat): the samples
// first under -U and -H, then the line.
func (s *session) printLat(r LatReport) {
	if !r.Duration && (s.p.Unsorted || s.p.Histogram) {
		io.WriteString(s.out, latSamples(r, s.p.Unsorted, s.p.Histogram))
		io.WriteString(s.out, resultLine+s.tableHeader())
	}
	line := formatLat(r)
	if s.p.cpuUtil {
		line = withCPU(line, s.cpu)
	}
	io.WriteString(s.out, line)
	s.r.Lat = append(s.r.Lat, r)
	s.writeJSON(jsonLat(r, s.p, s.cpu))
	s.printCounters()
}

// tableHeader returns the result table's header line for the test.
func (s *session) tableHeader() string {
	h := bwTableHeader(s.p.ReportGbits)
	if s.p.Test.Kind() == LAT {
		h = latTableHeader(s.p.duration)
	}
	if s.p.cpuUtil {
		h = withCPUHeader(h)
	}
	return h
}

// exchangeDuplex exchanges a bidirectional run's reports and prints
// their sum (print_full_bw_report with both reports).
func (s *session) exchangeDuplex(my BWReport) error {
	rem, err := s.x.ExchangeReport(my)
	if err != nil {
		return err
	}
	sum := my
	sum.BWPeak += rem.BWPeak
	sum.BWAvg += rem.BWAvg
	sum.MsgRate += rem.MsgRate
	s.printBW(sum)
	return nil
}

// rdmaBW is write_bw, read_bw and atomic_bw: only the client moves data
// and the server waits and prints the client's report, or with -b both
// move data, each printing the sum of both reports.
func (s *session) rdmaBW(ctx context.Context) error {
	p := s.p
	if err := s.roundAll("QP info", false); err != nil {
		return err
	}
	if err := s.connect(); err != nil {
		return err
	}
	s.printLocal()
	if err := s.roundAll("QP info again", true); err != nil {
		return err
	}
	s.remotes()
	s.armEvents()
	if err := s.roundOne("ready"); err != nil {
		return err
	}
	io.WriteString(s.out, resultLine+s.tableHeader())
	if !p.client && !p.Duplex {
		if err := s.roundOne("client finished"); err != nil {
			return err
		}
		rep, err := s.x.ExchangeReport(BWReport{})
		if err != nil {
			return err
		}
		s.printBW(rep)
		if err := s.closeExchange(); err != nil {
			return err
		}
		io.WriteString(s.out, resultLine)
		return nil
	}
	if p.RunInfinitely {
		return s.runBWInfinitely(ctx, p.Size)
	}
	var last BWReport
	for _, size := range p.sizes() {
		if p.Duplex {
			if err := s.roundOne("sync before the run"); err != nil {
				return err
			}
		}
		rep, err := s.runBW(ctx, size)
		if err != nil {
			return err
		}
		if p.Duplex {
			// With -a, perftest ≥ 4.6 syncs again after each size; then
			// both sides exchange reports.
			if p.All {
				if err := s.roundOne("sync after the run"); err != nil {
					return err
				}
			}
			if err := s.exchangeDuplex(rep); err != nil {
				return err
			}
		} else {
			s.printBW(rep)
		}
		last = rep
	}
	io.WriteString(s.out, resultLine)
	if !p.Duplex {
		if err := s.roundOne("client finished"); err != nil {
			return err
		}
		if _, err := s.x.ExchangeReport(last); err != nil {
			return err
		}
	}
	return s.closeExchange()
}

// sendBW is send_bw: the client sends, the server receives; each side
// measures and prints its own side. With -b each side does both.
func (s *session) sendBW(ctx context.Context) error {
	p := s.p
	if err := s.sendPreamble(); err != nil {
		return err
	}
	s.armEvents()
	io.WriteString(s.out, resultLine+s.tableHeader())
	if p.RunInfinitely {
		var rs []*receiver
		if !p.client {
			var err error
			if rs, err = s.postRecvs(p.Size); err != nil {
				return err
			}
		}
		if err := s.roundOne("receives posted"); err != nil {
			return err
		}
		if p.client {
			return s.runBWInfinitely(ctx, p.Size)
		}
		return s.runBWInfinitelyServer(ctx, p.Size, rs)
	}
	for _, size := range p.sizes() {
		var rs []*receiver
		if !p.client || p.Duplex {
			var err error
			if rs, err = s.postRecvs(size); err != nil {
				return err
			}
		}
		if err := s.roundOne("receives posted"); err != nil {
			return err
		}
		var rep BWReport
		var err error
		switch {
		case p.Duplex:
			rep, err = s.runBi(ctx, size, rs)
		case p.client:
			rep, err = s.runBW(ctx, size)
		default:
			rep, err = s.runBWServer(ctx, size, rs)
		}
		if err != nil {
			return err
		}
		switch {
		case !p.Duplex || p.duration:
			s.printBW(rep)
		default:
			if err := s.exchangeDuplex(rep); err != nil {
				return err
			}
		}
		if p.All {
			if err := s.roundOne("size done"); err != nil {
				return err
			}
		}
	}
	io.WriteString(s.out, resultLine)
	return s.closeExchange()
}

// sendPreamble is the QP exchange of send_bw and send_lat.
func (s *session) sendPreamble() error {
	if err := s.roundAll("QP info", false); err != nil {
		return err
	}
	if err := s.connect(); err != nil {
		return err
	}
	if err := s.roundOne("connected"); err != nil {
		return err
	}
	s.printLocal()
	if err := s.roundAll("QP info again", true); err != nil {
		return err
	}
	s.remotes()
	return nil
}

// latPreamble is the QP exchange of write_lat and read_lat.
func (s *session) latPreamble() error {
	if err := s.roundOne("QP info"); err != nil {
		return err
	}
	if err := s.roundAll("QP info again", false); err != nil {
		return err
	}
	if err := s.connect(); err != nil {
		return err
	}
	s.printLocal()
	if err := s.roundAll("QP info, third", true); err != nil {
		return err
	}
	s.remotes()
	s.armEvents()
	return s.roundOne("ready")
}

// writeLat is write_lat: both sides ping-pong and print. perftest has no
// close exchange here; the server, which finishes first, waits for the
// client to hang up, so that its NIC stays up to acknowledge the
// client's last WRITE.
func (s *session) writeLat(ctx context.Context) error {
	if err := s.latPreamble(); err != nil {
		return err
	}
	io.WriteString(s.out, resultLine+s.tableHeader())
	for _, size := range s.p.sizes() {
		rep, err := s.runWriteLat(ctx, size)
		if err != nil {
			return err
		}
		s.printLat(rep)
	}
	io.WriteString(s.out, resultLine)
	if !s.p.client {
		s.x.WaitPeerClose()
	}
	return nil
}

// readLat is read_lat: only the client READs and prints results; the
// server goes straight to the close exchange.
func (s *session) readLat(ctx context.Context) error {
	if err := s.latPreamble(); err != nil {
		return err
	}
	if !s.p.client {
		if err := s.closeExchange(); err != nil {
			return err
		}
		io.WriteString(s.out, resultLine)
		return nil
	}
	io.WriteString(s.out, resultLine+s.tableHeader())
	for _, size := range s.p.sizes() {
		rep, err := s.runReadLat(ctx, size)
		if err != nil {
			return err
		}
		s.printLat(rep)
	}
	if err := s.closeExchange(); err != nil {
		return err
	}
	io.WriteString(s.out, resultLine)
	return nil
}

// sendLat is send_lat: a SEND ping-pong; both sides print.
func (s *session) sendLat(ctx context.Context) error {
	if err := s.sendPreamble(); err != nil {
		return err
	}
	s.armEvents()
	io.WriteString(s.out, resultLine+s.tableHeader())
	for _, size := range s.p.sizes() {
		rs, err := s.postRecvs(size)
		if err != nil {
			return err
		}
		if err := s.roundOne("receives posted"); err != nil {
			return err
		}
		rep, err := s.runSendLat(ctx, size, rs)
		if err != nil {
			return err
		}
		s.printLat(rep)
	}
	io.WriteString(s.out, resultLine)
	return s.closeExchange()
}
