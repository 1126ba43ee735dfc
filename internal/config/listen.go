package config

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/anyhook/anyhook/internal/certs"
)

// AdminSettings give the admin API, the dashboard, /metrics and /readyz a
// listener of their own (docs/deploy.md: a public deployment). Without
// them, listen serves everything.
type AdminSettings struct {
	// Listen is the admin listener's HOST:PORT; required when admin: is
	// written. The ingest listener (listen) then answers only
	// POST /webhooks/{source} and /healthz.
	Listen string `yaml:"listen"`
	TLS    *TLS   `yaml:"tls"` // default none: plain HTTP
}

// TLS serves a listener over HTTPS (TLS 1.2 or later, HTTP/2 on), from
// certificate files or with certificates obtained by ACME; exactly one of
// the two.
type TLS struct {
	// CertFile and KeyFile are PEM files (the certificate chain, the
	// private key), relative to the config file. They are read again when
	// they change on disk: a renewal by an outside tool needs no restart.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCA (admin.tls only) is a PEM file of the CAs whose client
	// certificates the admin listener requires; default none: no client
	// certificate asked.
	ClientCA string `yaml:"client_ca"`
	// ACME (listen's tls only) obtains and renews the certificates.
	ACME *ACME `yaml:"acme"`
}

// ACME obtains certificates from an ACME CA (Let's Encrypt by default)
// with the TLS-ALPN-01 challenge, answered on the ingest listener itself:
// the CA must reach it on port 443 of each domain.
type ACME struct {
	Domains []string `yaml:"domains"` // required: the names the certificates cover
	Email   string   `yaml:"email"`   // optional: the CA's contact for expiry notices
	// CA is the ACME directory URL; default Let's Encrypt's production
	// directory, https://acme-v02.api.letsencrypt.org/directory.
	CA string `yaml:"ca"`
	// CARoot is a PEM file of the root that the CA's own HTTPS server
	// chains to, for a private ACME CA; default none: the system roots.
	CARoot string `yaml:"ca_root"`
	// Storage is the directory of the account key and certificates
	// (created, mode 0700); default anyhook-acme beside the SQLite file,
	// or beside the config file with PostgreSQL.
	Storage string `yaml:"storage"`
}

// ACME defaults.
const (
	DefaultACMECA      = "https://acme-v02.api.letsencrypt.org/directory"
	DefaultACMEStorage = "anyhook-acme"
)

func (c *Config) setListenDefaults() {
	if c.TLS != nil && c.TLS.ACME != nil && c.TLS.ACME.CA == "" && !c.has("tls.acme.ca") {
		c.TLS.ACME.CA = DefaultACMECA
	}
	if c.TLS != nil && c.TLS.ACME != nil && c.TLS.ACME.Storage == "" && !c.has("tls.acme.storage") {
		c.TLS.ACME.Storage = DefaultACMEStorage
	}
}

// AdminSeparate reports whether the admin API, dashboard, /metrics and
// /readyz have a listener of their own (admin.listen).
func (c *Config) AdminSeparate() bool { return c.Admin != nil && c.Admin.Listen != "" }

// AdminListen is the address that serves the admin API: admin.listen, or
// listen without it.
func (c *Config) AdminListen() string {
	if c.AdminSeparate() {
		return c.Admin.Listen
	}
	return c.Listen
}

// FilePath resolves a file named in the config against the config file's
// directory.
func (c *Config) FilePath(name string) string {
	if name == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(c.Dir, name)
}

// ACMEStoragePath is tls.acme.storage resolved: against the SQLite file's
// directory (the certificates live beside the database), else the config
// file's.
func (c *Config) ACMEStoragePath() string {
	if c.TLS == nil || c.TLS.ACME == nil {
		return ""
	}
	s := c.TLS.ACME.Storage
	if filepath.IsAbs(s) {
		return s
	}
	if p, ok := c.SQLitePath(); ok && p != ":memory:" {
		return filepath.Join(filepath.Dir(p), s)
	}
	return c.FilePath(s)
}

// checkListen checks a HOST:PORT listen address.
func (c *Config) checkListen(key, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return c.Errorf(key, "must be HOST:PORT such as 127.0.0.1:8080, not %q", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return c.Errorf(key, "invalid port %q", port)
	}
	return nil
}

