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
//	send_bw: all, connect, one, all (print); per size: one, traffic
//	    (with -a: one more); close
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

func (s *session) printBW(r BWReport) {
	io.WriteString(s.out, formatBW(r, s.p.ReportGbits))
	s.r.BW = append(s.r.BW, r)
}

func (s *session) printLat(r LatReport) {
	io.WriteString(s.out, formatLat(r))
	s.r.Lat = append(s.r.Lat, r)
}

// rdmaBW is write_bw, read_bw and atomic_bw: only the client moves data;
// the server waits and prints the client's report.
func (s *session) rdmaBW(ctx context.Context) error {
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
	if err := s.roundOne("ready"); err != nil {
		return err
	}
	io.WriteString(s.out, resultLine+bwTableHeader(s.p.ReportGbits))
	if !s.p.client {
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
	var last BWReport
	for _, size := range s.p.sizes() {
		rep, err := s.runBW(ctx, size)
		if err != nil {
			return err
		}
		s.printBW(rep)
		last = rep
	}
	io.WriteString(s.out, resultLine)
	if err := s.roundOne("client finished"); err != nil {
		return err
	}
	if _, err := s.x.ExchangeReport(last); err != nil {
		return err
	}
	return s.closeExchange()
}

// sendBW is send_bw: the client sends, the server receives; each side
// measures and prints its own side.
func (s *session) sendBW(ctx context.Context) error {
	if err := s.sendPreamble(); err != nil {
		return err
	}
	io.WriteString(s.out, resultLine+bwTableHeader(s.p.ReportGbits))
	for _, size := range s.p.sizes() {
		var rs []*receiver
		if !s.p.client {
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
		if s.p.client {
			rep, err = s.runBW(ctx, size)
		} else {
			rep, err = s.runBWServer(ctx, size, rs)
		}
		if err != nil {
			return err
		}
		s.printBW(rep)
		if s.p.All {
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
	io.WriteString(s.out, resultLine+latTableHeader(s.p.duration))
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
	io.WriteString(s.out, resultLine+latTableHeader(s.p.duration))
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
	io.WriteString(s.out, resultLine+latTableHeader(s.p.duration))
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
