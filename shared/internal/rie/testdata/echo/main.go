// Command echo is a tiny API Gateway proxy Lambda used to test package rie
// against the real emulator. It answers with what it received, plus the
// value of ECHO_GREETING to show that the environment reached it.
//
//	/fail  -> the handler returns an error
//	/sleep -> the handler sleeps past any short timeout
package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

type echo struct {
	Method   string `json:"method"`
	Path     string `json:"path"`
	Body     string `json:"body"`
	Greeting string `json:"greeting"`
	PID      int    `json:"pid"`
}

func handle(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	switch req.Path {
	case "/fail":
		return events.APIGatewayProxyResponse{}, errors.New("asked to fail")
	case "/sleep":
		// Ignores ctx on purpose: answering at the deadline would race the
		// emulator's timeout.
		time.Sleep(10 * time.Second)
	}
	b, err := json.Marshal(echo{
		Method:   req.HTTPMethod,
		Path:     req.Path,
		Body:     req.Body,
		Greeting: os.Getenv("ECHO_GREETING"),
		PID:      os.Getpid(),
	})
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	return events.APIGatewayProxyResponse{
		StatusCode: 200,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(b),
	}, nil
}

func main() { lambda.Start(handle) }
