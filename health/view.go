package health

import "maps"

// What rules never see. The health loop caches target objects without
// metadata.managedFields and the kubectl.kubernetes.io/last-applied-configuration
// annotation (bookkeeping of how the object was written, often larger than the object),
// while a direct read, /health explanations and convoyctl health eval get them whole.
// Evaluate removes both from the object it hands the rules, so a rule's verdict never
// depends on how the object was read (docs/rules.md, "What object holds").

// LastAppliedAnnotation is kubectl's copy of the object as last applied; rules never see
// it.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// ruleView returns object as rules see it: without metadata.managedFields and without
// the last-applied annotation (an annotations map left empty is removed, as the loop's
// cache does). object is never modified: when something must go, the maps on the way
// are copied (shallowly); otherwise object itself is returned. A nil object is {}.
func ruleView(object map[string]any) map[string]any {
	if object == nil {
		return emptyObject
	}
	md, ok := object["metadata"].(map[string]any)
	if !ok {
		return object
	}
	_, hasMF := md["managedFields"]
	ann, _ := md["annotations"].(map[string]any)
	_, hasLA := ann[LastAppliedAnnotation]
	if !hasMF && !hasLA {
		return object
	}
	// maps.Clone copies a map's table as it is, much faster than inserting its entries
	// one by one.
	view := maps.Clone(object)
	mdView := maps.Clone(md)
	delete(mdView, "managedFields")
	if hasLA {
		if len(ann) == 1 {
			delete(mdView, "annotations")
		} else {
			annView := maps.Clone(ann)
			delete(annView, LastAppliedAnnotation)
			mdView["annotations"] = annView
		}
	}
	view["metadata"] = mdView
	return view
}
