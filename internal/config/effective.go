package config

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Redacted is what Effective prints in place of a secret.
const Redacted = "<redacted>"

// How a string value is printed by Effective.
type printAs int

const (
	shownPlain      printAs = iota + 1
	shownSecret             // replaced by Redacted
	shownURL                // the password and secret-looking query values redacted
	shownCapability         // a URL that is itself the credential: only scheme and host kept
	shownBrokerURL          // comma-separated URLs, each as shownURL; a user name alone too (a NATS token)
)

// valueKinds classifies every string value of the file by its key path,
// with "*" for a source or destination name and "[]" for a list index. A
// string key missing here is printed as a secret (TestEffectiveClassifiesEveryKey
// fails until it is added).
var valueKinds = map[string]printAs{
	"listen":        shownPlain,
	"database":      shownURL, // postgres://user:PASSWORD@…; sqlite:PATH has no password
	"admin_token":   shownSecret,
	"dashboard_url": shownURL,

	"tokens[].name":     shownPlain,
	"tokens[].token":    shownSecret,
	"tokens[].scopes[]": shownPlain,

	"tls.cert_file":            shownPlain,
	"tls.key_file":             shownPlain,
	"tls.client_ca":            shownPlain,
	"tls.acme.domains[]":       shownPlain,
	"tls.acme.email":           shownPlain,
	"tls.acme.ca":              shownURL,
	"tls.acme.ca_root":         shownPlain,
	"tls.acme.storage":         shownPlain,
	"admin.listen":             shownPlain,
	"admin.tls.cert_file":      shownPlain,
	"admin.tls.key_file":       shownPlain,
	"admin.tls.client_ca":      shownPlain,
	"admin.tls.acme.domains[]": shownPlain,
	"admin.tls.acme.email":     shownPlain,
	"admin.tls.acme.ca":        shownURL,
	"admin.tls.acme.ca_root":   shownPlain,
	"admin.tls.acme.storage":   shownPlain,

	"sources.*.provider":            shownPlain,
	"sources.*.secrets[]":           shownSecret,
	"sources.*.public_url":          shownURL,
	"sources.*.api_key":             shownSecret,
	"sources.*.api_base":            shownURL,
	"sources.*.backfill.repo":       shownPlain,
	"sources.*.backfill.org":        shownPlain,
	"sources.*.signature.header":    shownPlain,
	"sources.*.signature.algorithm": shownPlain,
	"sources.*.signature.encoding":  shownPlain,
	"sources.*.signature.prefix":    shownPlain,
	"sources.*.id":                  shownPlain,
	"sources.*.type":                shownPlain,
	"sources.*.ordering.object":     shownPlain,
	"sources.*.ordering.version":    shownPlain,
	"sources.*.ordering.stale":      shownPlain,
	"sources.*.overload":            shownPlain,

	"destinations.*.type":                 shownPlain,
	"destinations.*.nats.url":             shownBrokerURL,
	"destinations.*.nats.subject":         shownPlain,
	"destinations.*.nats.stream":          shownPlain,
	"destinations.*.rabbitmq.url":         shownBrokerURL,
	"destinations.*.rabbitmq.exchange":    shownPlain,
	"destinations.*.rabbitmq.routing_key": shownPlain,
	"destinations.*.kafka.brokers[]":      shownPlain,
	"destinations.*.kafka.topic":          shownPlain,

	"destinations.*.url":            shownURL,
	"destinations.*.sources[]":      shownPlain,
	"destinations.*.signing_secret": shownSecret,
	"destinations.*.on_stale_claim": shownPlain,
	"destinations.*.drop_headers[]": shownPlain,
	"destinations.*.filter":         shownPlain,
	"destinations.*.order":          shownPlain,

	"destinations.*.headers.*":                 shownSecret,
	"destinations.*.auth.bearer":               shownSecret,
	"destinations.*.auth.basic.user":           shownSecret,
	"destinations.*.auth.basic.password":       shownSecret,
	"destinations.*.auth.oauth2.token_url":     shownURL,
	"destinations.*.auth.oauth2.client_id":     shownSecret,
	"destinations.*.auth.oauth2.client_secret": shownSecret,
	"destinations.*.auth.oauth2.scopes[]":      shownPlain,
	"destinations.*.tls.client_cert_file":      shownPlain,
	"destinations.*.tls.client_key_file":       shownPlain,
	"destinations.*.tls.ca_file":               shownPlain,
	"destinations.*.tls.server_name":           shownPlain,
	"destinations.*.proxy":                     shownURL,

	"alerts[].webhook":               shownCapability,
	"alerts[].slack":                 shownCapability,
	"alerts[].pagerduty.routing_key": shownSecret,
	"alerts[].pagerduty.url":         shownURL,

	"log.key_file": shownPlain,
	"log.push_url": shownURL,
	"log.origin":   shownPlain,
}

