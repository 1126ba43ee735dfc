package send

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// variant is one more event type of a provider's sample (--type): its
// body and headers, filled like the provider's default sample, and the
// ordering object it is about when that differs.
type variant struct {
	object func(now time.Time) string // nil: the provider's
	build  func(p params) ([]byte, http.Header)
}

// variants are the event types of provider beyond its sample's own.
func variants(provider string) map[string]variant {
	switch provider {
	case "stripe":
		return stripeTypes
	case "github":
		return githubTypes
	case "shopify":
		return shopifyTypes
	case "paddle":
		return paddleTypes
	case "gitlab":
		return gitlabTypes
	case "slack":
		return slackTypes
	case "hubspot":
		return hubspotTypes
	}
	return nil
}

// eventTypes are the event types --type picks for provider: the sample's
// own first, then the others sorted. A provider whose body carries any
// type (anyType) lists its default alone; one without types (Twilio),
// none.
func eventTypes(provider string) []string {
	s := samples[provider]
	if s.typ == "" {
		return nil
	}
	return append([]string{s.typ}, slices.Sorted(maps.Keys(variants(provider)))...)
}

// pickType resolves --type for provider: a listed type, or one that
// starts a single listed type ("pull_request" for "pull_request.opened").
func pickType(provider, typ string) (string, bool) {
	s := samples[provider]
	if s.anyType || typ == s.typ {
		return typ, true
	}
	if _, ok := variants(provider)[typ]; ok {
		return typ, true
	}
	var prefixed []string
	for _, t := range eventTypes(provider) {
		if strings.HasPrefix(t, typ+".") {
			prefixed = append(prefixed, t)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0], true
	}
	return "", false
}

// The event types below follow the providers' public documentation of
// each event (its envelope, its object's fields); the values are made up.
var (
	stripeTypes = map[string]variant{
		"invoice.paid": {
			object: func(time.Time) string { return "in_" + token(24) },
			build: func(p params) ([]byte, http.Header) {
				return fill(stripeInvoicePaidTmpl, "id", j(p.ID), "object", j(p.Object), "version", num(p.Version),
					"customer", j("cus_"+token(14)), "sub", j("sub_"+token(24)), "line", j("il_"+token(24)),
					"charge", j("ch_"+token(24)), "pi", j("pi_"+token(24)), "end", strconv.FormatInt(p.Now.AddDate(0, 1, 0).Unix(), 10)), nil
			},
		},
		"customer.subscription.updated": {
			object: func(time.Time) string { return "sub_" + token(24) },
			build: func(p params) ([]byte, http.Header) {
				return fill(stripeSubscriptionUpdatedTmpl, "id", j(p.ID), "object", j(p.Object), "version", num(p.Version),
					"customer", j("cus_"+token(14)), "item", j("si_"+token(14)), "invoice", j("in_"+token(24)),
					"end", strconv.FormatInt(p.Now.AddDate(0, 1, 0).Unix(), 10)), nil
			},
		},
		"checkout.session.completed": {
			object: func(time.Time) string { return "cs_test_a1" + token(56) },
			build: func(p params) ([]byte, http.Header) {
				return fill(stripeCheckoutCompletedTmpl, "id", j(p.ID), "object", j(p.Object), "version", num(p.Version),
					"customer", j("cus_"+token(14)), "pi", j("pi_"+token(24)),
					"expires", strconv.FormatInt(p.Now.Add(24*time.Hour).Unix(), 10)), nil
			},
		},
	}
	githubTypes = map[string]variant{
		"pull_request.opened": {build: func(p params) ([]byte, http.Header) {
			return fill(githubPullRequestTmpl, "sha", j(commitSHA(p.ID)), "ts", j(p.Now.UTC().Format(time.RFC3339))), githubHeader(p, "pull_request")
		}},
		"issues.opened": {build: func(p params) ([]byte, http.Header) {
			return fill(githubIssueTmpl, "ts", j(p.Now.UTC().Format(time.RFC3339))), githubHeader(p, "issues")
		}},
	}
	shopifyTypes = map[string]variant{
		"orders/paid": {build: func(p params) ([]byte, http.Header) {
			body, h := samples["shopify"].build(p)
			h.Set("X-Shopify-Topic", "orders/paid")
			return body, h
		}},
		"products/update": {build: func(p params) ([]byte, http.Header) {
			_, h := samples["shopify"].build(p)
			h.Set("X-Shopify-Topic", "products/update")
			return fill(shopifyProductTmpl, "object", num(p.Object), "version", j(p.Version),
				"created", j(p.Now.AddDate(0, -2, 0).Format("2006-01-02T15:04:05-07:00"))), h
		}},
	}
	paddleTypes = map[string]variant{
		"subscription.updated": {
			object: func(time.Time) string { return "sub_01" + lower(24) },
			build: func(p params) ([]byte, http.Header) {
				start := p.Now.UTC().AddDate(0, -1, 0)
				return fill(paddleSubscriptionTmpl, "id", j(p.ID), "object", j(p.Object), "version", j(p.Version),
					"ntf", j("ntf_01"+lower(24)), "ctm", j("ctm_01"+lower(24)), "add", j("add_01"+lower(24)),
					"start", j(start.Format("2006-01-02T15:04:05.000000Z")), "end", j(p.Now.UTC().Format("2006-01-02T15:04:05.000000Z")),
					"next", j(p.Now.UTC().AddDate(0, 1, 0).Format("2006-01-02T15:04:05.000000Z"))), nil
			},
		},
	}
	gitlabTypes = map[string]variant{
		"Merge Request Hook": {build: func(p params) ([]byte, http.Header) {
			_, h := samples["gitlab"].build(p)
			h.Set("X-Gitlab-Event", "Merge Request Hook")
			return fill(gitlabMergeRequestTmpl, "sha", j(commitSHA(p.ID)), "ts", j(p.Now.UTC().Format("2006-01-02 15:04:05 UTC"))), h
		}},
	}
	slackTypes = map[string]variant{
		"message": {build: func(p params) ([]byte, http.Header) {
			ts := strconv.FormatInt(p.Now.Unix(), 10) + ".000200"
			return fill(slackMessageTmpl, "id", j(p.ID), "ts", j(ts), "unix", strconv.FormatInt(p.Now.Unix(), 10)), nil
		}},
	}
	hubspotTypes = map[string]variant{
		"deal.creation": {build: func(p params) ([]byte, http.Header) {
			return fill(hubspotDealTmpl, "id", num(p.ID), "object", num(p.Object), "version", num(p.Version), "sub", p.subA), nil
		}},
	}
)

