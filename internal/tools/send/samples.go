package send

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// sample is one provider's built-in event: how to default and place the
// event id, the ordering object and its version.
type sample struct {
	contentType string
	// id, object and version return defaults; nil object means the
	// provider's events carry no ordering fields.
	id, object, version func(now time.Time) string
	// idKind, objectKind and versionKind are "int" when the body holds
	// the value as a JSON number.
	idKind, objectKind, versionKind string
	build                           func(p params) ([]byte, http.Header)
	// typ is the event type build sends; "" for a provider whose events
	// have none (Twilio). variants (types.go) has the provider's others.
	typ string
	// anyType: the body carries whatever type --type names (generic,
	// Standard Webhooks), in params.Type.
	anyType bool
}

// params are the values a sample is filled with.
type params struct {
	ID, Object, Version string
	Type                string // with anyType: the body's type
	Now                 time.Time
	run                 string // random letters, fixed for one run
	hook, subA, subB    string // random numbers, fixed for one run
}

// j returns s as a JSON string literal.
func j(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// fill replaces {{name}} placeholders with already-encoded JSON values.
func fill(tmpl string, kv ...string) []byte {
	pairs := make([]string, 0, len(kv))
	for i := 0; i < len(kv); i += 2 {
		pairs = append(pairs, "{{"+kv[i]+"}}", kv[i+1])
	}
	return []byte(strings.NewReplacer(pairs...).Replace(tmpl))
}

// token returns n random characters of [0-9A-Za-z].
func token(n int) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, n)
	for i := range b {
		k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}

func lower(n int) string { return strings.ToLower(token(n)) }

// digits returns a random n-digit decimal number without a leading zero.
func digits(n int) string {
	low := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n-1)), nil)
	k, _ := rand.Int(rand.Reader, new(big.Int).Mul(low, big.NewInt(9)))
	return k.Add(k, low).String()
}

func uuid() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func num(s string) string { return s }

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

