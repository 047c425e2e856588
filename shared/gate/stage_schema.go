package gate

import (
	"errors"

	"github.com/fluidbox/fluidbox/shared/schemaguard"
)

// Stage 3, frozen schema: the arguments must satisfy the input schema frozen
// with the tool, and a tool frozen un-callable is never called.
//
// Why here: the tool is known to be frozen (stage 2), so its schema is the
// one the run photographed, not whatever the upstream serves now. It comes
// before trust tier and policy because both read the input (policy matchers
// by JSON pointer, Bash prefixes, file paths): a rule judging an input of
// the wrong shape (a number where a path was expected, a field the rule
// does not know about) would judge something the tool then interprets
// differently. The policy cannot catch this: its matchers are written for
// the inputs a tool is supposed to take, and a missing field simply fails
// to match an allow rule while a surprising one may match nothing at all.
// The upstream server cannot be relied on either: it is untrusted.
//
// A schema that failed the pre-guard froze the tool un-callable: refusing
// it here is the fail-closed answer. A denial here is a tool error the
// model can fix, so the reason quotes the validator's causes.
func checkSchema(c *call) (Decision, bool) {
	return schemaStage(c.tool, c.req.ToolName, c.req.Input)
}

// SchemaDenial is the stage's judgement on its own: the reason a call's
// input would be denied with source schema, or ok=false if it passes. A
// recorded schema denial is replayed with it (the reason may quote the
// input, so it is not stored).
func SchemaDenial(t *Tool, toolName string, input any) (reason string, denied bool) {
	d, denied := schemaStage(t, toolName, input)
	return d.Reason, denied
}

func schemaStage(t *Tool, toolName string, input any) (Decision, bool) {
	if t == nil {
		return deny(SourceSchema, "tool %s has no frozen definition to validate against", quote(toolName))
	}
	if !t.Callable {
		why := t.Reason
		if why == "" {
			why = "its input schema was rejected when the run was created"
		}
		return deny(SourceSchema, "tool %s cannot be called in this run: %s", quote(t.Name), why)
	}
	if t.Schema == nil {
		return deny(SourceSchema, "tool %s has no frozen input schema, so its arguments cannot be checked", quote(t.Name))
	}
	err := t.Schema.Validate(input)
	if err == nil {
		return next()
	}
	var inv *schemaguard.InvalidError
	if errors.As(err, &inv) && inv.Reason != "" {
		return deny(SourceSchema, "the arguments do not match the input schema of tool %s; fix them and call again: %s", quote(t.Name), inv.Reason)
	}
	return deny(SourceSchema, "the arguments of tool %s could not be validated against its input schema", quote(t.Name))
}
