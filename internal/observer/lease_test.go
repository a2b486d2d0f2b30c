package observer_test

import coordinationv1 "k8s.io/api/coordination/v1"

type coordinationLease = coordinationv1.Lease
