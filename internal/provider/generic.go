package provider

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// generic verifies a configured HMAC of the body (header, algorithm,
// encoding, prefix), or nothing when the source says signature: none. Its
// dedup key and ordering come only from the source's id and ordering rules.
type generic struct {
	keys [][]byte
	sig  Signature
	hash func() hash.Hash
}

func buildGeneric(s *Settings, keys [][]byte, _ time.Duration) (Provider, error) {
	if s.Signature.None { // Validate has made sure there is a signature
		return &generic{sig: *s.Signature}, nil
	}
	h, err := genericScheme(*s.Signature)
	if err != nil {
		return nil, err
	}
	return &generic{keys, *s.Signature, h}, nil
}

// genericScheme validates sig; its errors are keyed signature.*.
func genericScheme(sig Signature) (func() hash.Hash, error) {
	switch {
	case sig.Header == "":
		return nil, errorf("signature.header", "a header name is required")
	case !validHeaderName(sig.Header):
		return nil, errorf("signature.header", "%q is not a valid header name", sig.Header)
	}
	switch sig.Encoding {
	case "", "hex", "base64":
	default:
		return nil, errorf("signature.encoding", "want hex or base64, got %q", sig.Encoding)
	}
	switch sig.Algorithm {
	case "sha1":
		return sha1.New, nil
	case "", "sha256":
		return sha256.New, nil
	case "sha512":
		return sha512.New, nil
	}
	return nil, errorf("signature.algorithm", "want sha1, sha256 or sha512, got %q", sig.Algorithm)
}

func (p *generic) Verify(r *Request, _ time.Time) (anyhook.Verification, error) {
	if p.sig.None {
		return unsigned, nil
	}
	h := r.Header.Get(p.sig.Header)
	if h == "" {
		return anyhook.Verification{}, missing(p.sig.Header)
	}
	v, ok := strings.CutPrefix(h, p.sig.Prefix)
	if !ok {
		return anyhook.Verification{}, fail("malformed %s header: want prefix %q", p.sig.Header, p.sig.Prefix)
	}
	var sig []byte
	var err error
	if p.sig.Encoding == "base64" {
		sig, err = decodeBase64(v)
	} else {
		sig, err = hex.DecodeString(v)
	}
	if err != nil {
		return anyhook.Verification{}, fail("malformed %s header: want %s", p.sig.Header, encodingName(p.sig.Encoding))
	}
	return signedBy("generic hmac-"+algorithmName(p.sig.Algorithm), matchAny(p.hash, p.keys, [][]byte{sig}, r.Body))
}

func algorithmName(a string) string {
	if a == "" {
		return "sha256"
	}
	return a
}

func encodingName(e string) string {
	if e == "" {
		return "hex"
	}
	return e
}

// Extract yields one event with no key of its own; New applies the source's
// id and ordering rules.
func (p *generic) Extract(*Request) (Extracted, error) {
	return Extracted{Events: []Event{{}}}, nil
}

// contentKey: the body, which is what the configured HMAC covers; "" for
// an unsigned source (anyone may send anything: there is nothing to key).
func (p *generic) contentKey(r *Request) string {
	if p.sig.None {
		return ""
	}
	return contentKey("generic", r.Body)
}

// SignGeneric sets sig.Header on r as a generic source configured with sig
// expects it. A signature of none sets nothing.
func SignGeneric(sig Signature, secret string, r *Request) error {
	if sig.None {
		return nil
	}
	h, err := genericScheme(sig)
	if err != nil {
		return err
	}
	if secret == "" {
		return errors.New("empty secret")
	}
	ensureHeader(r)
	sum := mac(h, []byte(secret), r.Body)
	enc := hex.EncodeToString(sum)
	if sig.Encoding == "base64" {
		enc = base64.StdEncoding.EncodeToString(sum)
	}
	r.Header.Set(sig.Header, sig.Prefix+enc)
	return nil
}
