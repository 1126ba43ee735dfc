package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/anyhook/anyhook/internal/cli"
)

// DefaultPath is the config file used when neither --config nor
// $ANYHOOK_CONFIG names one.
const DefaultPath = "anyhook.yaml"

// EnvPath is the environment variable naming the config file.
const EnvPath = "ANYHOOK_CONFIG"

// Resolve picks the config file: flagValue when set, else $ANYHOOK_CONFIG,
// else ./anyhook.yaml.
func Resolve(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := os.Getenv(EnvPath); v != "" {
		return v
	}
	return DefaultPath
}

// Load reads, expands, decodes and validates the file at path, taking
// ${VAR} values from the process environment. Every value must expand:
// this is the config as serve and config check load it.
func Load(path string) (*Config, error) { return LoadFor(path, nil) }

// LoadFor is Load for a command that reads only some of the values: uses
// says, of a key path, whether the command reads the value there (nil:
// every one; Uses builds it). A value it does not read whose ${VAR} is
// unset or whose ${file:PATH} cannot be read is skipped rather than an
// error: left empty, left out of the validation, and listed in
// Config.Skipped for the command to mention.
func LoadFor(path string, uses func(key string) bool) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		msg := "cannot read the config file: " + err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			msg = "config file not found (pass --config FILE or set $" + EnvPath + ")"
		}
		return nil, &Error{File: path, Msg: msg, Err: err}
	}
	return ParseFor(path, data, os.LookupEnv, uses)
}

// Parse is Load on bytes already read: path names the file in errors and
// anchors relative paths; getenv (nil: os.LookupEnv) supplies ${VAR}
// values. Defaults are applied and the result validated; the error, if
// any, is an Errors listing every problem found, in line order. With it
// the Config is returned as far as it could be read (nil after a YAML
// syntax error), for a caller that checks more of it (config check): it
// is not a config to run.
func Parse(path string, data []byte, getenv func(string) (string, bool)) (*Config, error) {
	return ParseFor(path, data, getenv, nil)
}

// ParseFor is Parse with LoadFor's uses.
func ParseFor(path string, data []byte, getenv func(string) (string, bool), uses func(key string) bool) (*Config, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	c := &Config{Path: path, lines: map[string]int{}}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	c.Dir = dir

	root, err := parseNode(c.fileName(), data)
	if err != nil {
		return nil, err
	}
	d := &decoder{c: c, getenv: getenv, uses: uses, order: map[string][]string{}}
	if root != nil {
		d.keep(d.decode(root, reflect.ValueOf(c).Elem(), ""))
		c.SourceOrder = d.order["sources"]
		c.DestinationOrder = d.order["destinations"]
	}
	c.Skipped = d.skipped
	c.setDefaults()
	c.mistakes = d.errs
	all := d.errs
	for _, e := range List(c.Validate()) {
		if !c.Follows(e.Key) {
			all = append(all, e)
		}
	}
	if err := all.err(); err != nil {
		return c, err
	}
	return c, nil
}

// Follows reports whether a problem with key, found by a check of the
// decoded config (Validate, or the wiring's), only repeats what decoding
// already reported or skipped: a value refused (now empty) is refused
// again, a block whose key was misspelt lacks the key meant ("secret:"
// for "secrets:"), a block with a merge key is incomplete as a whole, and
// a value LoadFor skipped is empty.
func (c *Config) Follows(key string) bool {
	if c.skipped(key) {
		return true
	}
	under := func(k, root string) bool {
		return root == "" || k == root || strings.HasPrefix(k, root+".") || strings.HasPrefix(k, root+"[")
	}
	for _, e := range c.mistakes {
		parent := parentKey(e.Key)
		switch {
		case under(key, e.Key), key == parent:
			return true
		case e.meant != "" && under(key, join(parent, e.meant)):
			return true
		case strings.HasSuffix(e.Key, ".<<") && under(key, parent):
			return true
		}
	}
	return false
}

