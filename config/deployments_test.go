package config_test

import (
	"bytes"
	"flag"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// checkObserverDeployment checks the observer Deployment: its image, flags, probes and certificates.
func checkObserverDeployment(t *testing.T, objs objects) {
	d := objs.deployment(t, "convoy-observer")
	c := checkPod(t, d, "convoy-observer", "convoy-observer:latest")
	args := checkArgs(t, "convoy-observer", observerFlags(t), d, c)
	if args["leader-elect"] != "true" {
		t.Errorf("--leader-elect = %q, want true", args["leader-elect"])
	}
	if got := args["leader-elect-resource-namespace"]; got != namespace {
		t.Errorf("--leader-elect-resource-namespace = %q, want %q", got, namespace)
	}
	if _, ok := args["shard"]; ok {
		t.Errorf("the default shard's Deployment passes --shard=%s", args["shard"])
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	checkProbes(t, c, args["health-probe-bind-address"], corev1.URISchemeHTTP, "/healthz", "/readyz")

	// Wake-ups go through the kube-apiserver (the APIService): no direct URL, no CA.
	if _, ok := args["sync-url"]; ok {
		t.Errorf("--sync-url = %q: the observer should wake through the kube-apiserver", args["sync-url"])
	}
	if _, ok := args["disable-sync"]; ok {
		t.Error("--disable-sync is set")
	}

	var pdb policyv1.PodDisruptionBudget
	objs.get(t, "PodDisruptionBudget", namespace, "convoy-observer").decode(t, &pdb)
	checkSelects(t, pdb.Spec.Selector, d)
}

// checkAPIDeployment checks convoy-api's Deployment, Service and APIService.
func checkAPIDeployment(t *testing.T, objs objects) {
	d := objs.deployment(t, "convoy-api")
	c := checkPod(t, d, "convoy-api", "convoy-api:latest")
	args := checkArgs(t, "convoy-api", apiFlags(t), d, c)
	cert := certificate(t, objs, "convoy-api-serving")
	if got, want := args["tls-cert-file"], secretFile(t, d, c, cert.secretName, "tls.crt"); got != want {
		t.Errorf("--tls-cert-file = %q, want %q (Secret %s)", got, want, cert.secretName)
	}
	if got, want := args["tls-private-key-file"], secretFile(t, d, c, cert.secretName, "tls.key"); got != want {
		t.Errorf("--tls-private-key-file = %q, want %q (Secret %s)", got, want, cert.secretName)
	}
	if _, ok := args["bind-address"]; ok {
		t.Errorf("--bind-address = %q: convoy-api should listen on every address of the pod", args["bind-address"])
	}
	port := checkProbes(t, c, ":"+args["secure-port"], corev1.URISchemeHTTPS, "/livez", "/readyz")
	if _, ok := args["kubeconfig"]; ok {
		t.Error("--kubeconfig is set: in the cluster, convoy-api uses its ServiceAccount")
	}

	var svc corev1.Service
	objs.get(t, "Service", namespace, "convoy-api").decode(t, &svc)
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service convoy-api ports = %+v, want one", svc.Spec.Ports)
	}
	if tp := svc.Spec.Ports[0].TargetPort; tp.String() != port.Name && tp.IntValue() != int(port.ContainerPort) {
		t.Errorf("Service targetPort %s is not the container port %s/%d", tp.String(), port.Name, port.ContainerPort)
	}
	checkSelects(t, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, d)

	as := objs.get(t, "APIService", "", "v1alpha1.subresources.convoy.kumodo.io")
	var apiService struct {
		Spec struct {
			Group, Version        string
			InsecureSkipTLSVerify bool
			CABundle              []byte
			Service               struct {
				Name, Namespace string
				Port            int32
			}
		}
	}
	if err := yaml.Unmarshal(as.yaml, &apiService); err != nil {
		t.Fatal(err)
	}
	s := apiService.Spec
	if s.Group != "subresources.convoy.kumodo.io" || s.Version != "v1alpha1" {
		t.Errorf("APIService group/version = %s/%s", s.Group, s.Version)
	}
	if s.Service.Name != svc.Name || s.Service.Namespace != svc.Namespace || s.Service.Port != svc.Spec.Ports[0].Port {
		t.Errorf("APIService service = %+v, want %s/%s:%d", s.Service, svc.Namespace, svc.Name, svc.Spec.Ports[0].Port)
	}
	if s.InsecureSkipTLSVerify {
		t.Error("APIService skips TLS verification")
	}
	if got, want := as.annotations["cert-manager.io/inject-ca-from"], namespace+"/convoy-api-serving"; got != want {
		t.Errorf("APIService CA injection from %q, want %q", got, want)
	}

	var pdb policyv1.PodDisruptionBudget
	objs.get(t, "PodDisruptionBudget", namespace, "convoy-api").decode(t, &pdb)
	checkSelects(t, pdb.Spec.Selector, d)
}

// checkPod checks the pod template of d: its ServiceAccount, one container with image,
// and the restricted security settings. It returns the container.
func checkPod(t *testing.T, d *appsv1.Deployment, serviceAccount, image string) *corev1.Container {
	t.Helper()
	p := d.Spec.Template.Spec
	if p.ServiceAccountName != serviceAccount {
		t.Errorf("%s: serviceAccountName = %q, want %q", d.Name, p.ServiceAccountName, serviceAccount)
	}
	if len(p.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", d.Name, len(p.Containers))
	}
	c := &p.Containers[0]
	if c.Image != image {
		t.Errorf("%s: image = %q, want %q", d.Name, c.Image, image)
	}
	psc, sc := p.SecurityContext, c.SecurityContext
	switch {
	case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
		t.Errorf("%s: pod securityContext.runAsNonRoot is not true", d.Name)
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("%s: pod seccompProfile is not RuntimeDefault", d.Name)
	case sc == nil:
		t.Fatalf("%s: no container securityContext", d.Name)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: readOnlyRootFilesystem is not true", d.Name)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: allowPrivilegeEscalation is not false", d.Name)
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("%s: capabilities = %+v, want drop [ALL] and no add", d.Name, sc.Capabilities)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: resources = %+v, want cpu and memory requests and a memory limit", d.Name, c.Resources)
	}
	return c
}

