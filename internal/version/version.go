// Package version reports what a binary of convoy-observer was built from, read from the
// build information the Go toolchain embeds (runtime/debug.ReadBuildInfo):
//
//   - the module version: the tag for `go install …@v1.2.3`, a pseudo-version
//     (v0.0.0-20261201150405-abcdef123456, "+dirty" for uncommitted changes) for a build
//     inside a git checkout, "(devel)" when neither is known;
//   - the commit (vcs.revision) and its date (vcs.time, RFC 3339, UTC), stamped by
//     `go build` in a git checkout; a build from the module cache (`go install …@VERSION`)
//     has none, and the commit is then read from a pseudo-version when there is one;
//   - the Go version and the platform.
//
// `make images` also sets the version, commit and date at link time (-ldflags -X of
// linkVersion, linkCommit, linkDate), which win over the build information: a build in a
// git worktree or from a source archive has no vcs.* settings.
//
// Nothing here depends on the build machine or the time of the build, so the same commit
// gives the same binary (the container images rely on it).
package version

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
)

// Info is what String prints.
type Info struct {
	// Version is the main module's version ("(devel)" when unknown).
	Version string
	// Commit is the full git revision, "" when unknown.
	Commit string
	// Date is the commit's time (RFC 3339), "" when unknown.
	Date string
	// Modified is true when the work tree had uncommitted changes.
	Modified bool
	// GoVersion and Platform ("linux/amd64") of the build.
	GoVersion, Platform string
}

// Set with -ldflags "-X github.com/kumodo/convoy-observer/internal/version.linkCommit=…".
var linkVersion, linkCommit, linkDate string

// pseudo matches the revision at the end of a pseudo-version (v0.0.0-20261201150405-abcdef123456).
var pseudo = regexp.MustCompile(`-\d{14}-([0-9a-f]{12})(\+dirty)?$`)

// Get reads the build information of the running binary.
func Get() Info {
	i := Info{Version: "(devel)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		i = fromBuildInfo(bi, i)
	}
	return withLinked(i, linkVersion, linkCommit, linkDate)
}

// withLinked overrides i with the values set at link time that are not empty.
func withLinked(i Info, version, commit, date string) Info {
	if version != "" {
		i.Version = version
	}
	if commit != "" {
		i.Commit, i.Modified = commit, false
	}
	if date != "" {
		i.Date = date
	}
	return i
}

func fromBuildInfo(bi *debug.BuildInfo, i Info) Info {
	if v := bi.Main.Version; v != "" {
		i.Version = v
	}
	if bi.GoVersion != "" {
		i.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Commit = s.Value
		case "vcs.time":
			i.Date = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	if i.Commit == "" {
		if m := pseudo.FindStringSubmatch(i.Version); m != nil {
			i.Commit = m[1]
		}
	}
	return i
}

// String is one line: "NAME VERSION (commit C, date D, go1.26.0 linux/amd64)", with
// "unknown" for what the build information does not hold and ", modified" after a
// commit built with uncommitted changes.
func (i Info) String() string {
	commit, date := i.Commit, i.Date
	if commit == "" {
		commit = "unknown"
	}
	if i.Modified {
		commit += ", modified"
	}
	if date == "" {
		date = "unknown"
	}
	return fmt.Sprintf("%s (commit %s, date %s, %s %s)", i.Version, commit, date, i.GoVersion, i.Platform)
}

// Line is the --version output of the binary name: "name " + Get().String() + "\n".
func Line(name string) string { return name + " " + Get().String() + "\n" }
