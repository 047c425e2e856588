package testenv

import "github.com/fluidbox/fluidbox/shared/egress"

// Loopback is the egress guard of a test's control plane: it reaches the
// upstreams and model stand-ins the test starts on 127.0.0.1, as `fluidbox
// dev` does, and refuses every other internal address. One guard for every
// test, so the broker's connection pool is shared as in a server.
var Loopback = egress.New(egress.Loopback)