var samples = map[string]sample{
	"stripe": {
		typ:         "payment_intent.succeeded",
		contentType: "application/json; charset=utf-8",
		id:          func(time.Time) string { return "evt_" + token(24) },
		object:      func(time.Time) string { return "pi_" + token(24) },
		version:     func(now time.Time) string { return strconv.FormatInt(now.Unix(), 10) },
		versionKind: "int",
		build: func(p params) ([]byte, http.Header) {
			return fill(stripeTmpl, "id", j(p.ID), "object", j(p.Object), "version", num(p.Version),
				"customer", j("cus_"+token(14)), "charge", j("ch_"+token(24)), "pm", j("pm_"+token(24)),
				"req", j("req_"+token(14)), "idem", j(uuid())), nil
		},
	},
	"github": {
		typ:         "push",
		contentType: "application/json",
		id:          func(time.Time) string { return uuid() },
		build: func(p params) ([]byte, http.Header) {
			h := http.Header{}
			h.Set("User-Agent", "GitHub-Hookshot/2c3a1e5")
			h.Set("X-GitHub-Event", "push")
			h.Set("X-GitHub-Delivery", p.ID)
			h.Set("X-GitHub-Hook-ID", p.hook)
			h.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
			h.Set("X-GitHub-Hook-Installation-Target-ID", "35129377")
			sha := commitSHA(p.ID)
			return fill(githubTmpl, "sha", j(sha), "ts", j(p.Now.UTC().Format("2006-01-02T15:04:05Z07:00")), "unix", strconv.FormatInt(p.Now.Unix(), 10)), h
		},
	},
	"shopify": {
		typ:         "orders/create",
		contentType: "application/json",
		id:          func(time.Time) string { return uuid() },
		object:      func(time.Time) string { return digits(13) },
		objectKind:  "int",
		version:     func(now time.Time) string { return now.Format("2006-01-02T15:04:05-07:00") },
		build: func(p params) ([]byte, http.Header) {
			h := http.Header{}
			h.Set("X-Shopify-Topic", "orders/create")
			h.Set("X-Shopify-Shop-Domain", "example-shop.myshopify.com")
			h.Set("X-Shopify-API-Version", "2025-07")
			h.Set("X-Shopify-Event-Id", p.ID)
			h.Set("X-Shopify-Webhook-Id", uuidFrom(p.run))
			h.Set("X-Shopify-Triggered-At", p.Now.UTC().Format("2006-01-02T15:04:05.000000Z"))
			return fill(shopifyTmpl, "object", num(p.Object), "version", j(p.Version),
				"created", j(p.Now.Format("2006-01-02T15:04:05-07:00")), "token", j(lower(32))), h
		},
	},
	"standard": {
		typ:         "invoice.paid",
		anyType:     true,
		contentType: "application/json",
		id:          func(time.Time) string { return "msg_" + token(27) },
		object:      func(time.Time) string { return "in_" + token(16) },
		version:     rfc3339,
		build: func(p params) ([]byte, http.Header) {
			h := http.Header{}
			h.Set("webhook-id", p.ID)
			return fill(standardTmpl, "type", j(p.Type), "object", j(p.Object), "version", j(p.Version), "ts", j(p.Now.UTC().Format(time.RFC3339Nano))), h
		},
	},
	"generic": {
		typ:         "order.updated",
		anyType:     true,
		contentType: "application/json",
		id:          func(time.Time) string { return uuid() },
		object:      func(time.Time) string { return "ord_" + token(12) },
		version:     rfc3339,
		build: func(p params) ([]byte, http.Header) {
			h := http.Header{}
			h.Set("X-Request-Id", p.ID)
			return fill(genericTmpl, "type", j(p.Type), "id", j(p.ID), "object", j(p.Object), "version", j(p.Version)), h
		},
	},
	"slack": {
		typ:         "app_mention",
		contentType: "application/json",
		id:          func(time.Time) string { return "Ev" + strings.ToUpper(token(9)) },
		build: func(p params) ([]byte, http.Header) {
			ts := fmt.Sprintf("%d.%06d", p.Now.Unix(), p.Now.Nanosecond()/1000)
			return fill(slackTmpl, "id", j(p.ID), "ts", j(ts), "unix", strconv.FormatInt(p.Now.Unix(), 10)), nil
		},
	},
	"hubspot": {
		typ:         "contact.propertyChange",
		contentType: "application/json",
		id:          func(time.Time) string { return digits(10) },
		idKind:      "int",
		object:      func(time.Time) string { return digits(11) },
		objectKind:  "int",
		version:     func(now time.Time) string { return strconv.FormatInt(now.UnixMilli(), 10) },
		versionKind: "int",
		build: func(p params) ([]byte, http.Header) {
			return fill(hubspotTmpl, "id", num(p.ID), "object", num(p.Object), "version", num(p.Version),
				"sub", p.subA, "sub2", p.subB), nil
		},
	},
	"paddle": {
		typ:         "transaction.completed",
		contentType: "application/json",
		id:          func(time.Time) string { return "evt_01" + lower(24) },
		object:      func(time.Time) string { return "txn_01" + lower(24) },
		version:     func(now time.Time) string { return now.UTC().Format("2006-01-02T15:04:05.000000Z") },
		build: func(p params) ([]byte, http.Header) {
			return fill(paddleTmpl, "id", j(p.ID), "object", j(p.Object), "version", j(p.Version),
				"ntf", j("ntf_01"+lower(24)), "ctm", j("ctm_01"+lower(24)), "at", j(p.Now.UTC().Format("2006-01-02T15:04:05.000000Z"))), nil
		},
	},
	"twilio": {
		contentType: "application/x-www-form-urlencoded",
		id:          func(time.Time) string { return uuid() },
		object:      func(time.Time) string { return "SM" + fmt.Sprintf("%x", []byte(token(16))) },
		version:     func(time.Time) string { return "delivered" },
		build: func(p params) ([]byte, http.Header) {
			h := http.Header{}
			h.Set("I-Twilio-Idempotency-Token", p.ID)
			h.Set("User-Agent", "TwilioProxy/1.1")
			form := url.Values{
				"AccountSid":    {"AC" + fmt.Sprintf("%x", []byte(p.run[:16]))},
				"ApiVersion":    {"2010-04-01"},
				"From":          {"+15017122661"},
				"To":            {"+15558675310"},
				"MessageSid":    {p.Object},
				"SmsSid":        {p.Object},
				"MessageStatus": {p.Version},
				"SmsStatus":     {p.Version},
			}
			return []byte(form.Encode()), h
		},
	},
	"square": {
		typ:         "payment.updated",
		contentType: "application/json",
		id:          func(time.Time) string { return uuid() },
		object:      func(time.Time) string { return token(29) },
		version:     func(time.Time) string { return "2" },
		versionKind: "int",
		build: func(p params) ([]byte, http.Header) {
			h := http.Header{}
			h.Set("Square-Environment", "Sandbox")
			return fill(squareTmpl, "id", j(p.ID), "object", j(p.Object), "version", num(p.Version),
				"at", j(p.Now.UTC().Format("2006-01-02T15:04:05.000Z")), "order", j(token(29))), h
		},
	},
	"gitlab": {
		typ:         "Push Hook",
		contentType: "application/json",
		id:          func(time.Time) string { return uuid() },
		build: func(p params) ([]byte, http.Header) {
			h := http.Header{}
			h.Set("User-Agent", "GitLab/18.2.0")
			h.Set("X-Gitlab-Event", "Push Hook")
			h.Set("X-Gitlab-Event-UUID", p.ID)
			h.Set("Idempotency-Key", p.ID)
			h.Set("X-Gitlab-Webhook-UUID", uuidFrom(p.run))
			h.Set("X-Gitlab-Instance", "https://gitlab.example.com")
			sha := commitSHA(p.ID)
			return fill(gitlabTmpl, "sha", j(sha), "ts", j(p.Now.UTC().Format("2006-01-02T15:04:05Z07:00"))), h
		},
	},
}

