package store

import (
	"context"
	"fmt"
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
	return s.putGeneration(ctx, githubAppPK, "put github app", a, prev, ErrGitHubAppChanged)
}

// GetGitHubApp reads the GitHub App.
func (s *Store) GetGitHubApp(ctx context.Context) (GitHubApp, error) {
	var a GitHubApp
	err := s.get(ctx, githubAppPK, "HEAD", &a)
	return a, err
}
