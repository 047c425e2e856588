package schedule

import (
	"errors"
	"testing"
	"time"
)

func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "cron()", "rate()", "cron(0 9 * * ? *", "0 9 * * ? *", "CRON(0 9 * * ? *)", " rate(5 minutes)",
		// rate: value, unit, singular and plural
		"rate(0 minutes)", "rate(-1 minutes)", "rate(1 minutes)", "rate(5 minute)", "rate(05 minutes)",
		"rate(5  minutes)", "rate(5 seconds)", "rate(5 weeks)", "rate(100000 days)", "rate(1.5 hours)",
		"rate(five minutes)", "rate(5)", "rate(5 Minutes)", "rate(+5 minutes)",
		// cron: field count and spacing
		"cron(0 9 * * ?)", "cron(0 9 * * ? * *)", "cron(0  9 * * ? *)", "cron( 0 9 * * ? *)", "cron(0 9 * * ? *\t)",
		// day-of-month and day-of-week: exactly one is "?"
		"cron(0 9 * * * *)", "cron(0 9 ? * ? *)", "cron(0 9 1 * MON *)",
		// bounds
		"cron(60 9 * * ? *)", "cron(0 24 * * ? *)", "cron(0 9 0 * ? *)", "cron(0 9 32 * ? *)", "cron(0 9 * 13 ? *)",
		"cron(0 9 * 0 ? *)", "cron(0 9 ? * 0 *)", "cron(0 9 ? * 8 *)", "cron(0 9 * * ? 1969)", "cron(0 9 * * ? 2200)",
		"cron(00000 9 * * ? *)",
		// names: upper case, known
		"cron(0 9 ? * mon *)", "cron(0 9 * jan ? *)", "cron(0 9 ? * MONDAY *)",
		// ranges run forwards; steps are positive and fit
		"cron(0 22-2 * * ? *)", "cron(0 9 ? * FRI-MON *)", "cron(*/0 9 * * ? *)", "cron(*/61 9 * * ? *)", "cron(0/ 9 * * ? *)",
		"cron(1-2-3 9 * * ? *)", "cron(0 9 * * ? */0)", "cron(,0 9 * * ? *)", "cron(0, 9 * * ? *)", "cron(- 9 * * ? *)",
		// L, W and #: where and how they may appear
		"cron(0 9 ? * L *)", "cron(0 9 L-0 * ? *)", "cron(0 9 L-31 * ? *)", "cron(0 9 0W * ? *)", "cron(0 9 32W * ? *)",
		"cron(0 9 W * ? *)", "cron(0 9 ? * MON#0 *)", "cron(0 9 ? * MON#6 *)", "cron(0 9 ? * #2 *)", "cron(0 9 ? * 8L *)",
		"cron(L 9 * * ? *)", "cron(0 L * * ? *)", "cron(0 9 * L ? *)", "cron(0 9 ? * MON *L)", "cron(0 9 1W-3W * ? *)",
		"cron(0 9 ? * 2#1/2 *)", "cron(0 9 LW/2 * ? *)", "cron(0 9 ? * ? * )",
		// never due
		"cron(0 0 30 FEB ? *)", "cron(0 0 31 APR,JUN,SEP,NOV ? *)",
	} {
		if _, err := Parse(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", s, err)
		}
	}
}

func TestParseRefusesLong(t *testing.T) {
	t.Parallel()
	long := "cron(0"
	for len(long) <= MaxLength {
		long += ",0"
	}
	if _, err := Parse(long + " 9 * * ? *)"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Parse(%d bytes) = %v, want ErrInvalid", len(long), err)
	}
}

