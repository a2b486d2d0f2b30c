package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Components are the binaries that a local cluster runs, all found in one directory.
var Components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// StagesFile is the name of the kwok stages file next to the binaries.
const StagesFile = "kwok-stages.yaml"

// FindAssets returns the directory of the control-plane binaries: KUBEBUILDER_ASSETS
// when it is set, else what `hack/controlplane.sh path` prints (the script builds the
// missing binaries first, which takes minutes on a cold cache). It then checks that the
// directory holds every component and the kwok stages file: a missing one is an error
// naming it, never a reason to skip.
func FindAssets(repoRoot string) (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		var stdout, stderr bytes.Buffer
		script := filepath.Join(repoRoot, "hack", "controlplane.sh")
		cmd := exec.Command("bash", append([]string{script, "path"}, Components...)...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s path: %w: %s", script, err, strings.TrimSpace(stderr.String()))
		}
		dir = strings.TrimSpace(stdout.String())
	}
	if err := CheckAssets(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// CheckAssets reports an error naming every component binary or stages file that dir
// lacks.
func CheckAssets(dir string) error {
	var missing []string
	for _, name := range Components {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, StagesFile)); err != nil || fi.Size() == 0 {
		missing = append(missing, StagesFile)
	}
	if len(missing) > 0 {
		return fmt.Errorf("the control-plane directory %q lacks %s (KUBEBUILDER_ASSETS must point at the directory printed by hack/controlplane.sh path, which builds them)",
			dir, strings.Join(missing, ", "))
	}
	return nil
}
