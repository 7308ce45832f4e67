package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rnic/rnic/internal/statsrv"
	"github.com/spf13/cobra"
)

// newStatCmd returns "rnic stat [link] [DEV[/PORT]]" and "rnic stat qp".
func newStatCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "stat [link] [DEV[/PORT]]",
		Short: "Show the counters of running rnic devices, as rdma statistic show",
		Long: `stat prints the counters of the rnic devices running on this machine, one
line per device and port in the format of Linux's "rdma statistic show":

  link rnic_127.0.0.1/1 tx_packets 12 rx_packets 10 ...

"rnic stat qp" lists their QPs as "rdma resource show qp" does. With a
device name (optionally "link DEV/1", as rdma takes it), only that device;
with -j, JSON as "rdma -j" prints it.

A device is visible when the program that runs it published it: "rnic
perf" publishes its devices, and any Go program can publish its own with
rnic.Options{Publish: true} (or Device.Publish). Devices are found by
their control sockets in $XDG_RUNTIME_DIR/rnic (or /tmp/rnic-$UID).`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := statTarget(args)
			if err != nil {
				return err
			}
			return printStat(cmd.OutOrStdout(), cmd.ErrOrStderr(), name, jsonOut)
		},
	}
	cmd.PersistentFlags().BoolVarP(&jsonOut, "json", "j", false, `JSON output, as "rdma -j"`)
	cmd.AddCommand(&cobra.Command{
		Use:   "qp [link] [DEV[/PORT]]",
		Short: "List the QPs of running rnic devices, as rdma resource show qp",
		Long: `qp lists the QPs of the rnic devices running on this machine (see "rnic
stat"), one line per QP in the format of Linux's "rdma resource show qp":

  link rnic_127.0.0.1/1 lqpn 17 rqpn 18 type RC state RTS rq-psn 1201 sq-psn 5317 path-mig-state MIGRATED pdn 1 pid 4242 comm kvserver

lqpn is the QP's number and rqpn its peer's; sq-psn is the next PSN the
QP sends and rq-psn the next it expects; pid and comm name the process
that runs the device. As the kernel, UD QPs have no rqpn, rq-psn or
path-mig-state (rnic has no alternate paths: always MIGRATED).`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := statTarget(args)
			if err != nil {
				return err
			}
			return runStatQP(cmd.OutOrStdout(), cmd.ErrOrStderr(), name, jsonOut)
		},
	})
	return cmd
}

// statTarget reads the device argument: "DEV", "DEV/1", or either after
// the keyword "link" (rdma's form). rnic devices have one port, 1.
func statTarget(args []string) (string, error) {
	if len(args) > 0 && args[0] == "link" {
		args = args[1:]
		if len(args) == 0 {
			return "", fmt.Errorf(`"link" needs a device: link DEV[/PORT]`)
		}
	} else if len(args) > 1 {
		return "", fmt.Errorf("unexpected %q: want [link] DEV[/PORT]", args[1])
	}
	if len(args) == 0 {
		return "", nil
	}
	name, port, hasPort := strings.Cut(args[0], "/")
	if hasPort && port != "1" {
		return "", fmt.Errorf("%s: rnic devices have one port, 1", args[0])
	}
	return name, nil
}

// statReply is one device's answer and its position in the listing of
// every device (rdma's ifindex).
type statReply struct {
	index int
	*statsrv.Reply
}

// askDevices asks the device called name, or every published device, and
// returns the answers in name order. A socket left by a process that
// died is skipped; a named device that does not answer is an error.
func askDevices(errw io.Writer, name, request string) ([]statReply, error) {
	paths, err := statsrv.List()
	if err != nil {
		return nil, err
	}
	if name != "" {
		path := statsrv.Path(name)
		i := slices.Index(paths, path)
		r, err := statsrv.Ask(path, request)
		if err != nil {
			return nil, fmt.Errorf("no running device %q (control socket %s): %w", name, path, err)
		}
		return []statReply{{max(i, 0), r}}, nil
	}
	var out []statReply
	for i, p := range paths {
		r, err := statsrv.Ask(p, request)
		if err != nil {
			continue // a socket left by a process that died
		}
		out = append(out, statReply{i, r})
	}
	if len(out) == 0 {
		fmt.Fprintf(errw, "no running rnic devices (no control sockets in %s)\n", statsrv.Dir())
	}
	return out, nil
}

// controlDir is where the devices' control sockets are.
func controlDir() string { return statsrv.Dir() }

// runStat prints the counters of the device called name, or of every
// running device, as text.
func runStat(out, errw io.Writer, name string) error { return printStat(out, errw, name, false) }