// parentKey is the key of the block key is in ("" at the top).
func parentKey(key string) string {
	if strings.HasSuffix(key, "]") {
		if i := strings.LastIndexByte(key, '['); i >= 0 {
			return key[:i]
		}
	}
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[:i]
	}
	return ""
}

// skipped reports whether a problem with key is one with a value
// LoadFor skipped (the key, a key under it, or the list it is in).
func (c *Config) skipped(key string) bool {
	for _, s := range c.Skipped {
		list, _, _ := strings.Cut(s.Key, "[")
		if key == s.Key || key == list || strings.HasPrefix(key, s.Key+".") || strings.HasPrefix(key, s.Key+"[") {
			return true
		}
	}
	return false
}

// Uses returns a LoadFor uses that takes the keys under any of patterns:
// dotted key paths in which * stands for any source or destination name
// ("database", "log", "destinations.*.filter").
func Uses(patterns ...string) func(key string) bool {
	alts := make([]string, len(patterns))
	for i, p := range patterns {
		alts[i] = strings.ReplaceAll(regexp.QuoteMeta(p), `\*`, `.+`)
	}
	re := regexp.MustCompile(`^(?:` + strings.Join(alts, "|") + `)(?:$|[.\[])`)
	return re.MatchString
}

var yamlLineErr = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseNode reads the one YAML document in data; nil means an empty file.
func parseNode(file string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(file, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, syntaxError(file, data, err)
		}
		return nil, &Error{File: file, Line: extra.Line, Msg: "more than one YAML document; the config is a single document"}
	}
	n := &doc
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil, nil
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, nil
	}
	return n, nil
}