// githubHeader is the headers of a GitHub delivery of event.
func githubHeader(p params, event string) http.Header {
	_, h := samples["github"].build(p)
	h.Set("X-GitHub-Event", event)
	return h
}

const stripeInvoicePaidTmpl = `{
  "id": {{id}},
  "object": "event",
  "api_version": "2025-03-31.basil",
  "created": {{version}},
  "data": {
    "object": {
      "id": {{object}},
      "object": "invoice",
      "account_country": "US",
      "amount_due": 2000,
      "amount_paid": 2000,
      "amount_remaining": 0,
      "attempt_count": 1,
      "attempted": true,
      "billing_reason": "subscription_cycle",
      "collection_method": "charge_automatically",
      "created": {{version}},
      "currency": "usd",
      "customer": {{customer}},
      "customer_email": "jenny.rosen@example.com",
      "lines": {
        "object": "list",
        "data": [
          {
            "id": {{line}},
            "object": "line_item",
            "amount": 2000,
            "currency": "usd",
            "description": "1 × Pro (at $20.00 / month)",
            "period": {"start": {{version}}, "end": {{end}}},
            "quantity": 1
          }
        ],
        "has_more": false,
        "total_count": 1
      },
      "livemode": false,
      "number": "9A4C2F1E-0007",
      "parent": {"type": "subscription_details", "subscription_details": {"subscription": {{sub}}}},
      "period_end": {{version}},
      "period_start": {{version}},
      "status": "paid",
      "status_transitions": {"finalized_at": {{version}}, "paid_at": {{version}}},
      "subtotal": 2000,
      "total": 2000
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": null, "idempotency_key": null},
  "type": "invoice.paid"
}`

