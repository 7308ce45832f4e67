package profile

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

//go:embed profiles/*.toml
var builtin embed.FS

// ErrUnknown is wrapped by Builtin and Show for a name that is not a
// built-in profile.
var ErrUnknown = errors.New("unknown profile")

// Names returns the names of the built-in profiles, sorted.
func Names() []string {
	entries, _ := builtin.ReadDir("profiles")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".toml"))
	}
	slices.Sort(names)
	return names
}

func builtinFile(name string) ([]byte, error) {
	b, err := builtin.ReadFile(path.Join("profiles", name+".toml"))
	if err != nil {
		return nil, fmt.Errorf("profile %q: %w (built-in: %s)", name, ErrUnknown, strings.Join(Names(), ", "))
	}
	return b, nil
}

// Builtin returns the built-in profile called name.
func Builtin(name string) (*HardwareProfile, error) {
	b, err := builtinFile(name)
	if err != nil {
		return nil, err
	}
	return Load(bytes.NewReader(b))
}

// Show writes the built-in profile called name as its TOML source, with
// the comments that cite where each number comes from: the starting point
// for a user's own profile (`rnic sim profile show cx6 > mine.toml`).
func Show(w io.Writer, name string) error {
	b, err := builtinFile(name)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Load reads a profile in TOML and validates it. Keys that are not
// parameters are errors (a misspelt key would otherwise silently keep its
// default), as is any invalid value; errors name the key.
func Load(r io.Reader) (*HardwareProfile, error) {
	var p HardwareProfile
	md, err := toml.NewDecoder(r).Decode(&p)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("profile %q: unknown parameters: %s", p.Name, strings.Join(keys, ", "))
	}
	for _, c := range []*Cache{&p.Caches.QPC, &p.Caches.MPT, &p.Caches.MTT, &p.Caches.CQC} {
		if c.Policy == "" {
			c.Policy = "lru" // profiles written before the key existed
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// LoadFile reads and validates the profile in the TOML file at path.
func LoadFile(path string) (*HardwareProfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := Load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Save writes p as TOML (without comments; Show keeps a built-in
// profile's). Load(Save(p)) yields p again.
func (p *HardwareProfile) Save(w io.Writer) error {
	return toml.NewEncoder(w).Encode(p)
}