// syntaxError reports a YAML syntax error at the line the mistake most
// likely is, with a hint at what it is (syntaxHint).
func syntaxError(file string, data []byte, err error) error {
	msg := strings.TrimPrefix(oneLine(err.Error()), "yaml: ")
	line := 0
	if m := yamlLineErr.FindStringSubmatch("yaml: " + msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	hintLine, hint := syntaxHint(data, msg)
	if hintLine > 0 {
		line = hintLine
	}
	if hint != "" {
		msg += "; " + hint
	}
	return &Error{File: file, Line: line, Msg: "invalid YAML: " + msg, Err: err}
}

// maxNodes bounds the work of one decode, so that aliases referring to
// aliases cannot make a small file expensive.
const maxNodes = 1 << 20

// decoder walks the YAML node tree alongside the Go types, so that it can
// name every key it rejects: unknown keys, wrong kinds, bad values and
// unset ${VAR}s, each with its line. It also records where every key was
// written (for Errorf) and the order of mapping keys (for SourceOrder).
type decoder struct {
	c      *Config
	getenv func(string) (string, bool)
	uses   func(key string) bool // nil: every key
	order  map[string][]string
	nodes  int

	errs    problems // every key refused, decoding went on past each
	skipped []*Error // values LoadFor skipped
	tooBig  bool     // maxNodes reached: decoding stops
}

func (d *decoder) errf(n *yaml.Node, key, format string, args ...any) error {
	return &Error{File: d.c.fileName(), Line: n.Line, Key: key, Msg: fmt.Sprintf(format, args...)}
}

// errSkipped is what decoding a value LoadFor skips returns: the value is
// left zero, and it is no error.
var errSkipped = errors.New("skipped")

// keep records the problem of one key, after which decoding goes on with
// the next, so that a file's every mistake is reported at once.
func (d *decoder) keep(err error) {
	if err != nil && !errors.Is(err, errSkipped) {
		d.errs.add(err)
	}
}

// warnf records a warning about the value of key at n's line.
func (d *decoder) warnf(n *yaml.Node, key, format string, args ...any) {
	d.c.warnings = append(d.c.warnings, &Error{File: d.c.fileName(), Line: n.Line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// scalarParser is implemented by the types written as one scalar with
// their own syntax (Duration, Size).
type scalarParser interface{ parseScalar(string) error }

var signatureType = reflect.TypeFor[Signature]()

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) error {
	if d.tooBig {
		return errSkipped // said once, where it happened
	}
	d.nodes++
	if d.nodes > maxNodes {
		d.tooBig = true
		return d.errf(n, path, "document too large (too many nodes or aliases)")
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return d.errf(n, path, "unresolved alias")
		}
		return d.decode(n.Alias, v, path)
	}
	if n.Kind == yaml.DocumentNode {
		return d.errf(n, path, "unexpected document")
	}
	isNull := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"

	if v.Kind() == reflect.Pointer {
		if isNull {
			v.SetZero()
			return nil
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return d.decode(n, v.Elem(), path)
	}
	if v.Type() == signatureType && n.Kind == yaml.ScalarNode {
		s, err := d.scalar(n, path)
		if err != nil {
			return err
		}
		if s != "none" {
			return d.errf(n, path, `must be "none" or a mapping {header, algorithm, encoding, prefix}, not %q`, s)
		}
		v.Set(reflect.ValueOf(Signature{None: true}))
		return nil
	}
	if p, ok := v.Addr().Interface().(scalarParser); ok {
		if isNull {
			v.SetZero()
			return nil
		}
		if n.Kind != yaml.ScalarNode {
			return d.errf(n, path, "must be a single value, not a %s", kindName(n))
		}
		s, err := d.scalar(n, path)
		if err != nil {
			return err
		}
		if err := p.parseScalar(s); err != nil {
			msg := err.Error()
			if s != n.Value { // expanded: the value may be a secret
				msg = strings.ReplaceAll(msg, strconv.Quote(s), "the value of "+strconv.Quote(n.Value))
			}
			return d.errf(n, path, "%s", msg)
		}
		return nil
	}

	switch v.Kind() {
	case reflect.String:
		if isNull {
			v.SetString("")
			return nil
		}
		if n.Kind != yaml.ScalarNode {
			return d.errf(n, path, "must be a string, not a %s", kindName(n))
		}
		s, err := d.scalar(n, path)
		if err != nil {
			return err
		}
		d.checkSpace(n, path, s)
		v.SetString(s)
	case reflect.Int, reflect.Int64:
		if isNull {
			v.SetInt(0)
			return nil
		}
		if n.Kind != yaml.ScalarNode {
			return d.errf(n, path, "must be an integer, not a %s", kindName(n))
		}
		s, err := d.scalar(n, path)
		if err != nil {
			return err
		}
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || v.OverflowInt(i) {
			return d.errf(n, path, "must be an integer, not %s", shown(n, s))
		}
		v.SetInt(i)
	case reflect.Float64:
		if isNull {
			v.SetFloat(0)
			return nil
		}
		if n.Kind != yaml.ScalarNode {
			return d.errf(n, path, "must be a number, not a %s", kindName(n))
		}
		s, err := d.scalar(n, path)
		if err != nil {
			return err
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return d.errf(n, path, "must be a number such as 0.5, not %s", shown(n, s))
		}
		v.SetFloat(f)
	case reflect.Bool:
		if isNull {
			v.SetBool(false)
			return nil
		}
		if n.Kind != yaml.ScalarNode {
			return d.errf(n, path, "must be true or false, not a %s", kindName(n))
		}
		s, err := d.scalar(n, path)
		if err != nil {
			return err
		}
		switch s {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			return d.errf(n, path, "must be true or false, not %s", shown(n, s))
		}
	case reflect.Slice:
		if isNull {
			v.SetZero()
			return nil
		}
		if n.Kind != yaml.SequenceNode {
			return d.errf(n, path, "must be a list such as [a, b], not a %s", kindName(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			d.c.lines[p] = item.Line
			d.keep(d.decode(item, s.Index(i), p))
		}
		v.Set(s)
	case reflect.Map:
		if isNull {
			v.SetZero()
			return nil
		}
		return d.mapping(n, v, path)
	case reflect.Struct:
		if isNull {
			return nil
		}
		return d.structure(n, v, path)
	default:
		return d.errf(n, path, "internal error: cannot decode into %s", v.Type())
	}
	return nil
}

// keys checks that n is a mapping and returns its (key, value) pairs,
// recording the line of each key. A pair whose key is not a plain string,
// is a merge key or repeats an earlier one is refused and left out.
func (d *decoder) keys(n *yaml.Node, path string) ([][2]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.errf(n, path, "must be a mapping (key: value), not a %s", kindName(n))
	}
	seen := map[string]int{}
	pairs := make([][2]*yaml.Node, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		switch first, dup := seen[k.Value]; {
		case k.Kind != yaml.ScalarNode:
			d.keep(d.errf(k, path, "keys must be plain strings, not a %s", kindName(k)))
		case k.Value == "<<":
			d.keep(d.errf(k, join(path, k.Value), "merge keys (<<) are not supported"))
		case dup:
			d.keep(d.errf(k, join(path, k.Value), "duplicate key (first at line %d)", first))
		default:
			seen[k.Value] = k.Line
			d.c.lines[join(path, k.Value)] = k.Line
			pairs = append(pairs, [2]*yaml.Node{k, val})
		}
	}
	return pairs, nil
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) error {
	if v.Type().Key().Kind() != reflect.String {
		return d.errf(n, path, "internal error: map key type %s", v.Type().Key())
	}
	pairs, err := d.keys(n, path)
	if err != nil {
		return err
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(v.Type(), len(pairs)))
	}
	names := make([]string, 0, len(pairs))
	for _, p := range pairs {
		key := p[0].Value
		elem := reflect.New(v.Type().Elem()).Elem()
		// Kept even when its value has a mistake: the rest of the file
		// may refer to it by name.
		d.keep(d.decode(p[1], elem, join(path, key)))
		v.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), elem)
		names = append(names, key)
	}
	d.order[path] = names
	return nil
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) error {
	pairs, err := d.keys(n, path)
	if err != nil {
		return err
	}
	fields := yamlFields(v.Type())
	for _, p := range pairs {
		key := p[0].Value
		i, ok := fields[key]
		if !ok {
			msg := "unknown key"
			s := suggest(key, fields)
			if s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			e := d.errf(p[0], join(path, key), "%s", msg).(*Error)
			e.meant = s
			d.keep(e)
			continue
		}
		d.keep(d.decode(p[1], v.Field(i), join(path, key)))
	}
	return nil
}

// scalar returns n's value with ${VAR} and ${file:PATH} references
// expanded. A reference that cannot be expanded at a key the caller of
// LoadFor does not use is skipped (errSkipped).
func (d *decoder) scalar(n *yaml.Node, path string) (string, error) {
	s, err := expand(n.Value, d.getenv, d.readFile)
	if err != nil {
		var un *unavailableError
		if errors.As(err, &un) && d.uses != nil && !d.uses(path) {
			d.skipped = append(d.skipped, d.errf(n, path, "%s", err).(*Error))
			return "", errSkipped
		}
		return "", d.errf(n, path, "%s", err)
	}
	return s, nil
}

// checkSpace warns about a secret with leading or trailing white space:
// it is kept as written (a secret may hold any byte), but it is far more
// often a copy-and-paste slip that makes every signature fail.
func (d *decoder) checkSpace(n *yaml.Node, path, s string) {
	if s == "" || strings.TrimSpace(s) == s {
		return
	}
	switch valueKinds[pattern(path)] {
	case shownSecret, shownCapability:
		d.warnf(n, path, "has white space at its start or end; it is kept as written, so it must be part of the secret: remove it if it is not")
	}
}

// unavailableError is a ${VAR} that is not set or a ${file:PATH} that
// cannot be read: the reference is right, the value is not there.
type unavailableError struct{ msg string }

func (e *unavailableError) Error() string { return e.msg }

// shown quotes a value for an error message; a value that came from
// ${VAR} or ${file:PATH} is named by its reference instead, since it may be
// a secret.
func shown(n *yaml.Node, s string) string {
	if s != n.Value {
		return "the value of " + strconv.Quote(n.Value)
	}
	return strconv.Quote(s)
}

// maxFileValue bounds a ${file:PATH} value: secrets and tokens are small,
// and a path such as /dev/zero must not make loading endless.
const maxFileValue = 64 << 10

// readFile returns the contents of a ${file:PATH} reference: PATH is
// relative to the config file's directory, must be a regular file of at
// most 64 KiB, and one trailing newline (\n or \r\n) is removed. Errors
// name the file, never its contents.
func (d *decoder) readFile(name string) (string, error) {
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(d.c.Dir, p)
	}
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("${file:%s}: file %s not found", name, p)
		}
		return "", fmt.Errorf("${file:%s}: cannot read %s: %v", name, p, errors.Unwrap(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("${file:%s}: %s is not a regular file", name, p)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileValue+1))
	if err != nil {
		return "", fmt.Errorf("${file:%s}: cannot read %s: %v", name, p, err)
	}
	if len(b) > maxFileValue {
		return "", fmt.Errorf("${file:%s}: %s is larger than %d bytes", name, p, maxFileValue)
	}
	s := string(b)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	return s, nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expand replaces each ${NAME} in s by the value of NAME and each
