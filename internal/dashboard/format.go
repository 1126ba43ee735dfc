package dashboard

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// funcs are the template helpers; "ago" is bound to the dashboard's
// clock in parseTemplates.
var funcs = template.FuncMap{
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"ago":     func(t time.Time) template.HTML { return "" },
	"agoText": func(t time.Time) string { return "" },
	"ms": func(d time.Duration) string {
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	},
	"age":    human,
	"size":   func(n int) string { return byteSize(int64(n)) },
	"status": func(s anyhook.DeliveryStatus) string { return "st-" + string(s) },
	"join":   strings.Join,
	"resolvable": func(s anyhook.DeliveryStatus) bool {
		return s == anyhook.StatusHeld || s == anyhook.StatusDead
	},
	// lost: the attempt's claim expired before its outcome was recorded.
	"lost": store.Lost,
	// outcome says what an attempt's request came to, and whether the
	// handler may have run.
	"outcome": outcomeText,
	// times writes n (any integer) with the singular or plural noun:
	// "1 time", "3 times".
	"times": func(n any, one, many string) (string, error) {
		switch n := n.(type) {
		case int:
			return count(n, one, many), nil
		case int64:
			return count(int(n), one, many), nil
		}
		return "", fmt.Errorf("times: %T is not an integer", n)
	},
}

// count writes n with the singular or plural noun: "1 event", "2 events".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// human writes a duration the way a person reads it: 3s, 4m, 2h 5m, 3d.
func human(d time.Duration) string {
	switch {
	case d < time.Second:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// statusOrder is how statuses are listed.
var statusOrder = []anyhook.DeliveryStatus{
	anyhook.StatusPending, anyhook.StatusRetrying, anyhook.StatusDelivering, anyhook.StatusDelivered, anyhook.StatusDead,
	anyhook.StatusHeld, anyhook.StatusSkipped, anyhook.StatusPaused, anyhook.StatusResolved,
}

// outcomeText is an attempt's outcome in words.
func outcomeText(a anyhook.Attempt) string {
	switch a.Outcome {
	case anyhook.OutcomeAnswered:
		return "answered"
	case anyhook.OutcomeNoAnswer:
		return "sent, no answer: may have run"
	case anyhook.OutcomeNotSent:
		return "not sent: did not run"
	}
	return "unknown: may have run"
}
