package capability

// The built-in bundle anthropic-server-tools names the tools Anthropic's
// Messages API runs on its own side (with the operator's key) when a request
// offers them. The model proxy judges each one it finds in a request as a
// call of these tools, through the gate, before anything is forwarded; the
// call's input is the tool's definition in the request, so a policy matches
// its configuration (/max_uses, /allowed_domains/0, ...) by JSON pointer.
// Persisted and on the wire: never renamed.
const (
	ServerToolsID   = "cap_anthropic_server_tools"
	ServerToolsName = "anthropic-server-tools"

	// ToolWebSearch is web_search_20250305 (class egress).
	ToolWebSearch = "anthropic__web_search"
	// ToolWebFetch is web_fetch_20250910 and every URL-sourced image or
	// document (class egress): in both the API fetches a URL.
	ToolWebFetch = "anthropic__web_fetch"
	// ToolCodeExecution is code_execution_20250825 (class execute).
	ToolCodeExecution = "anthropic__code_execution"
)