// commitSHA makes a stable commit-like hash of the event id.
func commitSHA(id string) string {
	sum := sha1.Sum([]byte(id))
	return hex.EncodeToString(sum[:])
}

// uuidFrom formats 32 characters of s as a UUID-looking id.
func uuidFrom(s string) string {
	h := fmt.Sprintf("%x", []byte(s))
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

const stripeTmpl = `{
  "id": {{id}},
  "object": "event",
  "api_version": "2025-03-31.basil",
  "created": {{version}},
  "data": {
    "object": {
      "id": {{object}},
      "object": "payment_intent",
      "amount": 2000,
      "amount_capturable": 0,
      "amount_received": 2000,
      "capture_method": "automatic_async",
      "currency": "usd",
      "customer": {{customer}},
      "description": "Order #1042",
      "latest_charge": {{charge}},
      "livemode": false,
      "metadata": {"order_id": "1042"},
      "payment_method": {{pm}},
      "payment_method_types": ["card"],
      "status": "succeeded"
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": {{req}}, "idempotency_key": {{idem}}},
  "type": "payment_intent.succeeded"
}`

const githubTmpl = `{"ref":"refs/heads/main","before":"6113728f27ae82c7b1a177c8d03f9e96e0adf246","after":{{sha}},"repository":{"id":35129377,"node_id":"MDEwOlJlcG9zaXRvcnkzNTEyOTM3Nw==","name":"public-repo","full_name":"octo-org/public-repo","private":false,"owner":{"name":"octo-org","login":"octo-org","id":21031067,"type":"Organization"},"html_url":"https://github.com/octo-org/public-repo","default_branch":"main","pushed_at":{{unix}}},"pusher":{"name":"octocat","email":"octocat@github.com"},"sender":{"login":"octocat","id":583231,"type":"User"},"created":false,"deleted":false,"forced":false,"base_ref":null,"compare":"https://github.com/octo-org/public-repo/compare/6113728f27ae...","commits":[{"id":{{sha}},"tree_id":"f9d2a07e9488b91af2641b26b9407fe22a451433","distinct":true,"message":"Fix the flaky retry test","timestamp":{{ts}},"url":"https://github.com/octo-org/public-repo/commit/","author":{"name":"Mona Octocat","email":"octocat@github.com","username":"octocat"},"committer":{"name":"GitHub","email":"noreply@github.com","username":"web-flow"},"added":[],"removed":[],"modified":["delivery/retry_test.go"]}],"head_commit":{"id":{{sha}},"message":"Fix the flaky retry test","timestamp":{{ts}},"modified":["delivery/retry_test.go"]}}`

const shopifyTmpl = `{"id":{{object}},"admin_graphql_api_id":"gid://shopify/Order/{{object}}","app_id":580111,"browser_ip":"203.0.113.7","buyer_accepts_marketing":false,"cart_token":{{token}},"confirmation_number":"K3PQ7XZ1A","confirmed":true,"contact_email":"jon@example.com","created_at":{{created}},"currency":"USD","current_subtotal_price":"398.00","current_total_price":"409.94","current_total_tax":"11.94","email":"jon@example.com","financial_status":"paid","fulfillment_status":null,"name":"#1042","order_number":1042,"processed_at":{{created}},"subtotal_price":"398.00","tags":"","test":false,"total_price":"409.94","total_tax":"11.94","updated_at":{{version}},"customer":{"id":115310627314723954,"email":"jon@example.com","first_name":"Jon","last_name":"Snow"},"line_items":[{"id":866550311766439020,"name":"IPod Nano - 8GB","price":"199.00","product_id":632910392,"quantity":2,"sku":"IPOD2008PINK","variant_id":808950810}],"shipping_address":{"address1":"123 Elm St.","city":"Ottawa","country_code":"CA","province_code":"ON","zip":"K2P 1L4"}}`

const standardTmpl = `{"type":{{type}},"timestamp":{{ts}},"data":{"id":{{object}},"updated_at":{{version}},"customer_id":"cus_4821","amount_due":4900,"currency":"eur","status":"paid"}}`

const genericTmpl = `{"id":{{id}},"type":{{type}},"order":{"id":{{object}},"status":"shipped","total":"59.90","currency":"EUR","updated_at":{{version}}}}`

const slackTmpl = `{"token":"XXYYZZ","team_id":"T0001ABCD","context_team_id":"T0001ABCD","api_app_id":"A0KRD7HC3","event":{"type":"app_mention","user":"U061F7AUR","text":"<@U0LAN0Z89> is the deploy done?","ts":{{ts}},"channel":"C0LAN2Q65","event_ts":{{ts}}},"type":"event_callback","authorizations":[{"enterprise_id":null,"team_id":"T0001ABCD","user_id":"U0LAN0Z89","is_bot":true}],"event_id":{{id}},"event_time":{{unix}},"event_context":"4-eyJldCI6ImFwcF9tZW50aW9uIn0"}`

const hubspotTmpl = `[{"eventId":{{id}},"subscriptionId":{{sub}},"portalId":62515,"appId":1160452,"occurredAt":{{version}},"subscriptionType":"contact.propertyChange","attemptNumber":0,"objectId":{{object}},"propertyName":"lifecyclestage","propertyValue":"customer","changeSource":"CRM_UI","sourceId":"userId:1502322"},{"eventId":{{id}},"subscriptionId":{{sub2}},"portalId":62515,"appId":1160452,"occurredAt":{{version}},"subscriptionType":"contact.propertyChange","attemptNumber":0,"objectId":{{object}},"propertyName":"email","propertyValue":"jane@example.com","changeSource":"CRM_UI","sourceId":"userId:1502322"}]`

const paddleTmpl = `{"event_id":{{id}},"event_type":"transaction.completed","occurred_at":{{version}},"notification_id":{{ntf}},"data":{"id":{{object}},"status":"completed","customer_id":{{ctm}},"address_id":"add_01hv8gwdfkw5z6d1yy6pa3xyrz","business_id":null,"custom_data":null,"origin":"web","collection_mode":"automatic","subscription_id":null,"invoice_id":null,"invoice_number":null,"billing_details":null,"currency_code":"USD","discount_id":null,"items":[{"price":{"id":"pri_01gsz8x8sawmvhz1pv30nge1ke","description":"Monthly","product_id":"pro_01gsz4t5hdjse780zja8vvr7jg","unit_price":{"amount":"3000","currency_code":"USD"}},"quantity":1}],"details":{"totals":{"subtotal":"3000","tax":"240","discount":"0","total":"3240","grand_total":"3240","fee":"212","earnings":"3028","currency_code":"USD"}},"payments":[{"amount":"3240","status":"captured","method_details":{"type":"card","card":{"type":"visa","last4":"4242"}}}],"created_at":{{at}},"updated_at":{{version}},"billed_at":{{at}}}}`

const squareTmpl = `{"merchant_id":"6SSW7HV8K2ST5","type":"payment.updated","event_id":{{id}},"created_at":{{at}},"data":{"type":"payment","id":{{object}},"object":{"payment":{"id":{{object}},"amount_money":{"amount":1000,"currency":"USD"},"approved_money":{"amount":1000,"currency":"USD"},"card_details":{"status":"CAPTURED","card":{"card_brand":"VISA","last_4":"1111"},"entry_method":"KEYED"},"created_at":{{at}},"location_id":"S8GWD5R9QB376","order_id":{{order}},"source_type":"CARD","status":"COMPLETED","total_money":{"amount":1000,"currency":"USD"},"updated_at":{{at}},"version":{{version}}}}}}`

const gitlabTmpl = `{"object_kind":"push","event_name":"push","before":"95790bf891e76fee5e1747ab589903a6a1f80f22","after":{{sha}},"ref":"refs/heads/main","ref_protected":true,"checkout_sha":{{sha}},"user_id":4,"user_name":"John Smith","user_username":"jsmith","user_email":"","project_id":15,"project":{"id":15,"name":"Diaspora","web_url":"https://gitlab.example.com/mike/diaspora","path_with_namespace":"mike/diaspora","default_branch":"main"},"commits":[{"id":{{sha}},"message":"Update the retry schedule","title":"Update the retry schedule","timestamp":{{ts}},"url":"https://gitlab.example.com/mike/diaspora/-/commit/","author":{"name":"John Smith","email":"jsmith@example.com"},"added":[],"modified":["delivery/retry.go"],"removed":[]}],"total_commits_count":1,"repository":{"name":"Diaspora","url":"git@gitlab.example.com:mike/diaspora.git","homepage":"https://gitlab.example.com/mike/diaspora","visibility_level":0}}`
