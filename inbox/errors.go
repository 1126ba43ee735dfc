package inbox

import "errors"

type classified struct {
	err  error
	kind int
}

const (
	kindPermanent = iota + 1
	kindNotApplied
)

func (c *classified) Error() string { return c.err.Error() }
func (c *classified) Unwrap() error { return c.err }

// Permanent marks err as a failure that will not go away on retry (a
// malformed event, a rejected card). Apply and Do record it, acknowledge the
// event (Outcome Failed), and report later deliveries as Duplicate.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, kind: kindPermanent}
}

// NotApplied marks an effect's error as proof that the effect did not happen
// (the request was refused before it reached the provider, the provider
// answered with a definite "not done"). Do releases the claim (Outcome
// Released) so the next delivery runs the effect at once.
//
// Any other error from an effect is uncertain: the claim stays, and the
// stale policy decides what a later delivery does.
func NotApplied(err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, kind: kindNotApplied}
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool { return kindOf(err) == kindPermanent }

// IsNotApplied reports whether err, or an error it wraps, was marked by
// NotApplied.
func IsNotApplied(err error) bool { return kindOf(err) == kindNotApplied }

func kindOf(err error) int {
	var c *classified
	if errors.As(err, &c) {
		return c.kind
	}
	return 0
}
