package schemaguard

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// drafts are the $schema URLs of the drafts the guard admits, and for
// each a schema only that draft's metaschema rejects and an input only
// that draft's semantics reject.
var drafts = []struct {
	url, badSchema, schema, badInput string
}{
	{"http://json-schema.org/draft-04/schema#", `{"minLength":-1}`, `{"type":"integer","minimum":0,"exclusiveMinimum":true}`, `0`},
	{"http://json-schema.org/draft-06/schema#", `{"type":12}`, `{"exclusiveMinimum":0}`, `0`},
	{"http://json-schema.org/draft-07/schema#", `{"required":"a"}`, `{"if":{"type":"integer"},"then":{"minimum":1}}`, `0`},
	{"https://json-schema.org/draft/2019-09/schema", `{"maxItems":1.5}`, `{"dependentRequired":{"a":["b"]}}`, `{"a":1}`},
	{"https://json-schema.org/draft/2020-12/schema", `{"enum":{}}`, `{"prefixItems":[{"type":"string"}]}`, `[1]`},
}

// TestDraftsFirstUse compiles schemas of every draft from 32 goroutines at
// once in a fresh process, so that each draft's metaschema (compiled when
// first needed, see third_party/jsonschema) is first needed by many at
// once: every draft's metaschema must still reject what it rejects, and
// its semantics hold.
func TestDraftsFirstUse(t *testing.T) {
	if os.Getenv("SCHEMAGUARD_FIRST_USE") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDraftsFirstUse$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SCHEMAGUARD_FIRST_USE=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("in a fresh process: %v\n%s", err, out)
		}
		return
	}
	inputs := make([]any, len(drafts))
	for i, d := range drafts {
		inputs[i] = decode(t, d.badInput)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 32*len(drafts))
	for g := range 32 {
		wg.Go(func() {
			for i := range drafts {
				j := (g + i) % len(drafts)
				d := drafts[j]
				if err := checkDraft(d.url, d.badSchema, d.schema, inputs[j]); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func checkDraft(url, badSchema, schema string, badInput any) error {
	with := func(s string) []byte { return []byte(`{"$schema":"` + url + `",` + s[1:]) }
	if _, err := Compile(with(badSchema)); err == nil {
		return fmt.Errorf("%s: Compile(%s) = nil, want a rejection by the metaschema", url, badSchema)
	}
	s, err := Compile(with(schema))
	if err != nil {
		return fmt.Errorf("%s: Compile(%s) = %v", url, schema, err)
	}
	if err := s.Validate(badInput); err == nil {
		return fmt.Errorf("%s: %s accepted %v", url, schema, badInput)
	}
	return nil
}
