package deploy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/yannh/kubeconform/pkg/validator"
	"sigs.k8s.io/yaml"
)

// The manifests are validated with kubeconform against the Kubernetes
// API's JSON schemas. kubeconform downloads those at run time, which this
// machine cannot; so the few it needs are vendored in
// testdata/kubernetes-json-schema (see its README): the definitions that
// the kinds below reach, taken from yannh/kubernetes-json-schema's
// _definitions.json as kubeconform's own module ships it, made strict (an
// undocumented field is an error). TestVendoredSchemas rebuilds them from
// that source and fails when they differ; -update rewrites them.

var update = flag.Bool("update", false, "rewrite testdata/kubernetes-json-schema from the kubeconform module")

const (
	schemaDir    = "testdata/kubernetes-json-schema"
	kubeconform  = "github.com/yannh/kubeconform"
	schemaSource = "https://raw.githubusercontent.com/yannh/kubernetes-json-schema/master/master/_definitions.json"
)

// schemaKinds maps kubeconform's schema file names
// ({{.ResourceKind}}{{.KindSuffix}}) to their definitions: the kinds the
// manifests use.
var schemaKinds = map[string]string{
	"configmap-v1":                  "io.k8s.api.core.v1.ConfigMap",
	"secret-v1":                     "io.k8s.api.core.v1.Secret",
	"service-v1":                    "io.k8s.api.core.v1.Service",
	"deployment-apps-v1":            "io.k8s.api.apps.v1.Deployment",
	"statefulset-apps-v1":           "io.k8s.api.apps.v1.StatefulSet",
	"poddisruptionbudget-policy-v1": "io.k8s.api.policy.v1.PodDisruptionBudget",
}

// vendoredSchemas builds the vendored files from the kubeconform module:
// file name → content.
func vendoredSchemas(t *testing.T) map[string][]byte {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", kubeconform).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", kubeconform, err)
	}
	// kubeconform's on-disk cache names a file by the SHA-256 of its URL.
	sum := sha256.Sum256([]byte(schemaSource))
	src := filepath.Join(strings.TrimSpace(string(out)), "fixtures", "cache", hex.EncodeToString(sum[:]))
	var all struct {
		Definitions map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(read(t, src), &all); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	keep := map[string]any{}
	var reach func(name string)
	reach = func(name string) {
		if _, ok := keep[name]; ok {
			return
		}
		def, ok := all.Definitions[name]
		if !ok {
			t.Fatalf("%s has no definition %s", src, name)
		}
		keep[name] = def
		walkSchema(def, func(m map[string]any) {
			if ref, ok := m["$ref"].(string); ok {
				reach(strings.TrimPrefix(ref, "#/definitions/"))
				m["$ref"] = "_definitions.json" + ref
			}
		})
	}
	files := map[string][]byte{}
	for file, def := range schemaKinds {
		reach(def)
		files[file+".json"] = []byte(fmt.Sprintf("{\n  \"$ref\": \"_definitions.json#/definitions/%s\"\n}\n", def))
	}
	// Strict, as kubeconform's -strict schemas: an object with documented
	// properties has no others.
	for _, def := range keep {
		walkSchema(def, func(m map[string]any) {
			if _, ok := m["properties"]; ok {
				if _, ok := m["additionalProperties"]; !ok {
					m["additionalProperties"] = false
				}
			}
		})
	}
	b, err := json.MarshalIndent(map[string]any{"definitions": keep}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	files["_definitions.json"] = append(b, '\n')
	return files
}

// walkSchema calls f on every JSON object in v, parents first.
func walkSchema(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(v)
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range v {
				if !yield(k) {
					return
				}
			}
		}) {
			walkSchema(v[k], f)
		}
	case []any:
		for _, e := range v {
			walkSchema(e, f)
		}
	}
}