// ${file:PATH} by the contents of the file (readFile); $${ stands for a
// literal ${. Any other $ is kept as is.
func expand(s string, getenv func(string) (string, bool), readFile func(string) (string, error)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", errors.New(`unterminated "${" (write "$${" for a literal "${")`)
			}
			name := s[i+2 : i+2+end]
			i += 2 + end + 1
			if file, ok := strings.CutPrefix(name, "file:"); ok {
				if file == "" {
					return "", errors.New("${file:PATH} needs a path")
				}
				val, err := readFile(file)
				if err != nil {
					return "", &unavailableError{err.Error()}
				}
				b.WriteString(val)
				continue
			}
			if !envName.MatchString(name) {
				return "", fmt.Errorf("invalid environment variable reference ${%s}: only ${NAME} and ${file:PATH} are supported", name)
			}
			val, ok := getenv(name)
			if !ok {
				return "", &unavailableError{"environment variable " + name + " is not set"}
			}
			b.WriteString(val)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), nil
}

// yamlFields maps the yaml names of t's fields to their indices.
func yamlFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = i
	}
	return m
}

// synonyms are the names other webhook tools give to some of our keys,
// suggested when written here.
var synonyms = map[string]string{
	"max_retries":  "max_attempts",
	"retries":      "max_attempts",
	"retry_limit":  "max_attempts",
	"attempts":     "max_attempts",
	"endpoint":     "url",
	"target":       "url",
	"signing_key":  "signing_secret",
	"secret_key":   "secrets",
	"webhook_url":  "url",
	"retry":        "backoff",
	"retry_policy": "backoff",
}

// suggest returns the known key closest to key, if it is close, or the
// key of ours that key is another tool's name for.
func suggest(key string, fields map[string]int) string {
	if s, ok := synonyms[strings.ToLower(key)]; ok {
		if _, known := fields[s]; known {
			return s
		}
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	best, bestDist := "", 3
	for _, name := range names {
		if dist := cli.EditDistance(strings.ToLower(key), name); dist < bestDist {
			best, bestDist = name, dist
		}
	}
	return best
}

func join(path, key string) string {
	if key == "" || strings.IndexFunc(key, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	}
	return "single value" // never quoted: it may be a secret
}
