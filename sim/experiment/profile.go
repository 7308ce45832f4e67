package experiment

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/rnic/rnic/sim/profile"
)

// Override sets one profile parameter, named by its dotted TOML key, to a
// value written in TOML ("caches.qpc.entries", "100").
type Override struct {
	Key, Value string
}

func (o Override) String() string { return o.Key + "=" + o.Value }

// LoadProfile loads a built-in profile by name, or else the TOML profile
// in the file at src, and applies the overrides in order. Overrides edit
// the TOML: it is decoded into a document, each key is set (it must name
// a parameter of a profile, and the value must have the parameter's
// type), and the document is encoded and loaded again, so a profile with
// overrides is validated like any other.
func LoadProfile(src string, overrides ...Override) (*profile.HardwareProfile, error) {
	builtin := slices.Contains(profile.Names(), src)
	if len(overrides) == 0 {
		if builtin {
			return profile.Builtin(src)
		}
		return loadFile(src)
	}
	var text bytes.Buffer
	if builtin {
		if err := profile.Show(&text, src); err != nil {
			return nil, err
		}
	} else {
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, notFound(src, err)
		}
		text.Write(b)
	}
	base, err := profile.Load(bytes.NewReader(text.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	out, err := applyOverrides(base, text.Bytes(), overrides)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", src, err)
	}
	p, err := profile.Load(bytes.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("profile %s with %s: %w", src, joinOverrides(overrides), err)
	}
	return p, nil
}

// ProfileTOML returns the TOML of a profile with overrides applied
// (without the comments of the original).
func ProfileTOML(src string, overrides ...Override) ([]byte, error) {
	p, err := LoadProfile(src, overrides...)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = p.Save(&b)
	return b.Bytes(), err
}

func loadFile(src string) (*profile.HardwareProfile, error) {
	if _, err := os.Stat(src); err != nil {
		return nil, notFound(src, err)
	}
	return profile.LoadFile(src)
}

func notFound(src string, err error) error {
	return fmt.Errorf("profile %q is neither built in (%s) nor a readable file: %w",
		src, strings.Join(profile.Names(), ", "), err)
}

func joinOverrides(list []Override) string {
	s := make([]string, len(list))
	for i, o := range list {
		s[i] = "--set " + o.String()
	}
	return strings.Join(s, " ")
}

// applyOverrides sets each override in the TOML document text and returns
// the document encoded again. The keys and types that are allowed are
// those of base encoded in full: every parameter of a profile, whether or
// not text mentions it.
func applyOverrides(base *profile.HardwareProfile, text []byte, overrides []Override) ([]byte, error) {
	var full bytes.Buffer
	if err := base.Save(&full); err != nil {
		return nil, err
	}
	var schema, doc map[string]any
	if _, err := toml.Decode(full.String(), &schema); err != nil {
		return nil, err
	}
	if _, err := toml.Decode(string(text), &doc); err != nil {
		return nil, err
	}
	for _, o := range overrides {
		if err := set(schema, doc, o); err != nil {
			return nil, fmt.Errorf("--set %s: %w", o, err)
		}
		clearSizeSibling(doc, o.Key)
		if o.Key == "dcqcn.preset" {
			if err := applyDCQCNPreset(doc, o.Value); err != nil {
				return nil, fmt.Errorf("--set %s: %w", o, err)
			}
		}
	}
	var out bytes.Buffer
	if err := toml.NewEncoder(&out).Encode(doc); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// applyDCQCNPreset writes every DCQCN parameter of the named preset into
// doc (enabled is left as it is): later --set keys still change one.
func applyDCQCNPreset(doc map[string]any, name string) error {
	if name == "" {
		return nil
	}
	d, err := profile.DCQCNPreset(name)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(d); err != nil {
		return err
	}
	var vals map[string]any
	if _, err := toml.Decode(buf.String(), &vals); err != nil {
		return err
	}
	delete(vals, "enabled")
	t, ok := doc["dcqcn"].(map[string]any)
	if !ok {
		t = map[string]any{}
		doc["dcqcn"] = t
	}
	for k, v := range vals {
		t[k] = v
	}
	return nil
}

// clearSizeSibling removes the other way of giving a cache's size when key
// gives one ("caches.qpc.entries" replaces "caches.qpc.capacity_bytes" and
// the other way round), so that --set of either works on any profile.
func clearSizeSibling(doc map[string]any, key string) {
	path := strings.Split(key, ".")
	if len(path) != 3 || path[0] != "caches" {
		return
	}
	var other string
	switch path[2] {
	case "entries":
		other = "capacity_bytes"
	case "capacity_bytes":
		other = "entries"
	default:
		return
	}
	caches, _ := doc["caches"].(map[string]any)
	if c, ok := caches[path[1]].(map[string]any); ok {
		delete(c, other)
	}
}

// set puts o's value at o's key in doc, if schema has a parameter there
// of the value's type.
func set(schema, doc map[string]any, o Override) error {
	path := strings.Split(o.Key, ".")
	for i, name := range path {
		want, ok := schema[name]
		if !ok {
			where := "a profile"
			if i > 0 {
				where = "[" + strings.Join(path[:i], ".") + "]"
			}
			return fmt.Errorf("no parameter %q in %s (it has: %s)", name, where, keys(schema))
		}
		if i == len(path)-1 {
			if _, isTable := want.(map[string]any); isTable {
				return fmt.Errorf("%s is a table (it has: %s), not a parameter", o.Key, keys(want.(map[string]any)))
			}
			v, err := parseValue(o.Value, want)
			if err != nil {
				return fmt.Errorf("%s: %w", o.Key, err)
			}
			doc[name] = v
			return nil
		}
		sub, isTable := want.(map[string]any)
		if !isTable {
			return fmt.Errorf("%s is a parameter, not a table", strings.Join(path[:i+1], "."))
		}
		schema = sub
		next, ok := doc[name].(map[string]any)
		if !ok {
			next = map[string]any{}
			doc[name] = next
		}
		doc = next
	}
	return nil
}

// parseValue reads s as a TOML value of the type of want (a string may be
// written without quotes; an integer is accepted for a float).
func parseValue(s string, want any) (any, error) {
	var m map[string]any
	_, err := toml.Decode("v = "+s, &m)
	if _, isString := want.(string); isString && (err != nil || m["v"] == nil) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%q is not a TOML value", s)
	}
	v := m["v"]
	switch want.(type) {
	case float64:
		if i, ok := v.(int64); ok {
			return float64(i), nil
		}
	case []map[string]any, []any:
		switch v.(type) {
		case []map[string]any, []any:
			return v, nil
		}
	}
	if fmt.Sprintf("%T", v) != fmt.Sprintf("%T", want) {
		return nil, fmt.Errorf("%s is %s, want %s", s, typeName(v), typeName(want))
	}
	return v, nil
}

func typeName(v any) string {
	switch v.(type) {
	case int64:
		return "an integer"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []map[string]any, []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

func keys(m map[string]any) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
