package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// String formats d as a Go duration.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML reads a Go duration string such as 150ms or 5m.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("must be a duration such as 150ms or 5m")
	}
	return d.parseScalar(n.Value)
}

// MarshalYAML writes d as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func (d *Duration) parseScalar(s string) error {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a duration: use a Go duration such as 150ms, 30s or 5m", s)
	}
	*d = Duration(v)
	return nil
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10},
	{"MiB", 1 << 20},
	{"GiB", 1 << 30},
	{"B", 1},
}

// String formats s with the largest unit that divides it exactly.
func (s Size) String() string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if s != 0 && int64(s)%u.mult == 0 {
			return strconv.FormatInt(int64(s)/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// UnmarshalYAML reads a byte count: 1024, 512KiB, 10MiB or 1GiB.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("must be a size such as 65536, 512KiB or 10MiB")
	}
	return s.parseScalar(n.Value)
}

// MarshalYAML writes s with a unit.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

func (s *Size) parseScalar(in string) error {
	bad := fmt.Errorf("%q is not a size: use bytes (65536) or KiB, MiB, GiB (512KiB, 10MiB)", in)
	str := strings.TrimSpace(in)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(str, u.suffix) {
			str, mult = strings.TrimSpace(strings.TrimSuffix(str, u.suffix)), u.mult
			break
		}
	}
	if str == "" || str[0] == '+' || str[0] == '-' {
		return bad
	}
	v, err := strconv.ParseInt(str, 10, 64)
	if err != nil || v > math.MaxInt64/mult {
		return bad
	}
	*s = Size(v * mult)
	return nil
}

// UnmarshalYAML accepts the scalar "none" (None is set) or a mapping of
// the scheme's fields. Load reads the file with its own stricter walker;
// this is for other users of the type.
func (sig *Signature) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value != "none" {
			return errors.New(`must be "none" or a mapping {header, algorithm, encoding, prefix}`)
		}
		*sig = Signature{None: true}
		return nil
	}
	type plain Signature
	return n.Decode((*plain)(sig))
}

// Rate is a request rate written as 50 or 50/s (per second), 600/m or
// 3600/h; it is kept per second. Zero means no limit.
type Rate float64

// PerSecond returns r in requests per second.
func (r Rate) PerSecond() float64 { return float64(r) }

// String formats r per second.
func (r Rate) String() string { return strconv.FormatFloat(float64(r), 'g', -1, 64) + "/s" }

// MarshalYAML writes r per second.
func (r Rate) MarshalYAML() (any, error) { return r.String(), nil }

func (r *Rate) parseScalar(in string) error {
	s := strings.TrimSpace(in)
	per := 1.0
	if num, unit, ok := strings.Cut(s, "/"); ok {
		switch strings.TrimSpace(unit) {
		case "s":
		case "m":
			per = 60
		case "h":
			per = 3600
		default:
			return fmt.Errorf("%q is not a rate: use requests per second (50 or 50/s), per minute (600/m) or per hour (3600/h)", in)
		}
		s = strings.TrimSpace(num)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return fmt.Errorf("%q is not a rate: use a positive number of requests per second (50 or 50/s), per minute (600/m) or per hour (3600/h)", in)
	}
	*r = Rate(v / per)
	return nil
}
