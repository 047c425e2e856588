package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// GitHubApp is the deployment's GitHub App: its id, where its API and git
// hosts are, and its private key sealed under seal.Context{ConnectionID:
// "github-app", Generation: Generation}. There is one per deployment; the
// control plane mints short-lived installation tokens with it and none of
// them, nor the key, ever leaves the control plane.
type GitHubApp struct {
	AppID      int64  `dynamodbav:"app_id"`
	APIURL     string `dynamodbav:"api_url"`
	GitURL     string `dynamodbav:"git_url"`
	Sealed     []byte `dynamodbav:"sealed"`
	Generation int    `dynamodbav:"generation"`
	UpdatedAt  string `dynamodbav:"updated_at"`
	UpdatedBy  string `dynamodbav:"updated_by"`
}

const githubAppPK = "GITHUBAPP"

// ErrGitHubAppChanged: someone replaced the GitHub App since it was read.
var ErrGitHubAppChanged = fmt.Errorf("store: github app changed: %w", ErrConditionFailed)

// PutGitHubApp writes the GitHub App if its stored generation is still
// prev (0: none stored yet): a compare-and-swap, so two concurrent
// replacements cannot both claim the same generation.
func (s *Store) PutGitHubApp(ctx context.Context, a GitHubApp, prev int) error {
	av, err := item(githubAppPK, "HEAD", a)
	if err != nil {
		return err
	}
	cond := "attribute_not_exists(pk)"
	vals := map[string]types.AttributeValue(nil)
	if prev > 0 {
		cond = "generation = :prev"
		vals = map[string]types.AttributeValue{":prev": num(int64(prev))}
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      av,
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeValues: vals,
	})
	if err != nil {
		err = translate("put github app", err)
		if errors.Is(err, ErrConditionFailed) {
			return ErrGitHubAppChanged
		}
	}
	return err
}

// GetGitHubApp reads the GitHub App.
func (s *Store) GetGitHubApp(ctx context.Context) (GitHubApp, error) {
	var a GitHubApp
	err := s.get(ctx, githubAppPK, "HEAD", &a)
	return a, err
}
