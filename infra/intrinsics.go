package infra

import (
	"fmt"
	"strings"

	"github.com/awslabs/goformation/v7/intrinsics"
)

// placeholder stands in for intrinsic functions the way the deployed value
// would: a string naming what it refers to. goformation's default handlers
// resolve Ref and GetAtt of resources to nil, which would make the schema
// check reject every !Ref and !GetAtt.
func placeholder(name string, input, _ any) any {
	switch name {
	case "Ref":
		return "REF:" + fmt.Sprint(input)
	case "Fn::GetAtt":
		if parts, ok := input.([]any); ok {
			s := make([]string, len(parts))
			for i, p := range parts {
				s[i] = fmt.Sprint(p)
			}
			return "GETATT:" + strings.Join(s, ".")
		}
		return "GETATT:" + fmt.Sprint(input)
	case "Fn::Sub":
		if parts, ok := input.([]any); ok && len(parts) > 0 {
			return "SUB:" + fmt.Sprint(parts[0])
		}
		return "SUB:" + fmt.Sprint(input)
	case "Fn::Equals":
		// A condition stays a condition (the schema wants an object);
		// goformation's own handler would evaluate it to a bool.
		return map[string]any{name: input}
	case "Fn::If":
		// [condition, then, else]: "then" is as representative as "else".
		if parts, ok := input.([]any); ok && len(parts) == 3 {
			return parts[1]
		}
	}
	return strings.ToUpper(strings.TrimPrefix(name, "Fn::")) + ":" + fmt.Sprint(input)
}

// Placeholders are the intrinsic handlers with which the template's tests
// (and the role check of shared/internal/ddbchaos/roles) read template.yaml:
// every intrinsic is its placeholder string, Fn::If its "then", and
// Fn::Equals (a condition) itself.
func Placeholders() *intrinsics.ProcessorOptions {
	h := map[string]intrinsics.IntrinsicHandler{}
	for _, name := range []string{"Ref", "Fn::GetAtt", "Fn::Sub", "Fn::If", "Fn::ImportValue", "Fn::Cidr", "Fn::GetAZs", "Fn::Join", "Fn::Select", "Fn::Equals"} {
		h[name] = placeholder
	}
	return &intrinsics.ProcessorOptions{IntrinsicHandlerOverrides: h}
}
