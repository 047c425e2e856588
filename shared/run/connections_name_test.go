package run

import "testing"

// TestBrokeredConnection: BrokeredConnection splits what BrokeredName
// joins, and refuses names of no connection.
func TestBrokeredConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ conn, tool string }{{"jira", "create_issue"}, {"a", "b__c"}, {"gh-1", "x"}} {
		if got, ok := BrokeredConnection(BrokeredName(tc.conn, tc.tool)); !ok || got != tc.conn {
			t.Errorf("BrokeredConnection(BrokeredName(%q, %q)) = %q, %v", tc.conn, tc.tool, got, ok)
		}
	}
	for _, name := range []string{"Bash", "mcp__", "mcp____x", "mcp__jira", "MCP__jira__x"} {
		if got, ok := BrokeredConnection(name); ok {
			t.Errorf("BrokeredConnection(%q) = %q, want none", name, got)
		}
	}
}