const stripeSubscriptionUpdatedTmpl = `{
  "id": {{id}},
  "object": "event",
  "api_version": "2025-03-31.basil",
  "created": {{version}},
  "data": {
    "object": {
      "id": {{object}},
      "object": "subscription",
      "billing_cycle_anchor": {{version}},
      "cancel_at_period_end": false,
      "collection_method": "charge_automatically",
      "created": {{version}},
      "currency": "usd",
      "customer": {{customer}},
      "items": {
        "object": "list",
        "data": [
          {
            "id": {{item}},
            "object": "subscription_item",
            "current_period_start": {{version}},
            "current_period_end": {{end}},
            "price": {
              "id": "price_1PqRs2LkdIwHu7ixPro",
              "object": "price",
              "currency": "usd",
              "product": "prod_QhPro",
              "recurring": {"interval": "month", "interval_count": 1},
              "type": "recurring",
              "unit_amount": 2000
            },
            "quantity": 1
          }
        ],
        "has_more": false,
        "total_count": 1
      },
      "latest_invoice": {{invoice}},
      "livemode": false,
      "metadata": {"account_id": "acct_1042"},
      "status": "active",
      "trial_end": {{version}}
    },
    "previous_attributes": {"status": "trialing"}
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": null, "idempotency_key": null},
  "type": "customer.subscription.updated"
}`

const stripeCheckoutCompletedTmpl = `{
  "id": {{id}},
  "object": "event",
  "api_version": "2025-03-31.basil",
  "created": {{version}},
  "data": {
    "object": {
      "id": {{object}},
      "object": "checkout.session",
      "amount_subtotal": 4200,
      "amount_total": 4200,
      "client_reference_id": "cart_1042",
      "created": {{version}},
      "currency": "usd",
      "customer": {{customer}},
      "customer_details": {"email": "jenny.rosen@example.com", "name": "Jenny Rosen"},
      "expires_at": {{expires}},
      "livemode": false,
      "metadata": {"order_id": "1042"},
      "mode": "payment",
      "payment_intent": {{pi}},
      "payment_status": "paid",
      "status": "complete",
      "success_url": "https://example.com/thanks"
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": null, "idempotency_key": null},
  "type": "checkout.session.completed"
}`

const githubPullRequestTmpl = `{"action":"opened","number":42,"pull_request":{"url":"https://api.github.com/repos/octo-org/public-repo/pulls/42","id":1990812472,"node_id":"PR_kwDOAhgGys52qKU4","html_url":"https://github.com/octo-org/public-repo/pull/42","number":42,"state":"open","locked":false,"title":"Retry deliveries with jitter","user":{"login":"octocat","id":583231,"type":"User"},"body":"Spreads retries so that a recovering handler is not hit all at once.","created_at":{{ts}},"updated_at":{{ts}},"closed_at":null,"merged_at":null,"draft":false,"head":{"label":"octocat:retry-jitter","ref":"retry-jitter","sha":{{sha}}},"base":{"label":"octo-org:main","ref":"main","sha":"6113728f27ae82c7b1a177c8d03f9e96e0adf246"},"merged":false,"mergeable":null,"commits":3,"additions":58,"deletions":12,"changed_files":4},"repository":{"id":35129377,"node_id":"MDEwOlJlcG9zaXRvcnkzNTEyOTM3Nw==","name":"public-repo","full_name":"octo-org/public-repo","private":false,"owner":{"login":"octo-org","id":21031067,"type":"Organization"},"html_url":"https://github.com/octo-org/public-repo","default_branch":"main"},"sender":{"login":"octocat","id":583231,"type":"User"}}`

const githubIssueTmpl = `{"action":"opened","issue":{"url":"https://api.github.com/repos/octo-org/public-repo/issues/57","id":2214093411,"node_id":"I_kwDOAhgGys6D-d5j","html_url":"https://github.com/octo-org/public-repo/issues/57","number":57,"title":"Deliveries to the EU endpoint time out","user":{"login":"monalisa","id":2,"type":"User"},"labels":[{"id":208045946,"name":"bug","color":"d73a4a"}],"state":"open","locked":false,"assignees":[],"comments":0,"created_at":{{ts}},"updated_at":{{ts}},"closed_at":null,"body":"Since this morning every delivery to eu.example.com times out after 15s."},"repository":{"id":35129377,"node_id":"MDEwOlJlcG9zaXRvcnkzNTEyOTM3Nw==","name":"public-repo","full_name":"octo-org/public-repo","private":false,"owner":{"login":"octo-org","id":21031067,"type":"Organization"},"html_url":"https://github.com/octo-org/public-repo","default_branch":"main"},"sender":{"login":"monalisa","id":2,"type":"User"}}`

