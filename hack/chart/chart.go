// Package chart generates the Helm chart charts/convoy-observer from the kustomize bases,
// so that the chart and config/default have one source:
//
//	go run ./hack/chart/gen        # make chart (and make generate)
//
// Generate renders config/default, config/monitoring and config/unsafe-read-as-observer
// as `kubectl kustomize` does and writes each object as a template (its CRDs as crds/),
// with the namespace convoy-system replaced by the release's namespace and these fields
// taken from the values (values.yaml holds config/default's own values as defaults):
//
//   - observer and api: image, replicas, resources, extraArgs;
//   - observer.shards: one observer Deployment and PodDisruptionBudget per shard name
//     ("" is the default shard: config/default's objects; another name adds the suffix
//     -NAME, the label convoy.kumodo.io/shard=NAME in the selectors and --shard=NAME, as
//     config/samples/shard-eu does);
//   - observer.defaultServiceAccount (--default-service-account) and
//     observer.unsafeReadAsObserver (--unsafe-read-as-observer and the RBAC of
//     config/unsafe-read-as-observer);
//   - namespace.create: the Namespace with its Pod Security labels (off by default: Helm
//     stores the release in the namespace, which must exist first);
//   - tenantRoles.enabled: the aggregated ClusterRoles convoy-tenant-edit and -view;
//   - monitoring.enabled: config/monitoring (needs the Prometheus Operator's CRDs), and the
//     observer's metrics on (--metrics-bind-address=:8080 and the container port metrics).
//
// values.schema.json (not generated) types every value and refuses shard names that are
// not DNS labels, "default" (the default shard's label) and repeated shards.
//
// Render renders the chart with the Helm SDK (what `helm template` does), which the tests
// compare with the kustomize rendering object by object.
package chart

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Dir is the chart's directory in the repository.
const Dir = "charts/convoy-observer"

// MetricsPort is the observer's metrics port with monitoring.enabled (docs/operations.md,
// "Monitoring").
const MetricsPort = "8080"

// Namespace is the namespace of config/default, the release's namespace in the chart.
const Namespace = "convoy-system"

