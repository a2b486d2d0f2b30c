package base

import (
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

var metav1GetOptions = metav1.GetOptions{}