func TestVendoredSchemas(t *testing.T) {
	files := vendoredSchemas(t)
	if *update {
		old, _ := filepath.Glob(filepath.Join(schemaDir, "*.json"))
		for _, f := range old {
			os.Remove(f)
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(schemaDir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, err := os.ReadDir(schemaDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok && e.Name() != "README.md" {
			t.Errorf("%s/%s is not built from the source: remove it, or run go test -run TestVendoredSchemas -update", schemaDir, e.Name())
		}
	}
	for name, want := range files {
		if got, err := os.ReadFile(filepath.Join(schemaDir, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s/%s differs from what %s gives (%v): run go test -run TestVendoredSchemas -update", schemaDir, name, schemaSource, err)
		}
	}
}

// kubeconformValidate validates a manifest file (or text) with kubeconform
// against the vendored strict schemas.
func kubeconformValidate(t *testing.T, name string, r io.Reader) []validator.Result {
	t.Helper()
	abs, err := filepath.Abs(schemaDir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := validator.New([]string{abs + "/{{ .ResourceKind }}{{ .KindSuffix }}.json"}, validator.Opts{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	return v.Validate(name, io.NopCloser(r))
}

func manifests(t *testing.T, flavor string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("kubernetes", flavor, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in kubernetes/%s: %v", flavor, err)
	}
	return files
}

func TestKubeconform(t *testing.T) {
	t.Parallel()
	for _, flavor := range []string{"sqlite", "postgres"} {
		for _, file := range manifests(t, flavor) {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range kubeconformValidate(t, file, f) {
				if r.Status != validator.Valid {
					t.Errorf("%s: %s %s: status %d: %v %+v", file, r.Resource.Path, sig(r), r.Status, r.Err, r.ValidationErrors)
				}
			}
			f.Close()
		}
	}
	// The schemas are strict and know required fields: these are refused.
	for name, bad := range map[string]string{
		"unknown field": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 2\n  selector: {matchLabels: {a: b}}\n  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: x, image: x}]}}\n",
		"no container":  "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  selector: {matchLabels: {a: b}}\n  template: {metadata: {labels: {a: b}}, spec: {containers: [{image: x}]}}\n",
		"wrong type":    "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: eighty}]}\n",
	} {
		for _, r := range kubeconformValidate(t, name, strings.NewReader(bad)) {
			if r.Status != validator.Invalid {
				t.Errorf("%s: status %d (%v), want invalid: are the schemas strict?", name, r.Status, r.Err)
			}
		}
	}
}

func sig(r validator.Result) string {
	s, err := r.Resource.Signature()
	if err != nil {
		return "?"
	}
	return s.Kind + "/" + s.Name
}

// The parts of the manifests the checks below read.
type (
	object struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
		Spec struct {
			Replicas             *int `json:"replicas"`
			MinAvailable         any  `json:"minAvailable"`
			VolumeClaimTemplates []struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"volumeClaimTemplates"`
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Ports []struct {
				TargetPort any `json:"targetPort"`
			} `json:"ports"`
			Template struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
				Spec podSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	podSpec struct {
		TerminationGracePeriodSeconds *int `json:"terminationGracePeriodSeconds"`
		SecurityContext               struct {
			RunAsNonRoot *bool `json:"runAsNonRoot"`
		} `json:"securityContext"`
		Containers []container `json:"containers"`
		Volumes    []podVolume `json:"volumes"`
	}
	podVolume struct {
		Name      string                       `json:"name"`
		ConfigMap *struct{ Name string }       `json:"configMap"`
		Secret    *struct{ SecretName string } `json:"secret"`
	}
	envVar struct {
		Name      string `json:"name"`
		ValueFrom *struct {
			SecretKeyRef *struct{ Name, Key string } `json:"secretKeyRef"`
		} `json:"valueFrom"`
	}
	container struct {
		Image                         string   `json:"image"`
		Args                          []string `json:"args"`
		Env                           []envVar `json:"env"`
		LivenessProbe, ReadinessProbe *struct {
			HTTPGet *struct{ Path string } `json:"httpGet"`
		}
		SecurityContext struct {
			ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
			AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
		} `json:"securityContext"`
		VolumeMounts []struct {
			Name      string `json:"name"`
			MountPath string `json:"mountPath"`
		} `json:"volumeMounts"`
	}
)

func loadObjects(t *testing.T, flavor string) map[string]object {
	t.Helper()
	objs := map[string]object{}
	for _, file := range manifests(t, flavor) {
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(read(t, file)), -1) {
			var o object
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if o.Kind != "" {
				objs[o.Kind] = o
			}
		}
	}
	return objs
}

// What the manifests promise beyond the schemas: SQLite on one replica
// with its volume, PostgreSQL on two sharing one log key, a config that
// passes config check with what the pods are given, secrets from Secrets,
// probes, a non-root read-only container.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	for _, flavor := range []string{"sqlite", "postgres"} {
		objs := loadObjects(t, flavor)
		kind := map[string]string{"sqlite": "StatefulSet", "postgres": "Deployment"}[flavor]
		w, ok := objs[kind]
		if !ok {
			t.Errorf("%s: no %s", flavor, kind)
			continue
		}
		pod := w.Spec.Template.Spec
		if len(pod.Containers) != 1 {
			t.Fatalf("%s: %d containers", flavor, len(pod.Containers))
		}
		c := pod.Containers[0]
		switch flavor {
		case "sqlite":
			if w.Spec.Replicas == nil || *w.Spec.Replicas != 1 || len(w.Spec.VolumeClaimTemplates) != 1 {
				t.Errorf("sqlite: replicas %v, %d volume claims; want exactly one replica with its volume", w.Spec.Replicas, len(w.Spec.VolumeClaimTemplates))
			}
		case "postgres":
			if w.Spec.Replicas == nil || *w.Spec.Replicas < 2 {
				t.Errorf("postgres: replicas %v, want 2", w.Spec.Replicas)
			}
			if pdb, ok := objs["PodDisruptionBudget"]; !ok || !subset(pdb.Spec.Selector.MatchLabels, w.Spec.Template.Metadata.Labels) {
				t.Errorf("postgres: no PodDisruptionBudget for the pods")
			}
		}
		if svc, ok := objs["Service"]; !ok || !subset(svc.Spec.Selector.MatchLabels, w.Spec.Template.Metadata.Labels) && !subset(selector(t, flavor), w.Spec.Template.Metadata.Labels) {
			t.Errorf("%s: no Service selecting the pods", flavor)
		}
		if g := pod.TerminationGracePeriodSeconds; g == nil || *g < 30 {
			t.Errorf("%s: terminationGracePeriodSeconds %v; want at least 30 (draining, delivery.shutdown)", flavor, g)
		}
		if r := pod.SecurityContext.RunAsNonRoot; r == nil || !*r {
			t.Errorf("%s: runAsNonRoot is not set", flavor)
		}
		if s := c.SecurityContext; s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem || s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation {
			t.Errorf("%s: the container's root file system is writable or it may escalate privileges", flavor)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
			c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: want liveness on /healthz and readiness on /readyz", flavor)
		}
		if !regexp.MustCompile(`:v\d+\.\d+\.\d+$`).MatchString(c.Image) {
			t.Errorf("%s: image %q; want a versioned tag, not latest", flavor, c.Image)
		}

		// The config: from the ConfigMap, valid with what the pod is given.
		cm, ok := objs["ConfigMap"]
		if !ok || cm.Data["anyhook.yaml"] == "" {
			t.Fatalf("%s: no ConfigMap with anyhook.yaml", flavor)
		}
		mounts := map[string]string{} // mount path → volume name
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		if v := volume(pod, mounts["/etc/anyhook"]); v == nil || v.ConfigMap == nil || v.ConfigMap.Name != cm.Metadata.Name ||
			!slices.Equal(c.Args, []string{"serve", "--config", "/etc/anyhook/anyhook.yaml"}) {
			t.Errorf("%s: the container does not serve the ConfigMap's anyhook.yaml (args %q)", flavor, c.Args)
		}
		// Every Secret the pod reads is one docs/deploy.md creates, with
		// the keys it reads.
		doc := string(read(t, filepath.Join(root, "docs", "deploy.md")))
		env := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				t.Errorf("%s: $%s is not from a Secret", flavor, e.Name)
				continue
			}
			ref := e.ValueFrom.SecretKeyRef
			if !strings.Contains(doc, "kubectl create secret generic "+ref.Name+" ") || !strings.Contains(doc, "--from-literal="+ref.Key+"=") {
				t.Errorf("%s: docs/deploy.md does not create the Secret %s with the key %s", flavor, ref.Name, ref.Key)
			}
			env[e.Name] = "whsec_value-of-" + e.Name
		}
		for _, v := range pod.Volumes {
			if v.Secret != nil && !strings.Contains(doc, "kubectl create secret generic "+v.Secret.SecretName+" --from-file=") {
				t.Errorf("%s: docs/deploy.md does not create the Secret %s", flavor, v.Secret.SecretName)
			}
		}
		env["ANYHOOK_DATABASE_URL"] = "postgres://anyhook:secret@postgres.example:5432/anyhook"
		cfg := cm.Data["anyhook.yaml"]
		for _, ref := range regexp.MustCompile(`\$\{([A-Z_]+)\}`).FindAllStringSubmatch(cfg, -1) {
			if !slices.ContainsFunc(c.Env, func(e envVar) bool { return e.Name == ref[1] }) {
				t.Errorf("%s: anyhook.yaml reads $%s, which the container is not given", flavor, ref[1])
			}
		}
		out := configCheck(t, flavor+" ConfigMap anyhook.yaml", []byte(cfg), env)
		// The database (SQLite) and the log key are on volumes that outlive
		// the pod: the claim, or a Secret shared by every replica.
		want := map[string]string{"sqlite": "data", "postgres": "log-key"}[flavor]
		keyFile := regexp.MustCompile(`key_file: (\S+)`).FindStringSubmatch(out)
		if keyFile == nil || mounts[filepath.Dir(keyFile[1])] != want {
			t.Errorf("%s: the log key %v is not on the volume %s", flavor, keyFile, want)
		}
		if flavor == "sqlite" {
			db := regexp.MustCompile(`database: sqlite:(\S+)`).FindStringSubmatch(out)
			if db == nil || mounts[filepath.Dir(db[1])] != "data" {
				t.Errorf("sqlite: the database %v is not on the volume claim", db)
			}
		} else if v := volume(pod, want); v == nil || v.Secret == nil {
			t.Errorf("postgres: the log key is not from a Secret")
		}
		if mounts["/tmp"] == "" {
			t.Errorf("%s: no writable /tmp (the root file system is read only; SQLite may need temporary files)", flavor)
		}
	}
}

func volume(pod podSpec, name string) *podVolume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

// selector reads a Service's spec.selector (a plain map, unlike a
// workload's matchLabels).
func selector(t *testing.T, flavor string) map[string]string {
	var svc struct {
		Spec struct {
			Selector map[string]string `json:"selector"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(read(t, filepath.Join("kubernetes", flavor, "service.yaml")), &svc); err != nil {
		t.Fatal(err)
	}
	return svc.Spec.Selector
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
