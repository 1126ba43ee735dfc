package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/provider"
)

const configUsage = `usage: anyhook config <command> [flags]

commands:
  check     validate the config as serve would and print it with defaults filled in, secrets redacted
  example   print a ready source block for a provider (anyhook config example stripe)

Run 'anyhook config <command> --help' for a command's flags.`

// configSubcommands are the commands of `anyhook config`, in the order
// help lists them.
var configSubcommands = []string{"check", "example"}

func configCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return fail(stderr, exitUsage, errors.New("config: give a command: config check or config example (anyhook config --help)"))
	}
	switch args[0] {
	case "check":
		return configCheck(args[1:], stdout, stderr)
	case "example":
		return configExample(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, configUsage)
		return exitOK
	}
	msg := fmt.Sprintf("config: unknown command %q", args[0])
	if s := cli.Suggest(args[0], configSubcommands); s != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", s)
	}
	return fail(stderr, exitUsage, errors.New(msg+"; the commands are config check and config example"))
}

const configCheckUsage = `usage: anyhook config check [--config FILE]

Validates the config as anyhook serve would before it listens — every key,
${VAR} and ${file:PATH}, each source's secrets in its provider's form (a
Stripe secret must start with whsec_), the log key file when it exists —
and prints the effective config on stdout: defaults filled in, secrets
redacted, relative paths resolved in comments. It does not connect to the
database. Warnings (a source no destination lists, a secret with white
space around it, a destination posting into this gateway's own source) go to stderr and do not fail the check. Exit 0 when
valid; exit 2 with every problem found, one line each naming the file,
line and key, in line order, when not.`

func configCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("config check")
	cfgPath := configFlag(fs)
	if code := parse(fs, args, stdout, stderr, configCheckUsage); code >= 0 {
		return code
	}
	cfg, err := checkedConfig(*cfgPath)
	if cfg != nil {
		warn(stderr, cfg) // with the errors too: every problem in one pass
	}
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	fmt.Fprintf(stdout, "# %s is valid. The effective configuration (defaults filled in, secrets redacted):\n", cfg.Path)
	stdout.Write(cfg.Effective())
	return exitOK
}

const configExampleUsage = `usage: anyhook config example [--name NAME] PROVIDER

Prints a ready source block for PROVIDER (%s): paste it under sources:
or save it as a config of its own. The secret is read from an environment
variable named after the source (STRIPE_WEBHOOK_SECRET); a comment says
where the provider shows it. Each provider's page is docs/providers/PROVIDER.md.`

func configExample(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("config example")
	name := fs.String("name", "", "the source `name` (default: the provider's; the URL is /webhooks/NAME)")
	synopsis := fmt.Sprintf(configExampleUsage, strings.Join(provider.Names(), ", "))
	// PROVIDER may come before or after the flags.
	var pos []string
	for len(args) > 0 {
		switch err := fs.Parse(args); {
		case errors.Is(err, flag.ErrHelp):
			cli.Usage(stdout, fs, synopsis)
			return exitOK
		case err != nil:
			return parse(fs, args, stdout, stderr, synopsis) // the usual one-line error
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		return fail(stderr, exitUsage, fmt.Errorf("config example: give one provider: %s", strings.Join(provider.Names(), ", ")))
	}
	kind := pos[0]
	tmpl, ok := sourceExamples[kind]
	if !ok {
		msg := fmt.Sprintf("config example: unknown provider %q", kind)
		if s := cli.Suggest(kind, provider.Names()); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		return fail(stderr, exitUsage, fmt.Errorf("%s; the providers are %s", msg, strings.Join(provider.Names(), ", ")))
	}
	src := *name
	if src == "" {
		src = kind
	}
	if !sourceName.MatchString(src) || src == "." || src == ".." {
		return fail(stderr, exitUsage, fmt.Errorf("config example: --name %q: use letters, digits, _, - and . only", src))
	}
	fmt.Fprint(stdout, strings.NewReplacer("NAME", src, "SECRET_VAR", secretVar(src), "PROVIDER", kind).Replace(tmpl))
	return exitOK
}

// checkedConfig loads the config as serve runs it: every value, and what
// the wiring checks beyond the file (a Stripe secret's form, the log key
// file when it exists; serve creates a missing one). The error lists
// every problem, once each, in line order; with it the config is returned
// as far as it could be read, for its warnings.
func checkedConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(config.Resolve(path))
	if cfg == nil {
		return nil, err
	}
	err = config.Join(err, without(cfg, gateway.Check(cfg), err))
	if _, statErr := os.Stat(cfg.LedgerKeyPath()); statErr == nil {
		if _, kerr := ledger.LoadKey(cfg.LedgerKeyPath()); kerr != nil {
			err = config.Join(err, cfg.Errorf("log.key_file", "%v", kerr))
		}
	}
	return cfg, err
}

// without returns the problems of err that are not in seen (the same
// key and message) and do not follow from one reported there
// (config.Config.Follows), as one error; nil when none is left.
func without(cfg *config.Config, err, seen error) error {
	known := map[string]bool{}
	for _, p := range config.List(seen) {
		known[p.Key+"\x00"+p.Msg] = true
	}
	var out []error
	for _, p := range config.List(err) {
		if !known[p.Key+"\x00"+p.Msg] && !cfg.Follows(p.Key) {
			out = append(out, p)
		}
	}
	if err != nil && config.List(err) == nil {
		out = append(out, err)
	}
	return config.Join(out...)
}

