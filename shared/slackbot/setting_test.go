package slackbot_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/slackbot"
)

// TestRolesMaxAgeSetting: FLUIDBOX_SLACK_ROLES_MAX_AGE_SECONDS reaches the
// bot's configuration, within its bounds; unset is the default; and the
// README's Configuration row states the default and bounds the code has.
func TestRolesMaxAgeSetting(t *testing.T) {
	t.Parallel()
	const name = "FLUIDBOX_SLACK_ROLES_MAX_AGE_SECONDS"
	load := func(v string) (slackbot.Config, error) {
		env := map[string]string{"FLUIDBOX_TABLE": "t", "FLUIDBOX_ADMIN_TOKEN": "0123456789abcdef0123"}
		if v != "" {
			env[name] = v
		}
		c, err := config.Load(func(k string) string { return env[k] }, config.Lambda)
		if err != nil {
			return slackbot.Config{}, err
		}
		return slackbot.FromConfig(c)
	}
	for _, c := range []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"", 0, true}, // the Directory's default
		{"3600", time.Hour, true},
		{"2592000", 30 * 24 * time.Hour, true},
		{"3599", 0, false},
		{"2592001", 0, false},
		{"0", 0, false},
		{"-5", 0, false},
		{"1h", 0, false},
	} {
		got, err := load(c.value)
		if (err == nil) != c.ok || (c.ok && got.RolesMaxAge != c.want) {
			t.Errorf("%s=%q: RolesMaxAge %v, err %v; want %v, ok %v", name, c.value, got.RolesMaxAge, err, c.want, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: error %q does not name the variable", name, c.value, err)
		}
	}

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(readme), "\n## Configuration\n")
	var row string
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "| `"+name+"`") {
			row = line
		}
	}
	cells := strings.Split(strings.Trim(row, "| "), " | ")
	if len(cells) != 4 {
		t.Fatalf("README's Configuration row for %s = %q, want four cells", name, row)
	}
	if want := "`" + strconv.Itoa(int(slackbot.DefaultRolesMaxAge/time.Second)) + "`"; cells[3] != want {
		t.Errorf("README's default for %s = %s, want %s (slackbot.DefaultRolesMaxAge)", name, cells[3], want)
	}
	if !strings.Contains(cells[2], "3600 to 2592000 seconds") {
		t.Errorf("README's meaning for %s = %q, want the bounds config enforces", name, cells[2])
	}
}
