package route

import "strings"

// Operation returns the operation id's text in a handler package's
// operations.yaml (file): the lines under its top-level key, dedented, or
// "" when the file has none. It reads lines, not YAML, so that a function
// links no YAML parser for its documentation; the generator parses what it
// returns and refuses what is not an operation.
func Operation(file, id string) string {
	lines := strings.Split(file, "\n")
	for i, l := range lines {
		if l != id+":" {
			continue
		}
		var b strings.Builder
		for _, l := range lines[i+1:] {
			if l != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "#") {
				break
			}
			b.WriteString(strings.TrimPrefix(l, "  "))
			b.WriteByte('\n')
		}
		return strings.TrimRight(b.String(), "\n") + "\n"
	}
	return ""
}

// DocIn returns the constructor of a handler package's Docs: id, tag,
// summary and error statuses in the row, the rest of the operation in
// the package's operations.yaml (file; Operation).
func DocIn(file string) func(id, tag, summary string, errors ...int) Doc {
	return func(id, tag, summary string, errors ...int) Doc {
		return Doc{ID: id, Tag: tag, Summary: summary, Errors: errors, OpenAPI: Operation(file, id)}
	}
}

// At is d documented at path, where the path's parameter names differ
// from the pattern's.
func (d Doc) At(path string) Doc {
	d.Path = path
	return d
}

// DocPath is the path r is documented and deployed at: Doc.Path, or the
// pattern's path without Go's {$} and with {name...} as {name}.
func (r Route) DocPath() string {
	if r.Doc.Path != "" {
		return r.Doc.Path
	}
	_, path, ok := strings.Cut(r.Pattern, " ")
	if !ok {
		path = r.Pattern
	}
	return strings.ReplaceAll(strings.ReplaceAll(path, "{$}", ""), "...}", "}")
}

// Method is r's method, or "" for a pattern without one (a catch-all).
func (r Route) Method() string {
	m, _, ok := strings.Cut(r.Pattern, " ")
	if !ok {
		return ""
	}
	return m
}

// Resource is f's logical id in template.yaml: ControlFunction,
// GitHubFunction.
func (f Function) Resource() string {
	if f == GitHub {
		return "GitHubFunction"
	}
	return strings.ToUpper(string(f[:1])) + string(f[1:]) + "Function"
}
