package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	base := Info{Version: "(devel)", GoVersion: "go1.26.0", Platform: "linux/amd64"}
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{{
		name: "checkout build",
		bi: debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201150405-0123456789ab+dirty"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-01T15:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		}},
		want: "v0.0.0-20261201150405-0123456789ab+dirty (commit 0123456789abcdef0123456789abcdef01234567, modified, date 2026-12-01T15:04:05Z, go1.26.0 linux/amd64)",
	}, {
		name: "go install of a tag",
		bi:   debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}},
		want: "v0.4.0 (commit unknown, date unknown, go1.26.0 linux/amd64)",
	}, {
		name: "go install of a pseudo-version",
		bi:   debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201150405-0123456789ab"}},
		want: "v0.0.0-20261201150405-0123456789ab (commit 0123456789ab, date unknown, go1.26.0 linux/amd64)",
	}, {
		name: "nothing known",
		bi:   debug.BuildInfo{},
		want: "(devel) (commit unknown, date unknown, go1.26.0 linux/amd64)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuildInfo(&tc.bi, base).String(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestWithLinked(t *testing.T) {
	i := Info{Version: "(devel)", Modified: true, GoVersion: "go1.26.0", Platform: "linux/arm64"}
	got := withLinked(i, "v1.0.0", "0123456789abcdef0123456789abcdef01234567", "2026-12-01T15:04:05Z").String()
	if want := "v1.0.0 (commit 0123456789abcdef0123456789abcdef01234567, date 2026-12-01T15:04:05Z, go1.26.0 linux/arm64)"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := withLinked(i, "", "", ""); got != i {
		t.Errorf("nothing linked changed %+v to %+v", i, got)
	}
}

func TestLine(t *testing.T) {
	l := Line("convoyctl")
	if !strings.HasPrefix(l, "convoyctl ") || !strings.HasSuffix(l, "\n") || strings.Count(l, "\n") != 1 {
		t.Errorf("Line = %q, want one line starting with the name", l)
	}
}