const shopifyProductTmpl = `{"id":{{object}},"admin_graphql_api_id":"gid://shopify/Product/{{object}}","title":"Trail Runner 2","body_html":"<p>Light, with a grippy sole.</p>","vendor":"Example Outdoor","product_type":"Shoes","created_at":{{created}},"handle":"trail-runner-2","updated_at":{{version}},"published_at":{{created}},"status":"active","tags":"running, trail","variants":[{"id":44346586513592,"product_id":{{object}},"title":"42 / Blue","price":"129.00","sku":"TR2-42-BLU","position":1,"inventory_quantity":14,"created_at":{{created}},"updated_at":{{version}}}],"options":[{"name":"Size","values":["42"]},{"name":"Color","values":["Blue"]}]}`

const paddleSubscriptionTmpl = `{"event_id":{{id}},"event_type":"subscription.updated","occurred_at":{{version}},"notification_id":{{ntf}},"data":{"id":{{object}},"status":"active","customer_id":{{ctm}},"address_id":{{add}},"business_id":null,"currency_code":"USD","created_at":{{start}},"updated_at":{{version}},"started_at":{{start}},"first_billed_at":{{start}},"next_billed_at":{{next}},"paused_at":null,"canceled_at":null,"collection_mode":"automatic","billing_details":null,"current_billing_period":{"starts_at":{{end}},"ends_at":{{next}}},"billing_cycle":{"interval":"month","frequency":1},"scheduled_change":null,"items":[{"status":"active","quantity":2,"recurring":true,"created_at":{{start}},"updated_at":{{version}},"price":{"id":"pri_01gsz8x8sawmvhz1pv30nge1ke","product_id":"pro_01gsz4t5hdjse780zja8vvr7jg","description":"Monthly","billing_cycle":{"interval":"month","frequency":1},"unit_price":{"amount":"3000","currency_code":"USD"}}}],"custom_data":null}}`

const gitlabMergeRequestTmpl = `{"object_kind":"merge_request","event_type":"merge_request","user":{"id":4,"name":"John Smith","username":"jsmith","email":"[REDACTED]"},"project":{"id":15,"name":"Diaspora","web_url":"https://gitlab.example.com/mike/diaspora","path_with_namespace":"mike/diaspora","default_branch":"main"},"object_attributes":{"id":99,"iid":7,"title":"Update the retry schedule","description":"Caps the backoff at two hours.","state":"opened","action":"open","source_branch":"retry-cap","target_branch":"main","author_id":4,"created_at":{{ts}},"updated_at":{{ts}},"merge_status":"unchecked","draft":false,"url":"https://gitlab.example.com/mike/diaspora/-/merge_requests/7","last_commit":{"id":{{sha}},"message":"Cap the backoff","timestamp":{{ts}},"author":{"name":"John Smith","email":"jsmith@example.com"}}},"labels":[],"repository":{"name":"Diaspora","url":"git@gitlab.example.com:mike/diaspora.git","homepage":"https://gitlab.example.com/mike/diaspora"}}`

const slackMessageTmpl = `{"token":"XXYYZZ","team_id":"T0001ABCD","context_team_id":"T0001ABCD","api_app_id":"A0KRD7HC3","event":{"type":"message","channel":"C2147483705","user":"U2147483697","text":"deploy finished: 0 errors","ts":{{ts}},"event_ts":{{ts}},"channel_type":"channel"},"type":"event_callback","authorizations":[{"enterprise_id":null,"team_id":"T0001ABCD","user_id":"U0LAN0Z89","is_bot":true}],"event_id":{{id}},"event_time":{{unix}}}`

const hubspotDealTmpl = `[{"eventId":{{id}},"subscriptionId":{{sub}},"portalId":62515,"appId":1160452,"occurredAt":{{version}},"subscriptionType":"deal.creation","attemptNumber":0,"objectId":{{object}},"changeFlag":"CREATED","changeSource":"CRM_UI","sourceId":"userId:1502322"}]`
