package experiment

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/perf"
)

// ScenarioDoc is a scenario file (TOML): several workloads on one fabric
// at once (perf.Scenario). Its keys:
//
//	hosts = 3            # machines on the switch (default: as many as the tenants name)
//	metadata = true      # move lengths only
//	seed = 1
//	limit = "20ms"       # virtual time bound
//	timeline_port = "switch:2"  # the port whose queue the timelines follow (default: towards the first server)
//
//	[[tenant]]
//	name = "victim"      # results and --set tenant.victim.KEY=... name it
//	test = "write_lat"
//	size = 64            # and every other workload parameter, by its column's name
//	clients = [0]        # hosts of its clients
//	servers = [2]        # one per client, or one for all
//	start = "50us"       # when its threads begin; stop: when its clients stop posting
//	rate = "1M"          # operations per second per QP (default: keep tx_depth outstanding)
//	sl = 1               # service level of its QPs
//	timeline_qp = 0      # its client QP whose rate its timeline follows
//
// Sizes take suffixes (4K), times Go durations ("10us") or nanoseconds,
// rates SI suffixes ("2.5M").
type ScenarioDoc struct {
	Path     string
	Hosts    int
	Metadata bool
	Seed     uint64
	Limit    sim.Time
	// TimelinePort is the port whose queue the timelines follow
	// (perf.Scenario's).
	TimelinePort string
	Tenants      []TenantDoc
}

// TenantDoc is one [[tenant]] of a scenario file: its name and its keys
// as written.
type TenantDoc struct {
	Name string
	Keys map[string]any
}

// LoadScenario reads a scenario file and checks its keys (the values are
// checked when a run's scenario is built, with its overrides).
func LoadScenario(path string) (*ScenarioDoc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d, err := ParseScenario(b)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	d.Path = path
	return d, nil
}