var sourceName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// secretVar is the environment variable an example reads the secret of
// source name from: STRIPE_WEBHOOK_SECRET.
func secretVar(name string) string {
	return strings.ToUpper(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(name, "_")) + "_WEBHOOK_SECRET"
}

// sourceExamples are the blocks `anyhook config example` prints: NAME,
// SECRET_VAR and PROVIDER are replaced. Each follows its
// docs/providers/PROVIDER.md page; TestConfigExamples checks that each
// passes config check.
var sourceExamples = map[string]string{
	"stripe": `# A Stripe source (docs/providers/PROVIDER.md). In Stripe: Dashboard → Developers →
# Webhooks → Add endpoint, URL https://<your host>/webhooks/NAME.
sources:
  NAME:
    provider: stripe
    # The endpoint's signing secret, whsec_… ("Reveal" on the endpoint's page);
    # not an API key (sk_…). While rolling it, list the old and the new one.
    secrets: ["${SECRET_VAR}"]
    tolerance: 5m
`,
	"github": `# A GitHub source (docs/providers/PROVIDER.md). In GitHub: repository or organization →
# Settings → Webhooks → Add webhook, payload URL https://<your host>/webhooks/NAME,
# content type application/json.
sources:
  NAME:
    provider: github
    # The webhook's "Secret", which you choose when adding the webhook
    # (e.g. openssl rand -hex 32).
    secrets: ["${SECRET_VAR}"]
`,
	"shopify": `# A Shopify source (docs/providers/PROVIDER.md). In Shopify: the app's webhook
# subscriptions (shopify.app.toml or the Admin API), or store admin → Settings →
# Notifications → Webhooks, URL https://<your host>/webhooks/NAME.
sources:
  NAME:
    provider: shopify
    # The app's client secret (shpss_…), or for store-admin webhooks the
    # store's signing key shown under the webhooks list.
    secrets: ["${SECRET_VAR}"]
`,
	"standard": `# A Standard Webhooks (or Svix) sender (docs/providers/PROVIDER.md): POSTs to
# https://<your host>/webhooks/NAME.
sources:
  NAME:
    provider: standard
    # The endpoint's signing secret as the sender shows it: whsec_ followed
    # by base64.
    secrets: ["${SECRET_VAR}"]
    tolerance: 5m
`,
	"generic": `# A generic source (docs/providers/PROVIDER.md): your own HMAC scheme, POSTing to
# https://<your host>/webhooks/NAME. For unsigned requests replace the
# secrets and signature lines by "signature: none".
sources:
  NAME:
    provider: generic
    # The shared secret the sender signs the raw body with.
    secrets: ["${SECRET_VAR}"]
    signature: {header: X-Signature, algorithm: sha256, encoding: hex, prefix: "sha256="}
    id: header:X-Request-Id          # the dedup key: header:<Header> or json:path.to.id
`,
	"twilio": `# A Twilio source (docs/providers/PROVIDER.md). In Twilio: the phone number's,
# messaging service's or Studio flow's webhook, or a StatusCallback, URL
# https://<your host>/webhooks/NAME.
sources:
  NAME:
    provider: twilio
    # The account's Auth Token: Console → Account info. List the old and the
    # new one while rotating.
    secrets: ["${SECRET_VAR}"]
    # Twilio signs the URL it calls: exactly as configured in Twilio.
    public_url: https://anyhook.example.com/webhooks/NAME
`,
	"slack": `# A Slack source (docs/providers/PROVIDER.md). In Slack: api.slack.com/apps → your app
# → Event Subscriptions (Interactivity, Slash Commands), Request URL
# https://<your host>/webhooks/NAME.
sources:
  NAME:
    provider: slack
    # The app's Signing Secret (Basic Information → App Credentials), not
    # the verification token.
    secrets: ["${SECRET_VAR}"]
    tolerance: 5m
`,
	"hubspot": `# A HubSpot source (docs/providers/PROVIDER.md). In HubSpot: developer account → your
# app → Webhooks, Target URL https://<your host>/webhooks/NAME.
sources:
  NAME:
    provider: hubspot
    # The app's client secret (the app's Auth page).
    secrets: ["${SECRET_VAR}"]
    # HubSpot signs the URL it calls: exactly the Target URL.
    public_url: https://anyhook.example.com/webhooks/NAME
    tolerance: 5m
`,
	"paddle": `# A Paddle Billing source (docs/providers/PROVIDER.md). In Paddle: Developer tools →
# Notifications → New destination, URL https://<your host>/webhooks/NAME.
sources:
  NAME:
    provider: paddle
    # The destination's secret key (pdl_ntfset_…), shown on the destination.
    secrets: ["${SECRET_VAR}"]
    tolerance: 5m
`,
	"gitlab": `# A GitLab source (docs/providers/PROVIDER.md). In GitLab: project or group → Settings
# → Webhooks, URL https://<your host>/webhooks/NAME.
sources:
  NAME:
    provider: gitlab
    # The webhook's "Secret token", which you choose; a whsec_… signing token
    # (where GitLab offers one) may be listed too.
    secrets: ["${SECRET_VAR}"]
`,
	"square": `# A Square source (docs/providers/PROVIDER.md). In Square: Developer Dashboard → your
# application → Webhooks → Add subscription, notification URL
# https://<your host>/webhooks/NAME.
sources:
  NAME:
    provider: square
    # The subscription's signature key, shown on the subscription.
    secrets: ["${SECRET_VAR}"]
    # Square signs the URL it calls: exactly the notification URL.
    public_url: https://anyhook.example.com/webhooks/NAME
`,
}
