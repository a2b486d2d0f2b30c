package library_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
	"github.com/kumodo/convoy-observer/health/library"
	"github.com/kumodo/convoy-observer/health/manifest/manifesttest"
)

var update = flag.Bool("update", false, "rewrite the generated table of docs/rule-library.md")

// gitopsEnginePrefix marks a case file that is one of gitops-engine's own fixtures,
// kept unchanged with their notice in the repository's testdata/gitops-engine-health.
const (
	gitopsEnginePrefix = "gitops-engine:"
	gitopsEngineDir    = "../../testdata/gitops-engine-health"
)

// libCase is one entry of testdata/cases.yaml.
type libCase struct {
	File        string `json:"file"`
	State       string `json:"state"`
	Message     string `json:"message"`
	Argo        string `json:"argo"`
	ArgoFixture string `json:"argoFixture"`
	Why         string `json:"why"`
}

func readCases(t *testing.T) []libCase {
	t.Helper()
	b, err := os.ReadFile("testdata/cases.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []libCase
	if err := yaml.UnmarshalStrict(b, &cases); err != nil {
		t.Fatalf("testdata/cases.yaml: %v", err)
	}
	return cases
}

// casePath is where the fixture of c is.
func casePath(t *testing.T, c libCase) string {
	t.Helper()
	if rest, ok := strings.CutPrefix(c.File, gitopsEnginePrefix); ok {
		return filepath.Join(gitopsEngineDir, rest)
	}
	return filepath.Join("testdata", c.File)
}

func libraryEvaluator(t *testing.T) (*health.Evaluator, []extv1alpha1.GlobalHealthRuleSet) {
	t.Helper()
	sets, err := library.RuleSets()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := health.NewEvaluator(sets, nil)
	if err != nil {
		t.Fatalf("the library does not compile: %v", err)
	}
	return ev, sets
}

// resources names the resource of each kind of the fixtures, as the controller-manager
// records it in an inventory entry (the resource field the rules match).
var resources = map[string]string{
	// Crossplane, Upbound, Config Connector, AWS controllers (wildcard rules)
	"DBInstance": "dbinstances", "Distribution": "distributions", "Provider": "providers", "Composition": "compositions",
	"ClusterStackInstall": "clusterstackinstalls", "Bucket": "buckets", "ResourceGroup": "resourcegroups",
	"ProviderConfig": "providerconfigs", "SQLInstance": "sqlinstances", "ConfigConnector": "configconnectors",
	"APIService": "apiservices", "ClusterIssuer": "clusterissuers", "Certificate": "certificates",
	"CronJob": "cronjobs", "CustomResourceDefinition": "customresourcedefinitions", "Gateway": "gateways",
	"GatewayClass": "gatewayclasses", "ListenerSet": "listenersets", "XListenerSet": "xlistenersets", "GRPCRoute": "grpcroutes",
	"Keycloak": "keycloaks", "IstioOperator": "istiooperators", "Kiali": "kialis", "OnePasswordItem": "onepassworditems", "SealedSecret": "sealedsecrets",
	"DeploymentConfig": "deploymentconfigs", "Route": "routes", "IngressController": "ingresscontrollers",
	"TLSRoute": "tlsroutes", "TCPRoute": "tcproutes", "UDPRoute": "udproutes", "BackendTLSPolicy": "backendtlspolicies",
	"GitRepository": "gitrepositories", "HelmRelease": "helmreleases", "HorizontalPodAutoscaler": "horizontalpodautoscalers",
	"HTTPRoute": "httproutes", "Ingress": "ingresses", "Issuer": "issuers", "Kustomization": "kustomizations",
	"Namespace": "namespaces", "PodDisruptionBudget": "poddisruptionbudgets", "Rollout": "rollouts",
	"ScaledObject": "scaledobjects", "ScaledJob": "scaledjobs", "Service": "services",
	"Pod": "pods", "StatefulSet": "statefulsets", "ReplicaSet": "replicasets", "ReplicationController": "replicationcontrollers", "Deployment": "deployments", "Job": "jobs",
	"Policy": "policies", "ConfigurationPolicy": "configurationpolicies", "CertificatePolicy": "certificatepolicies", "OperatorPolicy": "operatorpolicies",
	// GitOps Promoter
	"ArgoCDCommitStatus": "argocdcommitstatuses", "ChangeTransferPolicy": "changetransferpolicies",
	"ClusterScmProvider": "clusterscmproviders", "CommitStatus": "commitstatuses", "GitCommitStatus": "gitcommitstatuses",
	"PromotionStrategy": "promotionstrategies", "PullRequest": "pullrequests", "ScmProvider": "scmproviders",
	"TimedCommitStatus": "timedcommitstatuses", "WebRequestCommitStatus": "webrequestcommitstatuses",
	"Cluster": "clusters", "Machine": "machines", "MachineDeployment": "machinedeployments", "MachineSet": "machinesets", "MachinePool": "machinepools", "MachineHealthCheck": "machinehealthchecks", "ClusterResourceSet": "clusterresourcesets", "KubeadmControlPlane": "kubeadmcontrolplanes", "AWSManagedControlPlane": "awsmanagedcontrolplanes",
	// Argo Rollouts, Argo CD, Argo Workflows, Argo Events
	"AnalysisRun": "analysisruns", "Experiment": "experiments", "ApplicationSet": "applicationsets",
	"Workflow": "workflows", "CronWorkflow": "cronworkflows", "EventBus": "eventbus",
	"ResourceBinding": "resourcebindings", "ClusterResourceBinding": "clusterresourcebindings",
	"KeptnAppVersion": "keptnappversions", "KeptnWorkloadVersion": "keptnworkloadversions", "KeptnTask": "keptntasks", "KeptnEvaluation": "keptnevaluations", "KeptnMetric": "keptnmetrics", "Analysis": "analyses",
	"MariaDB": "mariadbs", "User": "users", "Backup": "backups", "SqlJob": "sqljobs",
	"Grafana": "grafanas", "GrafanaDashboard": "grafanadashboards", "GrafanaFolder": "grafanafolders", "GrafanaDatasource": "grafanadatasources", "GrafanaInstance": "grafanainstances", "GrafanaOrg": "grafanaorgs",
	// external-secrets
	"ExternalSecret": "externalsecrets", "ClusterExternalSecret": "clusterexternalsecrets", "SecretStore": "secretstores",
	"ClusterSecretStore": "clustersecretstores", "PushSecret": "pushsecrets", "ClusterPushSecret": "clusterpushsecrets",
	// Humio
	"HumioCluster": "humioclusters", "HumioRepository": "humiorepositories", "HumioView": "humioviews",
	"HumioParser": "humioparsers", "HumioIngestToken": "humioingesttokens", "HumioAlert": "humioalerts",
	"Tenant":          "tenants",
	"ServiceInstance": "serviceinstances", "ServiceBinding": "servicebindings",
	"NodeClaim": "nodeclaims", "NodePool": "nodepools", "EC2NodeClass": "ec2nodeclasses",
	"AnsibleJob":    "ansiblejobs",
	"Subscription":  "subscriptions",
	"Elasticsearch": "elasticsearches", "Kibana": "kibanas", "Beat": "beats",
	"CephCluster": "cephclusters", "CephBlockPool": "cephblockpools", "CephObjectStore": "cephobjectstores",
	"SparkApplication":     "sparkapplications",
	"DNSSDServiceInstance": "dnssd-service-instances",
	"FlinkDeployment":      "flinkdeployments",
	"TridentBackendConfig": "tridentbackendconfigs", "TridentOrchestrator": "tridentorchestrators",
	"VolumeSnapshot": "volumesnapshots", "VolumeSnapshotContent": "volumesnapshotcontents",
	"PerconaXtraDBCluster": "perconaxtradbclusters", "PerconaServerMongoDB": "perconaservermongodbs",
	"AtlasSchema": "atlasschemas", "AtlasMigration": "atlasmigrations",
	"Alert":           "alerts",
	"ScheduledBackup": "scheduledbackups", "Pooler": "poolers",
	"VMCluster": "vmclusters", "VMAgent": "vmagents", "VMAlert": "vmalerts",
	"OpenTelemetryCollector":         "opentelemetrycollectors",
	"NodeNetworkConfigurationPolicy": "nodenetworkconfigurationpolicies",
	"Stack":                          "stacks",
	"Function":                       "functions",
	"Iamrole":                        "iamroles",
	"SpinApp":                        "spinapps",
	"Shoot":                          "shoots",
	"ClickHouseInstallation":         "clickhouseinstallations",
	"postgresql":                     "postgresqls",
	"SpotDeployment":                 "spotdeployments",
	"SolrCloud":                      "solrclouds",
	"StorageCluster":                 "storageclusters",
	"ObjectBucketClaim":              "objectbucketclaims",
	"Prometheus":                     "prometheuses", "Alertmanager": "alertmanagers", "ServiceMonitor": "servicemonitors",
	"Jaeger":           "jaegers",
	"DatadogMetric":    "datadogmetrics",
	"Integration":      "integrations",
	"ZookeeperCluster": "zookeeperclusters",
	"ClusterPolicy":    "clusterpolicies",
	// Trident protect (astra.netapp.io)
	"Application": "applications", "AppVault": "appvaults", "Snapshot": "snapshots",
	"ExecHooksRun": "exechooksruns",
	// gloo
	"VirtualService": "virtualservices", "RouteTable": "routetables", "Upstream": "upstreams", "Proxy": "proxies",
	"AuthConfig": "authconfigs",
	// 3scale
	"APIManager": "apimanagers", "Product": "products", "ApplicationAuth": "applicationauths",
	"DeveloperAccount": "developeraccounts", "DeveloperUser": "developerusers", "ProxyConfigPromote": "proxyconfigpromotes",
	// Numaflow, Numaplane
	"Pipeline": "pipelines", "Vertex": "vertices", "MonoVertex": "monovertices",
	"PipelineRollout": "pipelinerollouts",
	// Strimzi
	"Kafka": "kafkas", "KafkaBridge": "kafkabridges", "KafkaConnect": "kafkaconnects", "KafkaConnector": "kafkaconnectors",
	"KafkaTopic": "kafkatopics", "KafkaUser": "kafkausers", "KafkaMirrorMaker2": "kafkamirrormaker2s", "KafkaMirrorMaker": "kafkamirrormakers",
	"KafkaNodePool": "kafkanodepools", "KafkaRebalance": "kafkarebalances",
	// Confluent for Kubernetes
	"Zookeeper": "zookeepers", "Connect": "connects", "ControlCenter": "controlcenters", "KsqlDB": "ksqldbs",
	"SchemaRegistry": "schemaregistries", "Connector": "connectors",
	// Contour
	"HTTPProxy": "httpproxies", "ExtensionService": "extensionservices",
	// Airlock Microgateway, GKE managed certificates, Koperator
	"AccessControlPolicy": "accesscontrolpolicies", "ContentSecurityPolicy": "contentsecuritypolicies", "CustomResponsePolicy": "customresponsepolicies",
	"RateLimitPolicy": "ratelimitpolicies", "ICAPPolicy": "icappolicies", "EnvoyExtensionPolicy": "envoyextensionpolicies", "DenyRules": "denyrules",
	"ManagedCertificate": "managedcertificates", "KafkaCluster": "kafkaclusters",
	// rabbitmq
	"RabbitmqCluster": "rabbitmqclusters", "Queue": "queues", "Exchange": "exchanges", "Vhost": "vhosts",
	// OpenKruise
	"CloneSet": "clonesets", "DaemonSet": "daemonsets", "BroadcastJob": "broadcastjobs",
	"AdvancedCronJob": "advancedcronjobs", "GameServer": "gameservers", "GameServerSet": "gameserversets",
	// KServe
	"InferenceService": "inferenceservices",
	// flagger
	"Canary": "canaries",
	// kubevirt
	"VirtualMachine": "virtualmachines", "VirtualMachineInstance": "virtualmachineinstances", "VirtualMachineInstanceMigration": "virtualmachineinstancemigrations", "VirtualMachinePool": "virtualmachinepools",
	// kubevirt-cdi
	"DataVolume": "datavolumes",
	// knative-operator
	"KnativeServing": "knativeservings", "KnativeEventing": "knativeeventings",
	// knative-serving
	"Configuration": "configurations", "Revision": "revisions", "DomainMapping": "domainmappings",
	// knative-eventing
	"Broker": "brokers", "Trigger": "triggers", "PingSource": "pingsources", "ApiServerSource": "apiserversources", "InMemoryChannel": "inmemorychannels", "Sequence": "sequences",
	// tekton-pipelines
	"PipelineRun": "pipelineruns", "TaskRun": "taskruns", "CustomRun": "customruns",
}

// resource is the plural lowercase resource of the object's kind, as the inventory
// records it; "" for a kind the table lacks (the test then fails on the verdict).
func resource(obj *unstructured.Unstructured) string { return resources[obj.GetKind()] }

type verdict struct {
	state   v1alpha1.HealthState
	result  health.Result
	degrade v1alpha1.HealthState // the state once a 5m deadline has passed
}

func evaluate(ev *health.Evaluator, obj *unstructured.Unstructured) verdict {
	r := ev.Evaluate(obj.GetAPIVersion(), resource(obj), obj.Object)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	state, _ := health.DeriveState(r, nil, nil, now)
	anchor := now.Add(-10 * time.Minute)
	deadline := 5 * time.Minute
	late, _ := health.DeriveState(r, &anchor, &deadline, now)
	return verdict{state: state, result: r, degrade: late}
}

// TestRuleSets checks the shape of the library: one labelled GlobalHealthRuleSet per
// file, named after its file, all compiling together with convoy-defaults, and no two
// rules of the library (or of convoy-defaults) for the same apiVersion and resource, so
// the order of the sets never decides.
func TestRuleSets(t *testing.T) {
	t.Parallel()
	sets, err := library.RuleSets()
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != len(library.FileNames()) || len(sets) == 0 {
		t.Fatalf("%d sets from %d files", len(sets), len(library.FileNames()))
	}
	defaults, _ := manifesttest.RuleSets(t, "../convoy-defaults.yaml")
	if _, err := health.NewEvaluator(append(slices.Clone(sets), defaults...), nil); err != nil {
		t.Fatalf("library + convoy-defaults do not compile: %v", err)
	}
	// The companion sets add conditions to convoy-defaults' rules on purpose: every rule
	// that applies must pass, so only their messages depend on the order.
	// They are named companion-STEM, to sort before convoy-defaults (rule order is by
	// name), so that their more precise messages speak first.
	companions := map[string]bool{"companion-workloads": true, "companion-deletion": true}
	owner := map[string]string{}
	for _, set := range append(slices.Clone(defaults), sets...) {
		for i, r := range set.Spec.Rules {
			if r.APIVersion == "*" {
				// Restricted by its leading apiVersion term (legacy-apis, deletion):
				// TestCases and TestDeletionCoversLibrary check what it judges.
				continue
			}
			for _, res := range r.Resources {
				k := r.APIVersion + " " + res
				if prev, dup := owner[k]; dup && prev != set.Name && !(companions[set.Name] && prev == "convoy-defaults") {
					t.Errorf("%s: rule %d of %s and a rule of %s both judge it", k, i, set.Name, prev)
				}
				if _, dup := owner[k]; !dup {
					owner[k] = set.Name
				}
			}
		}
	}
	for i, name := range library.FileNames() {
		s := sets[i]
		stem := strings.TrimSuffix(name, ".yaml")
		if want := "library-" + stem; s.Name != want && !(companions[s.Name] && s.Name == "companion-"+stem) {
			t.Errorf("%s: name %q, want %s", name, s.Name, want)
		}
		if s.Labels[library.LabelLibrary] != "true" || s.Labels[library.LabelSet] != stem {
			t.Errorf("%s: labels %v, want %s=true and %s=%s", name, s.Labels, library.LabelLibrary, library.LabelSet, stem)
		}
		for j, r := range s.Spec.Rules {
			if r.MessageExpression == "" {
				t.Errorf("%s rule %d has no messageExpression", s.Name, j)
			}
		}
	}
}

// TestCases evaluates every fixture of testdata/cases.yaml and checks the state and
// message, that a failure turns Degraded once a deadline has passed, that every fixture
// file is a case, and that every rule of the library decides at least one failing case
// and passes at least one other.
func TestCases(t *testing.T) {
	t.Parallel()
	ev, sets := libraryEvaluator(t)
	cases := readCases(t)
	failed := map[string]bool{}             // "set index" of rules that decided a failure
	var passed []*unstructured.Unstructured // objects that passed
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.File] {
			t.Errorf("%s: listed twice", c.File)
		}
		seen[c.File] = true
		obj := manifesttest.Object(t, casePath(t, c))
		v := evaluate(ev, obj)
		if string(v.state) != c.State || v.result.Message != c.Message {
			t.Errorf("%s: got %s %q, want %s %q", c.File, v.state, v.result.Message, c.State, c.Message)
		}
		switch v.result.Outcome {
		case health.Fail:
			failed[fmt.Sprintf("%s %d", v.result.RuleSet, v.result.RuleIndex)] = true
			if v.degrade != v1alpha1.StateDegraded {
				t.Errorf("%s: %s after the deadline, want Degraded", c.File, v.degrade)
			}
		case health.Pass:
			passed = append(passed, obj)
		default:
			t.Errorf("%s: evaluation error: %s", c.File, v.result.Message)
		}
		if c.Argo == "" || c.ArgoFixture == "" {
			t.Errorf("%s: no Argo CD verdict", c.File)
		}
		if c.Argo != c.State && !(c.Argo == "Degraded" && c.State == "Progressing") && c.Why == "" {
			t.Errorf("%s: differs from Argo CD (%s) without saying why", c.File, c.Argo)
		}
	}
	err := filepath.WalkDir("testdata", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == filepath.Join("testdata", "cases.yaml") || p == filepath.Join("testdata", "README.md") || p == filepath.FromSlash(healthTestFile) {
			return err
		}
		rel, _ := filepath.Rel("testdata", p)
		if !seen[filepath.ToSlash(rel)] {
			t.Errorf("%s is not in testdata/cases.yaml", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		for i, r := range s.Spec.Rules {
			// A rule for another served version of the same kind, with the very same
			// expressions, is covered by the tests of its twin.
			twins := []int{i}
			for j, o := range s.Spec.Rules {
				if j != i && o.RuleExpression == r.RuleExpression && o.MessageExpression == r.MessageExpression {
					twins = append(twins, j)
				}
			}
			decides := false
			for _, j := range twins {
				decides = decides || failed[fmt.Sprintf("%s/%s %d", health.KindGlobalHealthRuleSet, s.Name, j)]
			}
			if !decides {
				t.Errorf("rule %d of %s (%s %v) decides no failing case", i, s.Name, r.APIVersion, r.Resources)
			}
			passes := false
			for _, j := range twins {
				for _, obj := range passed {
					passes = passes || health.RuleMatches(s.Spec.Rules[j].APIVersion, s.Spec.Rules[j].Resources, obj.GetAPIVersion(), resource(obj))
				}
			}
			if !passes {
				t.Errorf("rule %d of %s (%s %v) passes no case", i, s.Name, r.APIVersion, r.Resources)
			}
		}
	}
}

// TestSizesFarBelowLimits: every shipped rule set (the library, generic.yaml,
// convoy-defaults) keeps a third of the compile size limits free, so a user who extends
// one still fits: each expression at most two thirds of health.MaxExpressionNodes (the
// largest has 583 nodes), each set's squared sizes at most two thirds of
// health.MaxRuleSetSquaredNodes (gateway-api sums to 1,767,868).
func TestSizesFarBelowLimits(t *testing.T) {
	t.Parallel()
	sets, err := library.RuleSets()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"../generic.yaml", "../convoy-defaults.yaml"} {
		g, _ := manifesttest.RuleSets(t, file)
		sets = append(sets, g...)
	}
	for _, set := range sets {
		squared := 0
		for i, r := range set.Spec.Rules {
			for _, expr := range []string{r.RuleExpression, r.MessageExpression} {
				if expr == "" {
					continue
				}
				n, err := health.ExpressionNodes(expr)
				if err != nil {
					t.Fatalf("%s rule %d: %v", set.Name, i, err)
				}
				if n > health.MaxExpressionNodes*2/3 {
					t.Errorf("%s rule %d: %d nodes, want at most %d (two thirds of the limit)", set.Name, i, n, health.MaxExpressionNodes*2/3)
				}
				squared += n * n
			}
		}
		if squared > health.MaxRuleSetSquaredNodes*2/3 {
			t.Errorf("%s: %d squared nodes, want at most %d (two thirds of the limit)", set.Name, squared, health.MaxRuleSetSquaredNodes*2/3)
		}
	}
}