// ParseScenario reads a scenario from its TOML text.
func ParseScenario(text []byte) (*ScenarioDoc, error) {
	var doc map[string]any
	if _, err := toml.NewDecoder(bytes.NewReader(text)).Decode(&doc); err != nil {
		return nil, err
	}
	d := &ScenarioDoc{}
	for k, v := range doc {
		var err error
		switch k {
		case "hosts":
			var n int
			n, err = intValue(v)
			d.Hosts = n
		case "metadata":
			d.Metadata, err = boolValue(v)
		case "seed":
			var n int
			n, err = intValue(v)
			d.Seed = uint64(n)
		case "limit":
			d.Limit, err = durationValue(v)
		case "timeline_port":
			d.TimelinePort, err = stringValue(v)
		case "tenant":
			tables, ok := v.([]map[string]any)
			if !ok {
				return nil, errors.New("tenant: want [[tenant]] tables")
			}
			for i, t := range tables {
				name, ok := t["name"].(string)
				if !ok {
					return nil, fmt.Errorf("tenant %d: no name (a string)", i+1)
				}
				td := TenantDoc{Name: name, Keys: map[string]any{}}
				for key, val := range t {
					if key == "name" {
						continue
					}
					if _, ok := tenantKeys[key]; !ok {
						return nil, fmt.Errorf("tenant %q: unknown key %q (keys: %s)", name, key, tenantKeyNames())
					}
					td.Keys[key] = val
				}
				d.Tenants = append(d.Tenants, td)
			}
		default:
			return nil, fmt.Errorf("unknown key %q (keys: hosts, metadata, seed, limit, timeline_port, [[tenant]])", k)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	if len(d.Tenants) == 0 {
		return nil, errors.New("no [[tenant]]")
	}
	return d, nil
}

// TenantSetPrefix starts the --set keys that override a tenant's
// parameter (tenant.NAME.KEY) rather than the profile's.
const TenantSetPrefix = "tenant."

// tenantSet splits a tenant override's key into the tenant's name and
// its key.
func tenantSet(key string) (name, k string, ok bool) {
	rest, ok := strings.CutPrefix(key, TenantSetPrefix)
	if !ok {
		return "", "", false
	}
	name, k, ok = strings.Cut(rest, ".")
	return name, k, ok
}

// checkSet checks that an override names one of the scenario's tenants
// and one of their keys.
func (d *ScenarioDoc) checkSet(key string) error {
	name, k, ok := tenantSet(key)
	if !ok {
		return fmt.Errorf("--set %s: want tenant.NAME.KEY", key)
	}
	if !slices.ContainsFunc(d.Tenants, func(t TenantDoc) bool { return t.Name == name }) {
		names := make([]string, len(d.Tenants))
		for i, t := range d.Tenants {
			names[i] = t.Name
		}
		return fmt.Errorf("--set %s: no tenant %q (tenants: %s)", key, name, strings.Join(names, ", "))
	}
	if _, ok := tenantKeys[k]; !ok {
		return fmt.Errorf("--set %s: unknown key %q (keys: %s)", key, k, tenantKeyNames())
	}
	return nil
}

// Scenario builds the scenario with a run's overrides of its tenants'
// keys (key tenant.NAME.KEY: a TOML value or a bare word) and seed
// (seed >= 0 overrides the file's).
func (d *ScenarioDoc) Scenario(overrides []Override, seed int64) (perf.Scenario, error) {
	sc := perf.Scenario{Hosts: d.Hosts, Metadata: d.Metadata, Seed: d.Seed, Limit: d.Limit, TimelinePort: d.TimelinePort}
	if seed >= 0 {
		sc.Seed = uint64(seed)
	}
	for _, td := range d.Tenants {
		t := perf.Tenant{Name: td.Name}
		keys := maps.Clone(td.Keys)
		for _, o := range overrides {
			if name, k, ok := tenantSet(o.Key); ok && name == td.Name {
				keys[k] = setValueOf(o.Value)
			}
		}
		// In a fixed order, so that the first bad key reported is the
		// same every time.
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			if err := tenantKeys[k](&t, keys[k]); err != nil {
				return sc, fmt.Errorf("tenant %q: %s: %w", td.Name, k, err)
			}
		}
		sc.Tenants = append(sc.Tenants, t)
	}
	return sc, nil
}

// setValueOf reads an override's value as TOML (64, 2.5, true, "text",
// [0, 1]); anything else (4K, 50us, write_bw) is taken as a bare word.
func setValueOf(s string) any {
	var doc map[string]any
	if _, err := toml.Decode("v = "+s, &doc); err == nil {
		return doc["v"]
	}
	return s
}

// tenantKeys sets each key of a tenant from its value.
var tenantKeys = map[string]func(t *perf.Tenant, v any) error{
	"test": func(t *perf.Tenant, v any) (err error) {
		s, err := stringValue(v)
		if err == nil {
			t.Spec.Test, err = ParseTest(s)
		}
		return err
	},
	"size":        intKey(func(t *perf.Tenant) *int { return &t.Spec.Size }),
	"qps":         intKey(func(t *perf.Tenant) *int { return &t.Spec.QPs }),
	"iters":       intKey(func(t *perf.Tenant) *int { return &t.Spec.Iters }),
	"warmup":      intKey(func(t *perf.Tenant) *int { return &t.Spec.Warmup }),
	"tx_depth":    intKey(func(t *perf.Tenant) *int { return &t.Spec.TxDepth }),
	"post_list":   intKey(func(t *perf.Tenant) *int { return &t.Spec.PostList }),
	"rx_depth":    intKey(func(t *perf.Tenant) *int { return &t.Spec.RxDepth }),
	"tclass":      intKey(func(t *perf.Tenant) *int { return &t.Spec.TrafficClass }),
	"footprint":   intKey(func(t *perf.Tenant) *int { return &t.Spec.Footprint }),
	"page_size":   intKey(func(t *perf.Tenant) *int { return &t.Spec.PageSize }),
	"threads":     intKey(func(t *perf.Tenant) *int { return &t.Spec.Threads }),
	"cq_mod":      intKey(func(t *perf.Tenant) *int { return &t.Spec.CQMod }),
	"sl":          intKey(func(t *perf.Tenant) *int { return &t.SL }),
	"timeline_qp": intKey(func(t *perf.Tenant) *int { return &t.Spec.TimelineQP }),
	"inline": func(t *perf.Tenant, v any) error {
		n, err := intValue(v)
		if n == 0 {
			n = perf.NoInline // asked for none, not for the default
		}
		t.Spec.Inline = n
		return err
	},
	"mr_per_qp": boolKey(func(t *perf.Tenant) *bool { return &t.Spec.MRPerQP }),
	"random":    boolKey(func(t *perf.Tenant) *bool { return &t.Spec.Random }),
	"start":     durationKey(func(t *perf.Tenant) *sim.Time { return &t.Start }),
	"stop":      durationKey(func(t *perf.Tenant) *sim.Time { return &t.Stop }),
	"mr_churn":  durationKey(func(t *perf.Tenant) *sim.Time { return &t.Spec.MRChurn }),
	"recv_every": durationKey(func(t *perf.Tenant) *sim.Time {
		return &t.Spec.RecvEvery
	}),
	"atomic_type":   stringKey(func(t *perf.Tenant) *string { return &t.Spec.AtomicType }),
	"atomic_target": stringKey(func(t *perf.Tenant) *string { return &t.Spec.AtomicTarget }),
	"rate":          key(func(t *perf.Tenant) *float64 { return &t.Rate }, rateValue),
	"clients":       key(func(t *perf.Tenant) *[]int { return &t.Clients }, intsValue),
	"servers":       key(func(t *perf.Tenant) *[]int { return &t.Servers }, intsValue),
}

func tenantKeyNames() string {
	names := make([]string, 0, len(tenantKeys)+1)
	names = append(names, "name")
	for k := range tenantKeys {
		names = append(names, k)
	}
	slices.Sort(names[1:])
	return strings.Join(names, ", ")
}

// key sets a field of a tenant from a value read by parse.
func key[T any](field func(t *perf.Tenant) *T, parse func(any) (T, error)) func(t *perf.Tenant, v any) error {
	return func(t *perf.Tenant, v any) (err error) {
		*field(t), err = parse(v)
		return err
	}
}

func intKey(field func(t *perf.Tenant) *int) func(*perf.Tenant, any) error {
	return key(field, intValue)
}
func boolKey(field func(t *perf.Tenant) *bool) func(*perf.Tenant, any) error {
	return key(field, boolValue)
}
func durationKey(field func(t *perf.Tenant) *sim.Time) func(*perf.Tenant, any) error {
	return key(field, durationValue)
}
func stringKey(field func(t *perf.Tenant) *string) func(*perf.Tenant, any) error {
	return key(field, stringValue)
}

// intValue reads a count: a TOML integer or a size ("4K").
func intValue(v any) (int, error) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return 0, fmt.Errorf("%d is negative", x)
		}
		return int(x), nil
	case string:
		return ParseSize(x)
	}
	return 0, fmt.Errorf("%v is not a number (64, \"4K\")", v)
}

