// Package certs gives the gateway's listeners their TLS configuration:
// a certificate read from files and read again when the files change (a
// renewal by an outside tool needs no restart), or certificates obtained
// and renewed over ACME (golang.org/x/crypto/acme/autocert, TLS-ALPN-01),
// and optionally the client CAs whose certificates a listener requires.
// TLS 1.2 is the minimum; everything else is Go's default.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// Options say where a listener's certificates come from; exactly one of
// CertFile (with KeyFile) and ACME is set.
type Options struct {
	CertFile, KeyFile string // PEM files, read again when they change
	// ClientCAs, when set, are the CAs whose client certificates the
	// listener requires: a connection without one is refused.
	ClientCAs *x509.CertPool
	ACME      *ACME
	Logger    *slog.Logger
}

// ACME configures automatic certificates.
type ACME struct {
	Domains []string
	Email   string
	CA      string         // the ACME directory URL
	Roots   *x509.CertPool // the roots the CA's HTTPS server chains to; nil: the system's
	Storage string         // directory of the account key and certificates
}

// Config builds the listener's *tls.Config. With certificate files, they
// are loaded now (an error names them).
func Config(o Options) (*tls.Config, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var tc *tls.Config
	switch {
	case o.ACME != nil:
		m, err := newManager(o.ACME, log)
		if err != nil {
			return nil, err
		}
		tc = m.TLSConfig() // h2, http/1.1 and the TLS-ALPN-01 protocol
	case o.CertFile != "":
		fc := &fileCert{certFile: o.CertFile, keyFile: o.KeyFile, log: log}
		if _, err := fc.load(); err != nil {
			return nil, err
		}
		tc = &tls.Config{GetCertificate: fc.get, NextProtos: []string{"h2", "http/1.1"}}
	default:
		return nil, errors.New("certs: neither certificate files nor ACME")
	}
	tc.MinVersion = tls.VersionTLS12
	if o.ClientCAs != nil {
		tc.ClientCAs = o.ClientCAs
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

func newManager(a *ACME, log *slog.Logger) (*autocert.Manager, error) {
	if err := os.MkdirAll(a.Storage, 0o700); err != nil {
		return nil, fmt.Errorf("tls.acme.storage: %w", err)
	}
	client := &acme.Client{DirectoryURL: a.CA, UserAgent: "AnyHook"}
	if a.Roots != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: a.Roots, MinVersion: tls.VersionTLS12}
		client.HTTPClient = &http.Client{Transport: tr, Timeout: time.Minute}
	}
	log.Info("tls: certificates by ACME", "ca", a.CA, "domains", a.Domains, "storage", a.Storage)
	return &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		Cache:      autocert.DirCache(a.Storage),
		HostPolicy: autocert.HostWhitelist(a.Domains...),
		Email:      a.Email,
		Client:     client,
	}, nil
}

// fileCert is a certificate read from files, read again on the first
// handshake after either file changed (another inode, size or modification
// time). A pair that does not load (a renewal half written, a key that does
// not match yet) is logged and the previous certificate kept.
type fileCert struct {
	certFile, keyFile string
	log               *slog.Logger

	mu     sync.Mutex
	cert   *tls.Certificate
	stamps [2]os.FileInfo
}

// get is the GetCertificate hook.
func (f *fileCert) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.load()
}

func (f *fileCert) load() (*tls.Certificate, error) {
	ci, cerr := os.Stat(f.certFile)
	ki, kerr := os.Stat(f.keyFile)
	f.mu.Lock()
	defer f.mu.Unlock()
	if cerr == nil && kerr == nil && f.cert != nil && same(f.stamps[0], ci) && same(f.stamps[1], ki) {
		return f.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		if f.cert == nil {
			return nil, fmt.Errorf("tls: %s and %s: %w", f.certFile, f.keyFile, err)
		}
		f.log.Warn("tls: the certificate files changed but do not load; serving the previous certificate", "cert_file", f.certFile, "key_file", f.keyFile, "err", err)
		if cerr == nil && kerr == nil {
			f.stamps = [2]os.FileInfo{ci, ki}
		}
		return f.cert, nil
	}
	if f.cert != nil {
		f.log.Info("tls: certificate reloaded", "cert_file", f.certFile, "serial", cert.Leaf.SerialNumber.String(), "not_after", cert.Leaf.NotAfter)
	}
	f.cert = &cert
	f.stamps = [2]os.FileInfo{ci, ki}
	return f.cert, nil
}

func same(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// ClientOptions are the TLS settings of a client to one server (a
// destination): its certificate for mutual TLS, the CAs the server is
// verified with and the name it must bear.
type ClientOptions struct {
	// CertFile and KeyFile are the client certificate, PEM, read again
	// when they change (as a listener's are); "": no client certificate.
	CertFile, KeyFile string
	// RootCAs are the CAs the server's certificate must chain to; nil:
	// the system's. (A CAFile's Pool, for CAs read again when they
	// change: its caller makes new connections with a new pool.)
	RootCAs *x509.CertPool
	// ServerName is the name the server's certificate must bear (and
	// the SNI sent); "": the URL's host.
	ServerName string
	Logger     *slog.Logger
}

// ClientConfig builds a client's *tls.Config. The certificate files are
// loaded now (an error names them), and then on the first handshake after
// either changed: a renewal needs no restart. A connection already open
// keeps the certificate it was made with.
func ClientConfig(o ClientOptions) (*tls.Config, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: o.RootCAs, ServerName: o.ServerName}
	if o.CertFile != "" {
		fc := &fileCert{certFile: o.CertFile, keyFile: o.KeyFile, log: log}
		if _, err := fc.load(); err != nil {
			return nil, err
		}
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return fc.load() }
	}
	return tc, nil
}

// CAFile is a PEM file of CA certificates, read again when it changes
// (another inode, size or modification time), as certificate files are.
// A file that changed but does not load is logged and the previous CAs
// kept.
type CAFile struct {
	path string
	log  *slog.Logger

	mu    sync.Mutex
	pool  *x509.CertPool
	stamp os.FileInfo
	gen   uint64
}

// NewCAFile reads path now (an error names it).
func NewCAFile(path string, log *slog.Logger) (*CAFile, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &CAFile{path: path, log: log}
	if _, _, err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

// Pool returns the CAs as the file is now, and a generation that changes
// when they do.
func (f *CAFile) Pool() (*x509.CertPool, uint64) {
	pool, gen, _ := f.load()
	return pool, gen
}

func (f *CAFile) load() (*x509.CertPool, uint64, error) {
	fi, serr := os.Stat(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if serr == nil && f.pool != nil && same(f.stamp, fi) {
		return f.pool, f.gen, nil
	}
	pool, err := LoadCAPool(f.path)
	if err != nil {
		if f.pool == nil {
			return nil, 0, err
		}
		f.log.Warn("tls: the CA file changed but does not load; verifying with the previous CAs", "ca_file", f.path, "err", err)
		if serr == nil {
			f.stamp = fi
		}
		return f.pool, f.gen, nil
	}
	if f.pool != nil {
		f.log.Info("tls: CA file reloaded", "ca_file", f.path)
	}
	f.pool, f.stamp = pool, fi
	f.gen++
	return f.pool, f.gen, nil
}

// LoadCAPool reads a PEM file of CA certificates.
func LoadCAPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
