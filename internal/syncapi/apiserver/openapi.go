package apiserver

import (
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kumodo/convoy-observer/internal/syncapi"
)

// GetOpenAPIDefinitions returns the OpenAPI definitions of every type that convoy-api's
// routes name: the meta types (generated in k8s.io/apiextensions-apiserver, which
// covers all of k8s.io/apimachinery's) and the bodies of /sync and /health, described
// here from the Go types of package subresources (docs/design.md, "Sync and health endpoints").
func GetOpenAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := generatedopenapi.GetOpenAPIDefinitions(ref)
	timeRef := metav1.Time{}.OpenAPIModelName()
	entry, hook := syncapi.HealthEntry{}.OpenAPIModelName(), syncapi.HealthHook{}.OpenAPIModelName()
	defs[syncapi.SyncResponse{}.OpenAPIModelName()] = object(
		"The answer of POST …/releases/{name}/sync: the value written to the annotation convoy.kumodo.io/sync-requested-at.",
		props{
			"release":         str(`"namespace/name" of the Release.`),
			"syncRequestedAt": str("The annotation's value: RFC 3339 with nine digits of nanoseconds, UTC."),
		}, nil)
	defs[syncapi.HealthResult{}.OpenAPIModelName()] = object(
		"The answer of GET …/releases/{name}/health: the HealthResult, built from the ReleaseInventory only.",
		props{
			"release":       str(`"namespace/name" of the Release.`),
			"renderCurrent": boolean("True when every entry's renderRef equals the Release's status.lastAttempted.renderRef."),
			"summary": object("Entries by state; an entry not assessed yet counts as unknown.", props{
				"total": integer("All entries."), "healthy": integer("Healthy entries."), "progressing": integer("Progressing entries."),
				"degraded": integer("Degraded entries."), "unknown": integer("Unknown or not yet assessed entries."),
			}, nil).Schema,
			"entries":        array("The entries that the controller-manager records, by wave, group, kind, namespace, name.", refTo(ref(entry))),
			"hooks":          array("The hooks that the controller-manager records, by name.", refTo(ref(hook))),
			"decidedByError": str(`Why some entries that are not Healthy have no decidedBy (rules that do not compile, an unreadable target, too many entries), or the entries no rulesApplied; "" when none.`),
		}, []string{entry, hook})
	defs[entry] = object("One inventory entry; every field is always present.", props{
		"group": str(`API group; "" for the core group.`), "version": str("Version applied."), "kind": str("Kind."),
		"namespace": str(`Namespace; "" for a cluster-scoped object.`), "name": str("Name."),
		"wave": integer("Apply wave."), "state": str(`Healthy, Progressing, Degraded, Unknown, or "" before the first assessment.`),
		"message": str("Why the object is not Healthy."), "firstUnhealthy": nullable(refTo(ref(timeRef)), "When the object first failed since it last passed; null when unset."),
		"renderRef": str("The render that applied the object."), "assessedRenderRef": str("The entry's renderRef at the last assessment."),
		"decidedBy": nullable(object("", props{
			"kind": str("GlobalHealthRuleSet or HealthRuleSet."), "namespace": str(`Namespace of a HealthRuleSet; "" for a global set.`),
			"name": str("Name of the rule set."), "rule": integer("0-based index of the rule in spec.rules."),
			"cause": str("RuleFailed (Progressing), DeadlinePassed (failing past the deadline: Degraded) or EvaluationError (Unknown)."),
		}, nil).Schema, "The rule that decides a non-Healthy entry now, re-evaluated on demand; null when none."),
		"rulesApplied": nullable(integer("The number of selected rules whose apiVersion and resources match the entry; 0: no rule judges it."),
			"The number of selected rules that match the entry now (0: no rule judges it); null when the rules cannot be read or do not compile (see decidedByError)."),
	}, []string{timeRef})
	defs[hook] = object("One lifecycle hook; every field is always present.", props{
		"name": str("Name of the hook."), "workloadKind": str("Job or Pod."), "namespace": str("Namespace of the workload."),
		"workloadName": str("Name of the workload."), "createdAt": nullable(refTo(ref(timeRef)), "When the hook was (re-)armed; null when unset."),
		"timeout": str(`The recorded timeout, or "" (10m).`), "state": str(`Running, Succeeded, Failed, or "" before the first poll.`),
		"message": str("Why the hook failed."), "finishedAt": nullable(refTo(ref(timeRef)), "When the state turned terminal; null when unset."),
	}, []string{timeRef})
	defs[Release{}.OpenAPIModelName()] = object(
		"The parent of the subresources sync and health in discovery, named like the Release of convoy.kumodo.io; it is never served.",
		props{"apiVersion": str("APIVersion of the object."), "kind": str("Kind of the object.")}, nil)
	return defs
}

type props map[string]spec.Schema

func object(desc string, p props, deps []string) common.OpenAPIDefinition {
	s := spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"object"}, Properties: p}}
	for name := range p {
		s.Required = append(s.Required, name)
	}
	return common.OpenAPIDefinition{Schema: s, Dependencies: deps}
}

func typed(t, desc string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{t}, Description: desc}}
}

func str(desc string) spec.Schema     { return typed("string", desc) }
func boolean(desc string) spec.Schema { return typed("boolean", desc) }

func integer(desc string) spec.Schema {
	s := typed("integer", desc)
	s.Format = "int32"
	return s
}

func array(desc string, items spec.Schema) spec.Schema {
	s := typed("array", desc)
	s.Items = &spec.SchemaOrArray{Schema: &items}
	return s
}

func nullable(s spec.Schema, desc string) spec.Schema {
	s.Description, s.Nullable = desc, true
	return s
}

// refTo is a schema that refers to r.
func refTo(r spec.Ref) spec.Schema { return spec.Schema{SchemaProps: spec.SchemaProps{Ref: r}} }
