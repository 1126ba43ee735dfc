// Package ledger is AnyHook's tamper-evident ledger (SPEC §8, docs/ledger.md):
// every accepted event becomes a leaf of an append-only Merkle tree with
// RFC 6962 hashing (golang.org/x/mod/sumdb/tlog), and signed checkpoints
// (golang.org/x/mod/sumdb/note, Ed25519) commit to the tree's size and root.
//
// Ingest does no work for the ledger. A background Sequencer gives positions
// to committed events in batches and stores the tree's hashes; a
// Checkpointer signs, stores and optionally pushes checkpoints, prunes old
// bodies and checks the stored tree against the previous checkpoint. Verify
// recomputes everything from the stored events.
package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"slices"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/anyhook/anyhook"
)

// LeafVersion tags the leaf encoding below. A new encoding gets a new tag;
// old leaves keep theirs.
const LeafVersion = "AnyHook leaf v1\n"

// LeafVersion2 tags the encoding of an event that did not arrive as a
// webhook (a backfilled one): the v1 record with its origin added. An
// event received as a webhook keeps the v1 encoding, so every leaf written
// before origins existed still verifies, and an origin changed either way
// changes the leaf.
const LeafVersion2 = "AnyHook leaf v2\n"

// Leaf is what the ledger holds for one event.
type Leaf struct {
	HeaderHash tlog.Hash // SHA-256 of CanonicalHeaders
	BodyHash   tlog.Hash // SHA-256 of the exact body
	Hash       tlog.Hash // tlog.RecordHash(Record(...)): SHA-256(0x00 || record)
}

// CanonicalHeaders encodes h for hashing: header names in byte order, each
// name's values in the order received, every (name, value) pair written as
// str(name) || str(value), where str(s) is len(s) as a 4-byte big-endian
// unsigned integer followed by the bytes of s. Names are taken as stored
// (canonical MIME form, as Go's HTTP server gives them).
func CanonicalHeaders(h http.Header) []byte {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	var b []byte
	for _, name := range names {
		for _, v := range h[name] {
			b = appendStr(b, name)
			b = appendStr(b, v)
		}
	}
	return b
}

// Record is the canonical, versioned record of one event that the leaf
// hashes:
//
//	LeafVersion ("AnyHook leaf v1\n", 16 bytes)
//	str(event id) || str(source) || str(dedup key)
//	receive time: Unix microseconds, 8 bytes big-endian two's complement
//	SHA-256 of CanonicalHeaders (32 bytes)
//	SHA-256 of the body (32 bytes)
//
// with str as in CanonicalHeaders. An event without a dedup key has an
// empty one.
func Record(id, source, dedupKey string, receivedMicros int64, headerHash, bodyHash tlog.Hash) []byte {
	return record(LeafVersion, "", id, source, dedupKey, receivedMicros, headerHash, bodyHash)
}

// RecordV2 is the record of an event whose origin is not a webhook:
//
//	LeafVersion2 ("AnyHook leaf v2\n", 16 bytes)
//	str(origin)
//
// followed by the v1 record's fields after its tag, in the same order.
func RecordV2(origin, id, source, dedupKey string, receivedMicros int64, headerHash, bodyHash tlog.Hash) []byte {
	return record(LeafVersion2, origin, id, source, dedupKey, receivedMicros, headerHash, bodyHash)
}

func record(version, origin, id, source, dedupKey string, receivedMicros int64, headerHash, bodyHash tlog.Hash) []byte {
	b := make([]byte, 0, len(version)+16+len(origin)+len(id)+len(source)+len(dedupKey)+8+64)
	b = append(b, version...)
	if version != LeafVersion {
		b = appendStr(b, origin)
	}
	b = appendStr(b, id)
	b = appendStr(b, source)
	b = appendStr(b, dedupKey)
	b = binary.BigEndian.AppendUint64(b, uint64(receivedMicros))
	b = append(b, headerHash[:]...)
	return append(b, bodyHash[:]...)
}

// LeafOf computes the leaf of ev from its stored fields.
func LeafOf(ev *anyhook.Event) Leaf {
	return LeafWithBodyHash(ev, sha256.Sum256(ev.Body))
}

// LeafWithBodyHash is LeafOf for an event whose body was pruned: the body
// hash kept in the ledger stands in for the body.
func LeafWithBodyHash(ev *anyhook.Event, bodyHash tlog.Hash) Leaf {
	l := Leaf{HeaderHash: sha256.Sum256(CanonicalHeaders(ev.Header)), BodyHash: bodyHash}
	if ev.Origin == "" || ev.Origin == anyhook.OriginWebhook {
		l.Hash = tlog.RecordHash(Record(ev.ID, ev.Source, ev.DedupKey, ev.ReceivedAt.UnixMicro(), l.HeaderHash, l.BodyHash))
	} else {
		l.Hash = tlog.RecordHash(RecordV2(ev.Origin, ev.ID, ev.Source, ev.DedupKey, ev.ReceivedAt.UnixMicro(), l.HeaderHash, l.BodyHash))
	}
	return l
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}