func boolValue(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		if b, err := strconv.ParseBool(x); err == nil {
			return b, nil
		}
	}
	return false, fmt.Errorf("%v is not true or false", v)
}

// durationValue reads a virtual time: a duration string or nanoseconds.
func durationValue(v any) (sim.Time, error) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return 0, fmt.Errorf("%d is negative", x)
		}
		return sim.Time(x), nil
	case string:
		return ParseDuration(x)
	}
	return 0, fmt.Errorf("%v is not a duration (\"10us\", or nanoseconds)", v)
}

func stringValue(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	return "", fmt.Errorf("%v is not a string", v)
}

// rateValue reads a rate: a number, or a string with an SI suffix
// ("2.5M": 2.5 million).
func rateValue(v any) (float64, error) {
	switch x := v.(type) {
	case int64:
		return float64(x), nil
	case float64:
		return x, nil
	case string:
		s := strings.TrimSpace(x)
		mult := 1.0
		if n := len(s); n > 0 {
			if i := strings.IndexByte("kMG", s[n-1]); i >= 0 {
				mult = math.Pow(1000, float64(i+1))
				s = s[:n-1]
			}
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f * mult, nil
		}
	}
	return 0, fmt.Errorf("%v is not a rate (operations per second: 500000, \"2.5M\")", v)
}

// intsValue reads a list of host numbers (or one).
func intsValue(v any) ([]int, error) {
	switch x := v.(type) {
	case []any:
		out := make([]int, len(x))
		for i, e := range x {
			n, err := intValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case int64:
		n, err := intValue(x)
		return []int{n}, err
	}
	return nil, fmt.Errorf("%v is not a list of hosts ([0, 1])", v)
}
