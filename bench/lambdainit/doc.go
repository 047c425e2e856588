// Package lambdainit measures what a cold start costs before the first
// invocation: how long a built bootstrap takes from process start to its
// first request for the next invocation from the Lambda Runtime API, and
// how large it is gzipped (what Lambda downloads), for each HTTP function
// beside a hello-world aws-lambda-go bootstrap built the same way, in the
// same run. A second baseline, dynamodb, is hello with the AWS SDK's
// DynamoDB client linked and called: the floor under every function that
// talks to the table. `make bench` runs it; nothing here asserts a time.
package lambdainit
