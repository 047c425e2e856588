package main

import (
	"os/exec"
	"strings"
	"testing"
)

// notLinked are AWS clients the fluidbox binary has no use for: dev prints
// notifications instead of putting them on EventBridge and runs expiry
// timers in-process instead of Step Functions executions. Each is seconds
// of a first build's compile that `make run` would spend for nothing.
var notLinked = []string{
	"github.com/aws/aws-sdk-go-v2/service/eventbridge",
	"github.com/aws/aws-sdk-go-v2/service/sfn",
}

func TestBinaryLinksNoUnusedAWSClient(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, p := range notLinked {
			if dep == p || strings.HasPrefix(dep, p+"/") {
				t.Errorf("cmd/fluidbox links %s", dep)
			}
		}
	}
}
