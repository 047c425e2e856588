package schemaguard

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// The worst schemas the pre-guard admits, each with the input at the input
// bounds that makes it work hardest. Without the work budget the first two
// took seconds to hours per call.
type worstCase struct {
	name, schema string
	input        func(tb testing.TB) any
}

func worstCases() []worstCase {
	// A $ref into an anyOf fan-out: 4 levels of 6 branches expand to about
	// 6,300 subschemas, under MaxExpandedSubschemas, applied to every item.
	var fan strings.Builder
	fan.WriteString(`{"type":"array","items":{"$ref":"#/$defs/l0"},"$defs":{`)
	for l := 0; l < 4; l++ {
		fmt.Fprintf(&fan, `"l%d":{"anyOf":[`, l)
		for i := 0; i < 6; i++ {
			if i > 0 {
				fan.WriteString(",")
			}
			fmt.Fprintf(&fan, `{"$ref":"#/$defs/l%d"}`, l+1)
		}
		fan.WriteString("]},")
	}
	fan.WriteString(`"l4":{"type":"integer","minimum":0}}}`)
	items := func(v any) func(testing.TB) any {
		return func(testing.TB) any {
			a := make([]any, MaxInputNodes-1)
			for i := range a {
				a[i] = v
			}
			return a
		}
	}
	nested := func(tb testing.TB) any {
		var v any = "leaf"
		for range MaxInputDepth - 1 {
			v = []any{v}
		}
		return v
	}
	return []worstCase{
		{"ref into anyOf fan-out", fan.String(), items("x")},
		// A cycle under items that doubles at each level: the expansion
		// bound counts a cycle once, the input's depth makes it 2^31.
		{"doubling cycle", `{"$defs":{"n":{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/n"},{"$ref":"#/$defs/n"}]}}},"$ref":"#/$defs/n"}`, nested},
		// A backtracking pattern on every item.
		{"catastrophic pattern", `{"type":"array","items":{"type":"string","pattern":"^(a|aa)+$"}}`, items(strings.Repeat("a", 60) + "!")},
		// uniqueItems compares every pair.
		{"uniqueItems", `{"type":"array","uniqueItems":true}`, func(testing.TB) any {
			a := make([]any, MaxInputNodes-1)
			for i := range a {
				a[i] = fmt.Sprintf("s%d", i)
			}
			return a
		}},
	}
}

func TestWorkBudget(t *testing.T) {
	t.Parallel()
	for _, tt := range worstCases() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tt.schema)
			err := s.Validate(tt.input(t))
			var ie *InvalidError
			if !errors.As(err, &ie) || !strings.Contains(ie.Reason, "one call may use") {
				t.Fatalf("Validate = %v, want the work budget's *InvalidError", err)
			}
		})
	}
}

// BenchmarkWorstAdmittedSchema is the bound `make bench` reports: each of
// the worst schemas the pre-guard admits, at the input bounds, per call.
func BenchmarkWorstAdmittedSchema(b *testing.B) {
	for _, tt := range worstCases() {
		b.Run(tt.name, func(b *testing.B) {
			s := mustCompile(b, tt.schema)
			input := tt.input(b)
			for b.Loop() {
				if s.Validate(input) == nil {
					b.Fatal("Validate accepted the worst case")
				}
			}
		})
	}
}

// TestConcurrentValidation: validations of one schema at once each take an
// engine of their own, so one's budget never leaks into another's (a
// shared meter would fail the light inputs or pass the heavy one).
func TestConcurrentValidation(t *testing.T) {
	t.Parallel()
	// Each item costs a hundred steps: 400 items run out, 2 do not. (No
	// pattern: pattern time is wall time, which 32 goroutines under the race
	// detector stretch.)
	s := mustCompile(t, `{"type":"array","items":{"$ref":"#/$defs/a"},"$defs":{
		"a":{"anyOf":[{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"}]},
		"b":{"anyOf":[{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"}]},
		"c":{"type":"string","minLength":1}}}`)
	item := func(n int) []any {
		a := make([]any, n)
		for i := range a {
			a[i] = "xx"
		}
		return a
	}
	heavy, light := item(400), item(2)
	if err := s.Validate(heavy); err == nil || !strings.Contains(err.Error(), "one call may use") {
		t.Fatalf("heavy alone = %v, want the work budget's error", err)
	}
	if err := s.Validate(light); err != nil {
		t.Fatalf("light alone = %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 96)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				if i%4 == 0 {
					if s.Validate(heavy) == nil {
						errs <- "the heavy input passed"
					}
				} else if err := s.Validate(light); err != nil {
					errs <- "a light input failed: " + err.Error()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