// TestDue checks the due times of the dialect's forms: Next from a start,
// three times over.
func TestDue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		expr, from string
		want       []string
	}{
		{"cron(0 9 ? * MON-FRI *)", "2026-12-04 09:00", []string{"2026-12-07 09:00", "2026-12-08 09:00", "2026-12-09 09:00"}}, // Fri -> Mon
		{"cron(*/15 * * * ? *)", "2026-12-07 10:07", []string{"2026-12-07 10:15", "2026-12-07 10:30", "2026-12-07 10:45"}},
		{"cron(5/20 * * * ? *)", "2026-12-07 10:07", []string{"2026-12-07 10:25", "2026-12-07 10:45", "2026-12-07 11:05"}},
		{"cron(0 8-10/2 * * ? *)", "2026-12-07 08:00", []string{"2026-12-07 10:00", "2026-12-08 08:00", "2026-12-08 10:00"}},
		{"cron(30 12 L * ? *)", "2026-01-31 13:00", []string{"2026-02-28 12:30", "2026-03-31 12:30", "2026-04-30 12:30"}},
		{"cron(0 0 L-2 * ? *)", "2028-02-01 00:00", []string{"2028-02-27 00:00", "2028-03-29 00:00", "2028-04-28 00:00"}},
		// LW: the last Monday-to-Friday; May 2026 ends on a Sunday.
		{"cron(0 0 LW * ? *)", "2026-05-01 00:00", []string{"2026-05-29 00:00", "2026-06-30 00:00", "2026-07-31 00:00"}},
		// 15W: Aug 15 2026 is a Saturday -> Friday 14; Nov 15 a Sunday -> Monday 16.
		{"cron(0 0 15W AUG,NOV,DEC ? *)", "2026-08-01 00:00", []string{"2026-08-14 00:00", "2026-11-16 00:00", "2026-12-15 00:00"}},
		// 1W on a Saturday stays in the month: Monday the 3rd (Aug 1 2026 is a Saturday).
		{"cron(0 0 1W AUG ? 2026-2027)", "2026-07-01 00:00", []string{"2026-08-03 00:00", "2027-08-02 00:00"}},
		// 31W on a Sunday: Friday the 29th (May 31 2026 is a Sunday).
		{"cron(0 0 31W MAY ? 2026)", "2026-01-01 00:00", []string{"2026-05-29 00:00"}},
		// 6L: the last Friday; 2#1: the first Monday.
		{"cron(0 17 ? * 6L *)", "2026-12-01 00:00", []string{"2026-12-25 17:00", "2027-01-29 17:00", "2027-02-26 17:00"}},
		{"cron(0 9 ? * MON#1 *)", "2026-12-01 00:00", []string{"2026-12-07 09:00", "2027-01-04 09:00", "2027-02-01 09:00"}},
		{"cron(0 9 ? * 2#1,FRIL *)", "2026-12-01 00:00", []string{"2026-12-07 09:00", "2026-12-25 09:00", "2027-01-04 09:00"}},
		{"cron(0 9 ? * SUN,7 *)", "2026-12-07 00:00", []string{"2026-12-12 09:00", "2026-12-13 09:00", "2026-12-19 09:00"}},
		{"cron(0 0 29 FEB ? *)", "2026-01-01 00:00", []string{"2028-02-29 00:00", "2032-02-29 00:00", "2036-02-29 00:00"}},
		{"cron(0 0 1 JAN ? 2030/10)", "2026-01-01 00:00", []string{"2030-01-01 00:00", "2040-01-01 00:00", "2050-01-01 00:00"}},
		{"cron(0 0 1 JAN ? 2199)", "2198-06-01 00:00", []string{"2199-01-01 00:00"}},
		{"rate(1 minute)", "2026-12-07 10:17", []string{"2026-12-07 10:18", "2026-12-07 10:19", "2026-12-07 10:20"}},
		{"rate(2 hours)", "2026-12-07 10:17", []string{"2026-12-07 12:17", "2026-12-07 14:17", "2026-12-07 16:17"}},
		{"rate(1 day)", "2026-12-07 10:17", []string{"2026-12-08 10:17", "2026-12-09 10:17", "2026-12-10 10:17"}},
	} {
		e, err := Parse(c.expr)
		if err != nil {
			t.Errorf("Parse(%q) = %v", c.expr, err)
			continue
		}
		since := utc(c.from)
		at := since
		var got []string
		for range 4 {
			n, ok := e.Next(since, at)
			if !ok {
				break
			}
			got = append(got, n.Format("2006-01-02 15:04"))
			at = n
		}
		if len(got) > len(c.want) {
			got = got[:len(c.want)]
		}
		if len(got) != len(c.want) {
			t.Errorf("%s from %s: Next = %v, want %v", c.expr, c.from, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s from %s: Next = %v, want %v", c.expr, c.from, got, c.want)
				break
			}
		}
	}
}

