package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kumodo/convoy-observer/health/lint"
)

// newHealthLintCommand builds `health lint FILE|DIR… [--schema F|DIR…] [--kubeconfig F]`.
func newHealthLintCommand(env *cliEnv) *cobra.Command {
	var schemas []string
	cmd := &cobra.Command{
		Use:   "lint FILE|DIR… [--schema FILE|DIR…] [--kubeconfig F]",
		Short: "Check health rule sets: compile them and type-check each rule against its resources' schema",
		Long: `Check the GlobalHealthRuleSets and HealthRuleSets of the files (YAML or JSON, one or more
documents, or a List) and print one line per finding. A directory stands for what
kubectl apply -k installs when it holds a kustomization (kustomize build), else for its
.yaml, .yml and .json files:

  error: GlobalHealthRuleSet/NAME rule I FIELD: MESSAGE

A line starts with its severity: "error" (the rule does not work as written), "warning"
(it works but never reads what it selects) or "note" (what was not checked).

Each rule must have what admission requires (apiVersion, resources, ruleExpression) and
compile as the health loop compiles it. Then each expression is type-checked with
object declared as the type of each resource the rule names, which finds a field that
does not exist (object.status.readyReplica), an operation on mismatched types
(object.spec.replicas == 'three'), has() on a field whose parent may be absent and is
not tested first, and a rule whose apiVersion and resource match nothing known.

A field that a resource's schema does not declare is absent on its objects: an optional
selection of it (object.?status.?conditions, or a selection chained after an optional
one) yields none and has() of it is false, so both are accepted; a warning says so when
no resource the rule is checked against declares the field (a misspelt field, most
likely). A plain selection of it (object.status.conditions) fails on every such object
and is an error. An index with a string (object['spec'], object[?'status']) and
'f' in x on an object of the schema are read as the selections x.f, x.?f and has(x.f).

A wildcard rule (apiVersion "*", "GROUP/*", "*/VERSION", "*.SUFFIX/VERSION" or
"*.SUFFIX/*", or resources holding "*") is type-checked against every resource it matches
among those the schema sources know (the built-in kinds, the --schema CRDs, the
cluster's served resources), and a note line names them: the resources it meets that no
source knows are not type-checked. A rule meant for kinds of which some lack a field
reads it with an optional selection or has() (object.?status.?conditions.orValue([])):
it is not reported for the kinds that lack the field as long as one of them declares it.
A "*" anywhere else (such as "apps*/v1" or "deploy*") matches nothing and is an error.

An apiVersion or resource that no API server can serve matches nothing, whatever the
pattern, and is an error: a resource that is not a plural lowercase name (the kind
Deployment, deployments/status), a group (or the SUFFIX of "*.SUFFIX") that is not a
lowercase DNS subdomain (Apps/v1), a version that is not a DNS-1035 label (apps/V1), "/",
an empty group or version, and core/v1 (the core group's apiVersion is v1). A resource
that a group the schema sources know has in none of the versions the rule matches is an
error, with a pattern too (deployment under "apps/*"; deployments is one); under a
wildcard group a note says when its plural is known (deployment under "*").

The schemas of the built-in kinds come from the Kubernetes API types compiled into
this binary (no cluster needed), the aggregator's APIService and CustomResourceDefinition
included. The schemas of other resources (CRDs) come from --schema, files or directories
of CustomResourceDefinitions (each served version, as the API server builds it), then,
with --kubeconfig, from the cluster's /openapi/v3 and its discovery. A rule of a CRD that
none of them knows is not type-checked, and a note line says so; so is a version that the
CustomResourceDefinition given with --schema does not serve (an older install may).

Exit status: 0 when there is no error (warnings and notes allowed), 1 when a rule set
has an error finding, 2 on a usage error or unreadable input.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(fmt.Errorf("%s needs one or more rule set files", cmd.CommandPath()))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			global, local, err := readRuleSetArgs(args)
			if err != nil {
				return inputError(err)
			}
			src := lint.Sources{&lint.Builtin{}}
			if len(schemas) > 0 {
				crds, err := readCRDs(schemas)
				if err != nil {
					return inputError(err)
				}
				fromFiles, err := lint.NewCRDs(crds)
				if err != nil {
					return inputError(fmt.Errorf("reading --schema: %w", err))
				}
				src = append(src, fromFiles)
			}
			if env.conn.given(cmd) {
				cs, err := newClusterSchemas(env.conn)
				if err != nil {
					return inputError(err)
				}
				src = append(src, cs)
			}
			findings := lint.Lint(global, local, src)
			errs := 0
			for _, f := range findings {
				fmt.Fprintln(env.stdout, sanitizeLines(f.String()))
				if f.Severity == lint.Error {
					errs++
				}
			}
			if errs > 0 {
				return &exitError{code: exitCompileError, err: fmt.Errorf("%d errors in %d rule sets", errs, len(global)+len(local))}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&schemas, "schema", nil, "file or directory of CustomResourceDefinitions whose schemas type-check the rules of their resources (repeatable)")
	return cmd
}

// clusterSchemas is the SchemaSource of health lint --kubeconfig, asked after lint.Builtin
// and --schema: the cluster's discovery says whether a resource is served and which kind
// it holds, its /openapi/v3 gives the schema.
type clusterSchemas struct {
	mapper    meta.RESTMapper
	resolver  resolver.SchemaResolver
	resources []schema.GroupVersionResource
}

func newClusterSchemas(conn *connection) (*clusterSchemas, error) {
	cfg, err := conn.restConfig()
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(dc)
	groups, err := restmapper.GetAPIGroupResources(cached)
	if err != nil {
		return nil, fmt.Errorf("discovering the cluster's resources: %w", err)
	}
	var served []schema.GroupVersionResource
	for _, g := range groups {
		for version, resources := range g.VersionedResources {
			for _, r := range resources {
				if !strings.Contains(r.Name, "/") { // not a subresource
					served = append(served, schema.GroupVersionResource{Group: g.Group.Name, Version: version, Resource: r.Name})
				}
			}
		}
	}
	return &clusterSchemas{mapper: restmapper.NewDiscoveryRESTMapper(groups), resolver: &resolver.ClientDiscoveryResolver{Discovery: cached},
		resources: served}, nil
}

// Resources lists the resources the cluster serves, for wildcard rules (lint.Enumerator).
func (c *clusterSchemas) Resources() []schema.GroupVersionResource { return c.resources }

// Lookup asks the cluster.
func (c *clusterSchemas) Lookup(gv schema.GroupVersion, resource string) (*spec.Schema, schema.GroupVersionKind, lint.Resolution, error) {
	gvk, err := c.mapper.KindFor(gv.WithResource(resource))
	if meta.IsNoMatchError(err) {
		return nil, schema.GroupVersionKind{}, lint.UnknownResource, nil
	}
	if err != nil {
		return nil, schema.GroupVersionKind{}, lint.NoSchema, err
	}
	s, err := c.resolver.ResolveSchema(gvk)
	if errors.Is(err, resolver.ErrSchemaNotFound) {
		return nil, gvk, lint.NoSchema, nil
	}
	if err != nil {
		return nil, gvk, lint.NoSchema, fmt.Errorf("reading the schema of %s: %w", gvk, err)
	}
	return s, gvk, lint.Found, nil
}
