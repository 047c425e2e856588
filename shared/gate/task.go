package gate

// SourceTaskRunning: the upstream runs a brokered call as a task that
// outlived the request which started it; the call is executing, and a
// retry with the same tool_call_id polls the task. Like SourceApproval, it
// is the broker's, never returned by Decide.
const SourceTaskRunning Source = "task_running"