// printStat prints the counters of the device called name, or of every
// running device, as text or JSON.
func printStat(out, errw io.Writer, name string, jsonOut bool) error {
	devs, err := askDevices(errw, name, statsrv.ReqCounters)
	if err != nil {
		return err
	}
	if jsonOut {
		objs := make([]jsonObject, len(devs))
		for i, d := range devs {
			objs[i] = statJSON(d.Device, d.Counters)
		}
		return writeJSONArray(out, objs)
	}
	for _, d := range devs {
		fmt.Fprintln(out, formatStatLine(d.Device, d.Counters))
	}
	return nil
}

// formatStatLine formats a device's counters as rdma statistic does:
// "link DEV/PORT name value name value ...".
func formatStatLine(dev string, counters []statsrv.Counter) string {
	var b strings.Builder
	fmt.Fprintf(&b, "link %s/1", dev)
	for _, c := range counters {
		fmt.Fprintf(&b, " %s %d", c.Name, c.Value)
	}
	return b.String()
}

// statJSON is a device's counters as "rdma -j statistic show" prints a
// link's: {"ifname": DEV, "port": 1, counter: value, ...}.
func statJSON(dev string, counters []statsrv.Counter) jsonObject {
	o := jsonObject{{"ifname", dev}, {"port", 1}}
	for _, c := range counters {
		o = append(o, jsonField{c.Name, c.Value})
	}
	return o
}

// runStatQP lists the QPs of the device called name, or of every running
// device.
func runStatQP(out, errw io.Writer, name string, jsonOut bool) error {
	devs, err := askDevices(errw, name, statsrv.ReqQPs)
	if err != nil {
		return err
	}
	var objs []jsonObject
	for _, d := range devs {
		for _, qp := range d.QPs {
			o := qpFields(d, qp)
			if jsonOut {
				objs = append(objs, o)
			} else {
				fmt.Fprintln(out, formatQPLine(o))
			}
		}
	}
	if jsonOut {
		return writeJSONArray(out, objs)
	}
	return nil
}

// qpFields are a QP's fields in the order and with the names of rdma's
// res-qp: ifindex (JSON only), ifname, port, lqpn, rqpn, type, state,
// rq-psn, sq-psn, path-mig-state, pdn, pid, comm. As the kernel reports
// them, a QP without a port has none, and only RC and UC QPs have a peer,
// a receive PSN and a path migration state.
func qpFields(d statReply, qp statsrv.QP) jsonObject {
	o := jsonObject{{"ifindex", d.index}, {"ifname", d.Device}}
	if qp.Port != 0 {
		o = append(o, jsonField{"port", qp.Port})
	}
	connected := qp.Type == "RC" || qp.Type == "UC"
	o = append(o, jsonField{"lqpn", qp.LQPN})
	if connected {
		o = append(o, jsonField{"rqpn", qp.RQPN})
	}
	o = append(o, jsonField{"type", qp.Type}, jsonField{"state", qp.State})
	if connected {
		o = append(o, jsonField{"rq-psn", qp.RQPSN})
	}
	o = append(o, jsonField{"sq-psn", qp.SQPSN})
	if connected {
		o = append(o, jsonField{"path-mig-state", "MIGRATED"})
	}
	return append(o, jsonField{"pdn", qp.PDN}, jsonField{"pid", d.PID}, jsonField{"comm", d.Comm})
}

// formatQPLine writes a QP's fields as rdma resource show qp does:
// "link DEV/PORT lqpn N ..." ("DEV/-" for a QP without a port).
func formatQPLine(o jsonObject) string {
	var b strings.Builder
	var dev string
	port := "-"
	for _, f := range o {
		switch f.key {
		case "ifindex":
		case "ifname":
			dev = f.value.(string)
		case "port":
			port = fmt.Sprint(f.value)
		default:
			if b.Len() == 0 {
				fmt.Fprintf(&b, "link %s/%s", dev, port)
			}
			fmt.Fprintf(&b, " %s %v", f.key, f.value)
		}
	}
	return b.String()
}

// jsonObject is a JSON object whose keys keep their order, as rdma
// prints them.
type jsonObject []jsonField

type jsonField struct {
	key   string
	value any
}

func (o jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeJSONArray prints objs as rdma -j does: one JSON array on one line
// ("[]" for none).
func writeJSONArray(out io.Writer, objs []jsonObject) error {
	if objs == nil {
		objs = []jsonObject{}
	}
	b, err := json.Marshal(objs)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}
