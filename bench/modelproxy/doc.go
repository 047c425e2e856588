// Package modelproxy measures what the model proxy's request inspector
// costs against what forwarding costs: a 100 KB Claude Code request
// (captured from Claude Code 2.1.332, grown with tool turns) is inspected
// and forwarded through a plain net/http/httputil.ReverseProxy to a
// loopback upstream, side by side in the same run, and the inspection's
// share of the forwarding's latency is reported. Beside it, as the floor
// of any inspection that reads the whole body, the same share for a
// syntax check alone by the fastest JSON validator Go has
// (github.com/bytedance/sonic, SIMD on amd64; a test dependency only) and
// by encoding/json. BenchmarkProxiedShare sends the same request through
// fluidbox's own model proxy too (as `fluidbox dev` serves it: minidyn on
// loopback, the reservation, the stream followed and settled) and reports
// the inspection's share of that latency beside its share of the plain
// forward; most of the proxied latency is the table's round trips, which
// on AWS are slower than minidyn's on loopback, and a real model's answer
// slower still. BenchmarkProxiedVerify goes on with the conversation, one
// new tool call a request, and reports the batched reads of call records
// the proxy's check of tool results makes per request (one for the new
// result, none for the history it checked before). `make bench` runs it;
// nothing here asserts a time.
package modelproxy
