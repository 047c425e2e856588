// Package modelproxy measures what the model proxy's request inspector
// costs against what forwarding costs: a 100 KB Claude Code request
// (captured from Claude Code 2.1.332, grown with tool turns) is inspected
// and forwarded through a plain net/http/httputil.ReverseProxy to a
// loopback upstream, side by side in the same run, and the inspection's
// share of the forwarding's latency is reported. `make bench` runs it;
// nothing here asserts a time.
package modelproxy