// Kustomize renders the kustomization dir as `kubectl kustomize` does and returns its
// objects.
func Kustomize(dir string) ([]map[string]any, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	var out []map[string]any
	for _, r := range m.Resources() {
		o, err := r.Map()
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// placeholder is a value that becomes template text after the object is written as YAML:
// text replaces the scalar; lines (each indented as the placeholder's line) replace the
// whole line of a list item or map key; block replaces the value of its key with the
// YAML of a template expression.
type placeholder struct {
	text  string
	lines []string
	block string
}

type objectTemplate struct {
	obj          map[string]any
	placeholders []placeholder
	// condition wraps the object in {{- if condition }}; rangeShards repeats it per shard.
	condition   string
	rangeShards bool
}

func (t *objectTemplate) put(p placeholder) string {
	t.placeholders = append(t.placeholders, p)
	return fmt.Sprintf("__HELM_%d__", len(t.placeholders)-1)
}

// Generate returns the chart's files (path in the chart → content) from the kustomize
// bases of the repository at root.
func Generate(root string) (map[string][]byte, error) {
	base, err := Kustomize(filepath.Join(root, "config", "default"))
	if err != nil {
		return nil, err
	}
	monitoring, err := Kustomize(filepath.Join(root, "config", "monitoring"))
	if err != nil {
		return nil, err
	}
	unsafe, err := Kustomize(filepath.Join(root, "config", "unsafe-read-as-observer"))
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	v := defaults{}
	add := func(o map[string]any, condition string) error {
		kind, name := str(o, "kind"), str(o, "metadata", "name")
		file := strings.ToLower(kind) + "-" + strings.ReplaceAll(name, ":", "-")
		if ns := str(o, "metadata", "namespace"); ns != "" && ns != Namespace {
			file += "-" + ns
		}
		if kind == "CustomResourceDefinition" {
			data, err := yaml.Marshal(o)
			if err != nil {
				return err
			}
			files["crds/"+name+".yaml"] = data
			return nil
		}
		t := &objectTemplate{obj: o, condition: condition}
		switch {
		case kind == "Namespace" && name == Namespace:
			t.condition = "$.Values.namespace.create"
		case kind == "ClusterRole" && (name == "convoy-tenant-edit" || name == "convoy-tenant-view"):
			t.condition = "$.Values.tenantRoles.enabled"
		case kind == "Deployment" && (name == "convoy-observer" || name == "convoy-api"):
			if err := deployment(t, &v); err != nil {
				return err
			}
		case kind == "PodDisruptionBudget" && name == "convoy-observer":
			shardObject(t)
		}
		text, err := t.render()
		if err != nil {
			return fmt.Errorf("%s %s: %w", kind, name, err)
		}
		path := "templates/" + file + ".yaml"
		if _, dup := files[path]; dup {
			return fmt.Errorf("two objects would be written to %s", path)
		}
		files[path] = text
		return nil
	}
	for _, o := range base {
		if err := add(o, ""); err != nil {
			return nil, err
		}
	}
	for _, o := range monitoring {
		if err := add(o, "$.Values.monitoring.enabled"); err != nil {
			return nil, err
		}
	}
	for _, o := range unsafe {
		if err := add(o, "$.Values.observer.unsafeReadAsObserver"); err != nil {
			return nil, err
		}
	}
	if v.observer.image == "" || v.api.image == "" {
		return nil, fmt.Errorf("config/default has no Deployment convoy-observer or convoy-api")
	}
	values, err := v.yaml()
	if err != nil {
		return nil, err
	}
	files["values.yaml"] = values
	return files, nil
}

// component is the values of one Deployment.
type component struct {
	image     string
	replicas  any
	resources any
}

type defaults struct{ observer, api component }

// deployment templates the Deployment convoy-observer or convoy-api and records its
// values.
func deployment(t *objectTemplate, v *defaults) error {
	name := str(t.obj, "metadata", "name")
	key := "api"
	c := &v.api
	if name == "convoy-observer" {
		key, c = "observer", &v.observer
	}
	spec := t.obj["spec"].(map[string]any)
	c.replicas = spec["replicas"]
	spec["replicas"] = t.put(placeholder{text: "{{ $.Values." + key + ".replicas }}"})
	containers, _ := nested(spec, "template", "spec", "containers").([]any)
	var ctr map[string]any
	for _, x := range containers {
		if m, ok := x.(map[string]any); ok && m["name"] == containerName(name) {
			ctr = m
		}
	}
	if ctr == nil {
		return fmt.Errorf("no container %s", containerName(name))
	}
	c.image, _ = ctr["image"].(string)
	ctr["image"] = t.put(placeholder{text: "{{ $.Values." + key + ".image | quote }}"})
	c.resources = ctr["resources"]
	ctr["resources"] = t.put(placeholder{block: "$.Values." + key + ".resources"})
	args, _ := ctr["args"].([]any)
	if key == "observer" {
		// monitoring.enabled turns the observer's metrics on, where the ServiceMonitor
		// of config/monitoring scrapes them: --metrics-bind-address and the port metrics.
		i := slices.Index(args, any("--metrics-bind-address=0"))
		if i < 0 {
			return fmt.Errorf("the observer's args have no --metrics-bind-address=0")
		}
		args[i] = t.put(placeholder{lines: []string{"{{- if $.Values.monitoring.enabled }}", "- --metrics-bind-address=:" + MetricsPort,
			"{{- else }}", "- --metrics-bind-address=0", "{{- end }}"}})
		ports, _ := ctr["ports"].([]any)
		ctr["ports"] = append(ports, t.put(placeholder{lines: []string{"{{- if $.Values.monitoring.enabled }}",
			"- containerPort: " + MetricsPort, "  name: metrics", "  protocol: TCP", "{{- end }}"}}))
		args = append(args,
			t.put(placeholder{lines: []string{"{{- if $shard }}", "- {{ printf \"--shard=%s\" $shard | quote }}", "{{- end }}"}}),
			t.put(placeholder{lines: []string{"{{- with $.Values.observer.defaultServiceAccount }}", "- {{ printf \"--default-service-account=%s\" . | quote }}", "{{- end }}"}}),
			t.put(placeholder{lines: []string{"{{- if $.Values.observer.unsafeReadAsObserver }}", "- --unsafe-read-as-observer", "{{- end }}"}}),
		)
		shardObject(t)
	}
	ctr["args"] = append(args, t.put(placeholder{lines: []string{"{{- range $.Values." + key + ".extraArgs }}", "- {{ . | quote }}", "{{- end }}"}}))
	return nil
}

// containerName is the container of the Deployment name (config/*/deployment.yaml).
func containerName(deployment string) string {
	if deployment == "convoy-observer" {
		return "observer"
	}
	return "api"
}

// shardObject repeats t per shard: the name gets -SHARD and the shard label, in the
// selector and the Pod template too, is the shard's (default for "").
func shardObject(t *objectTemplate) {
	t.rangeShards = true
	md := t.obj["metadata"].(map[string]any)
	md["name"] = t.put(placeholder{text: md["name"].(string) + "{{ if $shard }}-{{ $shard }}{{ end }}"})
	label := t.put(placeholder{text: `{{ $shard | default "default" | quote }}`})
	for _, path := range [][]string{{"metadata", "labels"}, {"spec", "selector", "matchLabels"}, {"spec", "template", "metadata", "labels"}} {
		if m, ok := nested(t.obj, path...).(map[string]any); ok {
			if _, has := m["convoy.kumodo.io/shard"]; has {
				m["convoy.kumodo.io/shard"] = label
			}
		}
	}
}

var (
	placeholderRE = regexp.MustCompile(`['"]?__HELM_(\d+)__['"]?`)
	lineRE        = regexp.MustCompile(`^(\s*)(- )?(?:([^\s:]+): )?['"]?__HELM_(\d+)__['"]?$`)
)

// render writes the object as YAML and turns its placeholders into template text; text
// that looks like a template action ({{ in a dashboard's legend) is escaped.
func (t *objectTemplate) render() ([]byte, error) {
	data, err := yaml.Marshal(t.obj)
	if err != nil {
		return nil, err
	}
	text := strings.ReplaceAll(string(data), "{{", `{{ "{{" }}`)
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if m := lineRE.FindStringSubmatch(line); m != nil {
			p := t.placeholders[atoi(m[4])]
			indent := m[1]
			switch {
			case p.lines != nil:
				if m[3] != "" {
					return nil, fmt.Errorf("line placeholder as the value of %s", m[3])
				}
				for _, l := range p.lines {
					out = append(out, indent+l)
				}
				continue
			case p.block != "":
				n := len(indent) + len(m[2]) + 2
				out = append(out, fmt.Sprintf("%s%s%s:", indent, m[2], m[3]), fmt.Sprintf("%s  {{- toYaml %s | nindent %d }}", strings.Repeat(" ", len(indent)+len(m[2])), p.block, n))
				continue
			}
		}
		out = append(out, placeholderRE.ReplaceAllStringFunc(line, func(s string) string {
			return t.placeholders[atoi(placeholderRE.FindStringSubmatch(s)[1])].text
		}))
	}
	body := strings.ReplaceAll(strings.Join(out, "\n"), Namespace, "{{ $.Release.Namespace }}")
	var b bytes.Buffer
	b.WriteString("# Generated by hack/chart from the kustomize bases (make chart); do not edit.\n")
	switch {
	case t.rangeShards:
		b.WriteString("{{- range $shard := $.Values.observer.shards }}\n---\n" + body + "\n{{- end }}\n")
	case t.condition != "":
		b.WriteString("{{- if " + t.condition + " }}\n" + body + "\n{{- end }}\n")
	default:
		b.WriteString(body + "\n")
	}
	if t.condition != "" && t.rangeShards {
		return nil, fmt.Errorf("a condition on a per-shard object")
	}
	return b.Bytes(), nil
}

// yaml is values.yaml: the chart's values, config/default's as defaults.
func (v defaults) yaml() ([]byte, error) {
	// resources: as YAML, indented under its component.
	block := func(x any) (string, error) {
		data, err := yaml.Marshal(map[string]any{"resources": x})
		return "  " + strings.TrimSuffix(strings.ReplaceAll(string(data), "\n", "\n  "), "  "), err
	}
	or, err := block(v.observer.resources)
	if err != nil {
		return nil, err
	}
	ar, err := block(v.api.resources)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `# Values of the convoy-observer chart (generated by hack/chart from config/default, whose
# values are the defaults; make chart). docs/operations.md explains every piece.

namespace:
  # create the Namespace, with the restricted Pod Security level; off by default since
  # Helm keeps the release in the namespace, which must exist before (create it with
  # those labels, or helm install --create-namespace for a bare one).
  create: false

observer:
  # image of convoy-observer (make release pins REGISTRY/convoy-observer@sha256:…).
  image: %q
  replicas: %v
%s  # the shards, one Deployment each; "" is the default shard (no --shard).
  shards: [""]
  # --default-service-account: the ServiceAccount of a Cluster's namespace whose identity
  # reads a local Cluster's objects; "" keeps the flag's default (docs/security.md).
  defaultServiceAccount: ""
  # --unsafe-read-as-observer, and the RBAC that lets the observer read every object:
  # UNSAFE on a shared cluster (docs/security.md).
  unsafeReadAsObserver: false
  # more arguments of convoy-observer (docs/operations.md, "Flags").
  extraArgs: []

api:
  # image of convoy-api (make release pins REGISTRY/convoy-api@sha256:…).
  image: %q
  replicas: %v
%s  extraArgs: []

# the aggregated ClusterRoles convoy-tenant-edit and convoy-tenant-view (tenants' edit
# and view of Releases and their health).
tenantRoles:
  enabled: true

# config/monitoring: ServiceMonitors, PrometheusRule and the Grafana dashboard (needs
# the Prometheus Operator's CRDs).
monitoring:
  enabled: false
`, v.observer.image, v.observer.replicas, or, v.api.image, v.api.replicas, ar), nil
}

func str(o map[string]any, path ...string) string {
	s, _ := nested(o, path...).(string)
	return s
}

func nested(o map[string]any, path ...string) any {
	var x any = o
	for _, p := range path {
		m, ok := x.(map[string]any)
		if !ok {
			return nil
		}
		x = m[p]
	}
	return x
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
