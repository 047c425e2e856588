package route

import (
	"strings"
	"testing"
)

// TestDecodeMessages: a refused body is described by the field's path and
// in JSON's words; never a Go type, never the input's text.
func TestDecodeMessages(t *testing.T) {
	t.Parallel()
	type body struct {
		Name   string `json:"name"`
		Budget *struct {
			LimitUSD *float64 `json:"limit_usd"`
		} `json:"budget"`
		Tags  []string `json:"tags,omitempty"`
		Items []struct {
			Name string `json:"name"`
		} `json:"items"`
		Count int `json:"count"`
	}
	tests := []struct{ in, want string }{
		{`{"budget":5}`, "budget: must be an object, not a number"},
		{`{"budget":{"limit_usd":"5"}}`, "budget.limit_usd: must be a number, not a string"},
		{`{"budget":{"limit_usd":1,"x":1}}`, "budget.x: unknown field"},
		{`{"items":[{"name":"a"},{"nam":"b"}]}`, "items[1].nam: unknown field"},
		{`{"tags":"secret-value"}`, "tags: must be a list, not a string"},
		{`{"count":1.5}`, "count: must be an integer, not a number"},
		{`{"name":true}`, "name: must be a string, not true or false"},
		{`{"Name":"x","bogus":1}`, "bogus: unknown field"},
		{`[1]`, "the request body: must be an object, not a list"},
		{``, "request body is empty"},
	}
	for _, tt := range tests {
		var v body
		e := DecodeBytes([]byte(tt.in), &v)
		if e == nil || e.Message != tt.want {
			t.Errorf("DecodeBytes(%s) = %v, want %q", tt.in, e, tt.want)
			continue
		}
		for _, goWord := range []string{"struct", "float64", "*", "[]", "secret-value"} {
			if strings.Contains(e.Message, goWord) {
				t.Errorf("DecodeBytes(%s) message %q has %q", tt.in, e.Message, goWord)
			}
		}
	}
}
