package store

import "context"

// Report is a run's report back to its pull request (RUN#<id> / REPORT):
// what was posted (check_run or comment) and GitHub's id for it. One per
// run.
type Report struct {
	Kind       string `dynamodbav:"kind"`
	ID         int64  `dynamodbav:"id"`
	ReportedAt string `dynamodbav:"reported_at"`
}

const reportSK = "REPORT"

// PutReport is the op that records a run's report, once.
func (s *Store) PutReport(runID string, r Report) (Op, error) {
	av, err := item(runPK(runID), reportSK, r)
	if err != nil {
		return Op{}, err
	}
	return Op{item: putNew(s.table, av), failed: ErrExists}, nil
}

// GetReport reads a run's report.
func (s *Store) GetReport(ctx context.Context, runID string) (Report, error) {
	var r Report
	err := s.get(ctx, runPK(runID), reportSK, &r)
	return r, err
}