// Effective returns the configuration as anyhook runs it, as YAML: every
// key with its value after ${VAR} and ${file:PATH} expansion and with the
// defaults filled in, sources and destinations in the file's order. Secrets
// (admin_token, tokens, secrets, signing_secret, PagerDuty routing keys) are
// replaced by "<redacted>", URLs lose their password and secret-looking
// query values, and alert webhook and Slack URLs (which are credentials
// themselves) keep only their scheme and host. The SQLite file and the log
// key file carry a comment with the path they resolve to.
func (c *Config) Effective() []byte { return c.effective(true) }

// effective is Effective; without redaction the output parses back into
// the same configuration (TestEffectiveRoundTrip).
func (c *Config) effective(redact bool) []byte {
	p := printer{c: c, redact: redact}
	root := p.node(reflect.ValueOf(c).Elem(), "")
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		// Only scalars, sequences and mappings built here: cannot fail.
		panic(fmt.Sprintf("config: encoding the effective configuration: %v", err))
	}
	enc.Close()
	return b.Bytes()
}

type printer struct {
	c      *Config
	redact bool
}

var (
	durationType = reflect.TypeFor[Duration]()
	sizeType     = reflect.TypeFor[Size]()
	rateType     = reflect.TypeFor[Rate]()
	pathIndexRe  = regexp.MustCompile(`\[\d+\]`)
	// A parameter named like a credential; code is Azure Functions' key.
	secretQueryRe = regexp.MustCompile(`(?i)pass|secret|token|key|sig|auth|cred|^code$`)
)

// pattern turns a key path ("sources.stripe.secrets[1]") into its
// valueKinds pattern ("sources.*.secrets[]").
func pattern(path string) string {
	path = pathIndexRe.ReplaceAllString(path, "[]")
	parts := strings.Split(path, ".")
	if len(parts) > 1 && (parts[0] == "sources" || parts[0] == "destinations") {
		parts[1] = "*"
	}
	if len(parts) > 3 && parts[0] == "destinations" && parts[2] == "headers" {
		// A header's name, which may hold dots.
		parts = append(parts[:3], "*")
	}
	return strings.Join(parts, ".")
}

func scalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

// node returns v as a YAML node, or nil to leave the key out (an unset
// optional value).
func (p *printer) node(v reflect.Value, path string) *yaml.Node {
	switch v.Type() {
	case durationType:
		return scalar("!!str", v.Interface().(Duration).String())
	case sizeType:
		return scalar("!!str", v.Interface().(Size).String())
	case rateType:
		if v.Float() == 0 {
			return nil // no cap
		}
		return scalar("!!str", v.Interface().(Rate).String())
	case signatureType:
		if v.Interface().(Signature).None {
			return scalar("!!str", "none")
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return p.node(v.Elem(), path)
	case reflect.String:
		if v.String() == "" {
			return nil
		}
		return scalar("!!str", p.str(v.String(), path))
	case reflect.Int, reflect.Int64:
		return scalar("!!int", strconv.FormatInt(v.Int(), 10))
	case reflect.Float64:
		if v.Float() == 0 {
			return nil // auto_pause's other rule
		}
		return scalar("!!float", strconv.FormatFloat(v.Float(), 'f', -1, 64))
	case reflect.Bool:
		return scalar("!!bool", strconv.FormatBool(v.Bool()))
	case reflect.Slice:
		if v.Len() == 0 {
			return nil
		}
		n := &yaml.Node{Kind: yaml.SequenceNode}
		if v.Type().Elem().Kind() == reflect.String {
			n.Style = yaml.FlowStyle
		}
		for i := range v.Len() {
			item := p.node(v.Index(i), path+"["+strconv.Itoa(i)+"]")
			if item == nil {
				item = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			}
			n.Content = append(n.Content, item)
		}
		return n
	case reflect.Map:
		if v.Len() == 0 {
			return nil
		}
		names := p.order(path)
		if len(names) != v.Len() {
			names = nil
			for _, k := range v.MapKeys() {
				names = append(names, k.String())
			}
			slices.Sort(names)
		}
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, name := range names {
			val := p.node(v.MapIndex(reflect.ValueOf(name)), join(path, name))
			if val == nil {
				val = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			}
			n.Content = append(n.Content, scalar("!!str", name), val)
		}
		return n
	case reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode}
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" || name == "" {
				continue
			}
			key := join(path, name)
			val := p.node(v.Field(i), key)
			if val == nil {
				continue
			}
			val.LineComment = p.comment(key)
			n.Content = append(n.Content, scalar("!!str", name), val)
		}
		return n
	}
	panic(fmt.Sprintf("config: cannot print %s (%s)", path, v.Type()))
}

