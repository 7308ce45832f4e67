package perftest

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procStat is where the CPU's time goes (perftest's CPU_UTILITY).
var procStat = "/proc/stat"

// cpuUtil is --cpu_util in a -D run: the share of user time in user and
// idle time over the measured part, as perftest computes it from the
// first line of /proc/stat at the sample's start and end (get_cpu_stats,
// calc_cpu_util). Without the file (not Linux) it reports 0, as perftest.
type cpuUtil struct {
	on     bool
	timers [2]*time.Timer
	reads  sync.WaitGroup // readings scheduled and not yet done

	mu         sync.Mutex
	user, idle [2]int64
	got        [2]bool
}

// newCPUUtil starts the two readings for a -D run that began (dur.start)
// on clk.
func (s *session) newCPUUtil(clk clock, dur *durTimer) *cpuUtil {
	c := &cpuUtil{on: s.p.cpuUtil && dur.on}
	if !c.on {
		return c
	}
	from, to := dur.window()
	for i, at := range []int64{from, to} {
		c.reads.Add(1)
		c.timers[i] = time.AfterFunc(time.Until(clk.at(at)), func() {
			defer c.reads.Done()
			c.read(i)
		})
	}
	return c
}

// read takes reading i.
func (c *cpuUtil) read(i int) {
	user, idle, ok := readProcStat()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.user[i], c.idle[i], c.got[i] = user, idle, ok
}

// stop cancels the readings not yet taken and waits for one being
// taken: none runs after the run (a reading that fired as the run ended
// read /proc/stat while the next test of the package changed procStat).
func (c *cpuUtil) stop() {
	if c == nil {
		return
	}
	for _, t := range c.timers {
		if t != nil && t.Stop() {
			c.reads.Done() // it will not run
		}
	}
	c.reads.Wait()
}

// percent returns the utilization between the readings, 0 without both.
func (c *cpuUtil) percent() float64 {
	if c == nil || !c.on {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.got[0] || !c.got[1] {
		return 0
	}
	u, i := c.user[1]-c.user[0], c.idle[1]-c.idle[0]
	if u+i == 0 {
		return 0
	}
	return float64(float32(u) / float32(u+i) * 100)
}

// readProcStat returns the user and idle times of the first line of
// /proc/stat ("cpu  user nice system idle ...").
func readProcStat() (user, idle int64, ok bool) {
	f, err := os.Open(procStat)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return 0, 0, false
	}
	w := strings.Fields(line)
	if len(w) < 5 {
		return 0, 0, false
	}
	user, err1 := strconv.ParseInt(w[1], 10, 64)
	idle, err2 := strconv.ParseInt(w[4], 10, 64)
	return user, idle, err1 == nil && err2 == nil
}
