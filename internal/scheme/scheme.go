// Package scheme builds the runtime.Scheme that convoy-observer's clients and caches
// use: client-go's built-in types plus this project's API types.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
)

// New returns a scheme with client-go's built-in types, convoy.kumodo.io/v1alpha1 and
// extensions.convoy.kumodo.io/v1alpha1.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	utilruntime.Must(extv1alpha1.AddToScheme(s))
	return s
}