// checkArgs parses the container's args with a flag set that mirrors the binary's (after
// expanding $(VAR) from the container's env as the kubelet does) and returns the values
// that the args set, by flag name.
func checkArgs(t *testing.T, bin string, defs *flag.FlagSet, d *appsv1.Deployment, c *corev1.Container) map[string]string {
	t.Helper()
	if len(c.Command) > 0 {
		t.Errorf("%s: command %v overrides the image's entrypoint", d.Name, c.Command)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = d.Namespace
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = ref.ReplaceAllStringFunc(a, func(m string) string {
			v, ok := env[m[2:len(m)-1]]
			if !ok {
				t.Errorf("%s: arg %q refers to %s, which the container's env does not define", d.Name, a, m)
			}
			return v
		})
	}
	fs := flag.NewFlagSet(bin, flag.ContinueOnError)
	var errBuf bytes.Buffer
	fs.SetOutput(&errBuf)
	defs.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%s: %s does not accept the args %q: %v", d.Name, bin, args, err)
	}
	if fs.NArg() > 0 {
		t.Errorf("%s: %s takes no arguments, got %q", d.Name, bin, fs.Args())
	}
	set := map[string]string{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = f.Value.String() })
	return set
}

// checkProbes checks that the liveness and readiness probes GET the given paths with
// scheme on the container port that addr (a --…-bind-address) listens on, and returns
// that port.
func checkProbes(t *testing.T, c *corev1.Container, addr string, scheme corev1.URIScheme, live, ready string) corev1.ContainerPort {
	t.Helper()
	_, p, ok := strings.Cut(addr, ":")
	portNum, err := strconv.Atoi(p)
	if !ok || err != nil {
		t.Fatalf("%s: bind address %q has no port", c.Name, addr)
	}
	var port *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].ContainerPort == int32(portNum) {
			port = &c.Ports[i]
		}
	}
	if port == nil {
		t.Fatalf("%s: no container port %d", c.Name, portNum)
	}
	for _, pr := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, live}, {"readiness", c.ReadinessProbe, ready}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", c.Name, pr.what)
			continue
		}
		g := pr.probe.HTTPGet
		s := g.Scheme
		if s == "" {
			s = corev1.URISchemeHTTP
		}
		if g.Path != pr.path || s != scheme || (g.Port.String() != port.Name && g.Port.IntValue() != portNum) {
			t.Errorf("%s: %s probe %s %s port %s, want %s %s port %d", c.Name, pr.what, s, g.Path, g.Port.String(), scheme, pr.path, portNum)
		}
	}
	return *port
}

// checkSelects checks that sel selects d's pods and that d's own selector does too.
func checkSelects(t *testing.T, sel *metav1.LabelSelector, d *appsv1.Deployment) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() || !s.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("selector %v does not select the pods of %s (labels %v): %v", sel, d.Name, d.Spec.Template.Labels, err)
	}
	own, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !own.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("%s: its selector does not match its own pods", d.Name)
	}
}

// secretFile returns the path at which container c of d sees key of Secret secret.
func secretFile(t *testing.T, d *appsv1.Deployment, c *corev1.Container, secret, key string) string {
	t.Helper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != secret {
			continue
		}
		file := key
		if len(v.Secret.Items) > 0 {
			file = ""
			for _, it := range v.Secret.Items {
				if it.Key == key {
					file = it.Path
				}
			}
			if file == "" {
				continue
			}
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name && m.SubPath == "" {
				return m.MountPath + "/" + file
			}
		}
	}
	t.Errorf("%s: container %s does not mount key %s of Secret %s", d.Name, c.Name, key, secret)
	return ""
}

type cert struct {
	secretName string
	dnsNames   []string
}

// certificate returns the cert-manager Certificate name of the install namespace.
func certificate(t *testing.T, objs objects, name string) cert {
	t.Helper()
	var c struct {
		Spec struct {
			SecretName string   `json:"secretName"`
			DNSNames   []string `json:"dnsNames"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(objs.get(t, "Certificate", namespace, name).yaml, &c); err != nil {
		t.Fatal(err)
	}
	return cert{secretName: c.Spec.SecretName, dnsNames: c.Spec.DNSNames}
}