// validateListeners checks admin: and the tls: blocks of both listeners.
func (c *Config) validateListeners() error {
	if c.Admin != nil {
		if c.Admin.Listen == "" {
			return c.Errorf("admin.listen", "is required in admin: (the admin API's own HOST:PORT, such as 10.0.0.5:8081); remove admin: to serve everything on listen")
		}
		if err := c.checkListen("admin.listen", c.Admin.Listen); err != nil {
			return err
		}
		if sameAddress(c.Admin.Listen, c.Listen) {
			return c.Errorf("admin.listen", "is listen's address too (%s); the admin listener needs an address of its own", c.Listen)
		}
	}
	if c.TLS != nil {
		if err := c.validateTLS("tls", c.TLS, false); err != nil {
			return err
		}
	}
	if c.Admin != nil && c.Admin.TLS != nil {
		if err := c.validateTLS("admin.tls", c.Admin.TLS, true); err != nil {
			return err
		}
	}
	return nil
}

// sameAddress reports whether two HOST:PORT addresses name the same
// socket, an unspecified host and a port other than 0 matching any.
func sameAddress(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if pa != pb || pa == "0" {
		return false
	}
	unspecified := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || (ip != nil && ip.IsUnspecified())
	}
	return ha == hb || unspecified(ha) || unspecified(hb)
}

func (c *Config) validateTLS(k string, t *TLS, admin bool) error {
	files := t.CertFile != "" || t.KeyFile != ""
	switch {
	case files && t.ACME != nil:
		return c.Errorf(k+".acme", "is set with cert_file and key_file; use one: certificate files or ACME")
	case !files && t.ACME == nil:
		return c.Errorf(k, "needs cert_file and key_file, or acme:")
	case t.CertFile == "" && t.ACME == nil:
		return c.Errorf(k+".cert_file", "is required with key_file")
	case t.KeyFile == "" && t.ACME == nil:
		return c.Errorf(k+".key_file", "is required with cert_file")
	}
	if t.ClientCA != "" && !admin {
		return c.Errorf(k+".client_ca", "client certificates are for the admin listener (admin.tls.client_ca); webhook providers present none")
	}
	if files {
		if _, err := tls.LoadX509KeyPair(c.FilePath(t.CertFile), c.FilePath(t.KeyFile)); err != nil {
			return c.Errorf(k+".cert_file", "%s and %s: %s", t.CertFile, t.KeyFile, err)
		}
	}
	if t.ClientCA != "" {
		if _, err := LoadCertPool(c.FilePath(t.ClientCA)); err != nil {
			return c.Errorf(k+".client_ca", "%s", err)
		}
	}
	if t.ACME != nil {
		if admin {
			return c.Errorf(k+".acme", "is for the public ingest listener (tls.acme): the CA must reach the listener, and the admin listener is private; give it cert_file and key_file")
		}
		return c.validateACME(k+".acme", t.ACME)
	}
	return nil
}

func (c *Config) validateACME(k string, a *ACME) error {
	if len(a.Domains) == 0 {
		return c.Errorf(k+".domains", "at least one domain name is required, such as [hooks.example.com]")
	}
	for i, d := range a.Domains {
		if !validDomain(d) {
			return c.Errorf(k+".domains["+strconv.Itoa(i)+"]", "%q is not a domain name such as hooks.example.com (ACME certifies names, not IP addresses)", d)
		}
	}
	if a.Email != "" && (!strings.Contains(a.Email, "@") || strings.ContainsAny(a.Email, " \t,")) {
		return c.Errorf(k+".email", "%q is not an email address", a.Email)
	}
	u, err := url.Parse(a.CA)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return c.Errorf(k+".ca", "must be the https:// URL of an ACME directory, such as %s", DefaultACMECA)
	}
	if a.Storage == "" {
		return c.Errorf(k+".storage", "must name a directory (default %s)", DefaultACMEStorage)
	}
	if a.CARoot != "" {
		if _, err := LoadCertPool(c.FilePath(a.CARoot)); err != nil {
			return c.Errorf(k+".ca_root", "%s", err)
		}
	}
	return nil
}

// validDomain accepts a DNS name with at least two labels.
func validDomain(d string) bool {
	if net.ParseIP(d) != nil || len(d) > 253 || !strings.Contains(d, ".") {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// LoadCertPool reads a PEM file of CA certificates, as the gateway will
// (certs.LoadCAPool).
func LoadCertPool(path string) (*x509.CertPool, error) { return certs.LoadCAPool(path) }
