package perftest

import (
	"encoding/binary"
	"math"
)

// BWReport is a bandwidth result as perftest exchanges it (struct
// bw_report_data, without the per-port fields).
type BWReport struct {
	Size    uint64
	Iters   uint64
	BWPeak  float64
	BWAvg   float64
	MsgRate float64 // Mpps
}

// ExchangeReport exchanges bandwidth reports, each field a separate
// 8-byte step in network byte order (xchg_bw_reports for peers ≥ 5.33).
func (x *Conn) ExchangeReport(my BWReport) (BWReport, error) {
	mine := [5]uint64{my.Size, my.Iters, math.Float64bits(my.BWPeak), math.Float64bits(my.BWAvg), math.Float64bits(my.MsgRate)}
	names := [5]string{"report size", "report iterations", "report peak", "report average", "report message rate"}
	var theirs [5]uint64
	for i, v := range mine {
		b, err := x.xchg(names[i], binary.BigEndian.AppendUint64(nil, v))
		if err != nil {
			return BWReport{}, err
		}
		theirs[i] = binary.BigEndian.Uint64(b)
	}
	return BWReport{theirs[0], theirs[1], math.Float64frombits(theirs[2]), math.Float64frombits(theirs[3]), math.Float64frombits(theirs[4])}, nil
}
