package surface

import (
	"fmt"
	"strings"

	"github.com/fluidbox/fluidbox/shared/api/route"
)

// The markers around what is generated in template.yaml (one pair per
// function, in its Events) and in docs/api.md.
const (
	eventsBegin = "# BEGIN generated Api events of %s (go generate ./shared/api: edit the route rows, not these lines)"
	eventsEnd   = "# END generated Api events of %s"
	indexBegin  = "<!-- BEGIN generated route index (go generate ./shared/api: edit the route rows, not these lines) -->"
	indexEnd    = "<!-- END generated route index -->"
)

// Template is template.yaml with each function's Api events written from
// its API Gateway rows, between the markers in its Events. A function with
// such rows and no markers, or markers of a function without rows, is an
// error: the other events and resources are the template's own.
func Template(rows []route.Route, cur []byte) ([]byte, error) {
	byFn := map[string][]route.Route{}
	var fns []string
	for _, r := range rows {
		if r.Via != route.APIGateway {
			continue
		}
		fn := r.Function.Resource()
		if byFn[fn] == nil {
			fns = append(fns, fn)
		}
		byFn[fn] = append(byFn[fn], r)
	}
	out := cur
	for _, fn := range fns {
		var err error
		out, err = replaceBetween(out, fmt.Sprintf(eventsBegin, fn), fmt.Sprintf(eventsEnd, fn), func(indent string) string {
			var b strings.Builder
			for _, r := range byFn[fn] {
				path := apiGatewayPath(r)
				if strings.ContainsAny(path, "{}") {
					path = "'" + path + "'"
				}
				fmt.Fprintf(&b, "%s%s:\n%s  Type: Api\n%s  Properties: {RestApiId: !Ref Api, Path: %s, Method: %s}\n",
					indent, eventName(r.Doc.ID), indent, indent, path, strings.ToLower(r.Method()))
			}
			return b.String()
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
	}
	for _, l := range strings.Split(string(out), "\n") {
		_, fn, ok := strings.Cut(l, "# BEGIN generated Api events of ")
		if fn, _, _ = strings.Cut(fn, " "); ok && byFn[fn] == nil {
			return nil, fmt.Errorf("%s has generated Api events but no API Gateway row names it", fn)
		}
	}
	return out, nil
}

// apiGatewayPath is r's documented path, with API Gateway's {name+} where
// the pattern has Go's greedy {name...}.
func apiGatewayPath(r route.Route) string {
	_, pattern, _ := strings.Cut(r.Pattern, " ")
	ps, ds := strings.Split(pattern, "/"), strings.Split(r.DocPath(), "/")
	for i := range ds {
		if i < len(ps) && strings.HasSuffix(ps[i], "...}") {
			ds[i] = strings.TrimSuffix(ds[i], "}") + "+}"
		}
	}
	return strings.Join(ds, "/")
}

// eventName is the Api event's name: the operation id, capitalised.
func eventName(id string) string { return strings.ToUpper(id[:1]) + id[1:] }

// replaceBetween replaces the lines between the line holding begin and the
// line holding end with what body returns, given begin's indentation.
func replaceBetween(doc []byte, begin, end string, body func(indent string) string) ([]byte, error) {
	s := string(doc)
	b := strings.Index(s, begin)
	if b < 0 {
		return nil, fmt.Errorf("no line %q", begin)
	}
	if strings.Count(s, begin) != 1 {
		return nil, fmt.Errorf("line %q is there twice", begin)
	}
	lineStart := strings.LastIndex(s[:b], "\n") + 1
	indent := s[lineStart:b]
	bodyStart := b + strings.Index(s[b:], "\n") + 1
	e := strings.Index(s[bodyStart:], end)
	if e < 0 {
		return nil, fmt.Errorf("no line %q after %q", end, begin)
	}
	endLine := bodyStart + e
	endLine = strings.LastIndex(s[:endLine], "\n") + 1
	return []byte(s[:bodyStart] + body(indent) + s[endLine:]), nil
}

// Contract is docs/api.md with its route index written from rows: each
// documented route, who may call it and the function that serves it. The
// prose around it is the contract's own.
func Contract(rows []route.Route, cur []byte) ([]byte, error) {
	return replaceBetween(cur, indexBegin, indexEnd, func(string) string {
		var b strings.Builder
		b.WriteString("\n| Route | Who may call it | Served by |\n|---|---|---|\n")
		for _, r := range rows {
			if r.Undocumented != "" {
				continue
			}
			served := string(r.Function)
			if r.Via == route.FunctionURL {
				served += " (function URL)"
			}
			fmt.Fprintf(&b, "| `%s %s` | %s | %s |\n", r.Method(), r.DocPath(), who[r.Access], served)
		}
		b.WriteString("\n")
		return b.String()
	})
}

// who says in a few words who may call a route of each access (route.Access
// says it in full).
var who = map[route.Access]string{
	route.Public:    "anyone",
	route.Signed:    "its signer (signature checked)",
	route.RunKey:    "the run's session token, as an API key",
	route.Runner:    "the run's session token, the operator",
	route.Admitters: "the run's session or runner token, the operator",
	route.Reporters: "the run's runner token, the operator, admins",
	route.RunScoped: "the run's session token, the operator, admins",
	route.Reviewers: "the run's session token, the operator, admins, approvers",
	route.Admin:     "the operator, admins",
	route.Deciders:  "the operator, every person (who may decide, per approval)",
	route.Issuers:   "its trigger's runner key or launch credential, the operator, admins",
	route.People:    "the operator, every person (owner or admin, per connection)",
}