func TestLatest(t *testing.T) {
	t.Parallel()
	weekdays, _ := Parse("cron(0 9 ? * MON-FRI *)")
	hourly, _ := Parse("rate(1 hour)")
	for _, c := range []struct {
		e               Expression
		since, now, due string // due "" for none
	}{
		{weekdays, "2026-12-01 00:00", "2026-12-07 08:59", "2026-12-04 09:00"}, // Monday before 9: Friday's, if the look-back reaches it
		{weekdays, "2026-12-01 00:00", "2026-12-07 09:00", "2026-12-07 09:00"},
		{weekdays, "2026-12-01 00:00", "2026-12-07 09:30", "2026-12-07 09:00"},
		{weekdays, "2026-12-07 09:00", "2026-12-07 09:30", ""}, // set at the due minute: not due
		{weekdays, "2026-12-07 08:59", "2026-12-07 09:00", "2026-12-07 09:00"},
		{hourly, "2026-12-07 10:17", "2026-12-07 11:16", ""},
		{hourly, "2026-12-07 10:17", "2026-12-07 11:17", "2026-12-07 11:17"},
		{hourly, "2026-12-07 10:17", "2026-12-07 15:40", "2026-12-07 15:17"}, // missed four: the latest only
	} {
		got, ok := c.e.Latest(utc(c.since), utc(c.now), 96*time.Hour)
		if c.due == "" {
			if ok {
				t.Errorf("%s since %s: Latest(%s) = %v, want none", c.e, c.since, c.now, got)
			}
			continue
		}
		if !ok || !got.Equal(utc(c.due)) {
			t.Errorf("%s since %s: Latest(%s) = %v %v, want %s", c.e, c.since, c.now, got, ok, c.due)
		}
	}
	// The look-back bounds how late a due time may be found.
	if got, ok := weekdays.Latest(utc("2026-12-01 00:00"), utc("2026-12-07 08:59"), 24*time.Hour); ok {
		t.Errorf("Latest with a day's look-back over a weekend = %v, want none", got)
	}
}

// TestLatestAgreesWithNext checks the two walks against each other: the
// latest due time before a point is the one whose Next passes it.
func TestLatestAgreesWithNext(t *testing.T) {
	t.Parallel()
	since := utc("2026-01-01 00:00")
	for _, expr := range []string{"cron(0 9 ? * MON-FRI *)", "cron(*/7 1-5 L-3,15W * ? *)", "cron(0 0 ? * 6L,2#2 *)", "rate(45 minutes)", "rate(3 days)"} {
		e, err := Parse(expr)
		if err != nil {
			t.Fatal(err)
		}
		for now := utc("2026-03-01 00:00"); now.Before(utc("2026-03-20 00:00")); now = now.Add(97 * time.Minute) {
			due, ok := e.Latest(since, now, 30*24*time.Hour)
			if !ok {
				t.Fatalf("%s: Latest(%v) = none", expr, now)
			}
			if due.After(now) {
				t.Fatalf("%s: Latest(%v) = %v, after now", expr, now, due)
			}
			if next, _ := e.Next(since, due); !next.After(now) {
				t.Fatalf("%s: Latest(%v) = %v, but %v is due between", expr, now, due, next)
			}
		}
	}
}
