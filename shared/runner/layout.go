//go:build linux

package runner

import "os"

// Layout is a sandbox's file system as the runner needs it. One function
// makes it everywhere: the local launcher for each run (Private), the
// runner image once at build (`fluidbox runner --layout`, from
// runner/Dockerfile), and the runner at every start (Workdir, Home and the
// managed settings' directory), so a layout drifting between a laptop and
// a Fargate task is one code path, not two. Making it again changes
// nothing; an empty field is not made.
type Layout struct {
	// Private is the runner's own directory (the launch credential's
	// file, its socket and log under the local launcher): root's, 0700.
	Private string
	// Workdir receives the workspace; Home is the agent's HOME: the
	// agent's user's, 0700.
	Workdir, Home string
	// SettingsDir holds Claude Code's managed settings: root's, 0755, so
	// the agent reads and cannot write them.
	SettingsDir string
	// UID and GID are the agent's user (Workdir and Home).
	UID, GID int
}

// Make creates the layout's directories, or fixes their owner and mode.
func (l Layout) Make() error {
	for _, d := range []struct {
		path     string
		mode     os.FileMode
		uid, gid int
	}{
		{l.Private, 0o700, 0, 0},
		{l.SettingsDir, 0o755, 0, 0},
		{l.Workdir, 0o700, l.UID, l.GID},
		{l.Home, 0o700, l.UID, l.GID},
	} {
		if d.path == "" {
			continue
		}
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Lchown(d.path, d.uid, d.gid); err != nil {
			return err
		}
	}
	return nil
}