// order is the file's order of the sources or destinations.
func (p *printer) order(path string) []string {
	switch path {
	case "sources":
		return p.c.SourceOrder
	case "destinations":
		return p.c.DestinationOrder
	}
	return nil
}

// comment says where a relative path points.
func (p *printer) comment(key string) string {
	switch key {
	case "database":
		if path, ok := p.c.SQLitePath(); ok && path != ":memory:" {
			return path
		}
	case "tls.acme.storage":
		return p.c.ACMEStoragePath()
	case "tls.cert_file", "tls.key_file", "tls.client_ca", "tls.acme.ca_root",
		"admin.tls.cert_file", "admin.tls.key_file", "admin.tls.client_ca":
		v := p.c.TLS
		if strings.HasPrefix(key, "admin.") {
			v = p.c.Admin.TLS
		}
		name := map[string]string{"cert_file": v.CertFile, "key_file": v.KeyFile, "client_ca": v.ClientCA}[key[strings.LastIndex(key, ".")+1:]]
		if key == "tls.acme.ca_root" {
			name = v.ACME.CARoot
		}
		if p.c.FilePath(name) != name {
			return p.c.FilePath(name)
		}
	case "log.key_file":
		path := p.c.LedgerKeyPath()
		if _, err := os.Stat(path); err != nil {
			return path + " (created at the first start)"
		}
		return path
	}
	return ""
}

// str prints a string value: redacted per valueKinds, and with "${"
// written "$${" so that the output reads back as the same value.
func (p *printer) str(s, path string) string {
	if p.redact {
		kind, ok := valueKinds[pattern(path)]
		if !ok {
			kind = shownSecret
		}
		switch kind {
		case shownSecret:
			return Redacted
		case shownURL:
			s = redactURL(s, false)
		case shownCapability:
			s = redactURL(s, true)
		case shownBrokerURL:
			s = redactBrokerURL(s)
		}
	}
	return strings.ReplaceAll(s, "${", "$${")
}

// redactBrokerURL is redactURL of each of comma-separated broker URLs,
// which also redacts a user name without a password: NATS takes a token
// as nats://TOKEN@host.
func redactBrokerURL(s string) string {
	parts := strings.Split(s, ",")
	for i, one := range parts {
		one = strings.TrimSpace(one)
		if u, err := url.Parse(one); err == nil && u.User != nil {
			if _, ok := u.User.Password(); !ok {
				u.User = url.User(Redacted)
				one = strings.ReplaceAll(u.String(), "%3Credacted%3E", Redacted)
			}
		}
		parts[i] = redactURL(one, false)
	}
	return strings.Join(parts, ",")
}

// redactURL removes the password and the values of secret-looking query
// parameters from a URL; with capability, everything after the host. A
// value that is not a URL with a host (sqlite:PATH) is returned as is.
func redactURL(s string, capability bool) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		if capability {
			return Redacted
		}
		return s
	}
	if capability {
		if u.Path == "" && u.RawQuery == "" && u.User == nil {
			return s
		}
		return u.Scheme + "://" + u.Host + "/" + Redacted
	}
	// A password is redacted; so is an http(s) user name without one (or
	// with an empty one): APIs that take the key as the user name
	// (Stripe-style https://KEY:@host) have it there. A database's user
	// name is a name.
	if pw, ok := u.User.Password(); ok && pw != "" {
		u.User = url.UserPassword(u.User.Username(), Redacted)
	} else if u.User != nil && (u.Scheme == "http" || u.Scheme == "https") {
		u.User = url.User(Redacted)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if secretQueryRe.MatchString(k) {
				q[k] = []string{Redacted}
			}
		}
		u.RawQuery = q.Encode()
	}
	// url.URL.String escapes < and >; keep the marker readable.
	return strings.NewReplacer("%3Credacted%3E", Redacted, "%3credacted%3e", Redacted).Replace(u.String())
}
