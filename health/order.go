package health

import "cmp"

// EntryPosition is what orders an inventory entry: its apply wave and its four keys.
type EntryPosition struct {
	Wave                         int32
	Group, Kind, Namespace, Name string
}

// CompareEntries orders inventory entries as the loop assesses them and /health lists
// them: by wave, then group, kind, namespace and name, each compared as a string. The
// order is total (the four keys are unique in an inventory). It returns -1, 0 or +1,
// as cmp.Compare does.
func CompareEntries(a, b EntryPosition) int {
	return cmp.Or(
		cmp.Compare(a.Wave, b.Wave),
		cmp.Compare(a.Group, b.Group),
		cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
	)
}
